// Gemm steps through cuBLAS: one cublasGemmStridedBatchedEx per step, with the transposes and leading
// dimensions the planner chose. cuBLAS is column-major: a row-major C is computed as C^T = B^T A^T.
#pragma once

#include <cuda_runtime_api.h>

#include "compiler/plan.hpp"

namespace einc::cuda {

// @pre a, b, c point at the matrices (offsets applied) on the current device
void gemm(const Gemm& gemm, DType dtype, const void* a, const void* b, void* c, cudaStream_t stream, bool allow_tf32);

}  // namespace einc::cuda
