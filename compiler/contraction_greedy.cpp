// Greedy contraction orders for networks of any size. The plain greedy is opt_einsum's, step for step
// (FaithfulGreedy): it scores a pair of tensors that share an axis by the elements its contraction
// removes, size(result) - size(a) - size(b), the lowest first; unconnected tensors are joined last, the
// smallest first. Pricing pairs by their FLOPs instead does the cheap outer products first and builds huge
// intermediates. Greedy::run scores every connected pair afresh instead (another order, often better);
// randomised runs then take, at each step, one of the best few pairs with Boltzmann weights at a
// temperature of their own, from a fixed seed; the best order by FLOPs is kept, so never one worse than
// opt_einsum's greedy. Their number is bounded by the pairs scored (work), not by time, so that one
// network always gets one order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>

#include "compiler/contraction_search.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::contraction {
namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();
constexpr std::size_t max_runs = 64;
constexpr std::size_t sampled_pairs = 4;  // a randomised step chooses among this many of the best pairs
constexpr std::uint64_t seed = 0x9E3779B97F4A7C15ull;

// SplitMix64: the same numbers on every platform (the standard distributions are not).
class Random {
public:
    explicit Random(std::uint64_t state) : state_(state) {}
    double uniform() {  // in [0, 1)
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
    }

private:
    std::uint64_t state_;
};

enum class Score {
    removed,  // size(result) - size(a) - size(b): opt_einsum's greedy
    flops,    // the pair's FLOPs, among connected pairs only
    size,     // size(result): the smallest peak, when none fits the limit
};

struct Candidate {
    long double score;
    std::size_t i, j;  // i < j
    // Equal scores: the pair whose later tensor is older first, as opt_einsum breaks ties.
    bool operator>(const Candidate& o) const {
        return score > o.score || (score == o.score && (j > o.j || (j == o.j && i > o.i)));
    }
};

struct Run {
    SsaPath path;  // empty: it broke the limit
    double peak = 0;
};

class Greedy {
public:
    explicit Greedy(const Network& network)
        : network_(network), in_output_(network.sizes.size(), false), holders_(network.sizes.size(), 0),
          holders_of_(network.sizes.size()) {
        for (const AxisId axis : network.output) in_output_[static_cast<std::size_t>(axis)] = true;
        for (std::size_t i = 0; i < network.operands.size(); ++i)
            for (const AxisId axis : network.operands[i]) {
                ++holders_[static_cast<std::size_t>(axis)];
                holders_of_[static_cast<std::size_t>(axis)].push_back(i);
            }
    }

    std::size_t work = 0;  // pairs scored, in every run

