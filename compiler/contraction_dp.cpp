// The optimal contraction order of up to 16 operands by dynamic programming over subsets of operands,
// after Pfeifer, Haegeman and Verstraete (2014): only subsets whose best order costs at most a cap are
// kept, and the cap is raised until the whole network is reached. Given an order known to fit, one pass
// keeps only what could beat it, and finding nothing proves it optimal. Every order of cost <= cap is
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
// A known order this far above the lower bound on any order's cost may be far from the optimum too.
constexpr double far_above_bound = 1e4;

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
          subset_(std::size_t{full_} + 1) {
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
        // The products of every byte's groups, a table per byte of the words the groups take.
        const std::size_t bytes = (sizes_.size() + 7) / 8;
        product_of_byte_.assign(bytes, {});
        for (std::size_t byte = 0; byte < bytes; ++byte)
            for (std::size_t bits = 0; bits < 256; ++bits) {
                double n = 1;
                for (std::size_t bit = 0; bit < 8; ++bit)
                    if (bits >> bit & 1 && byte * 8 + bit < sizes_.size()) n *= sizes_[byte * 8 + bit];
                product_of_byte_[byte][bits] = n;
            }
    }

    DpResult cheapest(const Evaluation& known_order, std::size_t work_budget) {
        for (Subset& subset : subset_) subset.cost = infinity;
        // No order costs less than its largest operand or its output: some contraction reads or writes it.
        double cap = std::max(1.0, result_size(full_));
        for (std::size_t i = 0; i < n_; ++i) cap = std::max(cap, result_size(std::uint32_t{1} << i));
        const double known = known_order.flops * (1 + 1e-9);  // (an order of this cost fits: the last pass)
        // Below 2^52 FLOPs every bound is exact (sums of integers and of halves of integers), and the last
        // pass keeps only what can beat the known order: fewer FLOPs, or as many and a smaller largest
        // result. Finding none proves that order optimal; ties kept would be most of a star's subsets.
        const bool exact = known_order.flops < 0x1p52;
        std::size_t work = 0;  // pairs of subsets priced, and runs of 64 subsets scanned
        // No order costs less than the charges of all operands (below): a pass under them finds none.
        const Charges charges = charge_operands();
        cap = std::max(cap, charges.all);
        // With an order known to fit, one pass at its cost: that order (the best greedy's, its subtrees
        // reordered) is mostly the optimum or near it, and a pass below it that fails cost a fifth to a
        // half of the last one (on 68 random 9-16-operand networks one pass took 0.8x the time in all).
        // Unless it costs far more than the lower bound: on 128 networks of 9-16 operands the known
        // order was at most 1.1x the optimum and 500x the bound, but on dense ones (a bond between every
        // two operands) 1.4-6x the optimum and 1e9x the bound, where a pass at a quarter of it finds
        // the optimum sooner.
        if (std::isfinite(known))
            cap = known_order.flops > far_above_bound * cap ? std::max(cap, known / 4) : known;
        // Comparisons with the cap allow for rounding: the bounds below add terms in another order than
        // the order's own count does.
        const auto over = [&](double bound) { return bound > cap * (1 + 1e-12); };
        std::vector<std::vector<std::uint32_t>> level(n_ + 1);
        // Each finished level again, in order of `key` = cost + size - charge, with what a scan reads
        // beside each subset (one pass through memory, not a lookup by subset for each of the pairs looked
        // at): whole, and apart only what bounds a pair (most pairs end there).
        struct Finished {
            std::uint32_t mask;
            double key, cost, charge, reduced, size, largest;  // reduced: cost - charge
            Bits<Words> result;
        };
        struct Probe {
            double reduced;
            Bits<Words> result;
            std::uint32_t mask;
        };
        // A level in order of key, with what a scan reads first, and for each run of 64 subsets a word
        // for each operand with a bit for each subset that holds it: the subsets disjoint from a are those
        // in no word of a's operands (a few ORs for 64 subsets, not a test of each).
        struct Scan {
            std::vector<double> key;
            std::vector<Probe> probe;
            std::vector<std::uint64_t> holds;  // [run * operands + operand]
            std::vector<std::uint64_t> below;  // [run * (operands + 1) + i]: the holds of operands < i
        };
        std::vector<std::vector<Finished>> finished(n_ + 1);
        std::vector<Scan> scans(n_ + 1);
        std::vector<std::pair<double, std::uint32_t>> order;       // a level's (key, subset), sorted
        std::array<std::pair<std::uint32_t, double>, 64> fitting;  // of a run: (subset, joined)
        std::vector<double> least_reduced(n_ + 1, infinity), least_key(n_ + 1, infinity);  // by level
        std::vector<std::uint32_t> touched;
        for (;;) {
            cap = std::min(cap, known);
            const bool last = cap >= known;  // (no pass after it: what it rejects is not needed)
            const bool beat_known = exact && last;
            for (const std::uint32_t mask : touched) subset_[mask].cost = infinity;
            touched.clear();
            for (auto& masks : level) masks.clear();
            for (std::size_t i = 0; i < n_; ++i) {
                level[1].push_back(std::uint32_t{1} << i);
                subset_[std::uint32_t{1} << i].cost = 0;
            }
            double rejected = infinity;  // the least bound of an order over the cap
            // a and b (of m operands together) into s, at the cost of a and b and their contraction,
            // whose every axis is read (`joined` elements) and written once, twice if some are summed.
            const auto join = [&](const Finished& a, const Finished& b, double joined, std::size_t m) {
                const std::uint32_t s = a.mask | b.mask;
                const double size = result_size(s);
                if (s != full_ && size > max_intermediate_) return;
                Subset& into = subset_[s];
                const double total =
                    a.cost + b.cost + joined * ((a.result | b.result) == into.result ? 1 : 2);
                // (Charges are sums of halves of integers: exact, in any order, below 2^52.)
                const double bound = total + charges.all - a.charge - b.charge;
                const double largest = std::max({a.largest, b.largest, size});
                if (beat_known) {
                    if (bound > known_order.flops ||
                        (bound == known_order.flops && largest >= known_order.largest))
                        return;
                } else if (over(bound)) {
                    rejected = std::min(rejected, bound);
                    return;
                }
                if (std::isinf(into.cost)) {
                    level[m].push_back(s);
                    touched.push_back(s);
                } else if (!(total < into.cost || (total == into.cost && largest < into.largest)))
                    return;
                into.cost = total;
                into.largest = largest;
                into.left = a.mask;
            };
            // An order through subsets a and b costs at least a.cost + b.cost + the larger of their
            // results (their contraction writes it, reading the axes of both) + the charges of the
            // operands in neither. Split as (a.cost - a.charge) + (b.cost + b.size - b.charge) + all
            // charges, it lets a scan of a level in order of key stop at the first subset that cannot fit.
            for (std::size_t m = 2; m <= n_; ++m) {
                order.clear();
                for (const std::uint32_t mask : level[m - 1])
                    order.emplace_back(subset_[mask].cost + result_size(mask) - charges.of[mask], mask);
                std::sort(order.begin(), order.end());
                finished[m - 1].clear();
                finished[m - 1].reserve(order.size());
                Scan& into = scans[m - 1];
                into.key.clear();
                into.key.reserve(order.size());
                into.probe.clear();
                into.probe.reserve(order.size());
                const std::size_t runs = (order.size() + 63) / 64;
                into.holds.assign(runs * n_, 0);
                least_reduced[m - 1] = least_key[m - 1] = infinity;
                for (const auto& [key, mask] : order) {
                    const Subset& subset = subset_[mask];
                    const double charge = charges.of[mask];
                    const Finished f{
                        mask,           key,          subset.cost, charge, subset.cost - charge, subset.size,
                        subset.largest, subset.result};
                    const std::size_t at = finished[m - 1].size();
                    for (std::uint32_t bits = mask; bits != 0; bits &= bits - 1)
                        into.holds[at / 64 * n_ + static_cast<std::size_t>(std::countr_zero(bits))] |=
                            std::uint64_t{1} << (at % 64);
                    into.key.push_back(key);
                    into.probe.push_back({f.reduced, f.result, mask});
                    finished[m - 1].push_back(f);
                    least_reduced[m - 1] = std::min(least_reduced[m - 1], f.reduced);
                    least_key[m - 1] = std::min(least_key[m - 1], key);
                }
                into.below.resize(runs * (n_ + 1));
                for (std::size_t run = 0; run < runs; ++run) {
                    std::uint64_t held = 0;
                    for (std::size_t i = 0; i <= n_; ++i) {
                        into.below[run * (n_ + 1) + i] = held;
                        if (i < n_) held |= into.holds[run * n_ + i];
                    }
                }
                for (std::size_t k = 1; k <= m / 2; ++k) {
                    const std::size_t need = m - k;
                    for (const Finished& a : finished[k]) {
                        const double a_bound = a.key + least_reduced[need] + charges.all;
                        if (over(a_bound)) {
                            rejected = std::min(rejected, a_bound);
                            break;
                        }
                        if (over(a.reduced + least_key[need] + charges.all)) {
                            rejected = std::min(rejected, a.reduced + least_key[need] + charges.all);
                            continue;  // (the level is in order of key, not of reduced: no break)
                        }
                        // b's operands are none of a's, and when the halves are of a size, none up to
                        // a's lowest either (the half with the lowest operand is a: each pair once).
                        const auto lowest = static_cast<std::size_t>(std::countr_zero(a.mask));
                        // The subsets of the level in order of key up to the first that cannot fit, and
                        // of those only the ones that hold none of those operands (cheaper, on every
                        // network tried, than enumerating the subsets of the other operands, where most
                        // have no order within the cap).
                        const double key_limit = cap * (1 + 1e-12) - a.reduced - charges.all;
                        const Scan& scan = scans[need];
                        const std::size_t end = static_cast<std::size_t>(
                            std::upper_bound(scan.key.begin(), scan.key.end(), key_limit) - scan.key.begin());
                        if (end < scan.key.size())
                            rejected = std::min(rejected, a.reduced + scan.key[end] + charges.all);
                        for (std::size_t run = 0; run * 64 < end; ++run) {
                            std::uint64_t held = need == k ? scan.below[run * (n_ + 1) + lowest] : 0;
                            for (std::uint32_t bits = a.mask; bits != 0; bits &= bits - 1)
                                held |=
                                    scan.holds[run * n_ + static_cast<std::size_t>(std::countr_zero(bits))];
                            std::uint64_t disjoint = ~held;
                            if (end - run * 64 < 64) disjoint &= (std::uint64_t{1} << (end - run * 64)) - 1;
                            ++work;
                            // What the operands in neither are charged and what a and b cost, then the
                            // pair's least: it reads every axis of both (writing the larger), once if
                            // none is summed - all from the probe, before the rest of b or s's own entry
                            // are read (misses in memory, mostly). Without a branch a pair: most fail,
                            // not predictably.
                            std::size_t count = 0;
                            for (; disjoint != 0; disjoint &= disjoint - 1) {
                                const std::size_t at =
                                    run * 64 + static_cast<std::size_t>(std::countr_zero(disjoint));
                                const Probe& b = scan.probe[at];
                                const double joined = product(a.result | b.result);
                                const double bound = a.reduced + b.reduced + charges.all + joined;
                                const bool fits = !over(bound);
                                if (!last) rejected = std::min(rejected, fits ? infinity : bound);
                                fitting[count] = {static_cast<std::uint32_t>(at), joined};
                                count += fits;
                                ++work;
                            }
                            // (The entries the joins read and write, asked for ahead: misses, mostly.)
                            for (std::size_t i = 0; i < count; ++i)
                                __builtin_prefetch(&subset_[a.mask | scan.probe[fitting[i].first].mask]);
                            for (std::size_t i = 0; i < count; ++i)
                                join(a, finished[need][fitting[i].first], fitting[i].second, m);
                        }
                        if (work > work_budget) return {DpOutcome::over_budget, {}};
                    }
                }
            }
            if (!std::isinf(subset_[full_].cost)) break;
            if (beat_known) return {DpOutcome::known_optimal, {}};
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
        Subset& subset = subset_[mask];
        if (subset.size < 0) {
            subset.result = std::popcount(mask) == 1 ? axes_of_[mask]
                                                     : axes_of_[mask] & (output_ | axes_of_[full_ & ~mask]);
            subset.size = product(subset.result);
        }
        return subset.size;
    }

    // The product of the sizes of the groups set, a byte of them at a time (two lookups for 16 groups).
    double product(const Bits<Words>& groups) const {
        double n = 1;
        for (std::size_t byte = 0; byte < product_of_byte_.size(); ++byte)  // (a count a network: predicted)
            n *= product_of_byte_[byte][groups.word[byte / 8] >> (byte % 8 * 8) & 255];
        return n;
    }

    std::size_t emit(std::uint32_t mask, SsaPath& path) const {
        if (std::popcount(mask) == 1) return static_cast<std::size_t>(std::countr_zero(mask));
        const std::size_t left = emit(subset_[mask].left, path);
        const std::size_t right = emit(mask & ~subset_[mask].left, path);
        path.emplace_back(left, right);
        return n_ + path.size() - 1;
    }

    std::size_t n_;
    std::uint32_t full_;
    std::span<const double> sizes_;
    double max_intermediate_;
    Bits<Words> output_;
    std::vector<Bits<Words>> axes_of_;  // by subset: every axis its operands hold
    std::vector<std::array<double, 256>> product_of_byte_;
    // By subset, what a pair that makes it reads and writes, together: one miss in memory, not several.
    struct Subset {
        Bits<Words> result;  // the axes of its tensor, once result_size() computed them
        double size = -1;    // -1: not computed yet
        double cost = infinity, largest = 0;
        std::uint32_t left = 0;  // the split of the cheapest order
    };
    std::vector<Subset> subset_;
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

DpResult optimal_by_dp(const Network& network, const Evaluation& known, std::size_t work_budget) {
    const auto found =
        with_search(network, [&](auto& search) { return search.cheapest(known, work_budget); });
    return found ? *found : DpResult{DpOutcome::over_budget, {}};
}

std::optional<double> smallest_peak_by_dp(const Network& network) {
    if (network.operands.size() > max_operands) return std::nullopt;
    return with_search(network, [](auto& search) { return search.smallest_peak(); });
}

}  // namespace einc::contraction
