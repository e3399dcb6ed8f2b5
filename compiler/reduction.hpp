// The reduction ops, one row each: everything einc knows of an op, read by every place that needs it -
// the result dtype (dtype.cpp), the accumulator (schedule.hpp's accumulator_dtype), the FLOPs (cost.cpp),
// the gradient (gradient.cpp), the generated CUDA (codegen.cpp) and the CPU kernels (runtime/cpu/fold.hpp,
// reduce.cpp). The rows are data; what each kind of fold, identity or rule means is written once per kind,
// in an exhaustive switch (no `default:`), so that a new op without a row, or a row of a new kind, fails
// to compile until every reader handles it.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "call.hpp"
#include "dtype.hpp"

namespace einc {

// How two values fold into one.
enum class Combine : std::uint8_t {
    add,          // sum, mean (integers wrap modulo 2^64, as numpy's int64)
    multiply,     // prod (likewise)
    maximum,      // max: NaN propagates, as PyTorch's
    minimum,      // min: likewise
    logical_or,   // any
    logical_and,  // all
};

// What folding no value gives: the fold's identity.
enum class Identity : std::uint8_t {
    zero,
    one,
    lowest,   // -inf, or the integer's lowest value
    highest,  // +inf, or the integer's highest value
};

// The result's dtype, from the input's (numpy's rules, which einops inherits).
enum class ResultRule : std::uint8_t {
    same,           // the input's (max, min)
    wide_integers,  // floats keep theirs; signed integers and bool give i64, unsigned u64 (sum, prod)
    boolean,        // bool (any, all)
    floating,       // floats keep theirs; integers and bool give f64 (mean: numpy's; einops refuses)
};

// The gradient of the reduction with respect to its input.
enum class GradientRule : std::uint8_t {
    broadcast,         // the output's gradient repeated along the reduced axes (sum)
    scaled_broadcast,  // likewise, times 1/n for n terms per output (mean)
    route,             // each term's share of its output's gradient: a Route step (max, min, prod)
    none,              // not differentiable: the result is boolean (any, all)
};

struct ReductionInfo {
    Reduction op = Reduction::sum;
    std::string_view name;
    Combine combine = Combine::add;
    Identity identity = Identity::zero;
    bool divides = false;  // finish: the fold divided by its number of terms (mean; NaN for none)
    ResultRule result = ResultRule::same;
    // The accumulator: whether long folds of f32 on the CPU carry f64 (sums and products gain precision
    // at memory speed there); every op folds integers and bool in i64 and f64 in f64 (accumulator_dtype).
    bool widens_f32 = false;
    GradientRule gradient = GradientRule::none;
    double flops_per_term = 1;  // and `divides` adds one per output (docs/cost-model.md)
};

inline constexpr std::array<ReductionInfo, 7> reduction_table = [] {
    using enum Combine;
    using enum Identity;
    using enum ResultRule;
    using enum GradientRule;
    using R = Reduction;
    // clang-format off
    return std::array<ReductionInfo, 7>{{
        // op     name    combine      identity divides result         widens  gradient          FLOPs/term
        {R::sum,  "sum",  add,         zero,    false,  wide_integers, true,   broadcast,        1},
        {R::mean, "mean", add,         zero,    true,   floating,      true,   scaled_broadcast, 1},
        {R::max,  "max",  maximum,     lowest,  false,  same,          false,  route,            1},
        {R::min,  "min",  minimum,     highest, false,  same,          false,  route,            1},
        {R::prod, "prod", multiply,    one,     false,  wide_integers, true,   route,            1},
        {R::any,  "any",  logical_or,  zero,    false,  boolean,       false,  none,             1},
        {R::all,  "all",  logical_and, one,     false,  boolean,       false,  none,             1},
    }};
    // clang-format on
}();

// One row per op, in the enum's order (Reduction::none, first, has none).
inline constexpr bool rows_in_order = [] {
    for (std::size_t k = 0; k < reduction_table.size(); ++k)
        if (reduction_table[k].op != static_cast<Reduction>(k + 1)) return false;
    return true;
}();
static_assert(reduction_table.size() == static_cast<std::size_t>(Reduction::all) && rows_in_order,
              "one row of reduction_table per reduction op, in the order of enum Reduction");

// @pre op != Reduction::none
constexpr const ReductionInfo& info_of(Reduction op) {
    return reduction_table[static_cast<std::size_t>(op) - 1];
}

// The dtype reducing `input` by `op` gives, where the op takes the dtype (result_dtype() in dtype.hpp
// says which do not, with the error).
constexpr DType reduced_dtype(Reduction op, DType input) {
    switch (info_of(op).result) {
    case ResultRule::same: return input;
    case ResultRule::floating: return is_floating(input) || is_complex(input) ? input : DType::f64;
    case ResultRule::wide_integers:
        return is_floating(input) || is_complex(input) ? input : is_unsigned(input) ? DType::u64 : DType::i64;
    case ResultRule::boolean: return DType::boolean;
    }
    return input;  // (unreachable: the switch is exhaustive)
}

// Whether integer folds of `op` wrap modulo 2^64 (sums and products, as numpy's int64 arithmetic) rather
// than compare or test values.
constexpr bool wraps(Combine combine) {
    switch (combine) {
    case Combine::add:
    case Combine::multiply: return true;
    case Combine::maximum:
    case Combine::minimum:
    case Combine::logical_or:
    case Combine::logical_and: return false;
    }
    return false;
}

}  // namespace einc
