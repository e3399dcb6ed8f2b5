// Gemm steps through cuBLAS: one cublasGemmStridedBatchedEx per step, with the transposes and leading
// dimensions the planner chose. cuBLAS is column-major: a row-major C is computed as C^T = B^T A^T.
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>

#include "compiler/schedule.hpp"

namespace einc::cuda {

// Creates the cuBLAS handle of `device`, when a program with a GEMM is bound: creating one allocates and
// synchronises, which a run (perhaps captured in a CUDA graph) must not.
void open_gemm(int device);

// @pre a, b, c point at the matrices (offsets applied) on the current device, open_gemm(that device)
// `workspace`: cuBLAS's scratch for this call, 256-byte aligned (null: cuBLAS's own pool, which it may
// allocate from - in a captured graph too)
void gemm(const Gemm& gemm, DType dtype, strategy::GemmCompute compute, const void* a, const void* b, void* c,
          cudaStream_t stream, void* workspace = nullptr, std::size_t workspace_bytes = 0);

}  // namespace einc::cuda