    // One run: deterministic without `random`. `limit`: the largest intermediate it may make. `by_size`:
    // join unconnected tensors the pair of the smallest product of sizes first, not by `score` (on a star
    // around an output axis, where nothing is connected, either way can be the better).
    Run run(Score score, Random* random, double temperature, double limit, bool by_size = false) {
        State s{network_.operands, {}, std::vector<bool>(network_.operands.size(), true),        holders_,
                holders_of_,       {}, std::vector<std::size_t>(2 * network_.operands.size(), 0)};
        for (const AxisSet& t : s.tensors) s.size.push_back(product(t, network_.sizes));
        for (std::size_t i = 0; i < s.tensors.size(); ++i) push_neighbours(s, score, i, true);
        Run run;
        std::size_t live = s.tensors.size();
        std::vector<Candidate> best;
        while (live > 1) {
            best.clear();
            // The best pairs whose scores are current (a contraction elsewhere may have changed them).
            while (!s.heap.empty() && best.size() < (random ? sampled_pairs : 1)) {
                std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
                const Candidate c = s.heap.back();
                s.heap.pop_back();
                if (!s.alive[c.i] || !s.alive[c.j]) continue;
                const Pair p = score_pair(s, score, c.i, c.j);
                if (live > 2 && p.size > limit) continue;  // (results only shrink later: rarely missed)
                if (p.score != c.score) {
                    s.heap.push_back({p.score, c.i, c.j});
                    std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
                    continue;
                }
                best.push_back(c);
            }
            Candidate chosen{};
            if (best.empty()) {
                // No connected pair left (or none within the limit): every pair, outer products included.
                bool found = false;
                for (std::size_t i = 0; i < s.tensors.size(); ++i)
                    for (std::size_t j = i + 1; j < s.tensors.size() && s.alive[i]; ++j) {
                        if (!s.alive[j]) continue;
                        const Pair p = score_pair(s, Score::removed, i, j);
                        if (live > 2 && p.size > limit) continue;
                        const Candidate c{by_size ? s.size[i] * s.size[j] : p.score, i, j};
                        if (!found || chosen > c) chosen = c;
                        found = true;
                    }
                if (!found) return Run{};
            } else {
                std::size_t pick = 0;
                if (random && best.size() > 1) {
                    // Boltzmann weights relative to the best score's magnitude.
                    const double scale =
                        temperature * std::max(1.0, std::abs(static_cast<double>(best[0].score)));
                    std::vector<double> weight;
                    double total = 0;
                    for (const Candidate& c : best)
                        total += weight.emplace_back(
                            std::exp(-static_cast<double>(c.score - best[0].score) / scale));
                    double x = random->uniform() * total;
                    while (pick + 1 < best.size() && x >= weight[pick]) x -= weight[pick++];
                }
                chosen = best[pick];
                for (std::size_t k = 0; k < best.size(); ++k)
                    if (k != pick) {
                        s.heap.push_back(best[k]);
                        std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
                    }
            }
            contract(s, score, chosen.i, chosen.j, run, --live == 1);
        }
        return run;
    }

private:
    struct State {
        std::vector<AxisSet> tensors;
        std::vector<double> size;
        std::vector<bool> alive;
        std::vector<int> holders;                          // live tensors holding each axis
        std::vector<std::vector<std::size_t>> holders_of;  // tensors that held each axis (dead ones too)
        std::vector<Candidate> heap;                       // a min-heap
        std::vector<std::size_t> seen;  // by tensor: the last tensor it was paired with, + 1
    };
    struct Pair {
        double score, size;
    };

    Pair score_pair(const State& s, Score score, std::size_t i, std::size_t j) {
        ++work;
        const AxisSet &a = s.tensors[i], &b = s.tensors[j];
        double all = 1, kept = 1;
        bool summed = false;
        auto x = a.begin(), y = b.begin();
        while (x != a.end() || y != b.end()) {
            AxisId axis;
            int here = 1;
            if (y == b.end() || (x != a.end() && *x < *y))
                axis = *x++;
            else if (x == a.end() || *y < *x)
                axis = *y++;
            else {
                axis = *x++;
                ++y;
                here = 2;
            }
            const auto k = static_cast<std::size_t>(axis);
            const double n = static_cast<double>(network_.sizes[k]);
            all *= n;
            if (in_output_[k] || s.holders[k] > here)
                kept *= n;
            else
                summed = true;
        }
        switch (score) {
        case Score::removed: return {kept - s.size[i] - s.size[j], kept};
        case Score::flops: return {all * (summed ? 2 : 1), kept};
        case Score::size: return {kept, kept};
        }
        return {0, kept};
    }

    // Pairs tensor t with every live tensor that shares a summed axis with it (with the later ones only:
    // `after`). Output axes (a batch axis) do not connect, as in opt_einsum: that would make every pair
    // a candidate - a slower greedy that prefers small outer products.
    void push_neighbours(State& s, Score score, std::size_t t, bool after) {
        for (const AxisId axis : s.tensors[t]) {
            if (in_output_[static_cast<std::size_t>(axis)]) continue;
            for (const std::size_t other : s.holders_of[static_cast<std::size_t>(axis)]) {
                if (other == t || !s.alive[other] || s.seen[other] == t + 1 || (after && other < t)) continue;
                s.seen[other] = t + 1;
                const Pair p = score_pair(s, score, std::min(t, other), std::max(t, other));
                s.heap.push_back({p.score, std::min(t, other), std::max(t, other)});
                std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
            }
        }
    }

