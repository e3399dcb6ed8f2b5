// DLPack import and export, so the tensors of other libraries (PyTorch, JAX, CuPy, ...) pass through
// einc without copies. Built when the DLPack headers are found (libdlpack-dev); EINC_HAS_DLPACK says so.
//
// dtypes: float 64/32/16, bfloat 16, int 8/16/32/64, uint 8/16/32/64, complex 64/128, and bool as type code 6
// (kDLBool from DLPack 0.8 on, what PyTorch uses). Lanes must be 1. Devices: kDLCPU, and kDLCUDA for GPU
// tensors.
#pragma once

#include <dlpack/dlpack.h>

#include "tensor.hpp"

namespace einc {

// A view of a DLPack tensor (data + byte_offset; compact row-major when strides is null). The caller
// keeps the tensor alive. Throws einc::Error for a dtype, device or lane count einc does not take.
TensorView from_dlpack(const DLTensor& tensor);

// Takes ownership of a managed tensor: its deleter runs when the returned Tensor's storage is released.
Tensor from_dlpack(DLManagedTensor* managed);

// A managed tensor sharing `tensor`'s memory; it keeps that memory alive until its deleter is called
// (by the consumer, as DLPack requires). Shape and strides are owned by the managed tensor.
DLManagedTensor* to_dlpack(const Tensor& tensor);

}  // namespace einc
