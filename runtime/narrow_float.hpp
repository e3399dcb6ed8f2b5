// Conversions between f32 and the narrow floating formats einc stores: f16 (IEEE binary16), bf16,
// and the OCP fp8 formats e4m3fn (no infinities, NaN = 0x7F, max 448) and e5m2 (IEEE-like).
// Narrowing rounds to nearest, ties to even. Out-of-range values become inf (f16, bf16, e5m2) or NaN
// (e4m3fn, which has no inf), as PyTorch converts.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace einc {

// Without branches, so that loops over f16 vectorise (a reduction of f16 ran 7 times slower with them):
// the exponent and mantissa moved to an f32's places and rebiased (15 -> 127) give a normal number;
// a subnormal (or zero) is rebiased one step further and the implicit one subtracted, exactly; the
// all-ones exponent (inf, NaN) stays all ones, the payload kept.
inline float f16_to_f32(std::uint16_t h) {
    const std::uint32_t shifted = static_cast<std::uint32_t>(h & 0x7FFFu) << 13;
    const std::uint32_t exponent = shifted & 0x0F800000u;
    const std::uint32_t normal = shifted + (112u << 23);
    const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(
        std::bit_cast<float>(shifted + (113u << 23)) - std::bit_cast<float>(113u << 23));
    const std::uint32_t is_subnormal = 0u - static_cast<std::uint32_t>(exponent == 0);
    const std::uint32_t is_special = 0u - static_cast<std::uint32_t>(exponent == 0x0F800000u);
    std::uint32_t bits = (subnormal & is_subnormal) | (normal & ~is_subnormal);
    bits = ((shifted | 0x7F800000u) & is_special) | (bits & ~is_special);
    return std::bit_cast<float>(bits | (static_cast<std::uint32_t>(h & 0x8000u) << 16));
}

inline std::uint16_t f32_to_f16(float value) {
    std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
    f &= 0x7FFFFFFFu;
    if (f >= 0x7F800000u) return sign | (f > 0x7F800000u ? 0x7E00u : 0x7C00u);  // NaN, inf
    if (f >= 0x47800000u) return sign | 0x7C00u;                                // >= 2^16: inf
    if (f < 0x38800000u) {
        // Below 2^-14 the result is subnormal: adding 0.5 puts the f16 ulp (2^-24) at the f32 ulp,
        // so the FPU does the round-to-nearest-even.
        const float shifted = std::bit_cast<float>(f) + 0.5f;
        return sign | static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(shifted) - 0x3F000000u);
    }
    const std::uint32_t odd = (f >> 13) & 1u;
    f += 0xC8000FFFu + odd;  // rebias the exponent (127 -> 15), round the 13 dropped bits to even
    return sign | static_cast<std::uint16_t>(f >> 13);
}

inline float bf16_to_f32(std::uint16_t b) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t f32_to_bf16(float value) {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    if ((f & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((f >> 16) | 0x0040u);  // quiet NaN
    return static_cast<std::uint16_t>((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

namespace detail {

// Decodes 1 sign bit, E exponent bits (bias 2^(E-1)-1) and M mantissa bits.
template <int E, int M>
float decode_minifloat(std::uint8_t bits) {
    constexpr int bias = (1 << (E - 1)) - 1;
    const bool negative = bits & 0x80u;
    const int exponent = (bits >> M) & ((1 << E) - 1);
    const int mantissa = bits & ((1 << M) - 1);
    float magnitude = exponent == 0
                          ? std::ldexp(static_cast<float>(mantissa), 1 - bias - M)
                          : std::ldexp(static_cast<float>(mantissa + (1 << M)), exponent - bias - M);
    return negative ? -magnitude : magnitude;
}

// Encodes |value| rounded to nearest-even on the format's grid; `max` is the largest finite value.
template <int E, int M>
std::uint8_t encode_minifloat(float value, float max, std::uint8_t overflow) {
    constexpr int bias = (1 << (E - 1)) - 1;
    const std::uint8_t sign = std::signbit(value) ? 0x80u : 0x00u;
    const float magnitude = std::fabs(value);
    int exponent = 0;
    std::frexp(magnitude, &exponent);                       // magnitude = f * 2^exponent with f in [0.5, 1)
    const int unbiased = std::max(exponent - 1, 1 - bias);  // subnormals share the smallest exponent
    const float quantum = std::ldexp(1.0f, unbiased - M);
    const float rounded = std::nearbyint(magnitude / quantum) * quantum;
    if (rounded > max) return sign | overflow;
    if (rounded == 0.0f) return sign;
    std::frexp(rounded, &exponent);
    if (exponent - 1 < 1 - bias)
        return sign | static_cast<std::uint8_t>(rounded / std::ldexp(1.0f, 1 - bias - M));
    const int mantissa = static_cast<int>(std::ldexp(rounded, -(exponent - 1) + M)) - (1 << M);
    return sign | static_cast<std::uint8_t>(((exponent - 1 + bias) << M) | mantissa);
}

}  // namespace detail

inline float f8e4m3_to_f32(std::uint8_t bits) {
    if ((bits & 0x7Fu) == 0x7Fu) return std::nanf("");
    return detail::decode_minifloat<4, 3>(bits);
}

inline float f8e5m2_to_f32(std::uint8_t bits) {
    return f16_to_f32(static_cast<std::uint16_t>(bits << 8));
}

inline std::uint8_t f32_to_f8e4m3(float value) {
    if (std::isnan(value)) return 0x7Fu;
    return detail::encode_minifloat<4, 3>(value, 448.0f, 0x7Fu);
}

inline std::uint8_t f32_to_f8e5m2(float value) {
    if (std::isnan(value)) return 0x7Eu;
    return detail::encode_minifloat<5, 2>(value, 57344.0f, 0x7Cu);
}

}  // namespace einc
