#include "runtime/gpu_executor.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include "grammar/diagnostic.hpp"
#include "runtime/run_memory.hpp"

namespace einc {
namespace {

// Whether the buffers a launch points at are aligned as its kernel's vector accesses need.
bool aligned_for(const KernelLaunch& launch, const StepOperands& at) {
    for (const KernelArgument argument : {KernelArgument::destination, KernelArgument::source0}) {
        const auto address =
            reinterpret_cast<std::uintptr_t>(at[argument == KernelArgument::source0 ? 1 : 0].base);
        if (address % static_cast<std::uintptr_t>(kernel_alignment(launch.signature, argument)) != 0)
            return false;
    }
    return true;
}

}  // namespace

std::vector<Access> kernel_accesses(const Step& step) {
    return std::visit(Overloaded{
                          [](const View&) { return std::vector<Access>{}; },
                          [](const Copy& copy) {
                              return std::vector<Access>{copy.dst, copy.src};
                          },
                          [](const Reduce& reduce) {
                              return std::vector<Access>{reduce.dst, reduce.src};
                          },
                          [](const Contract& contract) {
                              std::vector<Access> accesses{contract.dst};
                              accesses.insert(accesses.end(), contract.srcs.begin(), contract.srcs.end());
                              return accesses;
                          },
                          [](const Route& route) {
                              return std::vector<Access>{route.dst, route.src, route.grad};
                          },
                          [](const Gemm& gemm) { return kernel_accesses(gemm_as_contraction(gemm)); },
                      },
                      step);
}

void run_gpu_plan(const Plan& plan, const Schedule& schedule, std::span<const TensorView> inputs,
                  std::span<TensorView> outputs, DeviceOps& device, std::byte* workspace) {
    EINC_ASSERT(schedule.target.backend == Backend::cuda && schedule.steps.size() == plan.steps.size());
    // cuBLAS gets its part of the workspace only from a caller's.
    const bool library_workspace = workspace != nullptr;
    void* allocated = nullptr;
    if (workspace == nullptr && schedule.own_workspace_bytes > 0)
        allocated = device.allocate(static_cast<std::size_t>(schedule.own_workspace_bytes));
    struct Release {
        DeviceOps& device;
        void* memory;
        ~Release() {
            if (memory) device.release(memory);
        }
    } release{device, allocated};
    if (allocated) workspace = static_cast<std::byte*>(allocated);
    const RunMemory memory(plan, schedule, inputs, outputs, workspace);

    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const ScheduledStep& step = schedule.steps[s];
        const StepOperands at = operands_of(plan.steps[s].step, memory, plan);
        std::visit(
            Overloaded{
                [&](const strategy::View& v) {
                    outputs[v.view.output] = viewed(plan, v.view, inputs[v.view.source.buffer.index]);
                },
                [&](const strategy::LibraryGemm& gemm) {  // (a Gemm's operands are C, A, B)
                    const bool scratch = library_workspace && step.scratch_bytes > 0;
                    device.gemm(gemm.gemm, at[1].dtype, gemm.compute, at[1].base, at[2].base, at[0].base,
                                scratch ? memory.scratch(s) : nullptr,
                                scratch ? static_cast<std::size_t>(step.scratch_bytes) : 0);
                },
                [&](const strategy::Kernels& kernels) {
                    EINC_ASSERT(at.count >= 2);
                    // The schedule has launches for buffers that are not aligned as its vector
                    // accesses need (copies: the destination and the source).
                    const bool unaligned =
                        !kernels.unaligned_launches.empty() &&
                        !std::all_of(kernels.launches.begin(), kernels.launches.end(),
                                     [&](const KernelLaunch& launch) { return aligned_for(launch, at); });
                    if (step.zeroed_scratch_bytes > 0)
                        device.zero(memory.scratch(s), static_cast<std::size_t>(step.zeroed_scratch_bytes));
                    for (const KernelLaunch& launch :
                         unaligned ? kernels.unaligned_launches : kernels.launches) {
                        std::array<void*, 4> pointers{};  // one per KernelArgument at most
                        EINC_ASSERT(launch.arguments.size() <= pointers.size());
                        std::size_t count = 0;
                        for (const KernelArgument argument : launch.arguments) {
                            const std::size_t source = argument == KernelArgument::source0   ? 1
                                                       : argument == KernelArgument::source1 ? 2
                                                                                             : 0;
                            EINC_ASSERT(argument == KernelArgument::scratch || source < at.count);
                            pointers[count++] =
                                argument == KernelArgument::scratch ? memory.scratch(s) : at[source].base;
                        }
                        device.launch(launch, std::span<void* const>(pointers.data(), count));
                    }
                },
                [](const CpuOnly auto&) { EINC_ASSERT(false); },  // a GPU schedule has none
            },
            step.strategy);
    }
}

}  // namespace einc
