// Element types: names, sizes, result-dtype rules, and the narrow float conversions.
#include <bit>
#include <cmath>
#include <doctest/doctest.h>
#include <limits>

#include "compiler/dtype.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/narrow_float.hpp"

using namespace einc;

TEST_CASE("dtype names and sizes") {
    CHECK(size_of(DType::bf16) == 2);
    CHECK(size_of(DType::boolean) == 1);
    CHECK(name_of(DType::boolean) == "bool");
    CHECK(dtype_named("float32") == DType::f32);
    CHECK(dtype_named("bf16") == DType::bf16);
    CHECK(dtype_named("uint8") == DType::u8);
    CHECK(dtype_named("u64") == DType::u64);
    CHECK(dtype_named("int16") == DType::i16);
    CHECK(size_of(DType::u16) == 2);
    CHECK(name_of(DType::u32) == "u32");
    CHECK(dtype_named("complex64") == DType::c64);
    CHECK(size_of(DType::c128) == 16);
    CHECK_FALSE(dtype_named("f33").has_value());
}

TEST_CASE("result dtypes follow numpy, as einops does") {
    CHECK(result_dtype(Op::reduce, Reduction::sum, DType::i8) == DType::i64);
    CHECK(result_dtype(Op::reduce, Reduction::sum, DType::boolean) == DType::i64);
    CHECK(result_dtype(Op::reduce, Reduction::sum, DType::bf16) == DType::bf16);
    CHECK(result_dtype(Op::reduce, Reduction::max, DType::i32) == DType::i32);
    CHECK(result_dtype(Op::reduce, Reduction::sum, DType::u8) == DType::u64);  // numpy's, unsigned
    CHECK(result_dtype(Op::reduce, Reduction::prod, DType::u32) == DType::u64);
    CHECK(result_dtype(Op::reduce, Reduction::sum, DType::i16) == DType::i64);
    CHECK(result_dtype(Op::reduce, Reduction::max, DType::u16) == DType::u16);
    CHECK(result_dtype(Op::reduce, Reduction::mean, DType::u8) == DType::f64);
    CHECK(result_dtype(Op::einsum, Reduction::none, DType::u8) == DType::u8);  // wraps, as numpy's
    // complex: summed, averaged, multiplied and contracted in its own dtype (numpy's); no order
    CHECK(result_dtype(Op::rearrange, Reduction::none, DType::c128) == DType::c128);
    CHECK(result_dtype(Op::reduce, Reduction::sum, DType::c64) == DType::c64);
    CHECK(result_dtype(Op::reduce, Reduction::mean, DType::c128) == DType::c128);
    CHECK(result_dtype(Op::einsum, Reduction::none, DType::c128) == DType::c128);
    CHECK(result_dtype(Op::reduce, Reduction::max, DType::c64, /*reduces_an_axis=*/false) == DType::c64);
    CHECK_THROWS_WITH_AS(result_dtype(Op::reduce, Reduction::max, DType::c64),
                         doctest::Contains("max of c64 tensors is not defined"), Error);
    CHECK_THROWS_WITH_AS(result_dtype(Op::reduce, Reduction::any, DType::c128),
                         doctest::Contains("any of c128 tensors is not supported"), Error);
    CHECK(result_dtype(Op::reduce, Reduction::prod, DType::c64) == DType::c64);
    CHECK(result_dtype(Op::reduce, Reduction::any, DType::f32) == DType::boolean);
    CHECK(result_dtype(Op::rearrange, Reduction::none, DType::f8e4m3) == DType::f8e4m3);
    // numpy's mean of integers and bool is f64 (einops refuses it; einc follows numpy).
    CHECK(result_dtype(Op::reduce, Reduction::mean, DType::i32) == DType::f64);
    CHECK(result_dtype(Op::reduce, Reduction::mean, DType::boolean) == DType::f64);
    CHECK(result_dtype(Op::reduce, Reduction::mean, DType::f16) == DType::f16);
    CHECK(result_dtype(Op::einsum, Reduction::none, DType::boolean) == DType::boolean);  // numpy's
    CHECK_THROWS_AS(result_dtype(Op::einsum, Reduction::none, DType::f8e5m2), Error);
    // einops runs a reduce that reduces nothing as a rearrange: the dtype stays, even for mean.
    CHECK(result_dtype(Op::reduce, Reduction::sum, DType::i32, /*reduces_an_axis=*/false) == DType::i32);
    CHECK(result_dtype(Op::reduce, Reduction::mean, DType::i8, /*reduces_an_axis=*/false) == DType::i8);
}

