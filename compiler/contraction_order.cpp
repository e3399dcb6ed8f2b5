#include "compiler/contraction_order.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <limits>

#include "compiler/contraction_search.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {
namespace contraction {

double product(const AxisSet& axes, std::span<const std::int64_t> sizes) {
    double n = 1;
    for (const AxisId a : axes) n *= static_cast<double>(sizes[static_cast<std::size_t>(a)]);
    return n;
}

Evaluation evaluate(const Network& network, const SsaPath& path) {
    std::vector<AxisSet> tensors = network.operands;
    std::vector<int> holders(network.sizes.size(), 0);  // how many live tensors hold each axis
    std::vector<bool> in_output(network.sizes.size(), false);
    for (const AxisSet& set : tensors)
        for (const AxisId axis : set) ++holders[static_cast<std::size_t>(axis)];
    for (const AxisId axis : network.output) in_output[static_cast<std::size_t>(axis)] = true;
    Evaluation e;
    for (std::size_t step = 0; step < path.size(); ++step) {
        const AxisSet& a = tensors[path[step].first];
        const AxisSet& b = tensors[path[step].second];
        AxisSet all;
        std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(all));
        for (const AxisSet* t : {&a, &b})
            for (const AxisId axis : *t) --holders[static_cast<std::size_t>(axis)];
        AxisSet result;
        for (const AxisId axis : all)
            if (in_output[static_cast<std::size_t>(axis)] || holders[static_cast<std::size_t>(axis)] > 0)
                result.push_back(axis);
        for (const AxisId axis : result) ++holders[static_cast<std::size_t>(axis)];
        const bool summed = result.size() < all.size();
        e.flops += product(all, network.sizes) * (summed ? 2 : 1);
        const double size = product(result, network.sizes);
        e.largest = std::max(e.largest, size);
        if (step + 1 < path.size()) e.intermediate = std::max(e.intermediate, size);
        tensors.push_back(std::move(result));
    }
    return e;
}

}  // namespace contraction

namespace {

using contraction::AxisSet;
using contraction::Network;
using contraction::SsaPath;

AxisSet unite(const AxisSet& a, const AxisSet& b) {
    AxisSet out;
    std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
    return out;
}

// Axes needed outside a set of operands: the output's and those of every operand not in `mask`.
AxisSet needed_outside(std::uint64_t mask, std::span<const AxisSet> operands, const AxisSet& output) {
    AxisSet needed = output;
    for (std::size_t i = 0; i < operands.size(); ++i)
        if (!(mask >> i & 1u)) needed = unite(needed, operands[i]);
    return needed;
}

// Every split of every subset: 3^n steps and 2^n entries.
constexpr std::size_t exhaustive_operands = 8;
// Dynamic programming over subsets up to here (2^n entries), and the pairs of subsets it may price
// (about 50-80 ms here; past it, the greedy searches).
constexpr std::size_t dp_operands = 16;
constexpr std::size_t dp_work_budget = 3'000'000;
// The randomised greedy runs before it, from this many operands (pairs scored; 0.3-0.8 ms at 16).
constexpr std::size_t dp_greedy_operands = 13;
constexpr std::size_t dp_greedy_work_budget = 500;
// The greedy runs' budget: candidate pairs scored, in all runs together (deterministic, unlike time;
// about 15 ms for 100 operands here). Past a few runs the subtree reordering below gains more for the
// time than more runs do.
constexpr std::size_t greedy_work_budget = 30'000;
// Then the local search's: splits of subtrees tried (a 100-operand tree takes ~1.6M a pass over it).
constexpr std::size_t reorder_work_budget = 8'000'000;

struct Best {
    double flops = std::numeric_limits<double>::infinity();
    double largest = 0;
    AxisSet axes;
    std::uint64_t left = 0;  // the split that achieves it
};

bool better(double flops, double largest, const Best& than) {
    return flops < than.flops || (flops == than.flops && largest < than.largest);
}

// The tree of subset splits below `mask` in SSA form; returns the SSA id of `mask`'s tensor.
std::size_t emit_ssa(std::uint64_t mask, const std::vector<Best>& best, std::size_t operands, SsaPath& path) {
    if (std::popcount(mask) == 1) return static_cast<std::size_t>(std::countr_zero(mask));
    const std::size_t left = emit_ssa(best[mask].left, best, operands, path);
    const std::size_t right = emit_ssa(mask & ~best[mask].left, best, operands, path);
    path.emplace_back(left, right);
    return operands + path.size() - 1;
}

// The cheapest order by trying every split of every subset, or none when every order makes an
// intermediate larger than the limit.
std::optional<SsaPath> exhaustive(const Network& network) {
    const std::span<const AxisSet> operands = network.operands;
    const std::size_t n = operands.size();
    const std::uint64_t full = (std::uint64_t{1} << n) - 1;
    std::vector<Best> best(full + 1);
    for (std::size_t i = 0; i < n; ++i) {
        Best& leaf = best[std::uint64_t{1} << i];
        leaf.flops = 0;
        leaf.axes = operands[i];
    }
    for (std::uint64_t mask = 1; mask <= full; ++mask) {
        if (std::popcount(mask) < 2) continue;
        const AxisSet needed = needed_outside(mask, operands, network.output);
        // Every split into two non-empty halves, each once: the half holding the lowest operand is `left`.
        const std::uint64_t lowest = mask & (~mask + 1);
        for (std::uint64_t left = (mask - 1) & mask; left > 0; left = (left - 1) & mask) {
            if (!(left & lowest)) continue;
            const Best& l = best[left];
            const Best& r = best[mask & ~left];
            if (std::isinf(l.flops) || std::isinf(r.flops)) continue;
            const AxisSet all = unite(l.axes, r.axes);
            AxisSet result;
            std::set_intersection(all.begin(), all.end(), needed.begin(), needed.end(),
                                  std::back_inserter(result));
            const double size = contraction::product(result, network.sizes);
            if (mask != full && size > network.max_intermediate) continue;
            const double flops =
                l.flops + r.flops +
                contraction::product(all, network.sizes) * (result.size() < all.size() ? 2 : 1);
            const double largest = std::max({l.largest, r.largest, size});
            if (better(flops, largest, best[mask]))
                best[mask] = Best{flops, largest, std::move(result), left};
        }
    }
    if (std::isinf(best[full].flops)) return std::nullopt;
    SsaPath path;
    emit_ssa(full, best, n, path);
    return path;
}

// opt_einsum's list of pairs over a shrinking operand list, from a tree in SSA form.
std::vector<std::pair<std::size_t, std::size_t>> list_pairs(const SsaPath& path, std::size_t operands) {
    std::vector<std::size_t> list(operands);
    for (std::size_t i = 0; i < operands; ++i) list[i] = i;
    std::vector<std::pair<std::size_t, std::size_t>> pairs;
    for (std::size_t step = 0; step < path.size(); ++step) {
        const auto position = [&](std::size_t id) {
            return static_cast<std::size_t>(std::find(list.begin(), list.end(), id) - list.begin());
        };
        std::size_t i = position(path[step].first), j = position(path[step].second);
        if (i > j) std::swap(i, j);
        pairs.emplace_back(i, j);
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(j));
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        list.push_back(operands + step);
    }
    return pairs;
}

