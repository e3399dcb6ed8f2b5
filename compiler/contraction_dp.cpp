// The optimal contraction order of up to 16 operands by dynamic programming over subsets of operands,
// after Pfeifer, Haegeman and Verstraete (2014): only subsets whose best order costs at most a cap are
// kept, and the cap is raised until the whole network is reached. Every order of cost <= cap is
// considered - outer products too, since they can be cheaper (a vector with a vector before a large
// tensor) - so the order found is optimal. Outer products are not excluded but priced like any pair:
// under a low cap the expensive ones are never formed, which is what keeps the search small.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>

#include "compiler/contraction_search.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::contraction {
namespace {

constexpr std::size_t max_operands = 16;
constexpr double infinity = std::numeric_limits<double>::infinity();
// How far each pass raises the cap past the cheapest order it had to reject: more passes against more
// subsets a pass.
constexpr double cap_growth = 4;
// The first pass's cap, at least this far below the cost of the order known to fit: that order (the
// greedy's, its subtrees reordered) is mostly the optimum or near it, and passes far below it use up the
// work budget on subsets only to find that none reaches the whole network.
constexpr double first_cap_below_known = 4;

// Axes that the same operands hold (and the output does or not) behave as one axis of their product
// size in every contraction: the search works on these groups, a bit each.
struct Groups {
    std::vector<std::vector<std::size_t>> of_operand;
    std::vector<std::size_t> of_output;
    std::vector<double> size;
};

Groups group_axes(const Network& network) {
    std::map<std::pair<std::uint32_t, bool>, std::size_t> group_of;  // (holders, in output) -> group
    std::vector<std::uint32_t> holders(network.sizes.size(), 0);
    for (std::size_t i = 0; i < network.operands.size(); ++i)
        for (const AxisId axis : network.operands[i]) holders[static_cast<std::size_t>(axis)] |= 1u << i;
    std::vector<bool> in_output(network.sizes.size(), false);
    for (const AxisId axis : network.output) in_output[static_cast<std::size_t>(axis)] = true;
    Groups groups;
    groups.of_operand.resize(network.operands.size());
    std::vector<std::size_t> group_of_axis(network.sizes.size(), 0);
    for (std::size_t axis = 0; axis < network.sizes.size(); ++axis) {
        if (holders[axis] == 0) continue;  // (an output axis no operand has changes no count)
        const auto [at, added] =
            group_of.emplace(std::pair{holders[axis], in_output[axis]}, groups.size.size());
        if (added) {
            groups.size.push_back(1);
            if (in_output[axis]) groups.of_output.push_back(at->second);
        }
        groups.size[at->second] *= static_cast<double>(network.sizes[axis]);
        group_of_axis[axis] = at->second;
    }
    for (std::size_t i = 0; i < network.operands.size(); ++i)
        for (const AxisId axis : network.operands[i])
            groups.of_operand[i].push_back(group_of_axis[static_cast<std::size_t>(axis)]);
    return groups;
}

template <std::size_t Words>
struct Bits {
    std::array<std::uint64_t, Words> word{};

    void set(std::size_t bit) { word[bit / 64] |= std::uint64_t{1} << (bit % 64); }
    friend Bits operator|(Bits a, const Bits& b) {
        for (std::size_t w = 0; w < Words; ++w) a.word[w] |= b.word[w];
        return a;
    }
    friend Bits operator&(Bits a, const Bits& b) {
        for (std::size_t w = 0; w < Words; ++w) a.word[w] &= b.word[w];
        return a;
    }
    friend bool operator==(const Bits&, const Bits&) = default;
    // The product of the sizes of the groups set.
    double product(std::span<const double> sizes) const {
        double n = 1;
        for (std::size_t w = 0; w < Words; ++w)
            for (std::uint64_t bits = word[w]; bits != 0; bits &= bits - 1)
                n *= sizes[w * 64 + static_cast<std::size_t>(std::countr_zero(bits))];
        return n;
    }
};

template <std::size_t Words>
class SubsetSearch {
public:
    SubsetSearch(const Network& network, const Groups& groups)
        : n_(network.operands.size()), full_((std::uint32_t{1} << n_) - 1), sizes_(groups.size),
          max_intermediate_(network.max_intermediate), axes_of_(std::size_t{full_} + 1),
          result_(std::size_t{full_} + 1), size_(std::size_t{full_} + 1, -1) {
        Bits<Words> output;
        for (const std::size_t g : groups.of_output) output.set(g);
        for (std::size_t i = 0; i < n_; ++i) {
            Bits<Words> own;
            for (const std::size_t g : groups.of_operand[i]) own.set(g);
            axes_of_[std::size_t{1} << i] = own;
        }
        for (std::uint32_t mask = 1; mask <= full_; ++mask)
            axes_of_[mask] = axes_of_[mask & (mask - 1)] | axes_of_[mask & (~mask + 1)];
        output_ = output;
    }

