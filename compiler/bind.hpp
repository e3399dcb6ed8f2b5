// Pass 1: bind. Gives a parsed pattern its meaning for one operation and concrete operand shapes:
// resolves groups and `...` into elementary axes, infers every axis size, and makes every check einops
// makes (and a few it leaves to its backends), each reported as einc::Error with a caret.
#pragma once

#include <span>

#include "compiler/bound.hpp"
#include "compiler/call.hpp"
#include "grammar/syntax.hpp"

namespace einc {

// Reads call.pattern in the notation the operation uses: pack patterns for pack/unpack, compact
// subscripts for einsum when call.compact is set, einops notation otherwise.
syntax::Pattern parse(const Call& call);

// @pre pattern == parse(call)
// @post every axis has a size >= 0; each input dim's extent equals shapes[i][d]; the product of
//       the sizes of every operand fits in int64
Bound bind(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes);

inline Bound bind(const Call& call, std::span<const Shape> shapes) {
    return einc::bind(einc::parse(call), call, shapes);
}

}  // namespace einc
