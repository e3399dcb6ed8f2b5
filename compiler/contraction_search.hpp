// Internal to compiler/contraction_order*.cpp: the searches for a contraction order and what they share.
// A search returns a tree in SSA form; evaluate() is the one place its FLOPs and sizes are counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "compiler/bound.hpp"

namespace einc::contraction {

using AxisSet = std::vector<AxisId>;  // sorted, unique

struct Network {
    std::vector<AxisSet> operands;
    AxisSet output;
    std::span<const std::int64_t> sizes;  // by AxisId
    double max_intermediate = 0;          // elements of any intermediate but the output; infinity: none
};

// Contraction k makes tensor operands.size() + k of the two tensors it names (operands first).
using SsaPath = std::vector<std::pair<std::size_t, std::size_t>>;

struct Evaluation {
    double flops = 0;
    double largest = 0;       // the largest result, the output's included (ContractionPath's count)
    double intermediate = 0;  // the largest result but the last: what the memory limit bounds
};
Evaluation evaluate(const Network& network, const SsaPath& path);

// The product of the sizes of `axes`.
double product(const AxisSet& axes, std::span<const std::int64_t> sizes);

// Dynamic programming over subsets of at most 16 operands (contraction_dp.cpp).
enum class DpOutcome {
    optimal,        // `path` is the cheapest order within the limit
    known_optimal,  // no order beats the known one (`known`): it is the cheapest
    none_fits,
    over_budget,
};
struct DpResult {
    DpOutcome outcome = DpOutcome::over_budget;
    SsaPath path;
};
// `known`: the FLOPs and largest result of an order known to fit (infinite FLOPs: none known); the order
// found is the cheapest, of equal FLOPs the one of the smallest largest result. `work_budget`: the pairs
// of subsets it may look at before it gives up.
DpResult optimal_by_dp(const Network& network, const Evaluation& known, std::size_t work_budget);
// The smallest largest intermediate (the output's not counted) of any order, by dynamic programming over
// every subset (3^n steps); none past 16 operands or 256 distinct axes.
std::optional<double> smallest_peak_by_dp(const Network& network);

// Greedy searches (contraction_greedy.cpp), for any number of operands.
struct Heuristic {
    SsaPath path;  // empty when no run kept every intermediate within the limit
    std::size_t runs = 0;
    bool randomised_won = false;  // the best came from a randomised run, not the plain greedy
    double smallest_peak = 0;     // none fits: the smallest largest intermediate a run found
};
Heuristic best_greedy(const Network& network, std::size_t work_budget);
// The plain greedy alone (the DP's first upper bound): empty when it breaks the limit.
SsaPath plain_greedy(const Network& network);

// The path with the order inside each subtree of a few tensors made the cheapest there is, while that
// lowers the total (contraction_reorder.cpp); `reordered`: how many subtrees it changed. `work_budget`
// bounds the splits it tries, about.
SsaPath reorder_subtrees(const Network& network, SsaPath path, std::size_t work_budget,
                         std::size_t& reordered);

}  // namespace einc::contraction
