// Where plans run: the CPU executor, or the GPU backend that the CUDA library registers when it is
// linked in (runtime/ never depends on cuda/: the dependency points the other way).
#pragma once

#include <span>

#include "compiler/plan.hpp"
#include "runtime/program.hpp"
#include "runtime/tensor.hpp"

namespace einc {

class GpuBackend {
public:
    virtual ~GpuBackend() = default;
    virtual Tensor allocate(DType dtype, const Shape& shape, int device_index) = 0;
    // Everything a plan needs on a device, done once when a program is bound: kernels lowered,
    // compiled (or found in a cache) and loaded.
    virtual std::shared_ptr<const void> prepare(const Plan& plan, int device_index) = 0;
    // Runs the plan on the caller's stream, without synchronising.
    virtual void execute(const Plan& plan, const void* prepared, std::span<const TensorView> inputs, std::span<TensorView> outputs,
                         void* stream) = 0;
};

// Called once by the CUDA library; the backend lives as long as the process.
void register_gpu_backend(GpuBackend* backend);
GpuBackend* gpu_backend();  // null when no GPU backend is linked in

Tensor allocate(DType dtype, const Shape& shape, Device device, int device_index);
std::shared_ptr<const void> prepare(const Plan& plan, Device device, int device_index);  // null on the CPU
void execute(const Plan& plan, const void* prepared, std::span<const TensorView> inputs, std::span<TensorView> outputs, Device device,
             void* stream);

// Outputs must not overlap an input or each other, nor write one element twice: in-place updates are
// not supported, and a result written over its own input would be silently wrong.
void check_no_aliasing(std::span<const Input> inputs, std::span<const TensorView> outputs);

}  // namespace einc
