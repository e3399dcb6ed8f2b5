// The C++ type the CPU kernels fold in, for the schedule's accumulator dtype (compiler/schedule.hpp,
// accumulator_dtype: the one policy): decided here once, for every kernel that folds, multiplies or scales.
#pragma once

#include <cstdint>
#include <type_traits>

#include "compiler/schedule.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::cpu {

// f64 double, f32 float, i64 a 64-bit integer: unsigned where the fold wraps (sums and products, modulo
// 2^64 as numpy's int64 arithmetic; signed overflow is undefined in C++), signed where it compares; u64
// unsigned.
template <DType Accumulator, bool Wraps>
using accumulator_t = std::conditional_t<
    Accumulator == DType::f64, double,
    std::conditional_t<Accumulator == DType::f32, float,
                       std::conditional_t<Wraps || Accumulator == DType::u64, std::uint64_t, std::int64_t>>>;

// Whether folds of `op` wrap (Reduction::none: products and conversions, which do).
constexpr bool folds_wrap(Reduction op) {
    return op == Reduction::none || wraps(info_of(op).combine);
}

// Calls f(A{}) with the C++ type of `accumulator`, a folding step's by op Op on inputs of dtype In -
// instantiating only the accumulators the policy can give (Op, In): In's own, and the wider one that long
// folds of f32 take on the CPU. Anything else is a schedule these kernels were not built for.
template <Reduction Op, DType In, typename F>
void with_accumulator(DType accumulator, F&& f) {
    constexpr DType natural = accumulator_dtype(Op, In, 1, Backend::cpu);
    constexpr DType widened = accumulator_dtype(Op, In, max_window + 1, Backend::cpu);
    if (accumulator == natural) return f(accumulator_t<natural, folds_wrap(Op)>{});
    if constexpr (widened != natural)
        if (accumulator == widened) return f(accumulator_t<widened, folds_wrap(Op)>{});
    EINC_ASSERT(false);
}

// The same where the op is not known at compile time (scaling copies, routing gradients): every
// accumulator, each wrapping as `op` folds.
template <typename F>
void with_any_accumulator(DType accumulator, Reduction op, F&& f) {
    if (accumulator == DType::f64) return f(double{});
    if (accumulator == DType::f32) return f(float{});
    EINC_ASSERT(accumulator == DType::i64 || accumulator == DType::u64);  // (accumulator_dtype: no other)
    if (folds_wrap(op) || accumulator == DType::u64) return f(std::uint64_t{});
    f(std::int64_t{});
}

}  // namespace einc::cpu