ContractionPath path_of(const Network& network, const SsaPath& ssa, PathSearch search) {
    const contraction::Evaluation e = contraction::evaluate(network, ssa);
    ContractionPath path;
    path.pairs = list_pairs(ssa, network.operands.size());
    path.optimized_flops = e.flops;
    path.largest_intermediate = e.largest;
    path.search = search;
    path.optimal = search == PathSearch::exhaustive || search == PathSearch::dynamic_programming;
    return path;
}

// No order keeps every intermediate within the limit: an error naming the smallest peak there is (or,
// past what dynamic programming takes, the smallest einc's greedy runs found).
[[noreturn]] void throw_none_fits(const Network& network, const ContractionLimits& limits) {
    const std::optional<double> proven = contraction::smallest_peak_by_dp(network);
    const double peak = proven ? *proven : contraction::best_greedy(network, 0).smallest_peak;
    const std::string bytes = fmt::format("{:.0f} bytes", peak * static_cast<double>(limits.element_bytes));
    throw Error(ErrorKind::shape, fmt::format("no contraction order keeps every intermediate within {} bytes",
                                              limits.max_intermediate_bytes))
        .note(fmt::format("the smallest largest intermediate {} is {} ({:.0f} elements)",
                          proven ? "of any order" : "einc's search found", bytes, peak))
        .help(fmt::format("raise the limit to at least {}", bytes));
}

// Contracts the list pairwise, the result of each contraction appended, until one operand is left: at
// each step the pair `pick` chooses of the candidates, every pair (i, j), i < j, in the order (0, 1),
// (0, 2), ..., (1, 2), ...
SsaPath walk(const Network& network, const std::function<std::size_t(std::size_t)>& pick) {
    const std::size_t n = network.operands.size();
    std::vector<std::size_t> list(n);
    for (std::size_t i = 0; i < n; ++i) list[i] = i;
    SsaPath path;
    while (list.size() > 1) {
        const std::size_t count = list.size() * (list.size() - 1) / 2;
        std::size_t picked = pick(count);
        EINC_ASSERT(picked < count);
        std::size_t i = 0;
        while (picked >= list.size() - 1 - i) picked -= list.size() - 1 - i++;
        const std::size_t j = i + 1 + picked;
        path.emplace_back(list[i], list[j]);
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(j));
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        list.push_back(n + path.size() - 1);
    }
    return path;
}

