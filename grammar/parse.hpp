// Reading pattern text into the syntax tree. Throws einc::Error (kind syntax) with a caret at the first
// byte that cannot be part of a valid pattern.
#pragma once

#include <string_view>

#include "grammar/syntax.hpp"

namespace einc {

// Longest pattern einc reads; longer text is refused before parsing (spans are 32-bit).
inline constexpr std::size_t max_pattern_bytes = 1u << 24;

// einops notation: `b (h w) c -> b h w c`, `b i d, b j d -> b i j`. The `->` is optional here; whether
// an operation needs it is decided when binding.
syntax::Pattern parse_einops(std::string_view text);

// numpy/torch compact subscripts: every letter an axis, `...` allowed, output optional (`bij,bjk`).
syntax::Pattern parse_compact(std::string_view text);

// pack/unpack patterns: names and exactly one `*`, separated by blanks (`b * c`).
syntax::Pattern parse_pack(std::string_view text);

// Whether `text` is an axis name einops accepts: an identifier that neither starts nor ends with `_`.
// `allow_underscore` additionally accepts the lone `_` (einsum and parse_shape allow it).
bool is_axis_name(std::string_view text, bool allow_underscore = false);

}  // namespace einc
