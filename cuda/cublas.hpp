// cuBLAS, opened at first use (dlopen) rather than linked: a CUDA build of einc maps its few hundred
// megabytes only when a program runs a GEMM on a GPU, not when it starts or works on the CPU.
// EINC_CUBLAS=/path/libcublas.so picks the library, and only that one.
#pragma once

#include <cublas_v2.h>

namespace einc::cuda {

// The cuBLAS entry points einc calls.
struct Cublas {
    decltype(&::cublasCreate_v2) create = nullptr;
    decltype(&::cublasSetStream_v2) set_stream = nullptr;
    decltype(&::cublasSetWorkspace_v2) set_workspace = nullptr;
    decltype(&::cublasGemmStridedBatchedEx_64) gemm_strided_batched = nullptr;
    decltype(&::cublasGetStatusString) status_string = nullptr;
};

// The loaded library; the first call opens it. Throws einc::Error (kind device), naming the files tried,
// when it cannot be loaded or lacks an entry point.
const Cublas& cublas();

}  // namespace einc::cuda
