// Contraction order: hand-checked optimal orders; the exhaustive search against brute force over every
// pairwise order, the dynamic programming against a plain subset DP of its own, the greedy searches
// against a plain opt_einsum-style greedy; golden orders of a chain, a ring, a grid and a star; the
// memory limit; values of random networks against the reference interpreter.
#include <algorithm>
#include <bit>
#include <cmath>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>
#include <limits>
#include <random>

#include "compiler/contraction_order.hpp"
#include "grammar/diagnostic.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"
#include "tests/sanitized.hpp"

using namespace einc;

namespace {

using Axes = std::vector<AxisId>;

// The FLOPs of the best pairwise order, by trying them all (opt_einsum's counting).
double brute_force(std::vector<Axes> operands, const Axes& output, const std::vector<std::int64_t>& sizes) {
    if (operands.size() == 1) return 0;
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < operands.size(); ++i)
        for (std::size_t j = i + 1; j < operands.size(); ++j) {
            std::vector<Axes> rest;
            for (std::size_t o = 0; o < operands.size(); ++o)
                if (o != i && o != j) rest.push_back(operands[o]);
            Axes all = operands[i];
            for (const AxisId a : operands[j])
                if (std::find(all.begin(), all.end(), a) == all.end()) all.push_back(a);
            Axes kept;
            bool summed = false;
            double flops = 1;
            for (const AxisId a : all) {
                flops *= static_cast<double>(sizes[static_cast<std::size_t>(a)]);
                bool needed = std::find(output.begin(), output.end(), a) != output.end();
                for (const Axes& r : rest) needed = needed || std::find(r.begin(), r.end(), a) != r.end();
                if (needed)
                    kept.push_back(a);
                else
                    summed = true;
            }
            rest.push_back(kept);
            best = std::min(best, flops * (summed ? 2 : 1) + brute_force(rest, output, sizes));
        }
    return best;
}

}  // namespace

TEST_CASE("a matrix chain: (A B) C beats A (B C)") {
    // A 10x100 (i j), B 100x5 (j k), C 5x50 (k l). (A B) C: 2*10*100*5 + 2*10*5*50 = 10000 + 5000.
    // A (B C): 2*100*5*50 + 2*10*100*50 = 50000 + 100000. Naive: 10*100*5*50 * (2 + 1) = 750000.
    const std::vector<Axes> operands{{0, 1}, {1, 2}, {2, 3}};
    const std::vector<std::int64_t> sizes{10, 100, 5, 50};
    const ContractionPath path = contraction_order(operands, Axes{0, 3}, sizes);
    CHECK(path.optimal);
    CHECK(path.pairs == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {0, 1}});
    CHECK(path.optimized_flops == 15000);
    CHECK(path.naive_flops == 750000);
    CHECK(path.largest_intermediate == 500);  // the 10x50 result (opt_einsum counts it too)
}

TEST_CASE("a chain where the middle goes first") {
    // A 1000x2 (i j), B 2x1000 (j k), C 1000x2 (k l): (B C) first is 2*2*1000*2 = 8000 and leaves 2x2;
    // then A (BC) is 2*1000*2*2 = 8000. (A B) first would make a 1000x1000 intermediate: 4,000,000.
    const std::vector<Axes> operands{{0, 1}, {1, 2}, {2, 3}};
    const std::vector<std::int64_t> sizes{1000, 2, 1000, 2};
    const ContractionPath path = contraction_order(operands, Axes{0, 3}, sizes);
    CHECK(path.pairs == std::vector<std::pair<std::size_t, std::size_t>>{{1, 2}, {0, 1}});
    CHECK(path.optimized_flops == 16000);
    CHECK(path.largest_intermediate == 2000);  // the output, 1000x2
}

TEST_CASE("four and five operand chains match brute force") {
    // Four: a b, b c, c d, d e with b and d large: contracting over them early is cheap.
    const std::vector<Axes> four{{0, 1}, {1, 2}, {2, 3}, {3, 4}};
    const std::vector<std::int64_t> four_sizes{8, 64, 4, 64, 8};
    const ContractionPath p4 = contraction_order(four, Axes{0, 4}, four_sizes);
    CHECK(p4.optimized_flops == brute_force(four, Axes{0, 4}, four_sizes));
    // 8x64 * 64x4 = 2*8*64*4 = 4096 -> 8x4; 4x64 * 64x8 = 4096 -> 4x8; 8x4 * 4x8 = 512: 8704 in all.
    CHECK(p4.optimized_flops == 8704);
    const std::vector<Axes> five{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}};
    const std::vector<std::int64_t> five_sizes{3, 40, 2, 50, 6, 7};
    CHECK(contraction_order(five, Axes{0, 5}, five_sizes).optimized_flops ==
          brute_force(five, Axes{0, 5}, five_sizes));
}

