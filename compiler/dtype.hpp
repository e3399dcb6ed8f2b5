// Element types, and the rules for the dtype of a result (numpy's, which einops inherits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "call.hpp"

namespace einc {

// (New dtypes go last: the numbering is part of the AOT corpus' keys.)
enum class DType : std::uint8_t {
    f64,
    f32,
    f16,
    bf16,
    f8e4m3,
    f8e5m2,
    i8,
    i32,
    i64,
    boolean,
    i16,
    u8,
    u16,
    u32,
    u64,
    c64,  // complex: pairs (real, imaginary) of f32 or f64, as numpy and C++ lay them out
    c128
};

inline constexpr DType all_dtypes[] = {DType::f64,    DType::f32,    DType::f16, DType::bf16, DType::f8e4m3,
                                       DType::f8e5m2, DType::i8,     DType::i16, DType::i32,  DType::i64,
                                       DType::u8,     DType::u16,    DType::u32, DType::u64,  DType::c64,
                                       DType::c128,   DType::boolean};

std::size_t size_of(DType dtype);
std::string_view name_of(DType dtype);                    // "f32", "bf16", "bool", ...
std::optional<DType> dtype_named(std::string_view name);  // also numpy's names: "float32", "int64", ...
constexpr bool is_floating(DType dtype) {
    return dtype == DType::f64 || dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 ||
           dtype == DType::f8e4m3 || dtype == DType::f8e5m2;
}
constexpr bool is_complex(DType dtype) {
    return dtype == DType::c64 || dtype == DType::c128;
}
constexpr bool is_unsigned(DType dtype) {
    return dtype == DType::u8 || dtype == DType::u16 || dtype == DType::u32 || dtype == DType::u64;
}
constexpr bool is_integer(DType dtype) {  // signed and unsigned (not bool)
    return dtype == DType::i8 || dtype == DType::i16 || dtype == DType::i32 || dtype == DType::i64 ||
           is_unsigned(dtype);
}

// The dtype of a complex dtype's parts: f32 for c64, f64 for c128.
constexpr DType real_part_of(DType complex) {
    return complex == DType::c128 ? DType::f64 : DType::f32;
}

// The dtype einc's kernels do `dtype`'s arithmetic in (sums, products, comparisons; data movement takes
// every dtype as it is): its own, but for the integers no kernel is built for - i16, u8 and u16 are
// computed in i32, u32 in i64 - which a plan converts to, and back, by steps `explain` shows. The results
// are numpy's: integer sums and products wrap modulo 2^n in any wider integer alike, and comparisons are
// exact in one that holds every value. (Kernels for each would grow the build by a tenth per dtype.)
constexpr DType arithmetic_dtype(DType dtype) {
    switch (dtype) {
    case DType::i16:
    case DType::u8:
    case DType::u16: return DType::i32;
    case DType::u32: return DType::i64;
    default: return dtype;
    }
}

// The dtype operands of dtypes `a` and `b` are computed in, as numpy.result_type gives it: the smallest
// dtype that holds every value of both (bool < integers < floats; a signed and an unsigned integer give
// the first signed one that holds both - u64 with a signed integer gives f64 -; i32 with f32 gives f64, an
// integer with f16 or bf16 a float whose significand holds it; complex with a real dtype the complex whose
// parts hold it: c64 for f32 and narrower, c128 for f64 and integers of more than 16 bits). numpy has no
// bf16: bf16 with f16 gives f32, as torch. fp8 mixes with no other dtype (einc moves fp8 but computes nothing
// in it). Throws einc::Error for fp8.
DType promote_types(DType a, DType b);
// promote_types over every dtype of `dtypes` (at least one).
DType promote_types(std::span<const DType> dtypes);

// The dtype of the result of `op` on operands of dtype `input` (the operands' promoted dtype):
//   data movement keeps it; sum and prod of signed integers and bool give i64, of unsigned ones u64
//   (numpy), any/all give bool,
//   max/min keep it, mean gives f64 for integers and bool (numpy; einops refuses it); einsum keeps it
//   (bool: true where any product of trues is, as numpy) and refuses fp8. Complex tensors are summed,
//   averaged, multiplied and contracted (keeping the dtype); max, min, any and all refuse them, as torch
//   does.
// A reduce that reduces no axis is a rearrange, as einops runs it: it keeps the dtype, whatever the
// reduction. Throws einc::Error when the operation does not apply to the dtype.
DType result_dtype(Op op, Reduction reduction, DType input, bool reduces_an_axis = true);

}  // namespace einc
