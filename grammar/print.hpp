// Printers for the syntax tree: the canonical text of a pattern (single spaces, `, ` and ` -> `), and
// the tree as `einc explain` shows it. Output is stable: golden tests compare it byte for byte.
#pragma once

#include <string>

#include "grammar/syntax.hpp"

namespace einc {

std::string to_string(const syntax::Atom& atom);
std::string to_string(const syntax::Dim& dim);
std::string to_string(const syntax::Operand& operand);
std::string to_string(const syntax::Pattern& pattern);

// One line per operand, dims separated by two spaces:
//   syntax (einops notation)
//     in      b  (h w)  c
//     out     b  h  w  c
std::string print_syntax(const syntax::Pattern& pattern);

}  // namespace einc
