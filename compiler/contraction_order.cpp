#include "compiler/contraction_order.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>

#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

using AxisSet = std::vector<AxisId>;  // sorted, unique

// The exhaustive search costs 3^n steps and 2^n entries: 12 operands is about half a million steps.
constexpr std::size_t max_optimal_operands = 12;

AxisSet unite(const AxisSet& a, const AxisSet& b) {
    AxisSet out;
    std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
    return out;
}

double product(const AxisSet& axes, std::span<const std::int64_t> sizes) {
    double n = 1;
    for (const AxisId a : axes) n *= static_cast<double>(sizes[static_cast<std::size_t>(a)]);
    return n;
}

// The cost of contracting two operands into the axes `kept` (those still needed afterwards).
struct Pairwise {
    AxisSet result;
    double flops = 0;
};

Pairwise contract(const AxisSet& a, const AxisSet& b, const AxisSet& needed_elsewhere,
                  std::span<const std::int64_t> sizes) {
    const AxisSet all = unite(a, b);
    Pairwise p;
    std::set_intersection(all.begin(), all.end(), needed_elsewhere.begin(), needed_elsewhere.end(),
                          std::back_inserter(p.result));
    const bool summed = p.result.size() < all.size();
    p.flops = product(all, sizes) * (summed ? 2 : 1);
    return p;
}

// Axes needed outside a set of operands: the output's and those of every operand not in `mask`.
AxisSet needed_outside(std::uint64_t mask, std::span<const AxisSet> operands, const AxisSet& output) {
    AxisSet needed = output;
    for (std::size_t i = 0; i < operands.size(); ++i)
        if (!(mask >> i & 1u)) needed = unite(needed, operands[i]);
    return needed;
}

struct Best {
    double flops = std::numeric_limits<double>::infinity();
    double largest = 0;
    AxisSet axes;
    std::uint64_t left = 0;  // the split that achieves it
};

bool better(double flops, double largest, const Best& than) {
    return flops < than.flops || (flops == than.flops && largest < than.largest);
}

// Turns a tree of subset splits into opt_einsum's list of pairs over a shrinking operand list.
void emit_pairs(std::uint64_t mask, const std::vector<Best>& best, std::vector<std::uint64_t>& list,
                std::vector<std::pair<std::size_t, std::size_t>>& pairs) {
    if (std::popcount(mask) == 1) return;
    const std::uint64_t left = best[mask].left, right = mask & ~left;
    emit_pairs(left, best, list, pairs);
    emit_pairs(right, best, list, pairs);
    const auto position = [&](std::uint64_t m) {
        return static_cast<std::size_t>(std::find(list.begin(), list.end(), m) - list.begin());
    };
    std::size_t i = position(left), j = position(right);
    if (i > j) std::swap(i, j);
    pairs.emplace_back(i, j);
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(j));
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    list.push_back(mask);
}

ContractionPath optimal(std::span<const AxisSet> operands, const AxisSet& output,
                        std::span<const std::int64_t> sizes) {
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
        const AxisSet needed = needed_outside(mask, operands, output);
        // Every split into two non-empty halves, each once: the half holding the lowest operand is `left`.
        const std::uint64_t lowest = mask & (~mask + 1);
        for (std::uint64_t left = (mask - 1) & mask; left > 0; left = (left - 1) & mask) {
            if (!(left & lowest)) continue;
            const std::uint64_t right = mask & ~left;
            const Best& l = best[left];
            const Best& r = best[right];
            const Pairwise p = contract(l.axes, r.axes, needed, sizes);
            const double flops = l.flops + r.flops + p.flops;
            const double largest = std::max({l.largest, r.largest, product(p.result, sizes)});
            if (better(flops, largest, best[mask])) best[mask] = Best{flops, largest, p.result, left};
        }
    }
    ContractionPath path;
    std::vector<std::uint64_t> list;
    for (std::size_t i = 0; i < n; ++i) list.push_back(std::uint64_t{1} << i);
    emit_pairs(full, best, list, path.pairs);
    path.optimized_flops = best[full].flops;
    path.largest_intermediate = best[full].largest;
    path.optimal = true;
    return path;
}

// contract(a, b, needed, sizes) where `needed` is the output and every operand of the list but a and b:
// an axis is needed elsewhere when the output has it or more operands hold it than a and b together.
// Linear in |a| + |b| (rebuilding `needed` per pair would make greedy cubic per step).
Pairwise contract_in_list(const AxisSet& a, const AxisSet& b, const std::vector<int>& holders,
                          const std::vector<bool>& in_output, std::span<const std::int64_t> sizes) {
    const AxisSet all = unite(a, b);
    Pairwise p;
    for (const AxisId axis : all) {
        const auto k = static_cast<std::size_t>(axis);
        const int here = static_cast<int>(std::binary_search(a.begin(), a.end(), axis)) +
                         static_cast<int>(std::binary_search(b.begin(), b.end(), axis));
        if (in_output[k] || holders[k] > here) p.result.push_back(axis);
    }
    const bool summed = p.result.size() < all.size();
    p.flops = product(all, sizes) * (summed ? 2 : 1);
    return p;
}