TEST_CASE("random networks: the exhaustive search is optimal") {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> size_of(1, 9), operands_of(2, 5), axis_count(1, 3), axis_of(0, 5);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<std::int64_t> sizes;
        for (int a = 0; a < 6; ++a) sizes.push_back(size_of(rng));
        std::vector<Axes> operands(static_cast<std::size_t>(operands_of(rng)));
        for (Axes& axes : operands) {
            for (int k = axis_count(rng); k > 0; --k) axes.push_back(axis_of(rng));
            std::sort(axes.begin(), axes.end());
            axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
        }
        const Axes output{0};
        const ContractionPath path = contraction_order(operands, output, sizes);
        CHECK(path.pairs.size() == operands.size() - 1);
        CHECK(path.optimized_flops == doctest::Approx(brute_force(operands, output, sizes)));
    }
}

TEST_CASE("past 16 operands the search is greedy, and stays fast for many operands") {
    std::vector<Axes> chain;
    std::vector<std::int64_t> sizes;
    for (AxisId a = 0; a < 41; ++a) sizes.push_back(2 + a % 5);
    for (AxisId a = 0; a < 40; ++a) chain.push_back({a, a + 1});
    const ContractionPath path = contraction_order(chain, Axes{0, 40}, sizes);
    CHECK_FALSE(path.optimal);
    CHECK(path.pairs.size() == 39);
    CHECK(path.optimized_flops > 0);
    CHECK(path.optimized_flops < path.naive_flops);
}

TEST_CASE("contraction_path: the pairs it is told, with their counts; as they range, every order") {
    const std::vector<Axes> chain{{0, 1}, {1, 2}, {2, 3}, {3, 4}};
    const std::vector<std::int64_t> sizes{8, 64, 4, 64, 8};
    const ContractionPath searched = contraction_order(chain, Axes{0, 4}, sizes);
    // Every answer of every step: 6 pairs of four operands, 3 of three, 1 of two.
    std::vector<std::vector<std::pair<std::size_t, std::size_t>>> orders;
    for (std::size_t first = 0; first < 6; ++first)
        for (std::size_t second = 0; second < 3; ++second) {
            std::vector<std::size_t> asked;
            const ContractionPath path = contraction_path(chain, Axes{0, 4}, sizes, [&](std::size_t n) {
                asked.push_back(n);
                return asked.size() == 1 ? first : asked.size() == 2 ? second : 0;
            });
            CHECK(asked == std::vector<std::size_t>{6, 3, 1});
            CHECK_FALSE(path.optimal);
            CHECK(path.naive_flops == searched.naive_flops);
            if (path.pairs == searched.pairs) {
                CHECK(path.optimized_flops == searched.optimized_flops);
                CHECK(path.largest_intermediate == searched.largest_intermediate);
            }
            orders.push_back(path.pairs);
        }
    std::sort(orders.begin(), orders.end());
    CHECK(std::unique(orders.begin(), orders.end()) == orders.end());
    CHECK(std::find(orders.begin(), orders.end(), searched.pairs) != orders.end());
}

// ---- beyond 8 operands ----------------------------------------------------------------------------------

