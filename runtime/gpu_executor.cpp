#include "runtime/gpu_executor.hpp"

#include <array>
#include <cstdint>

#include "grammar/diagnostic.hpp"
#include "runtime/run_memory.hpp"

namespace einc {
namespace {

bool aligned16(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The addresses of the buffers a step's kernels take, in kernel_accesses() order, found without building
// the accesses (their layouts): a run allocates nothing.
struct KernelBuffers {
    std::array<void*, 1 + max_kernel_sources> address{};
    std::size_t count = 0;
};

KernelBuffers kernel_buffers(const Step& step, const RunMemory& memory) {
    KernelBuffers buffers;
    const auto add = [&](Buffer buffer, std::int64_t offset) {
        EINC_ASSERT(buffers.count < buffers.address.size());
        buffers.address[buffers.count++] = memory.address(buffer, offset);
    };
    std::visit(Overloaded{
                   [](const View&) {},
                   [&](const Copy& copy) {
                       add(copy.dst.buffer, copy.dst.offset);
                       add(copy.src.buffer, copy.src.offset);
                   },
                   [&](const Reduce& reduce) {
                       add(reduce.dst.buffer, reduce.dst.offset);
                       add(reduce.src.buffer, reduce.src.offset);
                   },
                   [&](const Contract& contract) {
                       add(contract.dst.buffer, contract.dst.offset);
                       for (const Access& src : contract.srcs) add(src.buffer, src.offset);
                   },
                   [&](const Route& route) {
                       add(route.dst.buffer, route.dst.offset);
                       add(route.src.buffer, route.src.offset);
                       add(route.grad.buffer, route.grad.offset);
                   },
                   // as gemm_as_contraction() orders them: C, then A and B
                   [&](const Gemm& gemm) {
                       add(gemm.c.buffer, gemm.c.offset);
                       add(gemm.a.buffer, gemm.a.offset);
                       add(gemm.b.buffer, gemm.b.offset);
                   },
               },
               step);
    return buffers;
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
            const bool scratch = library_workspace && scheduled.scratch_bytes > 0;
            device.gemm(gemm, plan.spec(gemm.a.buffer).dtype, memory.address(gemm.a.buffer, gemm.a.offset),
                        memory.address(gemm.b.buffer, gemm.b.offset),
                        memory.address(gemm.c.buffer, gemm.c.offset), scratch ? memory.scratch() : nullptr,
                        scratch ? static_cast<std::size_t>(scheduled.scratch_bytes) : 0);
            break;
        }
        case Strategy::kernels: {
            const KernelBuffers buffers = kernel_buffers(step, memory);
            EINC_ASSERT(buffers.count >= 2);
            // Vector copies need 16-byte aligned buffers; the schedule has the launches for others.
            const bool unaligned = !scheduled.unaligned_launches.empty() &&
                                   !(aligned16(buffers.address[0]) && aligned16(buffers.address[1]));
            for (const KernelLaunch& launch : unaligned ? scheduled.unaligned_launches : scheduled.launches) {
                std::array<void*, 4> pointers{};  // one per KernelArgument at most
                EINC_ASSERT(launch.arguments.size() <= pointers.size());
                std::size_t count = 0;
                for (const KernelArgument argument : launch.arguments) {
                    const std::size_t source = argument == KernelArgument::source0   ? 1
                                               : argument == KernelArgument::source1 ? 2
                                                                                     : 0;
                    EINC_ASSERT(argument == KernelArgument::scratch || source < buffers.count);
                    pointers[count++] =
                        argument == KernelArgument::scratch ? memory.scratch() : buffers.address[source];
                }
                device.launch(launch, std::span<void* const>(pointers.data(), count));
            }
            break;
        }
        default: EINC_ASSERT(false);
        }
    }
}

}  // namespace einc
