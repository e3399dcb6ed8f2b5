// What the user is told when the grammar cannot go on (kept apart from the rules and the actions).
// Internal to grammar/.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "grammar/syntax.hpp"

namespace einc::grammar {

// Which commitment point failed; the message also depends on the byte found there.
enum class Failure {
    missing_separator,     // after an atom: `2h`, `b...`, `....`
    unexpected_character,  // where an atom, a group or a separator should start
    group_member,          // inside `( ... )`: a nested `(`, or EOF / `,` / `->` before `)`
    trailing_output,       // after the output: a second `->`, a `,`
};

// Where the failure happened and what the parser knew at that point.
struct FailureContext {
    syntax::Notation notation = syntax::Notation::einops;
    std::size_t at = 0;                      // byte offset of the failure
    std::optional<syntax::Span> open_group;  // the `(` of the group being read
    std::optional<syntax::Span> arrow;       // the first `->`
    std::optional<syntax::Span> last_atom;   // the atom just read
};

[[noreturn]] void fail(Failure failure, std::string_view text, const FailureContext& context);

}  // namespace einc::grammar
