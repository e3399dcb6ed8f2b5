#include "compiler/dtype.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <iterator>

#include "compiler/reduction.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

struct DTypeInfo {
    std::string_view name;
    std::size_t size;
    std::string_view numpy_name;  // also accepted when reading names
};

constexpr DTypeInfo info[] = {
    {"f64", 8, "float64"},
    {"f32", 4, "float32"},
    {"f16", 2, "float16"},
    {"bf16", 2, "bfloat16"},
    {"f8e4m3", 1, "float8_e4m3fn"},
    {"f8e5m2", 1, "float8_e5m2"},
    {"i8", 1, "int8"},
    {"i32", 4, "int32"},
    {"i64", 8, "int64"},
    {"bool", 1, "bool_"},
    {"i16", 2, "int16"},
    {"u8", 1, "uint8"},
    {"u16", 2, "uint16"},
    {"u32", 4, "uint32"},
    {"u64", 8, "uint64"},
    {"c64", 8, "complex64"},
    {"c128", 16, "complex128"},
};
static_assert(std::size(info) == static_cast<std::size_t>(DType::c128) + 1, "one entry per DType, in order");
static_assert(std::size(all_dtypes) == std::size(info), "all_dtypes lists every DType");

const DTypeInfo& info_of(DType dtype) {
    return info[static_cast<std::size_t>(dtype)];
}

}  // namespace

std::size_t size_of(DType dtype) {
    return info_of(dtype).size;
}
std::string_view name_of(DType dtype) {
    return info_of(dtype).name;
}

std::optional<DType> dtype_named(std::string_view name) {
    for (const DType dtype : all_dtypes)
        if (name == info_of(dtype).name || name == info_of(dtype).numpy_name) return dtype;
    if (name == "float") return DType::f32;
    if (name == "double") return DType::f64;
    if (name == "half") return DType::f16;
    return std::nullopt;
}

namespace {

// The bits of an integer dtype's magnitude (bool: 1), and the significand bits of a float's - what a float
// must have to hold every value of an integer exactly.
int value_bits(DType dtype) {
    switch (dtype) {
    case DType::boolean: return 1;
    case DType::i8: return 7;
    case DType::i16: return 15;
    case DType::i32: return 31;
    case DType::i64: return 63;
    case DType::u8: return 8;
    case DType::u16: return 16;
    case DType::u32: return 32;
    case DType::u64: return 64;
    case DType::f16: return 11;
    case DType::bf16: return 8;
    case DType::f32: return 24;
    case DType::f64: return 53;
    case DType::f8e4m3: return 4;
    case DType::f8e5m2: return 3;
    case DType::c64: return 24;
    case DType::c128: return 53;
    }
    return 0;  // (unreachable: the switch is exhaustive)
}

bool is_fp8(DType dtype) {
    return dtype == DType::f8e4m3 || dtype == DType::f8e5m2;
}

}  // namespace

DType promote_types(DType a, DType b) {
    if (a == b) return a;
    if (is_fp8(a) || is_fp8(b))
        throw Error(ErrorKind::unsupported,
                    fmt::format("operands of {} and {} cannot be combined: fp8 mixes with no other dtype",
                                name_of(a), name_of(b)))
            .help("convert them to one dtype first");
    if (a == DType::boolean) return b;
    if (b == DType::boolean) return a;
    if (is_complex(a) || is_complex(b)) {  // the complex whose parts hold both (numpy's)
        const bool narrow = std::max(value_bits(a), value_bits(b)) <= value_bits(DType::c64) &&
                            a != DType::f64 && b != DType::f64;
        return narrow ? DType::c64 : DType::c128;
    }
    if (is_integer(a) && is_integer(b)) {
        if (is_unsigned(a) == is_unsigned(b)) return value_bits(a) > value_bits(b) ? a : b;
        const int bits = std::max(value_bits(a), value_bits(b));
        for (const DType candidate : {DType::i8, DType::i16, DType::i32, DType::i64})
            if (value_bits(candidate) >= bits) return candidate;
        return DType::f64;  // u64 with a signed integer: no integer holds both
    }
    if (is_floating(a) && is_floating(b)) {
        if (value_bits(a) != value_bits(b) && size_of(a) == size_of(b)) return DType::f32;  // f16, bf16
        return size_of(a) > size_of(b) ? a : b;
    }
    // A float and an integer: the float if its significand holds every value of the integer, else the
    // first wider float that does (i64 only in f64, which numpy gives though it rounds beyond 2^53).
    const DType real = is_floating(a) ? a : b, integer = is_floating(a) ? b : a;
    for (const DType candidate : {real, DType::f32, DType::f64})
        if (size_of(candidate) >= size_of(real) && value_bits(candidate) >= value_bits(integer))
            return candidate;
    return DType::f64;
}

DType promote_types(std::span<const DType> dtypes) {
    EINC_ASSERT(!dtypes.empty());
    DType promoted = dtypes.front();
    for (const DType dtype : dtypes.subspan(1)) promoted = promote_types(promoted, dtype);
    return promoted;
}

DType result_dtype(Op op, Reduction reduction, DType input, bool reduces_an_axis) {
    const bool fp8 = input == DType::f8e4m3 || input == DType::f8e5m2;
    if (is_complex(input) && op == Op::reduce && reduces_an_axis) {
        if (reduction == Reduction::max || reduction == Reduction::min)
            throw Error(ErrorKind::unsupported,
                        fmt::format("{} of {} tensors is not defined: complex numbers have no order",
                                    name_of(reduction), name_of(input)))
                .help("reduce their absolute values or their real parts instead (torch refuses it too)");
        if (reduction == Reduction::any || reduction == Reduction::all)
            throw Error(ErrorKind::unsupported,
                        fmt::format("{} of {} tensors is not supported", name_of(reduction), name_of(input)))
                .help("compare them with zero first");
    }
    if (op == Op::einsum) {
        if (fp8)
            throw Error(ErrorKind::unsupported,
                        fmt::format("einsum on {} operands is not supported", name_of(input)))
                .help("einsum takes floats of 16 bits or more, integers or bool");
        return input;  // bool: an or of ands, as numpy
    }
    if (op != Op::reduce || !reduces_an_axis) return input;
    if (fp8)
        throw Error(ErrorKind::unsupported, fmt::format("reduce on {} is not supported", name_of(input)))
            .help("fp8 tensors are supported for data movement: rearrange, repeat, pack, unpack");
    return reduced_dtype(reduction, input);
}

}  // namespace einc
