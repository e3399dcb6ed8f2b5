// Element access and arithmetic shared by the reference interpreter and the naive plan interpreter:
// loading any dtype as double or int64, storing with a single rounding, and the reductions' folds.
// Internal to tests/reference/.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "grammar/diagnostic.hpp"
#include "runtime/narrow_float.hpp"
#include "runtime/tensor.hpp"

namespace einc::reference::detail {

// ------------------------------------------------------------------------------------------------
// One element: where it is, and its value
// ------------------------------------------------------------------------------------------------

// Element (i0, i1, ...) of a view lies at data + sum(ik * strides[k]) elements.
inline std::byte* element_at(const TensorView& view, std::span<const std::int64_t> indices) {
    EINC_ASSERT(indices.size() == view.rank());
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < indices.size(); ++d) {
        EINC_ASSERT(indices[d] >= 0 && indices[d] < view.shape[d]);
        offset += indices[d] * view.strides[d];
    }
    return static_cast<std::byte*>(view.data) + offset * static_cast<std::int64_t>(size_of(view.dtype));
}

// memcpy: a strided view over a byte buffer promises no alignment.
template <typename T>
inline T load_bytes(const std::byte* element) {
    T value;
    std::memcpy(&value, element, sizeof value);
    return value;
}

template <typename T>
inline void store_bytes(std::byte* element, T value) {
    std::memcpy(element, &value, sizeof value);
}

// Data movement copies bytes: NaN payloads, signed zeros and fp8 encodings survive as they are.
inline void copy_element(std::byte* to, const std::byte* from, DType dtype) {
    std::memcpy(to, from, size_of(dtype));
}

// Any element as a double (a complex one: its real part); exact for every dtype but 64-bit integers beyond
// 2^53.
inline double load_real(const std::byte* element, DType dtype) {
    switch (dtype) {
    case DType::c64: return load_bytes<float>(element);
    case DType::c128: return load_bytes<double>(element);
    case DType::f64: return load_bytes<double>(element);
    case DType::f32: return load_bytes<float>(element);
    case DType::f16: return f16_to_f32(load_bytes<std::uint16_t>(element));
    case DType::bf16: return bf16_to_f32(load_bytes<std::uint16_t>(element));
    case DType::f8e4m3: return f8e4m3_to_f32(load_bytes<std::uint8_t>(element));
    case DType::f8e5m2: return f8e5m2_to_f32(load_bytes<std::uint8_t>(element));
    case DType::i8: return load_bytes<std::int8_t>(element);
    case DType::i16: return load_bytes<std::int16_t>(element);
    case DType::i32: return load_bytes<std::int32_t>(element);
    case DType::i64: return static_cast<double>(load_bytes<std::int64_t>(element));
    case DType::u8: return load_bytes<std::uint8_t>(element);
    case DType::u16: return load_bytes<std::uint16_t>(element);
    case DType::u32: return load_bytes<std::uint32_t>(element);
    case DType::u64: return static_cast<double>(load_bytes<std::uint64_t>(element));
    case DType::boolean: return load_bytes<std::uint8_t>(element) != 0 ? 1.0 : 0.0;
    }
    EINC_ASSERT(false);
}

// Stores a complex value (re, im) into a complex dtype, rounded to nearest; into another, its real part.
inline void store_real(std::byte* element, DType dtype, double value);
inline void store_complex(std::byte* element, DType dtype, double re, double im) {
    if (dtype == DType::c64)
        store_bytes(element, std::array<float, 2>{static_cast<float>(re), static_cast<float>(im)});
    else if (dtype == DType::c128)
        store_bytes(element, std::array<double, 2>{re, im});
    else
        store_real(element, dtype, re);
}

// The imaginary part of a complex element (0 for every other dtype).
inline double load_imaginary(const std::byte* element, DType dtype) {
    if (dtype == DType::c64) return load_bytes<float>(element + 4);
    if (dtype == DType::c128) return load_bytes<double>(element + 8);
    return 0;
}

