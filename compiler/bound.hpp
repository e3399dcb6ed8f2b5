// The bound IR: a pattern with every axis resolved to a size. Produced by bind() from the syntax tree,
// the operands' shapes and the axis sizes given; plain data, immutable once built.
//
// Everything is expressed in *elementary axes*: `b (h w) c` over a 2x32x3 input binds four axes
// b=2 h=4 w=8 c=3, and the input's dim 1 is the group (h w), h varying slowest. An operand is a list of
// dims, each the (possibly empty) list of elementary axes it is composed of.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../grammar/syntax.hpp"
#include "call.hpp"

namespace einc {

using AxisId = std::int32_t;

enum class AxisOrigin : std::uint8_t {
    named,      // `h`
    anonymous,  // `2` in `(h 2)`: a new axis of that length, nameless
    ellipsis,   // one of the dims `...` stands for
    packed,     // pack/unpack: one of the dims `*` stands for, in one part
};

struct Axis {
    std::string name;  // `h`; `...0` for ellipsis axes; `2@5` (length@column) for anonymous ones;
                       // `*1.0` for dim 0 of part 1 of a pack
    std::int64_t size = 0;
    AxisOrigin origin = AxisOrigin::named;
    syntax::Span span;  // where it first appears in the pattern
};

// One dim of an operand. Its extent is the product of its axes' sizes (1 for none) - except the
// concatenated dim of a pack/unpack, whose extent is the sum over the parts (see Bound::concat).
struct BoundDim {
    std::vector<AxisId> axes;  // row-major: the last varies fastest; may repeat an axis (einsum diagonal)
    std::int64_t extent = 1;
    syntax::Span span;
};

struct BoundOperand {
    std::vector<BoundDim> dims;
    syntax::Span span;
    Shape shape() const;
};

// pack/unpack: the packed tensor's dim `dim` is the concatenation of the parts; part i covers
// [offsets[i], offsets[i] + extent of part i) and is the row-major flattening of parts[i].
struct Concat {
    std::size_t dim = 0;
    std::vector<std::vector<AxisId>> parts;
    std::vector<std::int64_t> offsets;
};

struct Bound {
    Op op = Op::rearrange;
    Reduction reduction = Reduction::none;
    syntax::Pattern pattern;  // the spans below point into pattern.text
    std::vector<Axis> axes;
    std::vector<BoundOperand> inputs;
    std::vector<BoundOperand> outputs;  // one, except for unpack (one per part) and parse_shape (none)
    std::vector<AxisId> reduced;        // in an input but not the output: reduced (reduce) or summed (einsum)
    std::vector<AxisId> broadcast;      // in the output but no input (repeat): values repeat along them
    std::optional<Concat> concat;       // pack and unpack

    const Axis& axis(AxisId id) const { return axes.at(static_cast<std::size_t>(id)); }
    std::int64_t size(AxisId id) const { return axis(id).size; }
};

// The sizes parse_shape returns: named axes in pattern order (`_` and `...` are not returned).
AxisSizes parsed_shape(const Bound& bound);

// The shapes pack returns (of each tensor's part at `*`): what unpack needs to split the result again.
// @pre bound.op is pack or unpack
std::vector<Shape> packed_shapes(const Bound& bound);

// The IR as `einc explain` prints it; stable for golden tests:
//   bound rearrange
//     axes  b=2  h=4  w=8  c=3
//     in    2x32x3   b  (h w)  c
//     out   2x4x8x3  b  h  w  c
std::string print_bound(const Bound& bound);

}  // namespace einc
