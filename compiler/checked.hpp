// Size arithmetic that reports overflow instead of wrapping: every product of axis sizes goes
// through here, so a pattern can never make einc compute with a wrapped size.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace einc {

inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
    std::int64_t product = 0;
    if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
    return product;
}

inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
    std::int64_t sum = 0;
    if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
    return sum;
}

// Byte counts of memory that may never be allocated (a workspace figure): at most INT64_MAX, which no
// allocation can satisfy, so that asking for it fails clearly rather than wrapping.
inline std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
    return checked_mul(a, b).value_or(INT64_MAX);
}
inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
    return checked_add(a, b).value_or(INT64_MAX);
}

// a / b rounded up, for a >= 0 and b > 0: (a + b - 1) / b would wrap for sizes near INT64_MAX, which a
// pattern may bind (tiles, chunks and blocks of a tensor that is only planned, never allocated).
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return a / b + (a % b != 0);
}

// The product of non-negative sizes; a zero anywhere makes it 0 even if the others would overflow.
inline std::optional<std::int64_t> checked_product(std::span<const std::int64_t> values) {
    for (const std::int64_t v : values)
        if (v == 0) return 0;
    std::int64_t product = 1;
    for (const std::int64_t v : values) {
        const auto next = checked_mul(product, v);
        if (!next) return std::nullopt;
        product = *next;
    }
    return product;
}

// Whether a tensor of these lengths can be described: the product of its non-zero lengths fits, as numpy
// requires of every array, an empty one too. Then the product of any of its lengths fits (or is 0), which
// the planner relies on: 4 x (2^63-1) x 0 is empty, yet its first two lengths multiply past 64 bits.
inline bool lengths_fit(std::span<const std::int64_t> lengths) {
    std::int64_t product = 1;
    for (const std::int64_t v : lengths) {
        if (v == 0) continue;
        const auto next = checked_mul(product, v);
        if (!next) return false;
        product = *next;
    }
    return true;
}

}  // namespace einc
