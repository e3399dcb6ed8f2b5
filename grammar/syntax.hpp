// The syntax tree of a pattern: what the user wrote, with the byte span of every node.
// Plain data, built once by parse() and never modified; meaning (sizes, which axes are reduced, what is
// allowed for which operation) is given to it later by compiler/bind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace einc::syntax {

// Half-open byte range [begin, end) into Pattern::text.
struct Span {
    std::uint32_t begin = 0;
    std::uint32_t end = 0;
    friend bool operator==(const Span&, const Span&) = default;
};

struct Name {  // an axis name: `h`, `seq1`, `_` (only where allowed)
    std::string text;
    Span span;
};
struct Number {  // a numeric literal: `1` (a unit axis) or an anonymous axis of that length
    std::int64_t value = 0;
    Span span;
};
struct Ellipsis {  // `...`
    Span span;
};
struct Star {  // `*` in pack/unpack patterns
    Span span;
};
using Atom = std::variant<Name, Number, Ellipsis, Star>;

// One dimension of an operand: a single atom (`h`, `...`, `1`) or a group `(h w)` / `()`.
// A group's atoms are listed in order; einops allows exactly one level of grouping.
struct Dim {
    std::vector<Atom> atoms;
    bool grouped = false;
    Span span;
};

// One side of `->`, or one comma-separated einsum operand.
struct Operand {
    std::vector<Dim> dims;
    Span span;
};

// How the text was read: einops notation (space-separated names) or the numpy/torch compact
// subscripts (`bij,bjk->bik`), which are only read when the caller asks for them.
enum class Notation { einops, compact, pack };

struct Pattern {
    std::string text;
    Notation notation = Notation::einops;
    std::vector<Operand> inputs;    // at least one
    std::optional<Operand> output;  // absent when the pattern has no `->`
    std::optional<Span> arrow;
    std::vector<Span> commas;  // separators between inputs, for diagnostics
};

Span span_of(const Atom& atom);

}  // namespace einc::syntax
