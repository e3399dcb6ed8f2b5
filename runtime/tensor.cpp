#include "runtime/tensor.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <new>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "compiler/checked.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"

namespace einc {

namespace {

// Host memory for a tensor or a workspace. From 4 MiB (numpy's threshold), it is aligned to 2 MiB and
// asked to be backed by transparent huge pages, as numpy asks for its arrays: a permutation or a strided
// read then walks a few TLB entries rather than thousands (Linux's default "madvise" mode gives huge
// pages only to memory that asks). The advice may be ignored; nothing depends on it.
void* allocate_host(std::size_t bytes) {
    constexpr std::size_t line = 64, huge_page = std::size_t{2} << 20, from = std::size_t{4} << 20;
    const auto round_up = [](std::size_t n, std::size_t to) { return (n + to - 1) / to * to; };
    if (bytes < from) return std::aligned_alloc(line, round_up(bytes, line));
    void* memory = std::aligned_alloc(huge_page, round_up(bytes, huge_page));
#if defined(MADV_HUGEPAGE)
    if (memory != nullptr) madvise(memory, round_up(bytes, huge_page), MADV_HUGEPAGE);
#endif
    return memory;
}

}  // namespace

std::string_view name_of(Device device) {
    switch (device) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
    }
    EINC_ASSERT(false);
}

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
    return fmt::format("{} ({}):({}) on {}", name_of(view.dtype), fmt::join(view.shape, ","),
                       fmt::join(view.strides, ","), name_of(view.device));
}

Tensor Tensor::empty(DType dtype, Shape shape, Device device, int device_index) {
    // (A negative length would make a negative byte count, which wraps to a huge size_t.)
    if (std::any_of(shape.begin(), shape.end(), [](std::int64_t e) { return e < 0; }))
        throw Error(ErrorKind::shape, fmt::format("a {} tensor of shape {} has a negative length",
                                                  name_of(dtype), format_shape(shape)));
    const auto elements = checked_product(shape);
    const auto bytes =
        elements ? checked_mul(*elements, static_cast<std::int64_t>(size_of(dtype))) : std::nullopt;
    // (numpy refuses an empty shape whose other lengths overflow too.)
    if (!bytes || !lengths_fit(shape))
        throw Error(ErrorKind::shape,
                    fmt::format("a {} tensor of shape {} has more bytes than fit in 64 bits", name_of(dtype),
                                format_shape(shape)));
    if (device != Device::cpu) return allocate_on_gpu(dtype, std::move(shape), device_index);
    const auto size = static_cast<std::size_t>(*bytes);
    void* memory = size == 0 ? nullptr : allocate_host(size);
    if (size != 0 && memory == nullptr)
        throw Error(ErrorKind::device,
                    fmt::format("out of memory allocating {} bytes for a {} tensor of shape {}", size,
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
