// Layouts: how an index space maps to memory, as (shape):(stride) pairs in elements - CuTe's notation
// and CuTe's algebra, reduced to what a planner of index expressions needs. A layout maps the index
// (i0, ..., in-1) to the offset sum(ik * stride_k); indices are enumerated row-major (the last mode
// varies fastest), which is how einops flattens a group `(h w)`.
//
//   (2,3,4):(12,4,1)   a row-major 2x3x4 tensor
//   (4,2):(1,4)        a transposed 2x4 matrix
//   (8,3):(0,1)        3 values repeated 8 times (stride 0: broadcast)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "shape.hpp"

namespace einc {

struct Mode {
    std::int64_t extent = 1;
    std::int64_t stride = 0;
    friend bool operator==(const Mode&, const Mode&) = default;
};

struct Layout {
    SmallVector<Mode, 8> modes;  // inline up to rank 8: making and copying a layout allocates nothing

    std::size_t rank() const { return modes.size(); }
    std::int64_t size() const;  // number of indices: product of extents (INT64_MAX if it overflows)
    Shape extents() const;
    Shape strides() const;
    std::int64_t operator()(std::span<const std::int64_t> index) const;  // the offset of an index
    friend bool operator==(const Layout&, const Layout&) = default;
};

// `(2,3):(3,1)`; the empty layout prints as `():()`.
std::string to_string(const Layout& layout);

Layout make_layout(std::span<const std::int64_t> extents, std::span<const std::int64_t> strides);

// @post row-major: the last mode has stride 1, each other mode's stride is the product of the extents after
// it
//       (modulo 2^64 where that product does not fit in int64)
Layout row_major(std::span<const std::int64_t> extents);

// The strides of a row-major (C order) tensor of this shape.
inline Shape row_major_strides(std::span<const std::int64_t> extents) {
    return row_major(extents).strides();
}

// Whether mode `outer` followed by mode `inner` walks memory as one mode of extent outer*inner.
inline bool mergeable(Mode outer, Mode inner) {
    return outer.stride == inner.stride * inner.extent;
}

// Drops extent-1 modes and merges adjacent modes that walk memory as one.
// @post result(flat index) == layout(flat index) for every flat (row-major) index; no mode has extent 1;
//       no two adjacent modes are mergeable. An empty layout or one of size 1 becomes ():().
//       A layout of size 0 is returned as (0):(0).
Layout coalesce(const Layout& layout);

// The single mode a group of modes walks as, if there is one: e.g. `(h w)` over h:(4):(8), w:(8):(1)
// is (32):(1). Extent-1 modes are ignored; an empty group (or all extent 1) is (1):(0).
// @post when engaged: mode(i) == group(unflatten(i)) for every i < product of extents
std::optional<Mode> merge(std::span<const Mode> group);

// Splits one mode into row-major sub-modes of the given extents, e.g. (32):(1) into (4,8):(8,1).
// @pre the product of `extents` is mode.extent (mode.extent itself is not read)
// @post merge(result) == mode (when mode.extent > 1)
std::vector<Mode> split(Mode mode, std::span<const std::int64_t> extents);

// Selects and reorders modes. @pre `order` lists distinct modes;  @post result.modes[k] ==
// layout.modes[order[k]]
Layout permute(const Layout& layout, std::span<const std::size_t> order);

// The modes ordered as memory is laid out, outermost first: by |stride| in keys[0] (largest first), ties
// broken by keys[1], and so on; modes equal in every key keep their order.
// @pre every key has the same rank;  @post a permutation of [0, rank)
std::vector<std::size_t> order_by_stride(std::span<const Layout> keys);

// The smallest and one past the largest offset the layout reaches (the memory it may touch, in elements
// relative to its origin). Empty layouts (size 0) reach nothing: {0, 0}.
struct OffsetRange {
    std::int64_t begin = 0;
    std::int64_t end = 0;
};
OffsetRange offset_range(const Layout& layout);

// Whether two different indices can map to the same offset (a stride 0 with extent > 1, or modes that
// interleave). Exact for layouts whose modes, sorted by |stride|, nest (each stride >= the span of the
// smaller ones); conservative (answers true) otherwise.
bool may_overlap(const Layout& layout);

// The number of distinct elements the layout reads: the product of the extents of the modes with a
// non-zero stride (broadcast modes read their elements once), exact where those do not overlap; where they
// do (a sliding window), at most the offsets they span - exact for windows over one contiguous run.
std::int64_t distinct_elements(const Layout& layout);

}  // namespace einc
