#include "runtime/backend.hpp"

#include <atomic>
#include <cstring>
#include <fmt/format.h>

#include "grammar/diagnostic.hpp"
#include "runtime/execute.hpp"

namespace einc {
namespace {

std::atomic<GpuBackend*> registered{nullptr};

GpuBackend& require_gpu() {
    GpuBackend* backend = registered.load(std::memory_order_acquire);
    if (!backend)
        throw Error(ErrorKind::unsupported,
                    "a tensor is on a GPU, but this program was not linked with einc's CUDA backend")
            .help("build einc with CUDA (EINC_CUDA=ON) and link einc::einc");
    return *backend;
}

// The bytes a view may touch: [begin, end).
struct ByteRange {
    const std::byte* begin;
    const std::byte* end;
};

ByteRange byte_range_of(const TensorView& view) {
    const OffsetRange range =
        offset_range(make_layout(view.shape, view.strides));  // (no allocation to rank 8)
    const auto size = static_cast<std::int64_t>(size_of(view.dtype));
    const auto* base = static_cast<const std::byte*>(view.data);
    return {base + range.begin * size, base + range.end * size};
}

bool overlap(ByteRange a, ByteRange b) {
    return a.begin < b.end && b.begin < a.end && a.begin != a.end && b.begin != b.end;
}

}  // namespace

void register_gpu_backend(GpuBackend* backend) {
    registered.store(backend, std::memory_order_release);
}
GpuBackend* gpu_backend() {
    return registered.load(std::memory_order_acquire);
}

Tensor allocate(DType dtype, const Shape& shape, Device device, int device_index, void* stream) {
    if (device == Device::cpu) return Tensor::empty(dtype, shape);
    return require_gpu().allocate_on_stream(dtype, shape, device_index, stream);
}

Tensor allocate_on_gpu(DType dtype, const Shape& shape, int device_index) {
    return require_gpu().allocate(dtype, shape, device_index);
}

void fill_zero(const TensorView& dense) {
    if (dense.device == Device::cpu) {
        if (dense.data)
            std::memset(dense.data, 0, static_cast<std::size_t>(dense.numel()) * size_of(dense.dtype));
    } else {
        require_gpu().fill_zero(dense);
    }
}

Target target_of(Device device, int device_index) {
    if (device == Device::cpu) return cpu_target();
    return require_gpu().target(device_index);
}

std::shared_ptr<const void> prepare(const Schedule& schedule, Device device, int device_index) {
    if (device == Device::cpu) return nullptr;
    return require_gpu().prepare(schedule, device_index);
}

void execute(const Plan& plan, const Schedule& schedule, const void* prepared,
             std::span<const TensorView> inputs, std::span<TensorView> outputs, Device device, void* stream,
             void* workspace) {
    if (device == Device::cpu)
        execute_on_cpu(plan, schedule, inputs, outputs, static_cast<std::byte*>(workspace));
    else
        require_gpu().execute(plan, schedule, prepared, inputs, outputs, stream, workspace);
}

void check_no_aliasing(std::span<const Input> inputs, std::span<const TensorView> outputs) {
    for (std::size_t k = 0; k < outputs.size(); ++k) {
        const TensorView& out = outputs[k];
        if (out.numel() > 1 && may_overlap(make_layout(out.shape, out.strides)))
            throw Error(
                ErrorKind::usage,
                fmt::format("output {} has strides that write some elements twice: {}", k, describe(out)));
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (out.device == inputs[i].view().device &&
                overlap(byte_range_of(out), byte_range_of(inputs[i].view())))
                throw Error(ErrorKind::usage, fmt::format("output {} overlaps input {} in memory", k, i))
                    .note(fmt::format("output {}: {}", k, describe(out)))
                    .note(fmt::format("input {}: {}", i, describe(inputs[i].view())))
                    .help("einc does not compute in place: give an output in separate memory");
        for (std::size_t j = 0; j < k; ++j)
            if (overlap(byte_range_of(out), byte_range_of(outputs[j])))
                throw Error(ErrorKind::usage, fmt::format("outputs {} and {} overlap in memory", j, k));
    }
}

}  // namespace einc
