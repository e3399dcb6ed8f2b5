#include "runtime/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <new>

#include "compiler/checked.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"

namespace einc {

std::string_view name_of(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

std::int64_t TensorView::numel() const {
    // A shape from a user may not fit: saturate rather than overflow (binding then says what is wrong).
    return checked_product(shape).value_or(std::numeric_limits<std::int64_t>::max());
}

bool TensorView::is_row_major() const {
    if (numel() == 0) return true;
    if (!checked_product(shape)) return false;  // no memory is that large
    const Shape expected = row_major_strides(shape);
    for (std::size_t d = 0; d < shape.size(); ++d)
        if (shape[d] != 1 && strides[d] != expected[d]) return false;
    return true;
}

std::string describe(const TensorView& view) {
    return fmt::format("{} ({}):({}) on {}", name_of(view.dtype), fmt::join(view.shape, ","), fmt::join(view.strides, ","),
                       name_of(view.device));
}

Tensor Tensor::empty(DType dtype, Shape shape, Device device, int device_index) {
    const auto elements = checked_product(shape);
    const auto bytes = elements ? checked_mul(*elements, static_cast<std::int64_t>(size_of(dtype))) : std::nullopt;
    if (!bytes || !lengths_fit(shape))  // numpy refuses an empty shape whose other lengths overflow too throw Error(ErrorKind::shape, fmt::format("a {} tensor of shape {} has more bytes than fit in 64 bits", name_of(dtype), format_shape(shape)));
    if (device != Device::cpu) return allocate_on_gpu(dtype, std::move(shape), device_index);
    constexpr std::size_t alignment = 64;
    const std::size_t size = (static_cast<std::size_t>(*bytes) + alignment - 1) / alignment * alignment;
    void* memory = size == 0 ? nullptr : std::aligned_alloc(alignment, size);
    if (size != 0 && memory == nullptr)
        throw Error(ErrorKind::device, fmt::format("out of memory allocating {} bytes for a {} tensor of shape {}", size,
                                                   name_of(dtype), format_shape(shape)));
    Tensor tensor;
    tensor.storage_ = std::shared_ptr<void>(memory, [](void* p) { std::free(p); });
    tensor.view_ = TensorView{memory, dtype, shape, row_major_strides(shape), Device::cpu, 0};
    return tensor;
}

Tensor Tensor::zeros(DType dtype, Shape shape, Device device, int device_index) {
    Tensor tensor = empty(dtype, std::move(shape), device, device_index);
    fill_zero(tensor);
    return tensor;
}

}  // namespace einc
