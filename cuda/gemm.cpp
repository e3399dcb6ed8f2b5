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

// A cuBLAS handle per device. Calls are serialised per handle: cuBLAS keeps the stream (and the
// workspace) in the handle, and einc is called from many threads.
struct Handle {
    cublasHandle_t handle = nullptr;
    std::mutex mutex;
};

// (A hit allocates nothing; the handle is created by open_gemm() when a program is bound.)
Handle& handle_for(int device) {
    static std::mutex mutex;
    static std::map<int, Handle> handles;
    std::lock_guard lock(mutex);
    Handle& h = handles[device];
    if (!h.handle) check(cublas().create(&h.handle), "cublasCreate");
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

void open_gemm(int device) {
    (void)handle_for(device);
}

void gemm(const Gemm& g, DType dtype, strategy::GemmCompute compute_type, const void* a, const void* b,
          void* c, cudaStream_t stream, void* workspace, std::size_t workspace_bytes) {
    if (g.outer != 1) {  // one strided-batched GEMM per outer index, at its offsets
        const auto size = static_cast<std::int64_t>(size_of(dtype));
        Gemm one = g;
        one.outer = 1;
        for (std::int64_t o = 0; o < g.outer; ++o)
            gemm(one, dtype, compute_type, static_cast<const std::byte*>(a) + o * g.a.outer_stride * size,
                 static_cast<const std::byte*>(b) + o * g.b.outer_stride * size,
                 static_cast<std::byte*>(c) + o * g.c.outer_stride * size, stream, workspace,
                 workspace_bytes);
        return;
    }
    cudaDataType_t type{};
    switch (dtype) {
    case DType::f64: type = CUDA_R_64F; break;
    case DType::f32: type = CUDA_R_32F; break;
    case DType::f16: type = CUDA_R_16F; break;
    case DType::bf16: type = CUDA_R_16BF; break;
    default: throw Error(ErrorKind::unsupported, fmt::format("cuBLAS GEMM of {}", name_of(dtype)));
    }
    cublasComputeType_t compute{};  // the schedule's
    switch (compute_type) {
    case strategy::GemmCompute::f64: compute = CUBLAS_COMPUTE_64F; break;
    case strategy::GemmCompute::f32: compute = CUBLAS_COMPUTE_32F; break;
    case strategy::GemmCompute::tf32: compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    }
    // The step's epilogue, in the compute type's scalars (f32 for f16/bf16); beta == 0: C is not read.
    const double alpha64 = g.epilogue.alpha, beta64 = g.epilogue.beta;
    const float alpha32 = static_cast<float>(alpha64), beta32 = static_cast<float>(beta64);
    const void* alpha = dtype == DType::f64 ? static_cast<const void*>(&alpha64) : &alpha32;
    const void* beta = dtype == DType::f64 ? static_cast<const void*>(&beta64) : &beta32;
    int device = 0;
    einc::cuda::check(cudaGetDevice(&device), "cudaGetDevice");
    Handle& h = handle_for(device);
    std::lock_guard lock(h.mutex);
    // cublasSetStream puts the handle back on cuBLAS's own workspace pool: the caller's comes after it.
    check(cublas().set_stream(h.handle, stream), "cublasSetStream");
    if (workspace) check(cublas().set_workspace(h.handle, workspace, workspace_bytes), "cublasSetWorkspace");
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