namespace {

struct Network {
    std::vector<Axes> operands;
    Axes output;
    std::vector<std::int64_t> sizes;
};

double size_of(const Axes& axes, const std::vector<std::int64_t>& sizes) {
    double n = 1;
    for (const AxisId a : axes) n *= static_cast<double>(sizes[static_cast<std::size_t>(a)]);
    return n;
}

bool holds(const Axes& axes, AxisId a) {
    return std::find(axes.begin(), axes.end(), a) != axes.end();
}

// Contracts x and y of `live`: the result's axes (those the output or another live tensor needs) and
// the FLOPs, counted here afresh (opt_einsum's convention).
std::pair<Axes, double> contract(const std::vector<Axes>& live, std::size_t x, std::size_t y,
                                 const Network& net) {
    Axes all = live[x];
    for (const AxisId a : live[y])
        if (!holds(all, a)) all.push_back(a);
    Axes kept;
    for (const AxisId a : all) {
        bool needed = holds(net.output, a);
        for (std::size_t o = 0; o < live.size(); ++o)
            needed = needed || (o != x && o != y && holds(live[o], a));
        if (needed) kept.push_back(a);
    }
    std::sort(kept.begin(), kept.end());
    return {kept, size_of(all, net.sizes) * (kept.size() < all.size() ? 2 : 1)};
}

struct Counted {
    double flops = 0, peak = 0;  // peak: the largest intermediate but the output
};
// The FLOPs of a path over the shrinking operand list, and its largest intermediate.
Counted count(const Network& net, const std::vector<std::pair<std::size_t, std::size_t>>& pairs) {
    std::vector<Axes> live = net.operands;
    Counted c;
    for (std::size_t step = 0; step < pairs.size(); ++step) {
        const auto [i, j] = pairs[step];
        auto [result, flops] = contract(live, i, j, net);
        c.flops += flops;
        if (step + 1 < pairs.size()) c.peak = std::max(c.peak, size_of(result, net.sizes));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(j));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        live.push_back(result);
    }
    return c;
}

// The optimum by a plain DP over every subset of operands, every split, no pruning (and intermediates
// larger than `limit` refused; the output is not one).
double subset_optimum(const Network& net, double limit = std::numeric_limits<double>::infinity()) {
    const std::size_t n = net.operands.size();
    const std::size_t full = (std::size_t{1} << n) - 1;
    std::vector<double> best(full + 1, std::numeric_limits<double>::infinity());
    std::vector<Axes> axes(full + 1);
    for (std::size_t mask = 1; mask <= full; ++mask) {
        Axes inside, outside = net.output;
        for (std::size_t o = 0; o < n; ++o)
            for (const AxisId a : net.operands[o]) {
                Axes& side = mask >> o & 1 ? inside : outside;
                if (!holds(side, a)) side.push_back(a);
            }
        if (std::popcount(mask) == 1) {
            best[mask] = 0;
            axes[mask] = inside;
            continue;
        }
        for (const AxisId a : inside)
            if (holds(outside, a)) axes[mask].push_back(a);
        if (mask != full && size_of(axes[mask], net.sizes) > limit) continue;
        for (std::size_t left = (mask - 1) & mask; left > 0; left = (left - 1) & mask) {
            const std::size_t right = mask & ~left;
            if (left < right) continue;  // each split once
            Axes all = axes[left];
            for (const AxisId a : axes[right])
                if (!holds(all, a)) all.push_back(a);
            const double flops = size_of(all, net.sizes) * (all.size() > axes[mask].size() ? 2 : 1);
            best[mask] = std::min(best[mask], best[left] + best[right] + flops);
        }
    }
    return best[full];
}

// opt_einsum's greedy, plainly: the connected pair whose result removes the most elements (the first
// of equals), unconnected tensors last, the two smallest first.
double plain_greedy(const Network& net) {
    std::vector<Axes> live = net.operands;
    double flops = 0;
    while (live.size() > 1) {
        std::size_t bi = 0, bj = 0;
        double best = std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < live.size(); ++i)
            for (std::size_t j = i + 1; j < live.size(); ++j) {
                bool shared = false;
                for (const AxisId a : live[i]) shared = shared || holds(live[j], a);
                if (!shared) continue;
                const double removed = size_of(contract(live, i, j, net).first, net.sizes) -
                                       size_of(live[i], net.sizes) - size_of(live[j], net.sizes);
                if (removed < best) best = removed, bi = i, bj = j;
            }
        if (std::isinf(best))
            for (std::size_t i = 0; i < live.size(); ++i)
                for (std::size_t j = i + 1; j < live.size(); ++j) {
                    const double product = size_of(live[i], net.sizes) * size_of(live[j], net.sizes);
                    if (product < best) best = product, bi = i, bj = j;
                }
        auto [result, f] = contract(live, bi, bj, net);
        flops += f;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(bj));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(bi));
        live.push_back(result);
    }
    return flops;
}

