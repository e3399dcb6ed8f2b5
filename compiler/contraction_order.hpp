// The order in which einsum contracts its operands pairwise, minimising FLOPs (the largest intermediate as
// tie-break) under an optional limit on the largest intermediate:
//   up to 8 operands   every split of every subset (exhaustive): optimal
//   up to 16 operands  dynamic programming over subsets under a cost cap raised until an order fits
//                      (Pfeifer, Haegeman, Verstraete 2014): optimal, unless its work budget runs out
//   beyond             opt_einsum's greedy (the pair whose result removes the most elements), then
//                      randomised greedy runs from a fixed seed and a work budget: the best of them,
//                      then each subtree of up to 7 tensors reordered exhaustively while that is cheaper
//                      (deterministic, not proven optimal)
//
// FLOPs are counted as opt_einsum counts them: a contraction over the axes U of its operands costs
// product(U) * (terms - 1, at least 1, plus 1 if some axis is summed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "compiler/bound.hpp"
#include "compiler/plan.hpp"

namespace einc {

struct ContractionLimits {
    std::size_t max_intermediate_bytes = 0;  // 0: no limit; the output is not an intermediate
    std::size_t element_bytes = 4;           // what an element of an intermediate takes
};

// operands[i] is the set of axes of operand i; `sizes` is indexed by AxisId.
// @pre operands.size() >= 2
// @post path.pairs.size() == operands.size() - 1
// @throws Error (ErrorKind::shape) when no order keeps every intermediate within the limit, naming the
//         smallest largest intermediate there is (up to 16 operands; beyond, the smallest found)
ContractionPath contraction_order(std::span<const std::vector<AxisId>> operands,
                                  std::span<const AxisId> output, std::span<const std::int64_t> sizes,
                                  const ContractionLimits& limits = {});

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
