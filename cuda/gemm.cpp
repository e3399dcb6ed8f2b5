#include "cuda/gemm.hpp"

#include <fmt/format.h>
#include <map>
#include <mutex>

#include "cuda/cublas.hpp"
#include "cuda/driver.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::cuda {
namespace {

void check(cublasStatus_t status, const char* what) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    Error error(ErrorKind::device, fmt::format("cuBLAS: {} failed: {} ({})", what,
                                               cublas().status_string(status), static_cast<int>(status)));
    if (status == CUBLAS_STATUS_ALLOC_FAILED) error.help("the GPU is out of memory");
    throw error;
}

// A cuBLAS handle per device, with the workspace it owns. Calls are serialised per handle: cuBLAS keeps
// the stream in the handle, and einc is called from many threads.
struct Handle {
    cublasHandle_t handle = nullptr;
    void* workspace = nullptr;
    std::mutex mutex;
};

constexpr std::size_t workspace_bytes = 32u << 20;

Handle& handle_for(int device) {
    static std::mutex mutex;
    static std::map<int, Handle> handles;
    std::lock_guard lock(mutex);
    Handle& h = handles[device];
    if (!h.handle) {
        check(cublas().create(&h.handle), "cublasCreate");
        einc::cuda::check(cudaMalloc(&h.workspace, workspace_bytes), "cudaMalloc (cuBLAS workspace)");
        check(cublas().set_workspace(h.handle, h.workspace, workspace_bytes), "cublasSetWorkspace");
    }
    return h;
}

// How cuBLAS sees a stored matrix (rows x cols): as stored (column-major) or transposed (row-major).
struct Operand {
    cublasOperation_t op;
    std::int64_t ld;
};
Operand as_stored(const GemmMatrix& m) {  // op(X) = X
    return m.row_major() ? Operand{CUBLAS_OP_T, m.row_stride} : Operand{CUBLAS_OP_N, m.col_stride};
}
Operand as_transposed(const GemmMatrix& m) {  // op(X) = X^T
    return m.row_major() ? Operand{CUBLAS_OP_N, m.row_stride} : Operand{CUBLAS_OP_T, m.col_stride};
}

}  // namespace

void gemm(const Gemm& g, DType dtype, const void* a, const void* b, void* c, cudaStream_t stream, bool allow_tf32) {
    cudaDataType_t type{};
    cublasComputeType_t compute{};
    switch (dtype) {
    case DType::f64: type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F; break;
    case DType::f32: type = CUDA_R_32F, compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; break;
    case DType::f16: type = CUDA_R_16F, compute = CUBLAS_COMPUTE_32F; break;
    case DType::bf16: type = CUDA_R_16BF, compute = CUBLAS_COMPUTE_32F; break;
    default: throw Error(ErrorKind::unsupported, fmt::format("cuBLAS GEMM of {}", name_of(dtype)));
    }
    const double one64 = 1, zero64 = 0;
    const float one32 = 1, zero32 = 0;
    const void* alpha = dtype == DType::f64 ? static_cast<const void*>(&one64) : &one32;
    const void* beta = dtype == DType::f64 ? static_cast<const void*>(&zero64) : &zero32;
    int device = 0;
    einc::cuda::check(cudaGetDevice(&device), "cudaGetDevice");
    Handle& h = handle_for(device);
    std::lock_guard lock(h.mutex);
    check(cublas().set_stream(h.handle, stream), "cublasSetStream");
    if (g.c.row_major()) {  // C^T (n x m, column-major) = B^T A^T
        const Operand x = as_transposed(g.b), y = as_transposed(g.a);
        check(cublas().gemm_strided_batched(h.handle, x.op, y.op, g.n, g.m, g.k, alpha, b, type, x.ld,
                                            g.b.batch_stride, a, type, y.ld, g.a.batch_stride, beta, c, type,
                                            g.c.row_stride, g.c.batch_stride, g.batch, compute,
                                            CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
    } else {  // C (m x n, column-major) = A B
        const Operand x = as_stored(g.a), y = as_stored(g.b);
        check(cublas().gemm_strided_batched(h.handle, x.op, y.op, g.m, g.n, g.k, alpha, a, type, x.ld,
                                            g.a.batch_stride, b, type, y.ld, g.b.batch_stride, beta, c, type,
                                            g.c.col_stride, g.c.batch_stride, g.batch, compute,
                                            CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
    }
}

}  // namespace einc::cuda
