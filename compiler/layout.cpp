#include "compiler/layout.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <numeric>

#include "compiler/checked.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {

std::int64_t Layout::size() const {
    for (const Mode& m : modes)
        if (m.extent == 0) return 0;  // even if the other extents would overflow
    std::int64_t n = 1;
    for (const Mode& m : modes) {
        const auto product = checked_mul(n, m.extent);
        if (!product) return std::numeric_limits<std::int64_t>::max();
        n = *product;
    }
    return n;
}

Shape Layout::extents() const {
    Shape out;
    for (const Mode& m : modes) out.push_back(m.extent);
    return out;
}

Shape Layout::strides() const {
    Shape out;
    for (const Mode& m : modes) out.push_back(m.stride);
    return out;
}

std::int64_t Layout::operator()(std::span<const std::int64_t> index) const {
    EINC_ASSERT(index.size() == modes.size());
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < modes.size(); ++k) offset += index[k] * modes[k].stride;
    return offset;
}

std::string to_string(const Layout& layout) {
    return fmt::format("({}):({})", fmt::join(layout.extents(), ","), fmt::join(layout.strides(), ","));
}

Layout make_layout(std::span<const std::int64_t> extents, std::span<const std::int64_t> strides) {
    EINC_ASSERT(extents.size() == strides.size());
    Layout layout;
    for (std::size_t k = 0; k < extents.size(); ++k) layout.modes.push_back(Mode{extents[k], strides[k]});
    return layout;
}

Layout row_major(std::span<const std::int64_t> extents) {
    Layout layout;
    layout.modes.resize(extents.size());
    std::uint64_t stride = 1;  // modulo 2^64, for shapes too large to exist (which bind refuses)
    for (std::size_t k = extents.size(); k-- > 0;) {
        layout.modes[k] = Mode{extents[k], static_cast<std::int64_t>(stride)};
        stride *= static_cast<std::uint64_t>(std::max<std::int64_t>(extents[k], 1));
    }
    return layout;
}

Layout coalesce(const Layout& layout) {
    if (layout.size() == 0) return Layout{{Mode{0, 0}}};
    Layout result;
    for (const Mode& mode : layout.modes) {
        if (mode.extent == 1) continue;
        if (!result.modes.empty() && mergeable(result.modes.back(), mode)) {
            result.modes.back() = Mode{result.modes.back().extent * mode.extent, mode.stride};
        } else {
            result.modes.push_back(mode);
        }
    }
    return result;
}

std::optional<Mode> merge(std::span<const Mode> group) {
    const Layout merged = coalesce(Layout{{group.begin(), group.end()}});
    if (merged.modes.empty()) return Mode{1, 0};
    if (merged.modes.size() == 1) return merged.modes.front();
    return std::nullopt;
}

std::vector<Mode> split(Mode mode, std::span<const std::int64_t> extents) {
    std::vector<Mode> modes(extents.size());
    std::int64_t stride = mode.stride;
    for (std::size_t k = extents.size(); k-- > 0;) {
        modes[k] = Mode{extents[k], stride};
        stride *= extents[k];
    }
    return modes;
}

Layout permute(const Layout& layout, std::span<const std::size_t> order) {
    EINC_ASSERT(order.size() <= layout.rank());
    Layout result;
    for (const std::size_t k : order) {
        EINC_ASSERT(k < layout.rank());
        result.modes.push_back(layout.modes[k]);
    }
    return result;
}

std::vector<std::size_t> order_by_stride(std::span<const Layout> keys) {
    EINC_ASSERT(!keys.empty());
    std::vector<std::size_t> order(keys[0].rank());
    std::iota(order.begin(), order.end(), 0);
    const auto magnitude = [](std::int64_t stride) { return stride < 0 ? -stride : stride; };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        for (const Layout& key : keys) {
            const std::int64_t x = magnitude(key.modes[a].stride), y = magnitude(key.modes[b].stride);
            if (x != y) return x > y;
        }
        return false;
    });
    return order;
}

OffsetRange offset_range(const Layout& layout) {
    if (layout.size() == 0) return {0, 0};
    OffsetRange range{0, 1};
    for (const Mode& m : layout.modes) {
        const std::int64_t reach = (m.extent - 1) * m.stride;
        if (reach < 0)
            range.begin += reach;
        else
            range.end += reach;
    }
    return range;
}

bool may_overlap(const Layout& layout) {
    if (layout.size() <= 1) return false;
    SmallVector<Mode, 8> modes;
    for (const Mode& m : layout.modes)
        if (m.extent > 1) modes.push_back(Mode{m.extent, m.stride < 0 ? -m.stride : m.stride});
    std::sort(modes.begin(), modes.end(), [](Mode a, Mode b) { return a.stride < b.stride; });
    std::int64_t span = 1;  // one past the largest offset reached by the modes so far
    for (const Mode& m : modes) {
        if (m.stride < span) return true;
        span = m.stride * (m.extent - 1) + span;
    }
    return false;
}

std::int64_t distinct_elements(const Layout& layout) {
    Layout stepped;  // the modes that move (a broadcast reads its elements once)
    for (const Mode& m : layout.modes)
        if (m.stride != 0 || m.extent == 0) stepped.modes.push_back(m);
    const std::int64_t n = stepped.size();
    if (n <= 1 || !may_overlap(stepped)) return n;
    const OffsetRange range = offset_range(stepped);  // overlapping: at most every offset it spans
    return std::min(n, range.end - range.begin);
}

}  // namespace einc
