// Compiling generated CUDA C++ to cubins with NVRTC. NVRTC is loaded at run time (dlopen), not linked:
// a program built with einc's CUDA backend starts - and runs kernels compiled ahead of time - on a
// machine without the CUDA toolkit; only JIT compilation then reports that NVRTC is missing.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace einc::cuda {

// Whether NVRTC could be loaded (EINC_NVRTC overrides the library path tried first).
bool nvrtc_available();

// "12.4" etc.; empty when NVRTC is unavailable.
std::string nvrtc_version();

struct CompiledKernel {
    std::vector<std::byte> binary;  // a cubin for `arch`, or PTX text when asked for
    std::vector<std::byte> ptx;     // compile_with_ptx(): the PTX that cubin was compiled from
    std::string log;                // NVRTC's messages (warnings)
};

// Compiles `source` for sm_<arch> (e.g. 90): a cubin, or PTX for compute_<arch> when ptx is set.
// Throws einc::Error (kind device) carrying NVRTC's log when compilation fails, and when NVRTC is
// unavailable.
CompiledKernel compile(const std::string& source, const std::string& name, int arch, bool ptx = false);

// A cubin for sm_<arch> and, from the same NVRTC run, the PTX it was compiled from: the PTX a
// compute_<arch> compile gives (".target sm_<arch>"), which the driver compiles for newer GPUs. One
// compile instead of two (`einc aot`).
CompiledKernel compile_with_ptx(const std::string& source, const std::string& name, int arch);

// The options compile() passes to NVRTC for `arch` (part of every kernel cache key).
std::vector<std::string> compile_options(int arch, bool ptx = false);

// The CUDA headers' directory, found at run time: $CUDA_HOME/include, $CUDA_PATH/include, or the
// toolkit einc was built with; empty if none exists. einc's kernels include no header, but code that
// compiles its own kernels through compile() may.
std::string cuda_include_directory();

}  // namespace einc::cuda
