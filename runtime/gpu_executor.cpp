#include "runtime/gpu_executor.hpp"

#include <cstdint>

#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

// The device pointers of a run: inputs, outputs, and the temporaries it allocated.
struct Memory {
    const Plan& plan;
    std::span<const TensorView> inputs;
    std::span<TensorView> outputs;
    std::vector<void*> temporaries;

    std::byte* base(Buffer buffer) const {
        switch (buffer.kind) {
        case Buffer::Kind::input: return static_cast<std::byte*>(inputs[buffer.index].data);
        case Buffer::Kind::output: return static_cast<std::byte*>(outputs[buffer.index].data);
        case Buffer::Kind::temporary: return static_cast<std::byte*>(temporaries[buffer.index]);
        }
        EINC_ASSERT(false);
    }
    std::byte* address(Buffer buffer, std::int64_t offset) const {
        return base(buffer) + offset * static_cast<std::int64_t>(size_of(plan.spec(buffer).dtype));
    }
};

// The accesses of a step, in the order kernel arguments name them (destination, source0, source1).
std::vector<const Access*> accesses_of(const Step& step) {
    if (const auto* copy = std::get_if<Copy>(&step)) return {&copy->dst, &copy->src};
    if (const auto* reduce = std::get_if<Reduce>(&step)) return {&reduce->dst, &reduce->src};
    if (const auto* contract = std::get_if<Contract>(&step)) {
        std::vector<const Access*> accesses{&contract->dst};
        for (const Access& src : contract->srcs) accesses.push_back(&src);
        return accesses;
    }
    return {};
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

void launch_all(const GpuStep& lowered, const std::vector<void*>& buffers, DeviceOps& device) {
    void* workspace = lowered.workspace_bytes > 0 ? device.allocate(static_cast<std::size_t>(lowered.workspace_bytes)) : nullptr;
    struct Release {
        DeviceOps& device;
        void* memory;
        ~Release() {
            if (memory) device.release(memory);
        }
    } release{device, workspace};
    for (const KernelLaunch& launch : lowered.launches) {
        std::vector<void*> pointers;
        for (const KernelArgument argument : launch.arguments) {
            switch (argument) {
            case KernelArgument::destination: pointers.push_back(buffers.at(0)); break;
            case KernelArgument::source0: pointers.push_back(buffers.at(1)); break;
            case KernelArgument::source1: pointers.push_back(buffers.at(2)); break;
            case KernelArgument::workspace: pointers.push_back(workspace); break;
            }
        }
        device.launch(launch, pointers);
    }
}

}  // namespace

bool gemm_in_library(const Plan& plan, const Gemm& gemm) {
    const DType dtype = plan.spec(gemm.a.buffer).dtype;
    return dtype == DType::f64 || dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

PreparedGpuPlan prepare_gpu_plan(const Plan& plan, const GpuTarget& target) {
    PreparedGpuPlan prepared{target, {}};
    for (const PlanStep& step : plan.steps) {
        const auto* gemm = std::get_if<Gemm>(&step.step);
        prepared.steps.push_back(gemm && gemm_in_library(plan, *gemm) ? GpuStep{} : lower_to_kernels(plan, step.step, target));
    }
    return prepared;
}

void run_gpu_plan(const Plan& plan, const PreparedGpuPlan& prepared, std::span<const TensorView> inputs, std::span<TensorView> outputs,
                  DeviceOps& device) {
    EINC_ASSERT(prepared.steps.size() == plan.steps.size());
    Memory memory{plan, inputs, outputs, {}};
    struct ReleaseTemporaries {
        DeviceOps& device;
        std::vector<void*>& temporaries;
        ~ReleaseTemporaries() {
            for (void* t : temporaries) device.release(t);
        }
    } release{device, memory.temporaries};
    for (const TensorSpec& t : plan.temporaries) {
        std::int64_t elements = 1;
        for (const std::int64_t e : t.shape) elements *= e;
        memory.temporaries.push_back(device.allocate(static_cast<std::size_t>(std::max<std::int64_t>(elements, 1)) * size_of(t.dtype)));
    }
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const Step& step = plan.steps[s].step;
        if (const auto* view = std::get_if<View>(&step)) {
            const TensorView& source = inputs[view->source.buffer.index];
            outputs[view->output] = TensorView{memory.address(view->source.buffer, view->source.offset), source.dtype,
                                               plan.outputs[view->output].shape, view->source.layout.strides(), source.device,
                                               source.device_index};
            continue;
        }
        if (const auto* gemm = std::get_if<Gemm>(&step); gemm && gemm_in_library(plan, *gemm)) {
            device.gemm(*gemm, plan.spec(gemm->a.buffer).dtype, memory.address(gemm->a.buffer, gemm->a.offset),
                        memory.address(gemm->b.buffer, gemm->b.offset), memory.address(gemm->c.buffer, gemm->c.offset));
            continue;
        }
        std::vector<void*> buffers;
        if (const auto* gemm = std::get_if<Gemm>(&step)) {  // an integer GEMM: its contraction kernel
            const Step contraction = gemm_as_contraction(*gemm);
            for (const Access* a : accesses_of(contraction)) buffers.push_back(memory.address(a->buffer, a->offset));
        } else {
            for (const Access* a : accesses_of(step)) buffers.push_back(memory.address(a->buffer, a->offset));
        }
        const GpuStep& lowered = prepared.steps[s];
        // Vector copies were planned for 16-byte aligned buffers; lower again where they are not.
        const bool vector = !lowered.launches.empty() && lowered.launches.front().signature.kind == KernelKind::vector_copy;
        if (vector && !(aligned16(buffers[0]) && aligned16(buffers[1]))) {
            GpuTarget scalar = prepared.target;
            scalar.vectorize = false;
            launch_all(lower_to_kernels(plan, step, scalar), buffers, device);
        } else {
            launch_all(lowered, buffers, device);
        }
    }
}

}  // namespace einc
