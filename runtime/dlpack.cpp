#include "runtime/dlpack.hpp"

#include <fmt/format.h>

#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

constexpr std::uint8_t dl_bool = 6;  // kDLBool, from DLPack 0.8 on

DType dtype_of(DLDataType type) {
    if (type.lanes != 1)
        throw Error(ErrorKind::unsupported,
                    fmt::format("DLPack tensor with {} lanes: einc takes scalars only", type.lanes));
    const auto code = type.code;
    if (code == kDLFloat && type.bits == 64) return DType::f64;
    if (code == kDLFloat && type.bits == 32) return DType::f32;
    if (code == kDLFloat && type.bits == 16) return DType::f16;
    if (code == kDLBfloat && type.bits == 16) return DType::bf16;
    if (code == kDLInt && type.bits == 8) return DType::i8;
    if (code == kDLInt && type.bits == 16) return DType::i16;
    if (code == kDLInt && type.bits == 32) return DType::i32;
    if (code == kDLInt && type.bits == 64) return DType::i64;
    if (code == kDLUInt && type.bits == 8) return DType::u8;
    if (code == kDLUInt && type.bits == 16) return DType::u16;
    if (code == kDLUInt && type.bits == 32) return DType::u32;
    if (code == kDLUInt && type.bits == 64) return DType::u64;
    if (code == kDLComplex && type.bits == 64) return DType::c64;
    if (code == kDLComplex && type.bits == 128) return DType::c128;
    if (code == dl_bool && type.bits == 8) return DType::boolean;
    throw Error(ErrorKind::unsupported,
                fmt::format("DLPack dtype (code {}, {} bits) is not one einc takes", code, type.bits))
        .help(
            "einc takes float 64/32/16, bfloat 16, int 8/16/32/64, uint 8/16/32/64, complex 64/128 and bool");
}

DLDataType dl_type_of(DType dtype) {
    switch (dtype) {
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::i8: return {kDLInt, 8, 1};
    case DType::i16: return {kDLInt, 16, 1};
    case DType::i32: return {kDLInt, 32, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::u8: return {kDLUInt, 8, 1};
    case DType::u16: return {kDLUInt, 16, 1};
    case DType::u32: return {kDLUInt, 32, 1};
    case DType::u64: return {kDLUInt, 64, 1};
    case DType::c64: return {kDLComplex, 64, 1};
    case DType::c128: return {kDLComplex, 128, 1};
    case DType::boolean: return {dl_bool, 8, 1};
    case DType::f8e4m3:
    case DType::f8e5m2: break;
    }
    throw Error(ErrorKind::unsupported, fmt::format("{} has no DLPack type code", name_of(dtype)));
}

// What to_dlpack allocates: the managed tensor, the shape and strides it points to, and the storage
// it keeps alive.
struct Exported {
    DLManagedTensor managed{};
    Shape shape, strides;  // never moved: the DLTensor points into them
    std::shared_ptr<void> storage;
};

}  // namespace

TensorView from_dlpack(const DLTensor& t) {
    Device device = Device::cpu;
    if (t.device.device_type == kDLCUDA)
        device = Device::cuda;
    else if (t.device.device_type != kDLCPU)
        throw Error(ErrorKind::unsupported,
                    fmt::format("DLPack device type {} is not one einc takes (CPU, CUDA)",
                                static_cast<int>(t.device.device_type)));
    if (t.ndim < 0) throw Error(ErrorKind::usage, fmt::format("DLPack tensor with {} dims", t.ndim));
    TensorView view;
    view.dtype = dtype_of(t.dtype);
    view.device = device;
    view.device_index = t.device.device_id;
    view.data = static_cast<std::byte*>(t.data) + t.byte_offset;
    view.shape.assign(t.shape, t.shape + t.ndim);
    for (const std::int64_t extent : view.shape)
        if (extent < 0)
            throw Error(ErrorKind::usage, fmt::format("DLPack tensor with a negative length in its shape"));
    view.strides = t.strides ? Shape(t.strides, t.strides + t.ndim) : row_major_strides(view.shape);
    return view;
}

Tensor from_dlpack(DLManagedTensor* managed) {
    if (!managed) throw Error(ErrorKind::usage, "from_dlpack: null managed tensor");
    const TensorView view = from_dlpack(managed->dl_tensor);
    std::shared_ptr<void> owner(managed, [](void* p) {
        auto* m = static_cast<DLManagedTensor*>(p);
        if (m->deleter) m->deleter(m);
    });
    return Tensor(view, std::move(owner));
}

DLManagedTensor* to_dlpack(const Tensor& tensor) {
    const TensorView& view = tensor.view();
    auto* exported = new Exported{};
    exported->shape = view.shape;
    exported->strides = view.strides;
    exported->storage = tensor.storage();
    DLTensor& t = exported->managed.dl_tensor;
    t.data = view.data;
    t.device = {view.device == Device::cuda ? kDLCUDA : kDLCPU, view.device_index};
    t.ndim = static_cast<std::int32_t>(view.rank());
    try {
        t.dtype = dl_type_of(view.dtype);
    } catch (...) {
        delete exported;
        throw;
    }
    t.shape = exported->shape.data();
    t.strides = exported->strides.data();
    t.byte_offset = 0;
    exported->managed.manager_ctx = exported;
    exported->managed.deleter = [](DLManagedTensor* self) {
        delete static_cast<Exported*>(self->manager_ctx);
    };
    return &exported->managed;
}

}  // namespace einc
