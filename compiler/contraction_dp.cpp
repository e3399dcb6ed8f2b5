// The optimal contraction order of up to 16 operands by dynamic programming over subsets of operands,
// after Pfeifer, Haegeman and Verstraete (2014): only subsets whose best order costs at most a cap are
// kept, and the cap is raised until the whole network is reached. Every order of cost <= cap is
// considered - outer products too, since they can be cheaper (a vector with a vector before a large
// tensor) - so the order found is optimal. Outer products are not excluded but priced like any pair:
// under a low cap the expensive ones are never formed, which is what keeps the search small. A subset is
// also dropped when its cost plus a lower bound on consuming the operands outside it (their charges,
// see Charges) exceeds the cap: that bound is what keeps a star's search small.
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
    friend Bits operator~(Bits a) {
        for (std::uint64_t& w : a.word) w = ~w;
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
        // No order costs less than the charges of all operands (below): a pass under them finds none.
        const Charges charges = charge_operands();
        cap = std::max(cap, charges.all);
        // Comparisons with the cap allow for rounding: the bounds below add terms in another order than
        // the order's own count does.
        const auto over = [&](double bound) { return bound > cap * (1 + 1e-12); };
        std::vector<std::vector<std::uint32_t>> level(n_ + 1);
        // Each finished level again, with what a scan reads beside each subset (one pass through memory,
        // not a lookup by subset for each of the pairs looked at), in order of `key` = cost + size -
        // charge, whole and in buckets by the subset's lowest operands.
        struct Finished {
            std::uint32_t mask;
            double key, cost, reduced, size, largest;  // reduced: cost - charge
            Bits<Words> result;
        };
        const std::size_t bucket_bits = std::min<std::size_t>(n_, 6);
        const std::uint32_t bucket_mask = (std::uint32_t{1} << bucket_bits) - 1;
        std::vector<std::vector<Finished>> finished(n_ + 1);
        std::vector<std::vector<std::vector<Finished>>> buckets(
            n_ + 1, std::vector<std::vector<Finished>>(std::size_t{bucket_mask} + 1));
        std::vector<double> least_reduced(n_ + 1, infinity), least_key(n_ + 1, infinity);  // by level
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
            double rejected = infinity;  // the least bound of an order over the cap
            // An order through subsets a and b costs at least a.cost + b.cost + the larger of their
            // results (their contraction writes it, reading the axes of both) + the charges of the
            // operands in neither. Split as (a.cost - a.charge) + (b.cost + b.size - b.charge) + all
            // charges, it lets a scan of a level in order of key stop at the first subset that cannot fit.
            const auto key = [&](std::uint32_t mask) {
                return cost_[mask] + result_size(mask) - charges.of[mask];
            };
            for (std::size_t m = 2; m <= n_; ++m) {
                std::sort(level[m - 1].begin(), level[m - 1].end(), [&](std::uint32_t x, std::uint32_t y) {
                    return key(x) < key(y) || (key(x) == key(y) && x < y);
                });
                finished[m - 1].clear();
                for (auto& bucket : buckets[m - 1]) bucket.clear();
                least_reduced[m - 1] = least_key[m - 1] = infinity;
                for (const std::uint32_t mask : level[m - 1]) {
                    const Finished f{
                        mask,        key(mask),      cost_[mask],  cost_[mask] - charges.of[mask],
                        size_[mask], largest_[mask], result_[mask]};
                    finished[m - 1].push_back(f);
                    buckets[m - 1][mask & bucket_mask].push_back(f);
                    least_reduced[m - 1] = std::min(least_reduced[m - 1], f.reduced);
                    least_key[m - 1] = std::min(least_key[m - 1], f.key);
                }
                for (std::size_t k = 1; k <= m / 2; ++k) {
                    const std::size_t need = m - k;
                    for (const Finished& a : finished[k]) {
                        const double a_bound = a.key + least_reduced[need] + charges.all;
                        if (over(a_bound)) {
                            rejected = std::min(rejected, a_bound);
                            break;
                        }
                        const auto consider = [&](const Finished& b) {
                            ++work;
                            const double reads = a.cost + b.cost;
                            const std::uint32_t s = a.mask | b.mask;
                            const double rest = charges.of[full_ & ~s];
                            const double at_least = reads + std::max(a.size, b.size) + rest;
                            if (over(at_least)) {
                                rejected = std::min(rejected, at_least);
                                return;
                            }
                            const double size = result_size(s);
                            if (s != full_ && size > max_intermediate_) return;
                            const Bits<Words> all = a.result | b.result;
                            const double flops = a.size * b.size / (a.result & b.result).product(sizes_) *
                                                 (all == result_[s] ? 1 : 2);
                            const double total = reads + flops;
                            if (over(total + rest)) {
                                rejected = std::min(rejected, total + rest);
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
                        // Only the buckets of subsets disjoint from a in their lowest operands, each in
                        // order of key: a scan stops at the first subset that cannot fit (cheaper, on
                        // every network tried, than enumerating the subsets of the other operands, where
                        // most have no order within the cap).
                        if (over(a.reduced + least_key[need] + charges.all)) {
                            rejected = std::min(rejected, a.reduced + least_key[need] + charges.all);
                            continue;  // (the level is in order of key, not of reduced: no break)
                        }
                        const std::uint32_t free = bucket_mask & ~a.mask;
                        for (std::uint32_t low = free;; low = (low - 1) & free) {
                            for (const Finished& b : buckets[need][low]) {
                                ++looked;
                                const double bound = a.reduced + b.key + charges.all;
                                if (over(bound)) {
                                    rejected = std::min(rejected, bound);
                                    break;
                                }
                                if (!(a.mask & b.mask) && (need != k || b.mask > a.mask)) consider(b);
                            }
                            if (low == 0) break;
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
    // What the contractions that consume the operands outside a subset cost at least, by operand: each
    // contraction consumes at most two operands and costs at least twice (if it sums an axis only that
    // operand holds) the larger one, so half of that each is a lower bound; and where every operand has
    // axes of its own of product >= 2, two operands contracted together cost at least the sum of the
    // two, so the whole of it - for those operands, none for the rest. The larger total of the two.
    struct Charges {
        std::vector<double> of;  // by subset: the sum over its operands
        double all = 0;
    };
    Charges charge_operands() {
        std::vector<double> half(n_), own(n_);
        double half_total = 0, own_total = 0;
        for (std::size_t i = 0; i < n_; ++i) {
            const std::uint32_t bit = std::uint32_t{1} << i;
            const Bits<Words> only = axes_of_[bit] & ~axes_of_[full_ & ~bit];
            const double sums = (only & ~output_) == Bits<Words>{} ? 1 : 2;
            half[i] = sums * result_size(bit) / 2;
            own[i] = only.product(sizes_) >= 2 ? sums * result_size(bit) : 0;
            half_total += half[i];
            own_total += own[i];
        }
        const std::vector<double>& by_operand = own_total > half_total ? own : half;
        Charges charges;
        charges.of.assign(std::size_t{full_} + 1, 0);
        for (std::uint32_t mask = 1; mask <= full_; ++mask)
            charges.of[mask] =
                charges.of[mask & (mask - 1)] + by_operand[static_cast<std::size_t>(std::countr_zero(mask))];
        charges.all = charges.of[full_];
        return charges;
    }

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