TEST_CASE("operands of mixed dtypes promote as numpy.result_type does (bf16 with f16: f32, as torch)") {
    // numpy 2.4: numpy.result_type(a, b) for every pair of the dtypes numpy has, written out by hand
    // (bf16 after torch.promote_types, as numpy has none; fp8 mixes with nothing in einc).
    using enum DType;
    struct Pair {
        DType a, b, promoted;
    };
    const Pair table[] = {
        {f64, f32, f64},
        {f64, f16, f64},
        {f64, bf16, f64},
        {f64, i8, f64},
        {f64, i32, f64},
        {f64, i64, f64},
        {f64, boolean, f64},
        {f32, f16, f32},
        {f32, bf16, f32},
        {f32, i8, f32},
        {f32, i32, f64},
        {f32, i64, f64},
        {f32, boolean, f32},
        {f16, bf16, f32},
        {f16, i8, f16},
        {f16, i32, f64},
        {f16, i64, f64},
        {f16, boolean, f16},
        {bf16, i8, bf16},
        {bf16, i32, f64},
        {bf16, i64, f64},
        {bf16, boolean, bf16},
        {i8, i32, i32},
        {i8, i64, i64},
        {i8, boolean, i8},
        {i32, i64, i64},
        {i32, boolean, i32},
        {i64, boolean, i64},
        // the 16-bit and unsigned integers (numpy 2.4, printed by numpy.result_type)
        {i16, f64, f64},
        {i16, f32, f32},
        {i16, f16, f32},
        {i16, i8, i16},
        {i16, i32, i32},
        {i16, i64, i64},
        {i16, u8, i16},
        {i16, u16, i32},
        {i16, u32, i64},
        {i16, u64, f64},
        {i16, boolean, i16},
        {u8, f64, f64},
        {u8, f32, f32},
        {u8, f16, f16},
        {u8, i8, i16},
        {u8, i32, i32},
        {u8, i64, i64},
        {u8, u16, u16},
        {u8, u32, u32},
        {u8, u64, u64},
        {u8, boolean, u8},
        {u16, f64, f64},
        {u16, f32, f32},
        {u16, f16, f32},
        {u16, i8, i32},
        {u16, i32, i32},
        {u16, i64, i64},
        {u16, u32, u32},
        {u16, u64, u64},
        {u16, boolean, u16},
        {u32, f64, f64},
        {u32, f32, f64},
        {u32, f16, f64},
        {u32, i8, i64},
        {u32, i32, i64},
        {u32, i64, i64},
        {u32, u64, u64},
        {u32, boolean, u32},
        {u64, f64, f64},
        {u64, f32, f64},
        {u64, f16, f64},
        {u64, i8, f64},
        {u64, i32, f64},
        {u64, i64, f64},
        {u64, boolean, u64},
        // bf16 with them: the float whose significand holds the integer, as with f16 (torch agrees on u8)
        {bf16, u8, bf16},
        {bf16, i16, f32},
        {bf16, u16, f32},
        {bf16, u32, f64},
        {bf16, u64, f64},
        // complex (numpy 2.4, printed by numpy.result_type), and bf16 as f16
        {c64, f64, c128},
        {c64, f32, c64},
        {c64, f16, c64},
        {c64, i8, c64},
        {c64, i16, c64},
        {c64, i32, c128},
        {c64, i64, c128},
        {c64, u8, c64},
        {c64, u16, c64},
        {c64, u32, c128},
        {c64, u64, c128},
        {c64, boolean, c64},
        {c64, c128, c128},
        {c128, f64, c128},
        {c128, f32, c128},
        {c128, f16, c128},
        {c128, i8, c128},
        {c128, i16, c128},
        {c128, i32, c128},
        {c128, i64, c128},
        {c128, u8, c128},
        {c128, u16, c128},
        {c128, u32, c128},
        {c128, u64, c128},
        {c128, boolean, c128},
        {c64, bf16, c64},
        {c128, bf16, c128},
    };
    for (const Pair& pair : table) {
        CAPTURE(name_of(pair.a));
        CAPTURE(name_of(pair.b));
        CHECK(promote_types(pair.a, pair.b) == pair.promoted);
        CHECK(promote_types(pair.b, pair.a) == pair.promoted);
    }
    for (const DType dtype : all_dtypes) CHECK(promote_types(dtype, dtype) == dtype);
    const DType three[] = {i8, boolean, f16};
    CHECK(promote_types(three) == f16);
    const DType four[] = {i8, f16, i32, f32};
    CHECK(promote_types(four) == f64);
    CHECK_THROWS_WITH_AS(promote_types(f8e4m3, f32), doctest::Contains("fp8 mixes with no other dtype"),
                         Error);
    CHECK_THROWS_AS(promote_types(f8e4m3, f8e5m2), Error);
}

