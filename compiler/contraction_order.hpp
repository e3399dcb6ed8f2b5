// The order in which einsum contracts its operands pairwise. Exhaustive dynamic programming over subsets
// (opt_einsum's "optimal") up to a limit on the operand count, greedy beyond it; minimises FLOPs, with
// the largest intermediate as tie-break.
//
// FLOPs are counted as opt_einsum counts them: a contraction over the axes U of its operands costs
// product(U) * (terms - 1, at least 1, plus 1 if some axis is summed).
#pragma once

#include <cstdint>
#include <functional>
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

// The path that contracts, at each step, the pair pick(n) of the n pairs (i, j), i < j, of the current
// list, in the order (0, 1), (0, 2), ..., (1, 2), ... - with the counts of that order. As pick ranges over
// its answers, every order there is: what the planner takes under PlanChoices (plan.hpp), where `einc aot`
// plans an einsum in every order its `?` extents could make the search choose.
// @pre operands.size() >= 2
// @post path.pairs.size() == operands.size() - 1
ContractionPath contraction_path(std::span<const std::vector<AxisId>> operands,
                                 std::span<const AxisId> output, std::span<const std::int64_t> sizes,
                                 const std::function<std::size_t(std::size_t)>& pick);

}  // namespace einc
