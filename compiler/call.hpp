// What a user asks einc to do, before any tensor is seen: the operation, the pattern text, the
// reduction, and the axis sizes given by name (`h=4`). This is the key that parses once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shape.hpp"

namespace einc {

enum class Op : std::uint8_t { rearrange, reduce, repeat, einsum, pack, unpack, parse_shape };
enum class Reduction : std::uint8_t { none, sum, mean, max, min, prod, any, all };

std::string_view name_of(Op op);
std::string_view name_of(Reduction reduction);
std::optional<Op> op_named(std::string_view name);
std::optional<Reduction> reduction_named(std::string_view name);  // "sum" ... "all"; not "none"
std::vector<std::string_view> all_reduction_names();
// The reduction a misspelt name most likely meant (`maen` -> `mean`, `average` -> nothing).
std::optional<std::string_view> closest_reduction(std::string_view name);
// The reduction named `name`; else throws einc::Error (usage) that suggests the closest name.
Reduction reduction_or_error(std::string_view name);

// `2x3x10`; a 0-dim shape prints as `scalar`.
std::string format_shape(const Shape& shape);

struct AxisSize {
    std::string name;
    std::int64_t size = 0;
    friend bool operator==(const AxisSize&, const AxisSize&) = default;
};
using AxisSizes = std::vector<AxisSize>;  // in the order given, which error messages keep

struct Call {
    Op op = Op::rearrange;
    std::string pattern;
    Reduction reduction = Reduction::none;  // reduce only
    AxisSizes sizes;
    bool compact = false;              // einsum: read numpy/torch subscripts (`bij,bjk->bik`)
    std::vector<Shape> packed_shapes;  // unpack: the shapes pack returned; one entry may contain -1
    friend bool operator==(const Call&, const Call&) = default;
};

// The call as typed after `einc explain`: `reduce "a (b 2) -> a" max -a b=3`, with --packed shapes and
// --compact where it has them.
std::string format_call(const Call& call);

}  // namespace einc