TEST_CASE("f16: exact values, rounding to nearest even, subnormals, overflow") {
    CHECK(f32_to_f16(1.0f) == 0x3C00);
    CHECK(f32_to_f16(-2.0f) == 0xC000);
    CHECK(f32_to_f16(65504.0f) == 0x7BFF);
    CHECK(f32_to_f16(65520.0f) == 0x7C00);             // rounds up to inf
    CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3C00);      // tie: to even
    CHECK(f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3C02);  // tie: to even (up)
    CHECK(f32_to_f16(0x1p-24f) == 0x0001);             // smallest subnormal
    CHECK(f32_to_f16(0x1p-25f) == 0x0000);             // tie below it: to even (zero)
    CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7C00);
    CHECK((f32_to_f16(std::nanf("")) & 0x7C00) == 0x7C00);
    for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {  // every finite f16 survives a round trip
        const auto h = static_cast<std::uint16_t>(bits);
        if ((h & 0x7C00) == 0x7C00) continue;
        REQUIRE(f32_to_f16(f16_to_f32(h)) == h);
    }
    CHECK(f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(f16_to_f32(0x7BFF) == 65504.0f);
    for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {  // every f16, as binary16 defines it
        const auto h = static_cast<std::uint16_t>(bits);
        const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
        const float sign = (h & 0x8000) ? -1.0f : 1.0f;
        const float value = f16_to_f32(h);
        CAPTURE(bits);
        if (exponent == 0x1F && mantissa != 0) {  // NaN: the payload kept
            REQUIRE(std::isnan(value));
            REQUIRE(std::bit_cast<std::uint32_t>(value) ==
                    ((h & 0x8000u) << 16 | 0x7F800000u | static_cast<std::uint32_t>(mantissa) << 13));
        } else if (exponent == 0x1F) {
            REQUIRE(value == sign * std::numeric_limits<float>::infinity());
        } else {
            const float expected = exponent == 0
                                       ? sign * std::ldexp(static_cast<float>(mantissa), -24)
                                       : sign * std::ldexp(1.0f + mantissa / 1024.0f, exponent - 15);
            REQUIRE(std::bit_cast<std::uint32_t>(value) == std::bit_cast<std::uint32_t>(expected));
        }
    }
}

TEST_CASE("bf16: truncation with round to nearest even") {
    CHECK(f32_to_bf16(1.0f) == 0x3F80);
    CHECK(bf16_to_f32(0x3F80) == 1.0f);
    CHECK(f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80);      // tie: to even
    CHECK(f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82);  // tie: to even (up)
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST_CASE("fp8 e4m3fn and e5m2") {
    CHECK(f8e4m3_to_f32(0x38) == 1.0f);
    CHECK(f8e4m3_to_f32(0x7E) == 448.0f);
    CHECK(f8e4m3_to_f32(0x01) == 0x1p-9f);
    CHECK(std::isnan(f8e4m3_to_f32(0x7F)));
    CHECK(f32_to_f8e4m3(1.0f) == 0x38);
    CHECK(f32_to_f8e4m3(-448.0f) == 0xFE);
    CHECK(f32_to_f8e4m3(500.0f) == 0x7F);  // no inf in e4m3fn: NaN
    CHECK(f8e5m2_to_f32(0x3C) == 1.0f);
    CHECK(f32_to_f8e5m2(1.0f) == 0x3C);
    CHECK(f32_to_f8e5m2(1e6f) == 0x7C);       // inf
    for (int bits = 0; bits < 256; ++bits) {  // every finite value survives a round trip
        const auto b = static_cast<std::uint8_t>(bits);
        if ((b & 0x7F) != 0x7F) REQUIRE(f32_to_f8e4m3(f8e4m3_to_f32(b)) == b);
        if ((b & 0x7C) != 0x7C) REQUIRE(f32_to_f8e5m2(f8e5m2_to_f32(b)) == b);
    }
}