    DpResult cheapest(double upper_bound, std::size_t work_budget) {
        cost_.assign(std::size_t{full_} + 1, infinity);
        largest_.assign(std::size_t{full_} + 1, 0);
        left_.assign(std::size_t{full_} + 1, 0);
        // No order costs less than its largest operand or its output: some contraction reads or writes it.
        double cap = std::max(1.0, result_size(full_));
        for (std::size_t i = 0; i < n_; ++i) cap = std::max(cap, result_size(std::uint32_t{1} << i));
        const double known = upper_bound * (1 + 1e-9);  // (an order of this cost fits: the last pass)
        if (std::isfinite(known)) cap = std::max(cap, known / first_cap_below_known);
        std::size_t work = 0;  // pairs of subsets priced, and an eighth of those only looked at
        std::vector<std::vector<std::uint32_t>> level(n_ + 1);
        // Each finished level again, with what a scan reads beside each subset: one pass through memory,
        // not a lookup by subset for each of the pairs looked at.
        struct Finished {
            std::uint32_t mask;
            double least, cost, size, largest;
            Bits<Words> result;
        };
        std::vector<std::vector<Finished>> finished(n_ + 1);
        std::vector<std::uint32_t> touched;
        for (;;) {
            cap = std::min(cap, known);
            for (const std::uint32_t mask : touched) cost_[mask] = infinity;
            touched.clear();
            for (auto& masks : level) masks.clear();
            for (std::size_t i = 0; i < n_; ++i) {
                level[1].push_back(std::uint32_t{1} << i);
                cost_[std::uint32_t{1} << i] = 0;
            }
            std::size_t looked = 0;
            double rejected = infinity;  // the cheapest order of a subset over the cap
            // A pair costs at least its larger result (it writes it, reading the axes of both): with each
            // finished level sorted by cost + size, a scan stops at the first subset that cannot fit.
            const auto least = [&](std::uint32_t mask) { return cost_[mask] + result_size(mask); };
            for (std::size_t m = 2; m <= n_; ++m) {
                std::sort(level[m - 1].begin(), level[m - 1].end(), [&](std::uint32_t x, std::uint32_t y) {
                    return least(x) < least(y) || (least(x) == least(y) && x < y);
                });
                finished[m - 1].clear();
                for (const std::uint32_t mask : level[m - 1])
                    finished[m - 1].push_back(
                        {mask, least(mask), cost_[mask], result_size(mask), largest_[mask], result_[mask]});
                for (std::size_t k = 1; k <= m / 2; ++k) {
                    const std::size_t need = m - k;
                    for (const Finished& a : finished[k]) {
                        if (a.least > cap) break;
                        const auto consider = [&](const Finished& b) {
                            ++work;
                            const double reads = a.cost + b.cost;
                            const double at_least = reads + std::max(a.size, b.size);
                            if (at_least > cap) {
                                rejected = std::min(rejected, at_least);
                                return;
                            }
                            const std::uint32_t s = a.mask | b.mask;
                            const double size = result_size(s);
                            if (s != full_ && size > max_intermediate_) return;
                            const Bits<Words> all = a.result | b.result;
                            const double flops = a.size * b.size / (a.result & b.result).product(sizes_) *
                                                 (all == result_[s] ? 1 : 2);
                            const double total = reads + flops;
                            if (total > cap) {
                                rejected = std::min(rejected, total);
                                return;
                            }
                            const double largest = std::max({a.largest, b.largest, size});
                            if (std::isinf(cost_[s])) {
                                level[m].push_back(s);
                                touched.push_back(s);
                            } else if (!(total < cost_[s] || (total == cost_[s] && largest < largest_[s])))
                                return;
                            cost_[s] = total;
                            largest_[s] = largest;
                            left_[s] = a.mask;
                        };
                        // The finished level in order of cost + size: a scan stops at the first subset
                        // that cannot fit (cheaper, on every network tried, than enumerating the subsets
                        // of the other operands, where most have no order within the cap).
                        for (const Finished& b : finished[need]) {
                            ++looked;
                            if (a.cost + b.least > cap) {
                                rejected = std::min(rejected, a.cost + b.least);
                                break;
                            }
                            if (!(a.mask & b.mask) && (need != k || b.mask > a.mask)) consider(b);
                        }
                        work += looked / 8;
                        looked %= 8;
                        if (work > work_budget) return {DpOutcome::over_budget, {}};
                    }
                }
            }
            if (!std::isinf(cost_[full_])) break;
            if (std::isinf(rejected) || cap >= known) return {DpOutcome::none_fits, {}};
            cap = std::max(rejected, cap * cap_growth);
        }
        DpResult found{DpOutcome::optimal, {}};
        emit(full_, found.path);
        return found;
    }

