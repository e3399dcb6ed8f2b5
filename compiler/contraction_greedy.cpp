// Greedy contraction orders for networks of any size. The plain greedy scores a pair of tensors that
// share an axis as opt_einsum does, by the elements its contraction removes: size(result) - size(a) -
// size(b), the lowest first; unconnected tensors are joined last, the smallest first. Pricing pairs by
// their FLOPs instead does the cheap outer products first and builds huge intermediates.
// Randomised runs then take, at each step, one of the best few pairs with Boltzmann weights at a
// temperature of their own, from a fixed seed; the best order by FLOPs is kept. Their number is bounded
// by the pairs scored (work), not by time, so that one network always gets one order.
#include <algorithm>
#include <cmath>
#include <limits>

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
    double score;
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

    // One run: deterministic without `random`. `limit`: the largest intermediate it may make. `stale`:
    // take a pair at the score it had when it was pushed, and join unconnected tensors by size alone, as
    // opt_einsum's greedy does (neither way is always the better: the best of both is kept).
    Run run(Score score, Random* random, double temperature, double limit, bool stale = false) {
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
                if (p.score != c.score && !stale) {
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
                        const Candidate c{stale ? s.size[i] * s.size[j] : p.score, i, j};
                        if (!found || chosen > c) chosen = c;
                        found = true;
                    }
                if (!found) return Run{};
            } else {
                std::size_t pick = 0;
                if (random && best.size() > 1) {
                    // Boltzmann weights relative to the best score's magnitude.
                    const double scale = temperature * std::max(1.0, std::abs(best[0].score));
                    std::vector<double> weight;
                    double total = 0;
                    for (const Candidate& c : best)
                        total += weight.emplace_back(std::exp(-(c.score - best[0].score) / scale));
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

}  // namespace

SsaPath plain_greedy(const Network& network) {
    Greedy greedy(network);
    return greedy.run(Score::removed, nullptr, 0, network.max_intermediate).path;
}

Heuristic best_greedy(const Network& network, std::size_t work_budget) {
    Greedy greedy(network);
    Heuristic best;
    double best_flops = infinity, best_largest = infinity;
    const auto keep = [&](const Run& run, bool randomised) {
        ++best.runs;
        if (run.path.empty()) return;
        const Evaluation e = evaluate(network, run.path);
        if (e.flops < best_flops || (e.flops == best_flops && e.largest < best_largest)) {
            best_flops = e.flops;
            best_largest = e.largest;
            best.path = run.path;
            best.randomised_won = randomised;
        }
    };
    keep(greedy.run(Score::removed, nullptr, 0, network.max_intermediate), false);
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