// A random network of `n` operands: a random tree of bonds plus `extra` more, some open axes (the
// output's), now and then a hyperedge, a batch axis or a vector; sizes 2 to `largest`.
Network random_network(std::mt19937& rng, std::size_t n, std::size_t extra, int largest) {
    Network net;
    net.operands.resize(n);
    const auto pick = [&](std::size_t below) {
        return std::uniform_int_distribution<std::size_t>(0, below - 1)(rng);
    };
    const auto new_axis = [&] {
        net.sizes.push_back(std::uniform_int_distribution<int>(2, largest)(rng));
        return static_cast<AxisId>(net.sizes.size() - 1);
    };
    const auto bond = [&](std::size_t x, std::size_t y) {
        const AxisId a = new_axis();
        net.operands[x].push_back(a);
        if (y != x) net.operands[y].push_back(a);
        return a;
    };
    for (std::size_t i = 1; i < n; ++i) bond(i, pick(i));
    for (std::size_t e = 0; e < extra; ++e) bond(pick(n), pick(n));
    for (std::size_t o = 0; o < 1 + n / 5; ++o) net.output.push_back(bond(pick(n), pick(n)));
    if (pick(3) == 0) {  // a hyperedge over three operands
        const AxisId a = bond(pick(n), pick(n));
        net.operands[pick(n)].push_back(a);
    }
    if (pick(4) == 0) {  // a batch axis
        const AxisId a = new_axis();
        for (Axes& axes : net.operands) axes.push_back(a);
        net.output.push_back(a);
    }
    for (Axes& axes : net.operands) {
        std::sort(axes.begin(), axes.end());
        axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    }
    std::sort(net.output.begin(), net.output.end());
    net.output.erase(std::unique(net.output.begin(), net.output.end()), net.output.end());
    return net;
}

ContractionPath order_of(const Network& net, std::size_t max_bytes = 0) {
    return contraction_order(net.operands, net.output, net.sizes, {.max_intermediate_bytes = max_bytes});
}

using Pairs = std::vector<std::pair<std::size_t, std::size_t>>;

}  // namespace

TEST_CASE("9 to 12 operands: dynamic programming finds the optimum of a plain subset DP") {
    std::mt19937 rng(32);
    for (std::size_t n = 9; n <= 12; ++n)
        for (int trial = 0; trial < (n < 12 ? 5 : 2); ++trial) {
            const Network net =
                random_network(rng, n, n / 3 + static_cast<std::size_t>(trial % 3), 2 + trial % 6);
            const ContractionPath path = order_of(net);
            CAPTURE(n);
            CAPTURE(trial);
            CHECK(path.search == PathSearch::dynamic_programming);
            CHECK(path.optimal);
            REQUIRE(path.pairs.size() == n - 1);
            CHECK(path.optimized_flops == doctest::Approx(subset_optimum(net)));
            CHECK(count(net, path.pairs).flops == doctest::Approx(path.optimized_flops));
        }
}

TEST_CASE("outer products are in the search: two vectors before a large tensor") {
    // x (i), y (j), T (i j k) with k large, and a chain of 7 matrices on k (9 operands): x y first costs
    // |i||j| and spares a pass over T.
    Network net{{{0}, {1}, {0, 1, 2}}, {3, 10}, {3, 4, 50}};
    for (AxisId a = 2; a < 10; ++a) {
        net.operands.push_back({a, a + 1});
        net.sizes.push_back(a == 2 ? 50 : 3);
    }
    net.sizes.push_back(3);
    const ContractionPath path = order_of(net);
    CHECK(path.search == PathSearch::dynamic_programming);
    CHECK(path.optimized_flops == doctest::Approx(subset_optimum(net)));
}

