#include "runtime/execute.hpp"

#include <cstdint>
#include <fmt/format.h>

#include "grammar/diagnostic.hpp"
#include "runtime/cpu/kernels.hpp"

namespace einc {
namespace {

struct Buffers {
    std::span<const TensorView> inputs;
    std::span<TensorView> outputs;
    std::vector<Tensor> temporaries;

    const TensorView& of(Buffer buffer) const {
        switch (buffer.kind) {
        case Buffer::Kind::input: return inputs[buffer.index];
        case Buffer::Kind::output: return outputs[buffer.index];
        case Buffer::Kind::temporary: return temporaries[buffer.index].view();
        }
        EINC_ASSERT(false);
    }

    std::byte* address(Buffer buffer, std::int64_t offset) const {
        const TensorView& view = of(buffer);
        return static_cast<std::byte*>(view.data) + offset * static_cast<std::int64_t>(size_of(view.dtype));
    }

    cpu::Strided resolve(const Access& access) const {
        return cpu::Strided{address(access.buffer, access.offset), of(access.buffer).dtype, access.layout};
    }
};

}  // namespace

namespace {

// The kernels address elements through typed pointers: the memory must be aligned to the element size,
// as numpy's, DLPack's and einc's own tensors always are.
void check_aligned(const TensorView& view, const char* what, std::size_t index) {
    const std::size_t size = size_of(view.dtype);
    if (view.data != nullptr && reinterpret_cast<std::uintptr_t>(view.data) % size != 0)
        throw Error(ErrorKind::usage, fmt::format("{} {} is not aligned to its element size ({} bytes): {}", what, index, size,
                                                  describe(view)))
            .help("copy it into aligned memory first (einc's own tensors always are)");
}

}  // namespace

void execute_on_cpu(const Plan& plan, std::span<const TensorView> inputs, std::span<TensorView> outputs) {
    EINC_ASSERT(inputs.size() == plan.inputs.size() && outputs.size() == plan.outputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) check_aligned(inputs[i], "input", i);
    for (std::size_t k = 0; k < outputs.size(); ++k) check_aligned(outputs[k], "output", k);
    Buffers buffers{inputs, outputs, {}};
    for (const TensorSpec& temporary : plan.temporaries) buffers.temporaries.push_back(Tensor::empty(temporary.dtype, temporary.shape));

    for (const PlanStep& planned : plan.steps) {
        const Step& step = planned.step;
        if (const auto* view = std::get_if<View>(&step)) {
            const TensorView& source = buffers.of(view->source.buffer);
            outputs[view->output] = TensorView{buffers.address(view->source.buffer, view->source.offset), source.dtype,
                                               plan.outputs[view->output].shape, view->source.layout.strides(), source.device,
                                               source.device_index};
        } else if (const auto* copy = std::get_if<Copy>(&step)) {
            cpu::copy(buffers.resolve(copy->src), buffers.resolve(copy->dst));
        } else if (const auto* reduce = std::get_if<Reduce>(&step)) {
            cpu::reduce(reduce->op, buffers.resolve(reduce->src), buffers.resolve(reduce->dst));
        } else if (const auto* contract = std::get_if<Contract>(&step)) {
            std::vector<cpu::Strided> srcs;
            for (const Access& src : contract->srcs) srcs.push_back(buffers.resolve(src));
            cpu::contract(srcs, buffers.resolve(contract->dst));
        } else {
            const auto& gemm = std::get<Gemm>(step);
            const DType in = buffers.of(gemm.a.buffer).dtype, out = buffers.of(gemm.c.buffer).dtype;
            cpu::gemm(gemm, buffers.address(gemm.a.buffer, gemm.a.offset), buffers.address(gemm.b.buffer, gemm.b.offset),
                      buffers.address(gemm.c.buffer, gemm.c.offset), in, out);
        }
    }
}

}  // namespace einc
