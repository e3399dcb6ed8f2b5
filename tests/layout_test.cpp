// Layout algebra and loop-nest canonicalization, tested as properties on random layouts: every index of
// the transformed layout reaches the same element as the original.
#include <algorithm>
#include <doctest/doctest.h>
#include <map>
#include <random>
#include <set>

#include "compiler/canonicalize.hpp"
#include "compiler/layout.hpp"

using namespace einc;

namespace {

// Row-major unflattening of `flat` over `extents`.
std::vector<std::int64_t> unflatten(std::int64_t flat, std::span<const std::int64_t> extents) {
    std::vector<std::int64_t> index(extents.size());
    for (std::size_t k = extents.size(); k-- > 0;) {
        index[k] = flat % extents[k];
        flat /= extents[k];
    }
    return index;
}

std::int64_t offset_at(const Layout& layout, std::int64_t flat) {
    return layout(unflatten(flat, layout.extents()));
}

// Random layouts: a permuted row-major tensor (possibly sliced), with some broadcast and unit modes.
Layout random_layout(std::mt19937& rng, bool allow_broadcast = true) {
    std::uniform_int_distribution<int> rank_of(0, 5), extent_of(1, 4), coin(0, 3);
    const int rank = rank_of(rng);
    std::vector<std::int64_t> extents;
    for (int k = 0; k < rank; ++k) extents.push_back(extent_of(rng));
    Layout dense = row_major(extents);
    if (coin(rng) == 0 && rank > 0) dense.modes.back().stride = 1;  // keep
    if (coin(rng) == 0)
        for (Mode& m : dense.modes) m.stride *= 2;  // a slice: every other element
    std::vector<std::size_t> order(static_cast<std::size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    Layout layout = permute(dense, order);
    if (allow_broadcast)
        for (Mode& m : layout.modes)
            if (coin(rng) == 0) m.stride = 0;
    return layout;
}

}  // namespace

TEST_CASE("row_major: the last mode is contiguous") {
    CHECK(to_string(row_major(std::vector<std::int64_t>{2, 3, 4})) == "(2,3,4):(12,4,1)");
    CHECK(to_string(row_major(std::vector<std::int64_t>{})) == "():()");
    CHECK(row_major_strides(std::vector<std::int64_t>{2, 0, 3}) == Shape{3, 3, 1});
}

TEST_CASE("coalesce: examples") {
    CHECK(to_string(coalesce(make_layout(std::vector<std::int64_t>{2, 3, 4},
                                         std::vector<std::int64_t>{12, 4, 1}))) == "(24):(1)");
    CHECK(to_string(coalesce(make_layout(std::vector<std::int64_t>{2, 1, 4},
                                         std::vector<std::int64_t>{1, 7, 2}))) == "(2,4):(1,2)");
    CHECK(to_string(coalesce(
              make_layout(std::vector<std::int64_t>{3, 4}, std::vector<std::int64_t>{0, 0}))) == "(12):(0)");
    CHECK(to_string(coalesce(
              make_layout(std::vector<std::int64_t>{1, 1}, std::vector<std::int64_t>{5, 9}))) == "():()");
    CHECK(to_string(coalesce(
              make_layout(std::vector<std::int64_t>{3, 0}, std::vector<std::int64_t>{1, 1}))) == "(0):(0)");
}

TEST_CASE("coalesce: property - same offsets, no unit modes, no mergeable neighbours") {
    std::mt19937 rng(1);
    for (int trial = 0; trial < 2000; ++trial) {
        const Layout layout = random_layout(rng);
        const Layout merged = coalesce(layout);
        REQUIRE(merged.size() == layout.size());
        for (std::int64_t i = 0; i < layout.size(); ++i)
            REQUIRE(offset_at(merged, i) == offset_at(layout, i));
        for (const Mode& m : merged.modes) CHECK(m.extent != 1);
        for (std::size_t k = 1; k < merged.rank(); ++k)
            CHECK_FALSE(mergeable(merged.modes[k - 1], merged.modes[k]));
    }
}

TEST_CASE("merge: a group is one mode exactly when coalesce leaves at most one") {
    const std::vector<Mode> hw{{4, 8}, {8, 1}};
    CHECK(merge(hw) == Mode{32, 1});
    const std::vector<Mode> wh{{8, 1}, {4, 8}};
    CHECK_FALSE(merge(wh).has_value());
    CHECK(merge(std::vector<Mode>{}) == Mode{1, 0});
    std::mt19937 rng(2);
    for (int trial = 0; trial < 2000; ++trial) {
        const Layout layout = random_layout(rng);
        const auto mode = merge(layout.modes);
        CHECK(mode.has_value() == (coalesce(layout).rank() <= 1));
        if (!mode) continue;
        for (std::int64_t i = 0; i < layout.size(); ++i) REQUIRE(i * mode->stride == offset_at(layout, i));
    }
}

TEST_CASE("split: row-major sub-modes that merge back") {
    const std::vector<std::int64_t> extents{2, 3, 5};
    const std::vector<Mode> parts = split(Mode{30, 7}, extents);
    CHECK(parts == std::vector<Mode>{{2, 105}, {3, 35}, {5, 7}});
    CHECK(merge(parts) == Mode{30, 7});
    for (std::int64_t i = 0; i < 30; ++i) CHECK(offset_at(Layout{{parts.begin(), parts.end()}}, i) == 7 * i);
}

TEST_CASE("permute: mode k of the result is mode order[k]") {
    const Layout layout =
        make_layout(std::vector<std::int64_t>{2, 3, 4}, std::vector<std::int64_t>{12, 4, 1});
    const std::vector<std::size_t> order{2, 0, 1};
    const Layout permuted = permute(layout, order);
    CHECK(to_string(permuted) == "(4,2,3):(1,12,4)");
    for (std::int64_t i = 0; i < 4; ++i)
        for (std::int64_t j = 0; j < 2; ++j)
            for (std::int64_t k = 0; k < 3; ++k)
                CHECK(permuted(std::vector<std::int64_t>{i, j, k}) ==
                      layout(std::vector<std::int64_t>{j, k, i}));
}

TEST_CASE("offset_range, may_overlap and distinct_elements against brute force") {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 2000; ++trial) {
        Layout layout = random_layout(rng);
        if (trial % 3 == 0 && layout.rank() > 0) layout.modes.front().stride = -layout.modes.front().stride;
        std::set<std::int64_t> offsets;
        std::int64_t lowest = 0, highest = -1;
        for (std::int64_t i = 0; i < layout.size(); ++i) {
            const std::int64_t o = offset_at(layout, i);
            offsets.insert(o);
            lowest = i == 0 ? o : std::min(lowest, o);
            highest = i == 0 ? o : std::max(highest, o);
        }
        const OffsetRange range = offset_range(layout);
        CHECK(range.begin == lowest);
        CHECK(range.end == highest + 1);
        const bool overlaps = static_cast<std::int64_t>(offsets.size()) < layout.size();
        if (overlaps) CHECK(may_overlap(layout));
        Layout without_broadcast;
        for (const Mode& m : layout.modes)
            if (m.stride != 0) without_broadcast.modes.push_back(m);
        if (!may_overlap(without_broadcast))
            CHECK(distinct_elements(layout) == static_cast<std::int64_t>(offsets.size()));
    }
    CHECK(may_overlap(
        make_layout(std::vector<std::int64_t>{4, 4}, std::vector<std::int64_t>{1, 2})));  // interleaved
    CHECK_FALSE(may_overlap(make_layout(std::vector<std::int64_t>{4, 4}, std::vector<std::int64_t>{1, 4})));
}

