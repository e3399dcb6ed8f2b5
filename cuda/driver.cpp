#include "cuda/driver.hpp"

#include <fmt/format.h>

#include "grammar/diagnostic.hpp"

namespace einc::cuda {

void check(cudaError_t status, const char* what) {
    if (status == cudaSuccess) return;
    Error error(ErrorKind::device, fmt::format("CUDA: {} failed: {} ({})", what, cudaGetErrorString(status),
                                               cudaGetErrorName(status)));
    if (status == cudaErrorMemoryAllocation)
        error.help("the GPU is out of memory: free tensors, or use smaller ones");
    if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver)
        error.help("no usable NVIDIA GPU and driver on this machine");
    cudaGetLastError();  // clear the sticky error state of non-fatal errors
    throw error;
}

void check(CUresult status, const char* what) {
    if (status == CUDA_SUCCESS) return;
    const char* message = nullptr;
    if (driver().error_string) driver().error_string(status, &message);
    throw Error(ErrorKind::device,
                fmt::format("CUDA driver: {} failed: {} (code {})", what, message ? message : "unknown error",
                            static_cast<int>(status)));
}

bool device_available() {
    static const bool available = [] {
        int count = 0;
        const cudaError_t status = cudaGetDeviceCount(&count);
        if (status != cudaSuccess) cudaGetLastError();
        return status == cudaSuccess && count > 0;
    }();
    return available;
}

DeviceInfo device_info(int index) {
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, index), "cudaGetDeviceProperties");
    int version = 0;
    check(cudaDriverGetVersion(&version), "cudaDriverGetVersion");
    return DeviceInfo{properties.name,
                      index,
                      properties.major * 10 + properties.minor,
                      properties.multiProcessorCount,
                      properties.totalGlobalMem,
                      fmt::format("{}.{}", version / 1000, version % 1000 / 10)};
}

namespace {

template <typename F>
void entry_point(const char* name, F& f) {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check(cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found),
          "cudaGetDriverEntryPointByVersion");
    if (found != cudaDriverEntryPointSuccess || !function)
        throw Error(ErrorKind::device, fmt::format("the CUDA driver has no entry point {}", name))
            .help("update the NVIDIA driver");
    f = reinterpret_cast<F>(function);
}

}  // namespace

const Driver& driver() {
    static const Driver loaded = [] {
        Driver d;
        entry_point("cuGetErrorString", d.error_string);
        entry_point("cuModuleLoadData", d.module_load_data);
        entry_point("cuModuleGetFunction", d.module_get_function);
        entry_point("cuModuleUnload", d.module_unload);
        entry_point("cuLaunchKernel", d.launch_kernel);
        return d;
    }();
    return loaded;
}

}  // namespace einc::cuda
