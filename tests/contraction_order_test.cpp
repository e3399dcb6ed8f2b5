// Contraction order: hand-checked optimal orders, and the search checked against brute force over every
// pairwise order.
#include <algorithm>
#include <doctest/doctest.h>
#include <functional>
#include <limits>
#include <random>

#include "compiler/contraction_order.hpp"

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
    const ContractionPath path = contraction_order(operands, Axes{0, 3}, sizes, 8);
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
    const ContractionPath path = contraction_order(operands, Axes{0, 3}, sizes, 8);
    CHECK(path.pairs == std::vector<std::pair<std::size_t, std::size_t>>{{1, 2}, {0, 1}});
    CHECK(path.optimized_flops == 16000);
    CHECK(path.largest_intermediate == 2000);  // the output, 1000x2
}

TEST_CASE("four and five operand chains match brute force") {
    // Four: a b, b c, c d, d e with b and d large: contracting over them early is cheap.
    const std::vector<Axes> four{{0, 1}, {1, 2}, {2, 3}, {3, 4}};
    const std::vector<std::int64_t> four_sizes{8, 64, 4, 64, 8};
    const ContractionPath p4 = contraction_order(four, Axes{0, 4}, four_sizes, 8);
    CHECK(p4.optimized_flops == brute_force(four, Axes{0, 4}, four_sizes));
    // 8x64 * 64x4 = 2*8*64*4 = 4096 -> 8x4; 4x64 * 64x8 = 4096 -> 4x8; 8x4 * 4x8 = 512: 8704 in all.
    CHECK(p4.optimized_flops == 8704);
    const std::vector<Axes> five{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}};
    const std::vector<std::int64_t> five_sizes{3, 40, 2, 50, 6, 7};
    CHECK(contraction_order(five, Axes{0, 5}, five_sizes, 8).optimized_flops ==
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
        const ContractionPath path = contraction_order(operands, output, sizes, 8);
        CHECK(path.pairs.size() == operands.size() - 1);
        CHECK(path.optimized_flops == doctest::Approx(brute_force(operands, output, sizes)));
    }
}

TEST_CASE("past the limit the search is greedy, and stays fast for many operands") {
    std::vector<Axes> chain;
    std::vector<std::int64_t> sizes;
    for (AxisId a = 0; a < 41; ++a) sizes.push_back(2 + a % 5);
    for (AxisId a = 0; a < 40; ++a) chain.push_back({a, a + 1});
    const ContractionPath path = contraction_order(chain, Axes{0, 40}, sizes, 8);
    CHECK_FALSE(path.optimal);
    CHECK(path.pairs.size() == 39);
    CHECK(path.optimized_flops > 0);
    CHECK(path.optimized_flops < path.naive_flops);
}

TEST_CASE("contraction_path: the pairs it is told, with their counts; as they range, every order") {
    const std::vector<Axes> chain{{0, 1}, {1, 2}, {2, 3}, {3, 4}};
    const std::vector<std::int64_t> sizes{8, 64, 4, 64, 8};
    const ContractionPath searched = contraction_order(chain, Axes{0, 4}, sizes, 8);
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
