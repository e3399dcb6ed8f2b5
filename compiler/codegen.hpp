// Generating the source text of GPU kernels. Pure strings: no CUDA header, no GPU; every kernel compiles
// with NVRTC (cuda/) and, under tests/emulation, as host C++. Which kernels a step launches, and with
// what parameters, is the schedule's decision (compiler/schedule.hpp); the kernels' identity and launch
// arguments are the ABI in compiler/kernel_abi.hpp.
#pragma once

#include <string>
#include <vector>

#include "compiler/kernel_abi.hpp"

namespace einc {

// The kernel, as CUDA C++ (valid host C++ too under tests/emulation/einc_emulation.hpp).
std::string kernel_source(const KernelSignature& signature);

// The C types of the kernel's pointer parameters, after `einc_params p`: "float*", "const einc_u16*", ...
std::vector<std::string> kernel_pointer_types(const KernelSignature& signature);

}  // namespace einc
