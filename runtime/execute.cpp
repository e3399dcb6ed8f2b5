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

    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const ScheduledStep& step = schedule.steps[s];
        std::byte* const scratch = memory.scratch(s);
        const StepOperands at = operands_of(plan.steps[s].step, memory, plan);
        using namespace strategy;
        std::visit(
            Overloaded{
                [&](const strategy::View& v) {
                    outputs[v.view.output] = viewed(plan, v.view, inputs[v.view.source.buffer.index]);
                },
                [&](const Move& move) { cpu::move(move, at[0], at[1]); },
                [&](const Convert& convert) {
                    cpu::convert_elements(convert, step.accumulator, step.epilogue, at[0], at[1]);
                },
                [&](const Transpose& transpose) { cpu::transpose(transpose, at[0], at[1]); },
                [&](const ReduceRows& rows) { cpu::reduce(rows, step.accumulator, at[0], at[1]); },
                [&](const ReduceWindows& windows) { cpu::reduce(windows, step.accumulator, at[0], at[1]); },
                [&](const ReduceAccumulate& folding) {
                    cpu::reduce(folding, step.accumulator, step.epilogue, at[0], at[1], scratch);
                },
                [&](const ContractElementwise& products) {
                    cpu::contract(products, step.accumulator, at[0], at[1], at[2]);
                },
                [&](const ContractRows& rows) { cpu::contract(rows, step.accumulator, at[0], at[1], at[2]); },
                [&](const ContractAccumulate& folding) {
                    cpu::contract(folding, step.accumulator, step.epilogue, at[0], at[1], at[2], scratch);
                },
                // (a Gemm's operands are C, A, B)
                [&](const LibraryGemm& gemm) {
                    cpu::gemm(gemm, at[1].dtype, at[1].base, at[2].base, at[0].base);
                },
                [&](const LibraryGemv& gemv) {
                    cpu::gemm(gemv, at[1].dtype, at[1].base, at[2].base, at[0].base);
                },
                [&](const PackedGemm& packed) {
                    cpu::gemm(packed, at[1].dtype, step.accumulator, at[1].base, at[2].base, at[0].base,
                              scratch);
                },
                [&](const strategy::Route& route) {
                    cpu::route(route, step.accumulator, step.epilogue, at[0], at[1], at[2]);
                },
                [](const GpuOnly auto&) { EINC_ASSERT(false); },  // a CPU schedule has none
            },
            step.strategy);
    }
}

}  // namespace einc
