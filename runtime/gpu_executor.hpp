// Running a scheduled plan on a GPU, apart from any GPU API: which kernels each step launches, with which
// buffers, in which order, and where the workspace is. The CUDA backend (cuda/) provides the device
// operations; the tests provide a CPU emulation of the generated kernels, so this sequencing is tested on
// every CI run, GPU or not.
#pragma once

#include <span>

#include "compiler/schedule.hpp"
#include "runtime/tensor.hpp"

namespace einc {

// What a device must do for run_gpu_plan(). Work is queued in order (a CUDA stream); nothing waits.
class DeviceOps {
public:
    virtual ~DeviceOps() = default;
    virtual void* allocate(std::size_t bytes) = 0;  // the run's workspace, ordered with the work
    virtual void release(void* memory) = 0;
    virtual void zero(void* memory, std::size_t bytes) = 0;  // a memset, ordered with the work
    // Launches a kernel; pointers[i] is the buffer launch.arguments[i] names.
    virtual void launch(const KernelLaunch& launch, std::span<void* const> pointers) = 0;
    // A floating-point GEMM (f64, f32, f16, bf16) through the vendor library, on matrices already offset,
    // computed as the schedule says. `workspace`: the library's scratch for this call, `workspace_bytes`
    // long, carved from the caller's workspace (null: the library's own pool, from which it may allocate).
    virtual void gemm(const Gemm& gemm, DType dtype, strategy::GemmCompute compute, const void* a,
                      const void* b, void* c, void* workspace, std::size_t workspace_bytes) = 0;
};

// The accesses a step's kernel arguments name, in order: the destination, then the sources (a Gemm's
// kernels are its contraction's: C, then A and B).
std::vector<Access> kernel_accesses(const Step& step);

// @pre schedule = einc::schedule(plan, a GPU target); inputs and outputs are device memory with the plan's
//      layouts (outputs made by Views excepted)
//      `workspace`: device memory of schedule.workspace_bytes, 256-byte aligned (null: the temporaries and
//      the kernels' scratch are allocated for this run through `device`, and cuBLAS uses its own pool)
// @post outputs made by View steps are set to alias their input
// With a workspace, a run calls nothing but device.zero(), device.launch() and device.gemm() (and
// allocates no host memory): what a CUDA graph can capture.
void run_gpu_plan(const Plan& plan, const Schedule& schedule, std::span<const TensorView> inputs,
                  std::span<TensorView> outputs, DeviceOps& device, std::byte* workspace = nullptr);

}  // namespace einc
