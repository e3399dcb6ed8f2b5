#include "runtime/execute.hpp"

#include <cstdint>
#include <fmt/format.h>

#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/cpu/isa.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/parallel.hpp"
#include "runtime/run_memory.hpp"

namespace einc {
namespace {

// The kernels address elements through typed pointers: the memory must be aligned to the element size,
// as numpy's, DLPack's and einc's own tensors always are.
void check_aligned(const TensorView& view, const char* what, std::size_t index) {
    const std::size_t size = size_of(view.dtype);
    if (view.data != nullptr && reinterpret_cast<std::uintptr_t>(view.data) % size != 0)
        throw Error(ErrorKind::usage, fmt::format("{} {} is not aligned to its element size ({} bytes): {}",
                                                  what, index, size, describe(view)))
            .help("copy it into aligned memory first (einc's own tensors always are)");
}

}  // namespace

Target cpu_target() {
    return Target::cpu(cpu::thread_count(), cpu::kernel_vector_bytes(), EINC_HAS_BLAS != 0);
}

void execute_on_cpu(const Plan& plan, const Schedule& schedule, std::span<const TensorView> inputs,
                    std::span<TensorView> outputs, std::byte* workspace) {
    EINC_ASSERT(inputs.size() == plan.inputs.size() && outputs.size() == plan.outputs.size());
    EINC_ASSERT(schedule.target.backend == Backend::cpu && schedule.steps.size() == plan.steps.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) check_aligned(inputs[i], "input", i);
    for (std::size_t k = 0; k < outputs.size(); ++k) check_aligned(outputs[k], "output", k);
    Tensor allocated;  // 64-byte aligned
    if (workspace == nullptr && schedule.workspace_bytes > 0) {
        allocated = Tensor::empty(DType::i8, {schedule.workspace_bytes});
        workspace = static_cast<std::byte*>(allocated.data());
    }
    const RunMemory memory(plan, schedule, inputs, outputs, workspace);
    const auto data = [&](const Access& access) {
        return cpu::Data{memory.address(access.buffer, access.offset), plan.spec(access.buffer).dtype};
    };

    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const ScheduledStep& scheduled = schedule.steps[s];
        std::visit(Overloaded{
                       [&](const View& view) {
                           outputs[view.output] = viewed(plan, view, inputs[view.source.buffer.index]);
                       },
                       [&](const Copy& copy) { cpu::copy(scheduled, data(copy.dst), data(copy.src)); },
                       [&](const Reduce& reduce) {
                           cpu::reduce(scheduled, reduce.op, data(reduce.dst), data(reduce.src),
                                       memory.scratch());
                       },
                       [&](const Contract& contract) {
                           cpu::contract(scheduled, data(contract.dst), data(contract.srcs[0]),
                                         data(contract.srcs[1]), memory.scratch());
                       },
                       [&](const Route& route) {
                           cpu::route(scheduled, route.op, route.kept, data(route.dst), data(route.src),
                                      data(route.grad));
                       },
                       [&](const Gemm& gemm) {
                           const Strategy s = scheduled.strategy;
                           if (s == Strategy::contract_elementwise || s == Strategy::contract_rows ||
                               s == Strategy::contract_accumulate) {
                               // dot products, as the contraction they are (the nest is
                               // gemm_as_contraction()'s)
                               const auto matrix = [&](const GemmMatrix& m) {
                                   return data(Access{m.buffer, m.offset, {}});
                               };
                               return cpu::contract(scheduled, matrix(gemm.c), matrix(gemm.a), matrix(gemm.b),
                                                    memory.scratch());
                           }
                           cpu::gemm(scheduled, gemm, plan.spec(gemm.a.buffer).dtype,
                                     memory.address(gemm.a.buffer, gemm.a.offset),
                                     memory.address(gemm.b.buffer, gemm.b.offset),
                                     memory.address(gemm.c.buffer, gemm.c.offset), memory.scratch());
                       },
                   },
                   plan.steps[s].step);
    }
}

}  // namespace einc