// An integer or bool element as int64 (bool: any nonzero byte is true; u64: its bits).
inline std::int64_t load_integer(const std::byte* element, DType dtype) {
    switch (dtype) {
    case DType::i8: return load_bytes<std::int8_t>(element);
    case DType::i16: return load_bytes<std::int16_t>(element);
    case DType::i32: return load_bytes<std::int32_t>(element);
    case DType::i64: return load_bytes<std::int64_t>(element);
    case DType::u8: return load_bytes<std::uint8_t>(element);
    case DType::u16: return load_bytes<std::uint16_t>(element);
    case DType::u32: return load_bytes<std::uint32_t>(element);
    case DType::u64: return static_cast<std::int64_t>(load_bytes<std::uint64_t>(element));
    case DType::boolean: return load_bytes<std::uint8_t>(element) != 0 ? 1 : 0;
    default: break;
    }
    EINC_ASSERT(false);
}

// Rounds to float "to odd": toward zero, then the last mantissa bit set if anything was dropped. Rounding
// that float to nearest once more, to a format with at most 22 significant bits (f16, bf16, fp8), gives
// exactly the double rounded to nearest in that format; going double -> float -> f16 by rounding to
// nearest twice can be off by one ulp when the first rounding lands on a tie.
inline float round_to_odd(double value) {
    float rounded = static_cast<float>(value);
    if (std::isnan(value) || static_cast<double>(rounded) == value) return rounded;
    if (std::fabs(static_cast<double>(rounded)) > std::fabs(value)) rounded = std::nextafter(rounded, 0.0f);
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(rounded) | 1u);
}

inline void store_integer(std::byte* element, DType dtype, std::int64_t value);

// Stores a double, rounded to nearest. Integer dtypes truncate and wrap; the value must lie in int64 (or
// for u64, in [-2^63, 2^64)).
inline void store_real(std::byte* element, DType dtype, double value) {
    switch (dtype) {
    case DType::c64: store_bytes(element, std::array<float, 2>{static_cast<float>(value), 0.0f}); return;
    case DType::c128: store_bytes(element, std::array<double, 2>{value, 0.0}); return;
    case DType::f64: store_bytes(element, value); return;
    case DType::f32: store_bytes(element, static_cast<float>(value)); return;
    case DType::f16: store_bytes(element, f32_to_f16(round_to_odd(value))); return;
    case DType::bf16: store_bytes(element, f32_to_bf16(round_to_odd(value))); return;
    case DType::f8e4m3: store_bytes(element, f32_to_f8e4m3(round_to_odd(value))); return;
    case DType::f8e5m2: store_bytes(element, f32_to_f8e5m2(round_to_odd(value))); return;
    case DType::boolean: store_bytes(element, static_cast<std::uint8_t>(value != 0.0)); return;
    case DType::u64:
        if (value >= 0x1p63) {
            EINC_ASSERT(value < 0x1p64);
            store_bytes(element, static_cast<std::uint64_t>(value));
            return;
        }
        [[fallthrough]];
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64:
    case DType::u8:
    case DType::u16:
    case DType::u32: {
        // 2^63 is exactly representable; anything at or past it (or NaN) has no int64 value.
        EINC_ASSERT(value >= -0x1p63 && value < 0x1p63);
        store_integer(element, dtype, static_cast<std::int64_t>(value));
        return;
    }
    }
    EINC_ASSERT(false);
}

// Stores an int64: integers wrap (C++20 conversions are modular), bool is value != 0, floats round.
inline void store_integer(std::byte* element, DType dtype, std::int64_t value) {
    switch (dtype) {
    case DType::i8: store_bytes(element, static_cast<std::int8_t>(value)); return;
    case DType::i16: store_bytes(element, static_cast<std::int16_t>(value)); return;
    case DType::i32: store_bytes(element, static_cast<std::int32_t>(value)); return;
    case DType::i64: store_bytes(element, value); return;
    case DType::u8: store_bytes(element, static_cast<std::uint8_t>(value)); return;
    case DType::u16: store_bytes(element, static_cast<std::uint16_t>(value)); return;
    case DType::u32: store_bytes(element, static_cast<std::uint32_t>(value)); return;
    case DType::u64: store_bytes(element, static_cast<std::uint64_t>(value)); return;
    case DType::boolean: store_bytes(element, static_cast<std::uint8_t>(value != 0)); return;
    default: store_real(element, dtype, static_cast<double>(value)); return;
    }
}

// ------------------------------------------------------------------------------------------------
// Arithmetic in the accumulator types: int64 (integers and bool), uint64 (u64: it compares unsigned)
// and double (floats)
// ------------------------------------------------------------------------------------------------