    void contract(State& s, Score score, std::size_t i, std::size_t j, Run& run, bool last) {
        const AxisSet &a = s.tensors[i], &b = s.tensors[j];
        AxisSet all;
        std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(all));
        for (const AxisSet* t : {&a, &b})
            for (const AxisId axis : *t) --s.holders[static_cast<std::size_t>(axis)];
        AxisSet result;
        for (const AxisId axis : all)
            if (in_output_[static_cast<std::size_t>(axis)] || s.holders[static_cast<std::size_t>(axis)] > 0)
                result.push_back(axis);
        const std::size_t c = s.tensors.size();
        for (const AxisId axis : result) {
            ++s.holders[static_cast<std::size_t>(axis)];
            s.holders_of[static_cast<std::size_t>(axis)].push_back(c);
        }
        s.alive[i] = s.alive[j] = false;
        s.alive.push_back(true);
        s.size.push_back(product(result, network_.sizes));
        if (!last) run.peak = std::max(run.peak, s.size.back());
        s.tensors.push_back(std::move(result));
        run.path.emplace_back(i, j);
        push_neighbours(s, score, c, false);
    }

    const Network& network_;
    std::vector<bool> in_output_;
    std::vector<int> holders_;
    std::vector<std::vector<std::size_t>> holders_of_;
};

// opt_einsum's greedy step for step, so that the best of einc's runs is never worse than it. What sets it
// apart from Greedy::run: tensors with equal axis sets are multiplied as soon as they meet (a Hadamard
// product, whose result keeps the set); axes that every operand holds count as output axes; a new tensor
// pushes only its best partner (a tensor it shares a summed axis with), not every one, so a tensor whose
// partner goes elsewhere waits for a neighbour's result to pick it; equal scores go to the pair whose later
// tensor is older, then whose earlier one is; what is left unconnected is joined the two smallest (by
// their output axes) first, each result back among them. Scores are exact up to 2^64 (long double), as
// opt_einsum's integers are, so that ties fall the same way.
class FaithfulGreedy {
public:
    explicit FaithfulGreedy(const Network& network)
        : network_(network), output_(network.sizes.size(), false), holders_(network.sizes.size(), 0),
          holders_of_(network.sizes.size()), seen_(2 * network.operands.size(), 0) {
        for (const AxisId axis : network.output) output_[static_cast<std::size_t>(axis)] = true;
        // An axis of every operand can only go at the last contraction: an output axis to the greedy.
        for (std::size_t axis = 0; axis < network.sizes.size(); ++axis) {
            bool everywhere = true;
            for (const AxisSet& set : network.operands)
                everywhere =
                    everywhere && std::binary_search(set.begin(), set.end(), static_cast<AxisId>(axis));
            if (everywhere) output_[axis] = true;
        }
    }

    std::size_t work = 0;  // pairs scored

