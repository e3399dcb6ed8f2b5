// Runtime shape checks in the spirit of jaxtyping, but enforced: the first check of an axis name binds
// its size, later checks must agree, and a disagreement names the axis, both sizes and where each came from.
//
//   einc::dims d;
//   d.check(x, "batch seq hidden");
//   d.check(y, "batch seq2 hidden");   // throws if y's hidden differs from x's
//   std::int64_t h = d["hidden"];
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "../compiler/call.hpp"
#include "tensor.hpp"

namespace einc {

class dims {
public:
    // Checks `tensor`'s shape against a parse_shape pattern (names, `_`, numbers, one `...`) and binds
    // the names not seen before. Throws einc::Error (kind shape) on a disagreement, with carets.
    void check(const TensorView& tensor, std::string_view pattern);
    std::int64_t operator[](std::string_view name) const;  // throws if the name was never bound
    bool contains(std::string_view name) const;
    AxisSizes sizes() const;  // every bound name, in the order bound: pass them on as axis sizes

private:
    struct Binding {
        std::string name;
        std::int64_t size;
        std::string pattern;  // where it was bound, for the error message
        std::uint32_t begin, end;
        Shape shape;
    };
    std::vector<Binding> bindings_;
};

}  // namespace einc
