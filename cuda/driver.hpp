// The CUDA runtime and driver calls the backend makes, with their errors turned into einc::Error. The
// driver API (modules, kernel launches) is reached through the runtime's entry-point query, so einc does
// not link libcuda: a program built with CUDA still starts where no driver is installed.
#pragma once

#include <cstddef>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string>

namespace einc::cuda {

// Whether a usable CUDA device exists (a driver, and at least one device).
bool device_available();

struct DeviceInfo {
    std::string name;
    int index = 0;
    int arch = 0;  // 90 for sm_90
    int multiprocessors = 0;
    std::size_t memory = 0;
    std::string driver;  // "13.0"
};
DeviceInfo device_info(int index);

// Throws einc::Error (kind device) naming `what` when a runtime call failed.
void check(cudaError_t status, const char* what);
void check(CUresult status, const char* what);

// The driver entry points einc needs, looked up once.
struct Driver {
    decltype(&::cuModuleLoadData) module_load_data = nullptr;
    decltype(&::cuModuleGetFunction) module_get_function = nullptr;
    decltype(&::cuModuleUnload) module_unload = nullptr;
    decltype(&::cuLaunchKernel) launch_kernel = nullptr;
    decltype(&::cuGetErrorString) error_string = nullptr;
};
const Driver& driver();

}  // namespace einc::cuda