    double smallest_peak() {
        std::vector<double> peak(std::size_t{full_} + 1, 0);
        for (std::uint32_t mask = 1; mask <= full_; ++mask) {
            if (std::popcount(mask) < 2) continue;
            double best = infinity;
            const std::uint32_t lowest = mask & (~mask + 1);
            for (std::uint32_t left = (mask - 1) & mask; left > 0; left = (left - 1) & mask)
                if (left & lowest) best = std::min(best, std::max(peak[left], peak[mask & ~left]));
            peak[mask] = mask == full_ ? best : std::max(best, result_size(mask));
        }
        return peak[full_];
    }

private:
    // The axes (groups) of the tensor a subset contracts to, and its size: a single operand keeps every
    // axis it has (own axes are summed by its first contraction, as evaluate() counts them).
    double result_size(std::uint32_t mask) {
        if (size_[mask] < 0) {
            result_[mask] = std::popcount(mask) == 1 ? axes_of_[mask]
                                                     : axes_of_[mask] & (output_ | axes_of_[full_ & ~mask]);
            size_[mask] = result_[mask].product(sizes_);
        }
        return size_[mask];
    }

    std::size_t emit(std::uint32_t mask, SsaPath& path) const {
        if (std::popcount(mask) == 1) return static_cast<std::size_t>(std::countr_zero(mask));
        const std::size_t left = emit(left_[mask], path);
        const std::size_t right = emit(mask & ~left_[mask], path);
        path.emplace_back(left, right);
        return n_ + path.size() - 1;
    }

    std::size_t n_;
    std::uint32_t full_;
    std::span<const double> sizes_;
    double max_intermediate_;
    Bits<Words> output_;
    std::vector<Bits<Words>> axes_of_;  // by subset: every axis its operands hold
    std::vector<Bits<Words>> result_;   // by subset, once result_size() computed it
    std::vector<double> size_;          // -1: not computed yet
    std::vector<double> cost_, largest_;
    std::vector<std::uint32_t> left_;  // the split of the cheapest order
};

// Runs `f` on the search with as few words as the network's axis groups need.
template <typename F>
auto with_search(const Network& network, F f)
    -> std::optional<decltype(f(std::declval<SubsetSearch<1>&>()))> {
    EINC_ASSERT(network.operands.size() <= max_operands);
    const Groups groups = group_axes(network);
    const std::size_t count = groups.size.size();
    if (count <= 64) {
        SubsetSearch<1> search(network, groups);
        return f(search);
    }
    if (count <= 128) {
        SubsetSearch<2> search(network, groups);
        return f(search);
    }
    if (count <= 256) {
        SubsetSearch<4> search(network, groups);
        return f(search);
    }
    return std::nullopt;
}

}  // namespace

DpResult optimal_by_dp(const Network& network, double upper_bound, std::size_t work_budget) {
    const auto found =
        with_search(network, [&](auto& search) { return search.cheapest(upper_bound, work_budget); });
    return found ? *found : DpResult{DpOutcome::over_budget, {}};
}

std::optional<double> smallest_peak_by_dp(const Network& network) {
    if (network.operands.size() > max_operands) return std::nullopt;
    return with_search(network, [](auto& search) { return search.smallest_peak(); });
}

}  // namespace einc::contraction
