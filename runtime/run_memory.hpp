// Where the buffers of one run of a plan are, for both executors: the caller's inputs and outputs, and
// the temporaries and scratch in the run's workspace, at the offsets the schedule gave them.
#pragma once

#include <array>
#include <span>

#include "compiler/schedule.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/tensor.hpp"

namespace einc {

class RunMemory {
public:
    // @pre workspace holds schedule.workspace_bytes (it may be null when that is 0)
    RunMemory(const Plan& plan, const Schedule& schedule, std::span<const TensorView> inputs,
              std::span<TensorView> outputs, std::byte* workspace)
        : plan_(plan), schedule_(schedule), inputs_(inputs), outputs_(outputs), workspace_(workspace) {}

    // The element at `offset` (in elements of the dtype the plan reads it as: Plan::dtype_of) of a buffer.
    std::byte* address(Buffer buffer, std::int64_t offset) const {
        std::byte* const at = base(buffer);
        if (at == nullptr)
            return nullptr;  // an empty tensor's: no element is reached (a part's offset 1 too)
        return at + offset * static_cast<std::int64_t>(size_of(plan_.dtype_of(buffer)));
    }
    std::byte* scratch(std::size_t step) const { return workspace_ + schedule_.steps[step].scratch_offset; }

private:
    std::byte* base(Buffer buffer) const {
        switch (buffer.kind) {
        case Buffer::Kind::input: return static_cast<std::byte*>(inputs_[buffer.index].data);
        case Buffer::Kind::output: return static_cast<std::byte*>(outputs_[buffer.index].data);
        case Buffer::Kind::temporary: return workspace_ + schedule_.temporary_offsets[buffer.index];
        }
        return nullptr;
    }

    const Plan& plan_;
    const Schedule& schedule_;
    std::span<const TensorView> inputs_;
    std::span<TensorView> outputs_;
    std::byte* workspace_;
};

// A step's operand in a run: where its element 0 is, and its dtype.
struct Operand {
    std::byte* base = nullptr;
    DType dtype = DType::f32;
};

// The operands a step reads and writes, in the order every strategy names them: the destination, then
// the sources (a Contract's in order; a Route's x, then the gradient; a Gemm's C, then A and B, as
// gemm_as_contraction() orders them). A View has none. Found without building the accesses' layouts: a
// run allocates nothing.
struct StepOperands {
    std::array<Operand, 1 + max_kernel_sources> at{};
    std::size_t count = 0;
    const Operand& operator[](std::size_t k) const { return at[k]; }
};

inline StepOperands operands_of(const Step& step, const RunMemory& memory, const Plan& plan) {
    StepOperands operands;
    const auto add = [&](Buffer buffer, std::int64_t offset) {
        EINC_ASSERT(operands.count < operands.at.size());
        operands.at[operands.count++] = Operand{memory.address(buffer, offset), plan.dtype_of(buffer)};
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
                   [&](const Gemm& gemm) {
                       add(gemm.c.buffer, gemm.c.offset);
                       add(gemm.a.buffer, gemm.a.offset);
                       add(gemm.b.buffer, gemm.b.offset);
                   },
               },
               step);
    return operands;
}

// The result of a View step: the source input's memory, at the view's offset, with the output's layout.
inline TensorView viewed(const Plan& plan, const View& view, const TensorView& source) {
    return TensorView{static_cast<std::byte*>(source.data) +
                          view.source.offset * static_cast<std::int64_t>(size_of(source.dtype)),
                      source.dtype,
                      plan.outputs[view.output].shape,
                      plan.outputs[view.output].strides,
                      source.device,
                      source.device_index};
}

}  // namespace einc
