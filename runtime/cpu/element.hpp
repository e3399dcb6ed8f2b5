// Element types for the CPU kernels: how each dtype is stored, what it computes and accumulates in,
// and conversions between them. Kernels are templates over these traits, instantiated by dispatch().
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "compiler/dtype.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/narrow_float.hpp"

namespace einc::cpu {

// Distinct storage types for the formats C++ has no type for.
struct f16_t {
    std::uint16_t bits;
};
struct bf16_t {
    std::uint16_t bits;
};
struct f8e4m3_t {
    std::uint8_t bits;
};
struct f8e5m2_t {
    std::uint8_t bits;
};
struct bool_t {
    std::uint8_t value;
};

// storage: the bytes in memory; compute: what arithmetic happens in (f16/bf16/fp8 in float, integers
// and bool in int64, u64 in uint64); load/store convert between them (store rounds to nearest, wraps
// integers). Only the dtypes that are their own arithmetic_dtype() reach the arithmetic kernels; the
// others (i16, u8, u16, u32) are moved and converted.
template <DType D>
struct Element;
// The dtypes whose storage type is also what they compute in: loads and stores are copies.
template <typename T>
struct ComputedAsStored {
    using storage = T;
    using compute = T;
    static compute load(storage x) { return x; }
    static storage store(compute x) { return x; }
};
// The integers narrower than 64 bits: computed in int64, stored wrapping (modulo 2^bits, as numpy).
template <typename T>
struct ComputedInI64 {
    using storage = T;
    using compute = std::int64_t;
    static compute load(storage x) { return x; }
    static storage store(compute x) { return static_cast<storage>(static_cast<std::uint64_t>(x)); }
};
template <>
struct Element<DType::f64> : ComputedAsStored<double> {};
template <>
struct Element<DType::f32> : ComputedAsStored<float> {};
template <>
struct Element<DType::f16> {
    using storage = f16_t;
    using compute = float;
    static compute load(storage x) { return f16_to_f32(x.bits); }
    static storage store(compute x) { return {f32_to_f16(x)}; }
};
template <>
struct Element<DType::bf16> {
    using storage = bf16_t;
    using compute = float;
    static compute load(storage x) { return bf16_to_f32(x.bits); }
    static storage store(compute x) { return {f32_to_bf16(x)}; }
};
template <>
struct Element<DType::f8e4m3> {
    using storage = f8e4m3_t;
    using compute = float;
    static compute load(storage x) { return f8e4m3_to_f32(x.bits); }
    static storage store(compute x) { return {f32_to_f8e4m3(x)}; }
};
template <>
struct Element<DType::f8e5m2> {
    using storage = f8e5m2_t;
    using compute = float;
    static compute load(storage x) { return f8e5m2_to_f32(x.bits); }
    static storage store(compute x) { return {f32_to_f8e5m2(x)}; }
};
template <>
struct Element<DType::i8> : ComputedInI64<std::int8_t> {};
template <>
struct Element<DType::i16> : ComputedInI64<std::int16_t> {};
template <>
struct Element<DType::i32> : ComputedInI64<std::int32_t> {};
template <>
struct Element<DType::i64> : ComputedAsStored<std::int64_t> {};
template <>
struct Element<DType::u8> : ComputedInI64<std::uint8_t> {};
template <>
struct Element<DType::u16> : ComputedInI64<std::uint16_t> {};
template <>
struct Element<DType::u32> : ComputedInI64<std::uint32_t> {};
// (u64 computes unsigned: values past 2^63 compare and convert as numpy's.)
template <>
struct Element<DType::u64> : ComputedAsStored<std::uint64_t> {};
// (Complex is moved and converted; no arithmetic kernel takes it yet.)
template <>
struct Element<DType::c64> : ComputedAsStored<std::complex<float>> {};
template <>
struct Element<DType::c128> : ComputedAsStored<std::complex<double>> {};
template <>
struct Element<DType::boolean> {
    using storage = bool_t;
    using compute = std::int64_t;
    static compute load(storage x) { return x.value != 0; }
    static storage store(compute x) { return {static_cast<std::uint8_t>(x != 0)}; }
};

template <DType D>
using storage_t = typename Element<D>::storage;
template <DType D>
using compute_t = typename Element<D>::compute;

template <DType D>
struct DTypeTag {
    static constexpr DType value = D;
};

// Calls f(DTypeTag<D>{}) for the runtime dtype.
template <typename F>
decltype(auto) dispatch(DType dtype, F&& f) {
    switch (dtype) {
    case DType::f64: return f(DTypeTag<DType::f64>{});
    case DType::f32: return f(DTypeTag<DType::f32>{});
    case DType::f16: return f(DTypeTag<DType::f16>{});
    case DType::bf16: return f(DTypeTag<DType::bf16>{});
    case DType::f8e4m3: return f(DTypeTag<DType::f8e4m3>{});
    case DType::f8e5m2: return f(DTypeTag<DType::f8e5m2>{});
    case DType::i8: return f(DTypeTag<DType::i8>{});
    case DType::i16: return f(DTypeTag<DType::i16>{});
    case DType::i32: return f(DTypeTag<DType::i32>{});
    case DType::i64: return f(DTypeTag<DType::i64>{});
    case DType::u8: return f(DTypeTag<DType::u8>{});
    case DType::u16: return f(DTypeTag<DType::u16>{});
    case DType::u32: return f(DTypeTag<DType::u32>{});
    case DType::u64: return f(DTypeTag<DType::u64>{});
    case DType::c64: return f(DTypeTag<DType::c64>{});
    case DType::c128: return f(DTypeTag<DType::c128>{});
    case DType::boolean: return f(DTypeTag<DType::boolean>{});
    }
    EINC_ASSERT(false);
}

// Unaligned-safe element access (a strided view over bytes promises no alignment).
template <typename T>
inline T load_at(const std::byte* p) {
    T value;
    std::memcpy(&value, p, sizeof value);
    return value;
}
template <typename T>
inline void store_at(std::byte* p, T value) {
    std::memcpy(p, &value, sizeof value);
}

template <typename T>
constexpr bool is_complex_v = false;
template <typename T>
constexpr bool is_complex_v<std::complex<T>> = true;

// A value converted between compute types (float <-> int64 <-> uint64 <-> double, complex), as numpy's
// astype would: floats truncate toward zero, negative ones into u64 through i64 (wrapping); NaN gives 0,
// and a float no 64-bit integer holds 0x8000000000000000 (x86's "integer indefinite"), not undefined
// behaviour. A real value becomes complex with a zero imaginary part; a complex one keeps its real part
// in a real type (numpy's astype, which warns).
template <typename To, typename From>
inline To convert(From x) {
    if constexpr (is_complex_v<To> && is_complex_v<From>) {
        return To(static_cast<typename To::value_type>(x.real()),
                  static_cast<typename To::value_type>(x.imag()));
    } else if constexpr (is_complex_v<To>) {
        return To(static_cast<typename To::value_type>(x), 0);
    } else if constexpr (is_complex_v<From>) {
        return convert<To>(x.real());
    } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
        if (!(x == x)) return 0;  // NaN
        constexpr auto indefinite = static_cast<To>(std::uint64_t{1} << 63);
        if (x >= From(-0x1p63) && x < From(0x1p63)) return static_cast<To>(static_cast<std::int64_t>(x));
        if constexpr (std::is_unsigned_v<To>)
            if (x >= From(0x1p63) && x < From(0x1p64)) return static_cast<To>(x);
        return indefinite;
    } else {
        return static_cast<To>(x);
    }
}

// Whether the arithmetic kernels are built for dtype D (the others are converted to arithmetic_dtype).
template <DType D>
constexpr bool computed_natively = arithmetic_dtype(D) == D && !is_complex(D);

}  // namespace einc::cpu
