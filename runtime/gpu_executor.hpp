// Running a Plan on a GPU, apart from any GPU API: which kernels each step launches, with which
// buffers, in which order, and the scratch memory they need. The CUDA backend (cuda/) provides the
// device operations; the tests provide a CPU emulation of the generated kernels, so this sequencing
// is tested on every CI run, GPU or not.
#pragma once

#include <span>
#include <vector>

#include "compiler/codegen.hpp"
#include "compiler/plan.hpp"
#include "runtime/tensor.hpp"

namespace einc {

// What a device must do for run_gpu_plan(). Work is queued in order (a CUDA stream); nothing waits.
class DeviceOps {
public:
    virtual ~DeviceOps() = default;
    virtual void* allocate(std::size_t bytes) = 0;  // scratch for this run, ordered with the work
    virtual void release(void* memory) = 0;
    // Launches a kernel; pointers[i] is the buffer launch.arguments[i] names.
    virtual void launch(const KernelLaunch& launch, std::span<void* const> pointers) = 0;
    // A floating-point GEMM (f64, f32, f16, bf16) through the vendor library, on matrices already offset.
    virtual void gemm(const Gemm& gemm, DType dtype, const void* a, const void* b, void* c) = 0;
};

// The steps of a plan lowered to kernels once (at bind time), for one kind of GPU.
struct PreparedGpuPlan {
    GpuTarget target;
    std::vector<GpuStep> steps;  // one per plan step; empty for Views and library GEMMs
};
PreparedGpuPlan prepare_gpu_plan(const Plan& plan, const GpuTarget& target);

// Whether a Gemm step runs in the vendor library (floating dtypes) rather than as a contraction kernel.
bool gemm_in_library(const Plan& plan, const Gemm& gemm);

// @pre inputs and outputs are device memory with the plan's layouts (outputs made by Views excepted)
// @post outputs made by View steps are set to alias their input
void run_gpu_plan(const Plan& plan, const PreparedGpuPlan& prepared, std::span<const TensorView> inputs,
                  std::span<TensorView> outputs, DeviceOps& device);

}  // namespace einc