// The axis sets of the operands and the output, sorted and unique.
Network network_of(std::span<const std::vector<AxisId>> operands, std::span<const AxisId> output,
                   std::span<const std::int64_t> sizes, double max_intermediate) {
    Network network;
    for (const auto& axes : operands) {
        AxisSet set(axes.begin(), axes.end());
        std::sort(set.begin(), set.end());
        set.erase(std::unique(set.begin(), set.end()), set.end());
        network.operands.push_back(std::move(set));
    }
    network.output.assign(output.begin(), output.end());
    std::sort(network.output.begin(), network.output.end());
    network.output.erase(std::unique(network.output.begin(), network.output.end()), network.output.end());
    network.sizes = sizes;
    network.max_intermediate = max_intermediate;
    return network;
}

// opt_einsum's count for one loop over every axis.
double naive_flops(const Network& network) {
    AxisSet all;
    for (const AxisSet& set : network.operands) all = unite(all, set);
    const bool summed = all.size() > network.output.size();
    return contraction::product(all, network.sizes) *
           (static_cast<double>(std::max<std::size_t>(1, network.operands.size() - 1)) + (summed ? 1 : 0));
}

}  // namespace

ContractionPath contraction_order(std::span<const std::vector<AxisId>> operands,
                                  std::span<const AxisId> output, std::span<const std::int64_t> sizes,
                                  const ContractionLimits& limits) {
    EINC_ASSERT(operands.size() >= 2);
    EINC_ASSERT(limits.element_bytes > 0);
    const double max_intermediate = limits.max_intermediate_bytes == 0
                                        ? std::numeric_limits<double>::infinity()
                                        : std::floor(static_cast<double>(limits.max_intermediate_bytes) /
                                                     static_cast<double>(limits.element_bytes));
    const Network network = network_of(operands, output, sizes, max_intermediate);
    const std::size_t n = network.operands.size();
    const auto finish = [&](ContractionPath path) {
        path.naive_flops = naive_flops(network);
        return path;
    };
    if (n <= exhaustive_operands) {
        if (const auto path = exhaustive(network))
            return finish(path_of(network, *path, PathSearch::exhaustive));
        throw_none_fits(network, limits);
    }
    if (n <= dp_operands) {
        // The DP's cap: an order known to fit, the greedy's with its subtrees reordered (often the optimum
        // already, for under a millisecond; the DP then only looks for a cheaper one, or proves there is
        // none).
        std::size_t reordered = 0;
        const SsaPath plain = contraction::plain_greedy(network);
        SsaPath greedy = contraction::reorder_subtrees(network, plain, reorder_work_budget, reordered);
        contraction::Evaluation known =
            greedy.empty() ? contraction::Evaluation{std::numeric_limits<double>::infinity(), 0, 0}
                           : contraction::evaluate(network, greedy);
        // A few randomised greedy runs too, where the DP can take milliseconds: the closer the cap to the
        // optimum, the fewer subsets it keeps (a 4x4 grid's plain greedy is 1.6x it, its best run
        // 1.003x); below 13 operands they cost more than they save (0.3 ms). Their best is reordered too
        // unless it is the plain greedy's order (reordering takes a third of a small network's time).
        if (const contraction::Heuristic runs =
                n < dp_greedy_operands ? contraction::Heuristic{}
                                       : contraction::best_greedy(network, dp_greedy_work_budget);
            !runs.path.empty() && runs.path != plain) {
            SsaPath improved =
                contraction::reorder_subtrees(network, runs.path, reorder_work_budget, reordered);
            const contraction::Evaluation e = contraction::evaluate(network, improved);
            if (e.flops < known.flops || (e.flops == known.flops && e.largest < known.largest)) {
                greedy = std::move(improved);
                known = e;
            }
        }
        const contraction::DpResult dp = contraction::optimal_by_dp(network, known, dp_work_budget);
        switch (dp.outcome) {
        case contraction::DpOutcome::optimal:
            return finish(path_of(network, dp.path, PathSearch::dynamic_programming));
        case contraction::DpOutcome::known_optimal:
            return finish(path_of(network, greedy, PathSearch::dynamic_programming));
        case contraction::DpOutcome::none_fits: throw_none_fits(network, limits);
        case contraction::DpOutcome::over_budget: break;  // too many subsets: the greedy searches below
        }
    }
    const contraction::Heuristic found = contraction::best_greedy(network, greedy_work_budget);
    if (found.path.empty()) throw_none_fits(network, limits);
    std::size_t reordered = 0;
    const SsaPath improved =
        contraction::reorder_subtrees(network, found.path, reorder_work_budget, reordered);
    ContractionPath path =
        path_of(network, improved, found.randomised_won ? PathSearch::random_greedy : PathSearch::greedy);
    path.greedy_runs = found.runs;
    path.subtrees_reordered = reordered;
    return finish(std::move(path));
}

ContractionPath contraction_path(std::span<const std::vector<AxisId>> operands,
                                 std::span<const AxisId> output, std::span<const std::int64_t> sizes,
                                 const std::function<std::size_t(std::size_t)>& pick) {
    EINC_ASSERT(operands.size() >= 2);
    const Network network = network_of(operands, output, sizes, std::numeric_limits<double>::infinity());
    ContractionPath path = path_of(network, walk(network, pick), PathSearch::chosen);
    path.naive_flops = naive_flops(network);
    return path;
}

}  // namespace einc
