// The CUDA libraries einc loads at run time: the toolkit paths compiled in (a generated header) name the
// directories that hold NVRTC, cuBLAS and the CUDA headers; and a process that does not run a GEMM on a
// GPU never maps cuBLAS (a CUDA build of einc starts small where there is no GPU).
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "cuda/cuda.hpp"
#include "cuda/nvrtc.hpp"
#include "einc_toolkit_paths.hpp"

using namespace einc;
namespace fs = std::filesystem;

namespace {

bool holds(const char* directory, const std::string& prefix) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(directory, error))
        if (entry.path().filename().string().starts_with(prefix)) return true;
    return false;
}

}  // namespace

TEST_CASE("cuda libraries: the toolkit paths compiled in hold NVRTC, cuBLAS and cuda_runtime.h") {
    CHECK_MESSAGE(holds(cuda::toolkit::nvrtc_directory, "libnvrtc.so"), cuda::toolkit::nvrtc_directory);
    CHECK_MESSAGE(holds(cuda::toolkit::cublas_directory, "libcublas.so"), cuda::toolkit::cublas_directory);
    bool headers = false;
    for (const char* directory : cuda::toolkit::include_directories)
        headers = headers || fs::exists(fs::path(directory) / "cuda_runtime.h");
    CHECK(headers);
    CHECK(fs::exists(fs::path(cuda::cuda_include_directory()) / "cuda_runtime.h"));
    CHECK(cuda::nvrtc_available());
}

TEST_CASE("cuda libraries: without a GPU, cuBLAS is never mapped") {
    if (cuda::available()) {
        MESSAGE("a GPU is usable here: GEMMs may have loaded cuBLAS, which is not checked");
        return;
    }
    std::ifstream maps("/proc/self/maps");
    REQUIRE(maps);
    std::string line;
    while (std::getline(maps, line)) CHECK_MESSAGE(line.find("libcublas") == std::string::npos, line);
}