    Run run(double limit) {
        const std::size_t n = network_.operands.size();
        tensors_ = network_.operands;
        alive_.assign(n, false);
        for (std::size_t i = 0; i < n; ++i) {
            const auto same = live_.find(tensors_[i]);
            if (same == live_.end()) {
                revive(i, true);
                continue;
            }
            // Equal to an earlier operand: multiplied with it at once (its axes are counted already).
            const std::size_t earlier = same->second;
            alive_[earlier] = false;
            live_.erase(same);
            path_.emplace_back(earlier, i);
            tensors_.push_back(tensors_[i]);
            alive_.push_back(false);
            revive(tensors_.size() - 1, false);
        }
        live_count_ = live_.size();
        // The first candidates: along each summed axis, each tensor's best partner among the later ones.
        for (std::size_t axis = 0; axis < holders_of_.size(); ++axis) {
            std::vector<std::size_t> holding;
            for (const std::size_t t : holders_of_[axis])
                if (alive_[t]) holding.push_back(t);
            std::sort(holding.begin(), holding.end());
            for (std::size_t k = 0; k + 1 < holding.size(); ++k)
                push_best(holding[k], std::span(holding).subspan(k + 1));
        }
        Run result;
        while (!heap_.empty()) {
            std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
            const Candidate c = heap_.back();
            heap_.pop_back();
            if (!alive_[c.i] || !alive_[c.j]) continue;
            const AxisSet key = result_of(c.i, c.j);
            if (live_count_ > 2 && size(key) > limit) continue;  // (einc's limit; opt_einsum has none here)
            contract(c.i, c.j, key);
            std::vector<std::size_t> partners;
            const std::size_t t = tensors_.size() - 1;
            for (const AxisId axis : tensors_[t])
                for (const std::size_t other : holders_of_[static_cast<std::size_t>(axis)])
                    if (other != t && alive_[other] && seen_[other] != t + 1) {
                        seen_[other] = t + 1;
                        partners.push_back(other);
                    }
            if (!partners.empty()) push_best(t, partners);
        }
        // Unconnected tensors: the two smallest by their output axes first.
        using Entry = std::pair<long double, std::size_t>;  // (size of the output part, tensor)
        std::vector<Entry> left;
        for (std::size_t t = 0; t < tensors_.size(); ++t)
            if (alive_[t]) left.emplace_back(size(output_part(tensors_[t])), t);
        std::make_heap(left.begin(), left.end(), std::greater<>{});
        while (left.size() > 1) {
            std::pop_heap(left.begin(), left.end(), std::greater<>{});
            const std::size_t a = left.back().second;
            left.pop_back();
            std::pop_heap(left.begin(), left.end(), std::greater<>{});
            const std::size_t b = left.back().second;
            left.pop_back();
            const AxisSet key = output_part(unite(tensors_[a], tensors_[b]));
            if (!left.empty() && size(key) > limit) return result;  // breaks the limit: no order
            path_.emplace_back(std::min(a, b), std::max(a, b));
            tensors_.push_back(key);
            alive_.push_back(false);
            left.emplace_back(size(key), tensors_.size() - 1);
            std::push_heap(left.begin(), left.end(), std::greater<>{});
        }
        result.path = std::move(path_);
        return result;
    }

private:
    // Tensor t joins the live ones (`count`: its axes add to the holders' counts).
    void revive(std::size_t t, bool count) {
        alive_[t] = true;
        live_.emplace(tensors_[t], t);
        for (const AxisId axis : tensors_[t]) {
            const auto k = static_cast<std::size_t>(axis);
            if (output_[k]) continue;
            holders_of_[k].push_back(t);
            if (count) ++holders_[k];
        }
    }

    // A new tensor of the axis set `key`, as the search sees it (a Hadamard product keeps its set).
    void add(const AxisSet& key, bool live, bool count = true) {
        tensors_.push_back(key);
        alive_.push_back(false);
        if (live) revive(tensors_.size() - 1, count);
    }

