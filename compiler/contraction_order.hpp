// The order in which einsum contracts its operands pairwise. Exhaustive dynamic programming over subsets
// (opt_einsum's "optimal") up to a limit on the operand count, greedy beyond it; minimises FLOPs, with
// the largest intermediate as tie-break.
//
// FLOPs are counted as opt_einsum counts them: a contraction over the axes U of its operands costs
// product(U) * (terms - 1, at least 1, plus 1 if some axis is summed).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/bound.hpp"
#include "compiler/plan.hpp"

namespace einc {

// operands[i] is the set of axes of operand i; `sizes` is indexed by AxisId.
// @pre operands.size() >= 2
// @post path.pairs.size() == operands.size() - 1
ContractionPath contraction_order(std::span<const std::vector<AxisId>> operands,
                                  std::span<const AxisId> output, std::span<const std::int64_t> sizes,
                                  std::size_t optimal_limit);

}  // namespace einc
