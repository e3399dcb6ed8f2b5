// A local improvement of a contraction tree: the subtree below each contraction, cut at a frontier of a
// few tensors (the costliest contractions opened first), is reordered by trying every split of every
// subset of that frontier, and kept when cheaper. The tensors on the frontier and the subtree's result do
// not depend on the order inside it (a result keeps the axes needed outside its operands), so the rest of
// the tree keeps its cost: each change lowers the total. A greedy order's mistakes are mostly local (a
// pair taken one step too early), which is what this repairs.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "compiler/contraction_search.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::contraction {
namespace {

constexpr std::size_t frontier_size = 7;  // 3^7 splits a subtree
constexpr double infinity = std::numeric_limits<double>::infinity();

struct Tree {
    std::size_t leaves = 0;
    std::vector<std::pair<std::size_t, std::size_t>> children;  // of node leaves + k
    std::vector<AxisSet> axes;                                  // of every node: its result
    std::vector<double> cost;                                   // of every node: its contraction (leaves 0)
};

Tree tree_of(const Network& network, const SsaPath& path) {
    Tree tree{network.operands.size(), path, network.operands,
              std::vector<double>(network.operands.size(), 0)};
    std::vector<int> holders(network.sizes.size(), 0);
    std::vector<bool> in_output(network.sizes.size(), false);
    for (const AxisSet& set : network.operands)
        for (const AxisId axis : set) ++holders[static_cast<std::size_t>(axis)];
    for (const AxisId axis : network.output) in_output[static_cast<std::size_t>(axis)] = true;
    for (const auto& [i, j] : path) {
        AxisSet all;
        std::set_union(tree.axes[i].begin(), tree.axes[i].end(), tree.axes[j].begin(), tree.axes[j].end(),
                       std::back_inserter(all));
        for (const std::size_t t : {i, j})
            for (const AxisId axis : tree.axes[t]) --holders[static_cast<std::size_t>(axis)];
        AxisSet result;
        for (const AxisId axis : all)
            if (in_output[static_cast<std::size_t>(axis)] || holders[static_cast<std::size_t>(axis)] > 0)
                result.push_back(axis);
        for (const AxisId axis : result) ++holders[static_cast<std::size_t>(axis)];
        tree.cost.push_back(product(all, network.sizes) * (result.size() < all.size() ? 2 : 1));
        tree.axes.push_back(std::move(result));
    }
    return tree;
}

// The SSA path of the tree below `node`, children before their parent.
std::size_t emit(const Tree& tree, std::size_t node, SsaPath& path) {
    if (node < tree.leaves) return node;
    const auto [i, j] = tree.children[node - tree.leaves];
    const std::size_t left = emit(tree, i, path);
    const std::size_t right = emit(tree, j, path);
    path.emplace_back(left, right);
    return tree.leaves + path.size() - 1;
}

// The cheapest order of the frontier's tensors into `result` (every split of every subset), with the
// axes as bits: its cost and, by subset, the split that achieves it. None when the frontier has more
// than 64 distinct axes or no order keeps within the limit.
struct Local {
    double cost = infinity;
    std::vector<std::uint32_t> left;  // by subset of the frontier
};

Local cheapest(const std::vector<const AxisSet*>& frontier, const AxisSet& result, const Network& network) {
    std::vector<AxisId> ids;
    for (const AxisSet* set : frontier) ids.insert(ids.end(), set->begin(), set->end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (ids.size() > 64) return {};
    const auto bits = [&](const AxisSet& set) {
        std::uint64_t b = 0;
        for (const AxisId axis : set)
            b |= std::uint64_t{1} << (std::lower_bound(ids.begin(), ids.end(), axis) - ids.begin());
        return b;
    };
    const auto size = [&](std::uint64_t b) {
        double n = 1;
        for (; b != 0; b &= b - 1)
            n *= static_cast<double>(
                network.sizes[static_cast<std::size_t>(ids[static_cast<std::size_t>(std::countr_zero(b))])]);
        return n;
    };
    const std::size_t m = frontier.size();
    const std::uint32_t full = (std::uint32_t{1} << m) - 1;
    std::vector<std::uint64_t> held(full + 1, 0), kept(full + 1, 0);
    for (std::size_t i = 0; i < m; ++i) held[std::uint32_t{1} << i] = bits(*frontier[i]);
    for (std::uint32_t mask = 1; mask <= full; ++mask)
        held[mask] = held[mask & (mask - 1)] | held[mask & (~mask + 1)];
    const std::uint64_t needed = bits(result);
    for (std::uint32_t mask = 1; mask <= full; ++mask)
        kept[mask] = std::popcount(mask) == 1 ? held[mask] : held[mask] & (needed | held[full & ~mask]);
    std::vector<double> best(full + 1, infinity);
    Local local;
    local.left.assign(full + 1, 0);
    for (std::uint32_t mask = 1; mask <= full; ++mask) {
        if (std::popcount(mask) == 1) {
            best[mask] = 0;
            continue;
        }
        if (mask != full && size(kept[mask]) > network.max_intermediate) continue;
        const std::uint32_t lowest = mask & (~mask + 1);
        for (std::uint32_t left = (mask - 1) & mask; left > 0; left = (left - 1) & mask) {
            if (!(left & lowest)) continue;  // each split once
            const std::uint32_t right = mask & ~left;
            if (std::isinf(best[left]) || std::isinf(best[right])) continue;
            const std::uint64_t all = kept[left] | kept[right];
            const double cost = best[left] + best[right] + size(all) * (all == kept[mask] ? 1 : 2);
            if (cost < best[mask]) {
                best[mask] = cost;
                local.left[mask] = left;
            }
        }
    }
    local.cost = best[full];
    return local;
}

// Rebuilds the subtree of `mask` from the local splits, taking node ids from `free` (its root last).
std::size_t rebuild(Tree& tree, const Local& local, std::uint32_t mask,
                    const std::vector<std::size_t>& frontier, std::vector<std::size_t>& free) {
    if (std::popcount(mask) == 1) return frontier[static_cast<std::size_t>(std::countr_zero(mask))];
    const std::size_t left = rebuild(tree, local, local.left[mask], frontier, free);
    const std::size_t right = rebuild(tree, local, mask & ~local.left[mask], frontier, free);
    const std::size_t node = free.back();
    free.pop_back();
    tree.children[node - tree.leaves] = {left, right};
    return node;
}

}  // namespace

SsaPath reorder_subtrees(const Network& network, SsaPath path, std::size_t work_budget,
                         std::size_t& reordered) {
    reordered = 0;
    if (path.empty()) return path;
    std::size_t work = 0;
    Tree tree = tree_of(network, path);
    for (bool changed = true; changed && work < work_budget;) {
        changed = false;
        for (std::size_t node = tree.leaves; node < tree.axes.size() && work < work_budget; ++node) {
            // The frontier: open the costliest contraction on it until it holds frontier_size tensors.
            std::vector<std::size_t> frontier{tree.children[node - tree.leaves].first,
                                              tree.children[node - tree.leaves].second};
            std::vector<std::size_t> inside{node};
            while (frontier.size() < frontier_size) {
                std::size_t open = frontier.size();
                for (std::size_t f = 0; f < frontier.size(); ++f)
                    if (frontier[f] >= tree.leaves &&
                        (open == frontier.size() || tree.cost[frontier[f]] > tree.cost[frontier[open]]))
                        open = f;
                if (open == frontier.size()) break;
                const std::size_t opened = frontier[open];
                inside.push_back(opened);
                frontier[open] = tree.children[opened - tree.leaves].first;
                frontier.push_back(tree.children[opened - tree.leaves].second);
            }
            if (inside.size() < 2) continue;  // one contraction: nothing to reorder
            double before = 0;
            for (const std::size_t i : inside) before += tree.cost[i];
            std::vector<const AxisSet*> sets;
            for (const std::size_t f : frontier) sets.push_back(&tree.axes[f]);
            work += std::size_t{1} << (2 * frontier.size());  // ~3^m splits, each a few bit operations
            const Local local = cheapest(sets, tree.axes[node], network);
            if (!(local.cost < before * (1 - 1e-9))) continue;
            // The node keeps its id (its parent still names it): the other ids of the subtree are reused.
            // (rebuild() takes ids from the back and makes the root last: the node goes first.)
            std::vector<std::size_t> free = inside;
            rebuild(tree, local, (std::uint32_t{1} << frontier.size()) - 1, frontier, free);
            SsaPath emitted;
            emit(tree, tree.axes.size() - 1, emitted);
            tree = tree_of(network, emitted);
            ++reordered;
            changed = true;  // (and on from about here: the new path keeps most of the order before it)
        }
    }
    SsaPath improved;
    emit(tree, tree.axes.size() - 1, improved);
    return improved;
}

}  // namespace einc::contraction
