// The CUDA backend, as a user sees it. Linking einc (built with CUDA) registers the backend: tensors on a
// GPU (Device::cuda) then run through the same einc::rearrange/einsum/... calls and Programs as CPU ones.
//
//   if (einc::cuda::available()) {
//       einc::Tensor q = einc::cuda::to_device(q_host), k = einc::cuda::to_device(k_host);
//       einc::Tensor s = einc::einsum("b i d, b j d -> b i j", q, k);   // cuBLAS, on the default stream
//       einc::Tensor back = einc::cuda::to_host(s);                      // waits for the result
//   }
#pragma once

#include <cstddef>
#include <string>

#include "../runtime/tensor.hpp"

namespace einc::cuda {

// Whether a usable NVIDIA GPU and driver are present.
bool available();

// Copies a CPU tensor (any strides) to device `device`, row-major; and a device tensor back, row-major.
// to_host waits for the work queued on the default stream.
Tensor to_device(const TensorView& host, int device = 0);
Tensor to_host(const TensorView& on_device);

// Waits until everything queued on `device`, on every stream, has finished (cudaDeviceSynchronize); a
// failure of that work is raised here as an einc::Error.
void synchronize(int device = 0);

// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, driver 13.0)"
std::string describe_device(int device = 0);

}  // namespace einc::cuda