using complex = std::complex<double>;

template <typename T>
T load(const std::byte* element, DType dtype) {
    if constexpr (std::is_same_v<T, complex>)
        return {load_real(element, dtype), load_imaginary(element, dtype)};
    else if constexpr (std::is_same_v<T, double>)
        return load_real(element, dtype);
    else
        return static_cast<T>(load_integer(element, dtype));
}

inline void store(std::byte* element, DType dtype, complex value) {
    store_complex(element, dtype, value.real(), value.imag());
}
inline void store(std::byte* element, DType dtype, double value) {
    store_real(element, dtype, value);
}
inline void store(std::byte* element, DType dtype, std::int64_t value) {
    store_integer(element, dtype, value);
}
inline void store(std::byte* element, DType dtype, std::uint64_t value) {
    if (is_floating(dtype))
        store_real(element, dtype, static_cast<double>(value));
    else
        store_integer(element, dtype, static_cast<std::int64_t>(value));
}

// Integers wrap around as two's complement, without the undefined behaviour of signed overflow.
inline std::int64_t add(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
inline std::int64_t multiply(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}
inline std::uint64_t add(std::uint64_t a, std::uint64_t b) {
    return a + b;
}
inline std::uint64_t multiply(std::uint64_t a, std::uint64_t b) {
    return a * b;
}
inline double add(double a, double b) {
    return a + b;
}
inline double multiply(double a, double b) {
    return a * b;
}
inline complex add(complex a, complex b) {
    return a + b;
}
inline complex multiply(complex a, complex b) {  // as written: std::complex's NaN recovery is not numpy's
    return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}

inline bool is_nan(double value) {
    return std::isnan(value);
}
inline bool is_nan(std::int64_t) {
    return false;
}
inline bool is_nan(std::uint64_t) {
    return false;
}
inline bool is_nan(complex value) {
    return std::isnan(value.real()) || std::isnan(value.imag());
}

// Calls f(T{}) with the type arithmetic on elements of `dtype` is done in: double for floats,
// std::complex<double> for complex dtypes, uint64 for u64 (it compares unsigned), int64 for the other
// integers and bool.
template <typename F>
decltype(auto) with_value_type(DType dtype, F&& f) {
    if (is_complex(dtype)) return f(complex{});
    if (is_floating(dtype)) return f(double{});
    if (dtype == DType::u64) return f(std::uint64_t{});
    return f(std::int64_t{});
}

// One reduction over the values of a reduced set (which may be empty, except for max and min).
template <typename T>
T fold(Reduction reduction, const std::vector<T>& values) {
    const auto nonzero = [](T v) { return v != T{0}; };  // NaN counts as nonzero, as in numpy
    switch (reduction) {
    case Reduction::sum: {
        T total{0};
        for (const T v : values) total = add(total, v);
        return total;
    }
    case Reduction::mean:
        if constexpr (std::is_same_v<T, double> || std::is_same_v<T, complex>) {
            constexpr double nan = std::numeric_limits<double>::quiet_NaN();
            if (values.empty()) {  // numpy's mean of nothing: NaN, in both parts of a complex one
                if constexpr (std::is_same_v<T, complex>)
                    return complex{nan, nan};
                else
                    return nan;
            }
            return fold(Reduction::sum, values) / static_cast<double>(values.size());
        }
        break;  // result_dtype rejects the mean of integers
    case Reduction::prod: {
        T total{1};
        for (const T v : values) total = multiply(total, v);
        return total;
    }
    case Reduction::max:
    case Reduction::min:
        if constexpr (!std::is_same_v<T, complex>) {  // (result_dtype refuses complex ones)
            EINC_ASSERT(!values.empty());
            T best = values.front();
            for (const T v : values) {
                if (is_nan(v)) return v;  // NaN propagates, as numpy's max does
                best = reduction == Reduction::max ? std::max(best, v) : std::min(best, v);
            }
            return best;
        }
        break;
    case Reduction::any: return std::any_of(values.begin(), values.end(), nonzero) ? T{1} : T{0};
    case Reduction::all: return std::all_of(values.begin(), values.end(), nonzero) ? T{1} : T{0};
    case Reduction::none: break;
    }
    EINC_ASSERT(false);
}

}  // namespace einc::reference::detail