TEST_CASE("golden orders: a chain, a ring, a 4x4 grid and a star") {
    SUBCASE("a chain of 12 matrices, sizes rising and falling") {
        Network net;
        for (AxisId a = 0; a <= 12; ++a) net.sizes.push_back(2 + (a * 7) % 11);
        for (AxisId a = 0; a < 12; ++a) net.operands.push_back({a, a + 1});
        net.output = {0, 12};
        const ContractionPath path = order_of(net);
        CHECK(path.search == PathSearch::dynamic_programming);
        CHECK(path.optimized_flops == doctest::Approx(subset_optimum(net)));
        CHECK(
            path.pairs ==
            Pairs{{9, 10}, {8, 10}, {0, 1}, {0, 8}, {0, 7}, {0, 6}, {0, 5}, {0, 4}, {0, 3}, {1, 2}, {0, 1}});
        CHECK(path.optimized_flops == 1956);
    }
    SUBCASE("a ring of 10 tensors with a physical axis each, bond 8") {
        Network net;
        for (AxisId a = 0; a < 20; ++a) net.sizes.push_back(a < 10 ? 8 : 2);
        for (AxisId t = 0; t < 10; ++t) net.operands.push_back({t, (t + 1) % 10, 10 + t});
        for (Axes& axes : net.operands) std::sort(axes.begin(), axes.end());
        net.output = {10, 11};
        const ContractionPath path = order_of(net);
        CHECK(path.search == PathSearch::dynamic_programming);
        CHECK(path.optimized_flops == doctest::Approx(subset_optimum(net)));
        CHECK(path.optimized_flops == 18944);
    }
    SUBCASE("a 4x4 grid, bond 3, closed") {
        Network net;
        const auto bond = [&] {
            net.sizes.push_back(3);
            return static_cast<AxisId>(net.sizes.size() - 1);
        };
        net.operands.resize(16);
        for (std::size_t r = 0; r < 4; ++r)
            for (std::size_t c = 0; c < 4; ++c) {
                if (c < 3) {
                    const AxisId a = bond();
                    net.operands[r * 4 + c].push_back(a);
                    net.operands[r * 4 + c + 1].push_back(a);
                }
                if (r < 3) {
                    const AxisId a = bond();
                    net.operands[r * 4 + c].push_back(a);
                    net.operands[r * 4 + c + 4].push_back(a);
                }
            }
        for (Axes& axes : net.operands) std::sort(axes.begin(), axes.end());
        const ContractionPath path = order_of(net);
        CHECK(path.search == PathSearch::dynamic_programming);
        CHECK(path.optimized_flops == 11358);
        CHECK(count(net, path.pairs).flops == doctest::Approx(path.optimized_flops));
    }
    SUBCASE("a star: 12 matrices around one shared axis") {
        Network net{{}, {0}, {4}};
        for (AxisId a = 1; a <= 12; ++a) {
            net.operands.push_back({0, a});
            net.sizes.push_back(1 + a % 4);
        }
        const ContractionPath path = order_of(net);
        CHECK(path.search == PathSearch::dynamic_programming);
        CHECK(path.optimized_flops == doctest::Approx(subset_optimum(net)));
        CHECK(path.optimized_flops == 224);
    }
}

TEST_CASE("17 to 100 operands: never worse than opt_einsum's plain greedy, and deterministic") {
    std::mt19937 rng(17);
    for (int trial = 0; trial < 12; ++trial) {
        const std::size_t n = 17 + static_cast<std::size_t>(trial) * 83 / 11;
        const Network net =
            random_network(rng, n, n / 4 + static_cast<std::size_t>(trial % 4), 2 + trial % 7);
        const ContractionPath path = order_of(net);
        CAPTURE(n);
        CHECK_FALSE(path.optimal);
        CHECK((path.search == PathSearch::greedy || path.search == PathSearch::random_greedy));
        REQUIRE(path.pairs.size() == n - 1);
        CHECK(count(net, path.pairs).flops == doctest::Approx(path.optimized_flops));
        CHECK(path.optimized_flops <= plain_greedy(net) * (1 + 1e-9));
        const ContractionPath again = order_of(net);
        CHECK(again.pairs == path.pairs);
    }
}