// Contracts the list pairwise, the result of each contraction appended, until one operand is left: at
// each step the pair `pick` returns of the candidates, every pair (i, j), i < j, in the order (0, 1),
// (0, 2), ..., (1, 2), ...
struct Candidate {
    std::size_t i, j;
    Pairwise pair;
    double size;  // of its result
};
template <typename Pick>
ContractionPath walk(std::span<const AxisSet> operands, const AxisSet& output,
                     std::span<const std::int64_t> sizes, Pick pick) {
    std::vector<AxisSet> list(operands.begin(), operands.end());
    ContractionPath path;
    path.optimal = false;
    std::vector<int> holders(sizes.size(), 0);  // how many operands of the list hold each axis
    std::vector<bool> in_output(sizes.size(), false);
    for (const AxisSet& set : list)
        for (const AxisId axis : set) ++holders[static_cast<std::size_t>(axis)];
    for (const AxisId axis : output) in_output[static_cast<std::size_t>(axis)] = true;
    std::vector<Candidate> candidates;
    while (list.size() > 1) {
        candidates.clear();
        for (std::size_t i = 0; i < list.size(); ++i)
            for (std::size_t j = i + 1; j < list.size(); ++j) {
                Pairwise p = contract_in_list(list[i], list[j], holders, in_output, sizes);
                const double size = product(p.result, sizes);
                candidates.push_back(Candidate{i, j, std::move(p), size});
            }
        const std::size_t picked = pick(std::span<const Candidate>(candidates));
        EINC_ASSERT(picked < candidates.size());
        Candidate& best = candidates[picked];
        path.pairs.emplace_back(best.i, best.j);
        path.optimized_flops += best.pair.flops;
        path.largest_intermediate = std::max(path.largest_intermediate, best.size);
        for (const std::size_t k : {best.i, best.j})
            for (const AxisId axis : list[k]) --holders[static_cast<std::size_t>(axis)];
        for (const AxisId axis : best.pair.result) ++holders[static_cast<std::size_t>(axis)];
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(best.j));
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(best.i));
        list.push_back(std::move(best.pair.result));
    }
    return path;
}

// The cheapest pair at each step (the smaller result on a tie; the first of equals).
std::size_t cheapest(std::span<const Candidate> candidates) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < candidates.size(); ++c) {
        const Candidate &x = candidates[c], &y = candidates[best];
        if (x.pair.flops < y.pair.flops || (x.pair.flops == y.pair.flops && x.size < y.size)) best = c;
    }
    return best;
}

// The axis sets of the operands and the output, sorted and unique.
std::pair<std::vector<AxisSet>, AxisSet> sets_of(std::span<const std::vector<AxisId>> operands,
                                                 std::span<const AxisId> output) {
    std::vector<AxisSet> sets;
    for (const auto& axes : operands) {
        AxisSet set(axes.begin(), axes.end());
        std::sort(set.begin(), set.end());
        set.erase(std::unique(set.begin(), set.end()), set.end());
        sets.push_back(std::move(set));
    }
    AxisSet out(output.begin(), output.end());
    std::sort(out.begin(), out.end());
    return {std::move(sets), std::move(out)};
}

// opt_einsum's count for one loop over every axis.
double naive_flops(std::span<const AxisSet> operands, const AxisSet& output,
                   std::span<const std::int64_t> sizes) {
    AxisSet all;
    for (const AxisSet& set : operands) all = unite(all, set);
    const bool summed = all.size() > output.size();
    return product(all, sizes) *
           (static_cast<double>(std::max<std::size_t>(1, operands.size() - 1)) + (summed ? 1 : 0));
}

}  // namespace

ContractionPath contraction_order(std::span<const std::vector<AxisId>> operands,
                                  std::span<const AxisId> output, std::span<const std::int64_t> sizes,
                                  std::size_t optimal_limit) {
    EINC_ASSERT(operands.size() >= 2);
    const auto [sets, out] = sets_of(operands, output);
    const bool use_optimal = operands.size() <= std::min<std::size_t>(optimal_limit, max_optimal_operands);
    ContractionPath path = use_optimal ? optimal(sets, out, sizes) : walk(sets, out, sizes, cheapest);
    path.naive_flops = naive_flops(sets, out, sizes);
    return path;
}

ContractionPath contraction_path(std::span<const std::vector<AxisId>> operands,
                                 std::span<const AxisId> output, std::span<const std::int64_t> sizes,
                                 const std::function<std::size_t(std::size_t)>& pick) {
    EINC_ASSERT(operands.size() >= 2);
    const auto [sets, out] = sets_of(operands, output);
    ContractionPath path = walk(
        sets, out, sizes, [&](std::span<const Candidate> candidates) { return pick(candidates.size()); });
    path.naive_flops = naive_flops(sets, out, sizes);
    return path;
}

}  // namespace einc
