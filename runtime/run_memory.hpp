// Where the buffers of one run of a plan are, for both executors: the caller's inputs and outputs, and
// the temporaries and scratch in the run's workspace, at the offsets the schedule gave them.
#pragma once

#include <span>

#include "compiler/schedule.hpp"
#include "runtime/tensor.hpp"

namespace einc {

class RunMemory {
public:
    // @pre workspace holds schedule.workspace_bytes (it may be null when that is 0)
    RunMemory(const Plan& plan, const Schedule& schedule, std::span<const TensorView> inputs,
              std::span<TensorView> outputs, std::byte* workspace)
        : plan_(plan), schedule_(schedule), inputs_(inputs), outputs_(outputs), workspace_(workspace) {}

    // The element at `offset` (in elements of the buffer's dtype) of a buffer.
    std::byte* address(Buffer buffer, std::int64_t offset) const {
        return base(buffer) + offset * static_cast<std::int64_t>(size_of(plan_.spec(buffer).dtype));
    }
    std::byte* scratch() const { return workspace_ + schedule_.scratch_offset; }

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
