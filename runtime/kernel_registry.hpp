// Kernels compiled ahead of time by `einc aot`. The source it generates registers each binary here when
// the program starts; the CUDA backend looks here before it compiles anything. Plain data, no CUDA: a
// program registers its kernels (and tests can inspect them) whether or not a GPU backend is linked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../compiler/schedule.hpp"

namespace einc {

enum class BinaryFormat : std::uint8_t { cubin, ptx };

struct AheadOfTimeKernel {
    std::string name;  // KernelSignature::name()
    int arch = 0;      // 90: a cubin for sm_90, or PTX for compute_90
    BinaryFormat format = BinaryFormat::cubin;
    std::span<const std::byte> binary;  // static storage (the generated source's): never copied
};

// @pre kernel.binary outlives every use of the registry (it is static data in generated code)
void register_ahead_of_time(AheadOfTimeKernel kernel);

// The binary to load for `kernel_name` on a device of sm_<device_arch>: a cubin for the same major
// architecture and no newer minor (an sm_80 cubin runs on sm_86), the newest such; else the newest PTX
// not newer than the device (the driver compiles it, no NVRTC); nothing when none fits.
std::optional<AheadOfTimeKernel> find_ahead_of_time(std::string_view kernel_name, int device_arch);

// Everything registered, in registration order.
std::vector<AheadOfTimeKernel> ahead_of_time_kernels();

// The kernels a GPU schedule launches (with aligned or unaligned buffers) that no registered binary
// serves on a device of sm_<arch>: what a run with EINC_JIT=0 would fail on.
std::vector<KernelSignature> missing_ahead_of_time(const Schedule& schedule, int arch);

}  // namespace einc