    AxisSet unite(const AxisSet& a, const AxisSet& b) const {
        AxisSet all;
        std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(all));
        return all;
    }
    AxisSet output_part(const AxisSet& axes) const {
        AxisSet kept;
        for (const AxisId axis : axes)
            if (output_[static_cast<std::size_t>(axis)]) kept.push_back(axis);
        return kept;
    }
    long double size(const AxisSet& axes) const {
        long double n = 1;
        for (const AxisId axis : axes)
            n *= static_cast<long double>(network_.sizes[static_cast<std::size_t>(axis)]);
        return n;
    }

    // The axes of i and j that an output or another live tensor still needs.
    AxisSet result_of(std::size_t i, std::size_t j) {
        ++work;
        const AxisSet &a = tensors_[i], &b = tensors_[j];
        AxisSet kept;
        for (const AxisId axis : unite(a, b)) {
            const auto k = static_cast<std::size_t>(axis);
            const int here =
                std::binary_search(a.begin(), a.end(), axis) + std::binary_search(b.begin(), b.end(), axis);
            if (output_[k] || holders_[k] > here) kept.push_back(axis);
        }
        return kept;
    }

    void push_best(std::size_t t, std::span<const std::size_t> partners) {
        bool found = false;
        Candidate best{};
        for (const std::size_t other : partners) {
            const std::size_t i = std::min(t, other), j = std::max(t, other);
            const long double removed = size(result_of(i, j)) - size(tensors_[i]) - size(tensors_[j]);
            const Candidate c{removed, i, j};
            if (!found || best > c) best = c;
            found = true;
        }
        heap_.push_back(best);
        std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
    }

    void contract(std::size_t i, std::size_t j, const AxisSet& key) {
        path_.emplace_back(i, j);
        alive_[i] = alive_[j] = false;
        for (const std::size_t t : {i, j}) {
            live_.erase(tensors_[t]);
            for (const AxisId axis : tensors_[t])
                if (!output_[static_cast<std::size_t>(axis)]) --holders_[static_cast<std::size_t>(axis)];
        }
        --live_count_;
        const auto same = live_.find(key);
        if (same == live_.end()) {
            add(key, true);
            return;
        }
        // Equal to a live tensor: multiplied with it at once (whose axes are counted already).
        add(key, false);
        const std::size_t earlier = same->second;
        alive_[earlier] = false;
        live_.erase(same);
        path_.emplace_back(earlier, tensors_.size() - 1);
        --live_count_;
        add(key, true, false);
    }

    const Network& network_;
    std::vector<bool> output_;                          // the output's axes and those of every operand
    std::vector<int> holders_;                          // live tensors holding each axis (not the output's)
    std::vector<std::vector<std::size_t>> holders_of_;  // tensors that held each axis, dead ones too
    std::vector<std::size_t> seen_;  // by tensor: the last new tensor it was paired with, + 1
    std::vector<AxisSet> tensors_;   // by SSA id
    std::vector<bool> alive_;
    std::map<AxisSet, std::size_t> live_;  // the live tensor of each axis set
    std::size_t live_count_ = 0;
    std::vector<Candidate> heap_;  // a min-heap
    SsaPath path_;
};

}  // namespace

SsaPath plain_greedy(const Network& network) {
    SsaPath path = FaithfulGreedy(network).run(network.max_intermediate).path;
    // (It checks the limit on the tensors as it sees them: a Hadamard product of operands is not.)
    if (!path.empty() && evaluate(network, path).intermediate > network.max_intermediate) return {};
    return path;
}

Heuristic best_greedy(const Network& network, std::size_t work_budget) {
    Greedy greedy(network);
    Heuristic best;
    double best_flops = infinity, best_largest = infinity;
    const auto keep = [&](const Run& run, bool randomised) {
        ++best.runs;
        if (run.path.empty()) return;
        const Evaluation e = evaluate(network, run.path);
        if (e.intermediate > network.max_intermediate) return;
        if (e.flops < best_flops || (e.flops == best_flops && e.largest < best_largest)) {
            best_flops = e.flops;
            best_largest = e.largest;
            best.path = run.path;
            best.randomised_won = randomised;
        }
    };
    keep(greedy.run(Score::removed, nullptr, 0, network.max_intermediate), false);
    FaithfulGreedy faithful(network);
    keep(faithful.run(network.max_intermediate), false);
    greedy.work += faithful.work;
    keep(greedy.run(Score::removed, nullptr, 0, network.max_intermediate, true), false);
    keep(greedy.run(Score::flops, nullptr, 0, network.max_intermediate), false);
    Random random(seed);
    while (best.runs < max_runs && greedy.work < work_budget) {
        // Temperatures from 0.01 to 1, log-uniform: near-greedy runs and adventurous ones.
        const double temperature = std::pow(10.0, -2 * random.uniform());
        keep(greedy.run(Score::removed, &random, temperature, network.max_intermediate), true);
    }
    if (best.path.empty()) {
        // None fits: the smallest peak of runs without the limit, one of them after the smallest results.
        best.smallest_peak = infinity;
        for (const Score score : {Score::size, Score::removed})
            best.smallest_peak = std::min(best.smallest_peak, greedy.run(score, nullptr, 0, infinity).peak);
    }
    return best;
}

}  // namespace einc::contraction
