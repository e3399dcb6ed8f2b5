#include "runtime/gpu_executor.hpp"

#include <cstdint>

#include "grammar/diagnostic.hpp"
#include "runtime/run_memory.hpp"

namespace einc {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

std::vector<Access> kernel_accesses(const Step& step) {
    return std::visit(Overloaded{
                          [](const View&) { return std::vector<Access>{}; },
                          [](const Copy& copy) { return std::vector<Access>{copy.dst, copy.src}; },
                          [](const Reduce& reduce) { return std::vector<Access>{reduce.dst, reduce.src}; },
                          [](const Contract& contract) {
                              std::vector<Access> accesses{contract.dst};
                              accesses.insert(accesses.end(), contract.srcs.begin(), contract.srcs.end());
                              return accesses;
                          },
                          [](const Gemm& gemm) { return kernel_accesses(gemm_as_contraction(gemm)); },
                      },
                      step);
}

void run_gpu_plan(const Plan& plan, const Schedule& schedule, std::span<const TensorView> inputs, std::span<TensorView> outputs,
                  DeviceOps& device) {
    EINC_ASSERT(schedule.target.backend == Backend::cuda && schedule.steps.size() == plan.steps.size());
    void* workspace = schedule.workspace_bytes > 0 ? device.allocate(static_cast<std::size_t>(schedule.workspace_bytes)) : nullptr;
    struct Release {
        DeviceOps& device;
        void* memory;
        ~Release() {
            if (memory) device.release(memory);
        }
    } release{device, workspace};
    const RunMemory memory(plan, schedule, inputs, outputs, static_cast<std::byte*>(workspace));

    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const Step& step = plan.steps[s].step;
        const ScheduledStep& scheduled = schedule.steps[s];
        switch (scheduled.strategy) {
        case Strategy::view: {
            const View& view = std::get<View>(step);
            outputs[view.output] = viewed(plan, view, inputs[view.source.buffer.index]);
            break;
        }
        case Strategy::library_gemm: {
            const Gemm& gemm = std::get<Gemm>(step);
            device.gemm(gemm, plan.spec(gemm.a.buffer).dtype, memory.address(gemm.a.buffer, gemm.a.offset),
                        memory.address(gemm.b.buffer, gemm.b.offset), memory.address(gemm.c.buffer, gemm.c.offset));
            break;
        }
        case Strategy::kernels: {
            std::vector<void*> buffers;
            for (const Access& access : kernel_accesses(step)) buffers.push_back(memory.address(access.buffer, access.offset));
            // Vector copies need 16-byte aligned buffers; the schedule has the launches for others.
            const bool unaligned = !scheduled.unaligned_launches.empty() && !(aligned16(buffers[0]) && aligned16(buffers[1]));
            for (const KernelLaunch& launch : unaligned ? scheduled.unaligned_launches : scheduled.launches) {
                std::vector<void*> pointers;
                for (const KernelArgument argument : launch.arguments) {
                    switch (argument) {
                    case KernelArgument::destination: pointers.push_back(buffers.at(0)); break;
                    case KernelArgument::source0: pointers.push_back(buffers.at(1)); break;
                    case KernelArgument::source1: pointers.push_back(buffers.at(2)); break;
                    case KernelArgument::scratch: pointers.push_back(memory.scratch()); break;
                    }
                }
                device.launch(launch, pointers);
            }
            break;
        }
        default: EINC_ASSERT(false);
        }
    }
}

}  // namespace einc