TEST_CASE("the memory limit: the cheapest order within it, or an error naming the smallest peak") {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 12; ++trial) {
        const std::size_t n = trial < 6 ? 6 : 10;  // the exhaustive search, then dynamic programming
        const Network net = random_network(rng, n, 3, 6);
        const ContractionPath free = order_of(net);
        const Counted unlimited = count(net, free.pairs);
        if (unlimited.peak < 2) continue;
        // Half the peak of the cheapest order (elements of 4 bytes).
        const double limit = std::floor(unlimited.peak / 2);
        const double constrained = subset_optimum(net, limit);
        CAPTURE(trial);
        if (std::isinf(constrained)) {
            CHECK_THROWS_WITH_AS(order_of(net, static_cast<std::size_t>(limit) * 4),
                                 doctest::Contains("no contraction order keeps every intermediate within"),
                                 Error);
            continue;
        }
        const ContractionPath path = order_of(net, static_cast<std::size_t>(limit) * 4);
        CHECK(path.optimal);
        CHECK(count(net, path.pairs).peak <= limit);
        CHECK(path.optimized_flops == doctest::Approx(constrained));
        CHECK(path.optimized_flops >= free.optimized_flops);
    }
    // A 3-operand chain whose every order makes a 100x100 or 100x1000 intermediate.
    const std::vector<Axes> chain{{0, 1}, {1, 2}, {2, 3}};
    const std::vector<std::int64_t> sizes{100, 1000, 100, 1000};
    try {
        contraction_order(chain, Axes{0, 3}, sizes, {.max_intermediate_bytes = 39'999, .element_bytes = 4});
        FAIL("no order fits");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::shape);
        const std::string text = e.what();
        CHECK(text.find("within 39999 bytes") != std::string::npos);
        CHECK(text.find("of any order is 40000 bytes (10000 elements)") != std::string::npos);
    }
    CHECK(contraction_order(chain, Axes{0, 3}, sizes, {.max_intermediate_bytes = 40'000})
              .largest_intermediate == 100000);  // (the output, 100x1000, is not an intermediate)
    // Past 16 operands: the greedy runs keep within it too.
    std::vector<Axes> long_chain;
    std::vector<std::int64_t> long_sizes;
    for (AxisId a = 0; a <= 30; ++a) long_sizes.push_back(a % 2 ? 40 : 3);
    for (AxisId a = 0; a < 30; ++a) long_chain.push_back({a, a + 1});
    const ContractionPath limited = contraction_order(long_chain, Axes{0, 30}, long_sizes,
                                                      {.max_intermediate_bytes = 9 * 8, .element_bytes = 8});
    CHECK(count(Network{long_chain, {0, 30}, long_sizes}, limited.pairs).peak <= 9);
    CHECK_THROWS_AS(contraction_order(long_chain, Axes{0, 30}, long_sizes,
                                      {.max_intermediate_bytes = 8 * 8, .element_bytes = 8}),
                    Error);
}

TEST_CASE("random networks of 9 to 20 operands compute what the reference interpreter does") {
    std::mt19937 rng(9);
    // (sanitized: the first two networks, 72 s with the 17-operand one under ASan - the reference's loops
    // over every axis value are what is slow; the greedy searches' own test runs there too)
    const std::vector<std::size_t> operands =
        testing::sanitized ? std::vector<std::size_t>{9, 11} : std::vector<std::size_t>{9, 11, 13, 17};
    for (const std::size_t n : operands) {
        // (sizes of 2: the reference loops over every combination of axis values)
        Network net = random_network(rng, n, 0, 2);
        std::string pattern;
        std::vector<Tensor> storage;
        std::vector<TensorView> views;
        const auto name = [](AxisId a) { return fmt::format("a{}", a); };
        for (std::size_t o = 0; o < n; ++o) {
            Shape shape;
            std::vector<std::string> names;
            for (const AxisId a : net.operands[o]) {
                shape.push_back(net.sizes[static_cast<std::size_t>(a)]);
                names.push_back(name(a));
            }
            std::vector<double> values(static_cast<std::size_t>(size_of(net.operands[o], net.sizes)));
            for (double& v : values) v = std::uniform_int_distribution<int>(-2, 2)(rng);
            storage.push_back(reference::make_tensor(DType::f64, shape, values));
            views.push_back(storage.back().view());
            pattern += fmt::format("{}{}", o ? ", " : "", fmt::join(names, " "));
        }
        std::vector<std::string> out;
        for (const AxisId a : net.output) out.push_back(name(a));
        pattern += fmt::format(" -> {}", fmt::join(out, " "));
        CAPTURE(pattern);
        const testing::Planned planned =
            testing::bind_and_plan(Call{Op::einsum, pattern, Reduction::none, {}, false, {}}, views);
        REQUIRE(planned.plan.path.has_value());
        CHECK(planned.plan.path->optimal == (n <= 16));
        const reference::PlanRun run = reference::run_plan(planned.plan, views);
        const std::vector<Tensor> expected = reference::evaluate(planned.bound, views);
        std::string difference;
        CHECK_MESSAGE(testing::same_values(run.outputs[0], expected[0].view(), &difference), difference);
    }
}