TEST_CASE("canonicalize: the same element tuples, in fewer modes") {
    std::mt19937 rng(4);
    for (int trial = 0; trial < 1000; ++trial) {
        // A destination and two sources over one index space: permutations of row-major tensors.
        const Layout dst = random_layout(rng, false);
        std::vector<Layout> accesses{dst};
        for (int s = 0; s < 2; ++s) {
            Layout src = random_layout(rng);
            src.modes.resize(dst.rank());
            for (std::size_t k = 0; k < dst.rank(); ++k) src.modes[k].extent = dst.modes[k].extent;
            accesses.push_back(src);
        }
        if (trial % 4 == 0 && dst.rank() > 0) accesses[0].modes.back().stride = 0;  // a reduced mode
        std::multiset<std::vector<std::int64_t>> before, after;
        for (std::int64_t i = 0; i < dst.size(); ++i) {
            std::vector<std::int64_t> tuple;
            for (const Layout& l : accesses) tuple.push_back(offset_at(l, i));
            before.insert(tuple);
        }
        std::vector<Layout> canonical = accesses;
        canonicalize(canonical);
        for (const Layout& l : canonical) REQUIRE(l.size() == dst.size());
        for (std::int64_t i = 0; i < canonical[0].size(); ++i) {
            std::vector<std::int64_t> tuple;
            for (const Layout& l : canonical) tuple.push_back(offset_at(l, i));
            after.insert(tuple);
        }
        CHECK(before == after);
        for (const Mode& m : canonical[0].modes) CHECK((m.extent != 1 || canonical[0].size() == 0));
    }
}

TEST_CASE("canonicalize: a transpose keeps two modes, a contiguous copy becomes one") {
    std::vector<Layout> transpose{
        make_layout(std::vector<std::int64_t>{4, 8}, std::vector<std::int64_t>{8, 1}),
        make_layout(std::vector<std::int64_t>{4, 8}, std::vector<std::int64_t>{1, 4})};
    canonicalize(transpose);
    CHECK(to_string(transpose[0]) == "(4,8):(8,1)");
    CHECK(to_string(transpose[1]) == "(4,8):(1,4)");
    std::vector<Layout> copy{
        make_layout(std::vector<std::int64_t>{2, 3, 4}, std::vector<std::int64_t>{12, 4, 1}),
        make_layout(std::vector<std::int64_t>{2, 3, 4}, std::vector<std::int64_t>{24, 8, 2})};
    canonicalize(copy);
    CHECK(to_string(copy[0]) == "(24):(1)");
    CHECK(to_string(copy[1]) == "(24):(2)");
}
