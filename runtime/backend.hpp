// Where plans run: the CPU executor, or the GPU backend that the CUDA library registers when it is
// linked in (runtime/ never depends on cuda/: the dependency points the other way).
#pragma once

#include <span>

#include "compiler/schedule.hpp"
#include "runtime/program.hpp"
#include "runtime/tensor.hpp"

namespace einc {

class GpuBackend {
public:
    virtual ~GpuBackend() = default;
    // Device memory for a row-major tensor: allocate() synchronously (Tensor::empty); allocate_on_stream()
    // ordered on `stream`, and given back on that stream when the last reference goes - results of
    // Program::run cost no synchronisation (the stream must outlive them).
    virtual Tensor allocate(DType dtype, const Shape& shape, int device_index) = 0;
    virtual Tensor allocate_on_stream(DType dtype, const Shape& shape, int device_index, void* stream) = 0;
    virtual void fill_zero(const TensorView& dense) = 0;  // on the default stream
    // What the schedule needs to know of a device (its multiprocessors).
    virtual Target target(int device_index) = 0;
    virtual std::string describe_device(int device_index) = 0;  // its name, sm, memory, driver
    // Everything a schedule needs on a device, done once when a program is bound: every kernel of
    // the schedule compiled (or found in a cache) and loaded, cuBLAS opened if a GEMM needs it.
    virtual std::shared_ptr<const void> prepare(const Schedule& schedule, int device_index) = 0;
    // Runs the scheduled plan on the caller's stream, without synchronising. `workspace`: device memory of
    // schedule.workspace_bytes, 256-byte aligned, or null to have the run allocate it.
    virtual void execute(const Plan& plan, const Schedule& schedule, const void* prepared,
                         std::span<const TensorView> inputs, std::span<TensorView> outputs, void* stream,
                         void* workspace) = 0;
};

// Called once by the CUDA library; the backend lives as long as the process.
void register_gpu_backend(GpuBackend* backend);
GpuBackend* gpu_backend();  // null when no GPU backend is linked in

// A result's memory: on a GPU, ordered on `stream` (null: the default stream).
Tensor allocate(DType dtype, const Shape& shape, Device device, int device_index, void* stream = nullptr);
Tensor allocate_on_gpu(DType dtype, const Shape& shape, int device_index);  // Tensor::empty's GPU half
void fill_zero(const TensorView& dense);  // a row-major tensor, on any device
// The target a plan is scheduled for on `device`: this CPU, or the GPU `device_index`.
Target target_of(Device device, int device_index);
std::shared_ptr<const void> prepare(const Schedule& schedule, Device device,
                                    int device_index);  // null on the CPU
// `workspace`: the caller's scratch of schedule.workspace_bytes on `device`, or null to allocate it for the
// run.
void execute(const Plan& plan, const Schedule& schedule, const void* prepared,
             std::span<const TensorView> inputs, std::span<TensorView> outputs, Device device, void* stream,
             void* workspace = nullptr);

// Outputs must not overlap an input or each other, nor write one element twice: in-place updates are
// not supported, and a result written over its own input would be silently wrong.
void check_no_aliasing(std::span<const Input> inputs, std::span<const TensorView> outputs);

}  // namespace einc
