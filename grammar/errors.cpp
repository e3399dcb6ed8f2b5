#include "grammar/errors.hpp"

#include <fmt/format.h>

#include "grammar/diagnostic.hpp"

namespace einc::grammar {
namespace {

using syntax::Span;

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The byte at `at` as the user would recognise it.
std::string describe(std::string_view text, std::size_t at) {
    const auto c = static_cast<unsigned char>(text[at]);
    if (c == '\t') return "a tab";
    if (c >= 0x80) return fmt::format("byte 0x{:02X} (not ASCII)", c);
    if (c < 0x20 || c == 0x7F) return fmt::format("control character 0x{:02X}", c);
    return fmt::format("'{}'", static_cast<char>(c));
}

Span here(std::size_t at, std::size_t length = 1) {
    return Span{static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(at + length)};
}

[[noreturn]] void unexpected_character(std::string_view text, const FailureContext& context) {
    const std::size_t at = context.at;
    if (at >= text.size())  // only reachable through a rule that expected more text
        throw Error(ErrorKind::syntax, "pattern ends too early").at(text, here(at, 0));
    const char c = text[at];
    const bool compact = context.notation == syntax::Notation::compact;
    const bool pack = context.notation == syntax::Notation::pack;
    auto error = [&](std::string message) {
        return Error(ErrorKind::syntax, std::move(message)).at(text, here(at));
    };
    if (c == ')') throw error("unmatched ')'").help("every ')' closes a '(' before it on the same side");
    if (pack && c == '.') {
        std::size_t dots = 0;
        while (at + dots < text.size() && text[at + dots] == '.') ++dots;
        throw Error(ErrorKind::syntax, fmt::format("'{}' in a pack pattern", std::string(dots, '.')))
            .at(text, here(at, dots))
            .help("`*` stands for the packed dims and there is no `...`: name the others, e.g. `b * c`");
    }
    if (c == '.') {
        std::size_t dots = 0;
        while (at + dots < text.size() && text[at + dots] == '.') ++dots;
        throw Error(ErrorKind::syntax, fmt::format("'{}' is not an ellipsis", std::string(dots, '.')))
            .at(text, here(at, dots))
            .help("an ellipsis is exactly three dots, `...`");
    }
    if (c == '-' || c == '>')
        throw error(fmt::format("stray '{}'", c)).help("input and output are separated by `->`");
    if (c == '\t') throw error("a tab in the pattern").help("separate axes with spaces, as einops does");
    if (compact && is_word_char(c))
        throw error(fmt::format("'{}' in compact subscripts, which are single letters", c))
            .help("digits and '_' need einops notation: drop --compact and separate names with spaces");
    if (compact && c == '(')
        throw error("groups are not available in compact subscripts").help("drop --compact to use `(h w)`");
    if (pack && (c == '(' || c == ')' || c == '.'))
        throw error(fmt::format("{} in a pack pattern", describe(text, at)))
            .help("a pack pattern lists axis names and one `*`, e.g. `b * c`");
    if (!pack && c == '*')
        throw error("'*' outside a pack pattern")
            .help("`*` is for pack and unpack; use `...` for any number of axes");
    if (c == ',' && pack)
        throw error("',' in a pack pattern")
            .help("a pack pattern lists axis names and one `*`, e.g. `b * c`");
    throw error(fmt::format("unexpected {} in pattern", describe(text, at)))
        .help("patterns are made of axis names, numbers, `...`, `(`, `)`, `,` and `->`");
}

[[noreturn]] void missing_separator(std::string_view text, const FailureContext& context) {
    const std::size_t at = context.at;
    const Span atom = context.last_atom.value_or(here(at, 0));
    const std::string_view previous = text.substr(atom.begin, atom.end - atom.begin);
    const char c = text[at];
    if (previous == "..." && c == '.') {
        std::size_t end = at;
        while (end < text.size() && text[end] == '.') ++end;
        throw Error(ErrorKind::syntax, "too many dots")
            .at(text, Span{atom.begin, static_cast<std::uint32_t>(end)})
            .help("an ellipsis is exactly three dots, `...`");
    }
    // Only a whole `...` can follow a name without a space being the problem; `a.b`, `a..` are stray dots.
    std::size_t dots = 0;
    while (at + dots < text.size() && text[at + dots] == '.') ++dots;
    const bool pack = context.notation == syntax::Notation::pack;
    if ((c == '.' && dots == 3 && !pack) || (previous == "..." && is_word_char(c)) ||
        (pack && (c == '*' || is_word_char(c)))) {
        // The token that follows: `...`, one `*`, or a word.
        std::size_t next_end = at + (c == '.' ? 3 : c == '*' ? 1 : 0);
        if (c != '.' && c != '*')
            while (next_end < text.size() && is_word_char(text[next_end])) ++next_end;
        throw Error(ErrorKind::syntax, fmt::format("missing space between '{}' and '{}'", previous,
                                                   text.substr(at, next_end - at)))
            .at(text, here(at, next_end - at))
            .also(atom)
            .help(fmt::format("write `{} {}`", previous, text.substr(at, next_end - at)));
    }
    unexpected_character(text, context);
}

[[noreturn]] void group_member(std::string_view text, const FailureContext& context) {
    const std::size_t at = context.at;
    const Span open = context.open_group.value_or(here(at, 0));
    if (at < text.size() && text[at] == '(')
        throw Error(ErrorKind::syntax, "axis groups cannot be nested")
            .at(text, here(at))
            .also(open)
            .help("einops allows one level of grouping: write `(a b c)` instead of `(a (b c))`");
    const bool ends_side = at >= text.size() || text[at] == ',' || text.substr(at, 2) == "->";
    if (ends_side)
        throw Error(ErrorKind::syntax, "unclosed '('")
            .at(text, open)
            .also(here(at, 0))
            .help("close the group with ')' before the end of this side");
    unexpected_character(text, context);
}

[[noreturn]] void trailing_output(std::string_view text, const FailureContext& context) {
    const std::size_t at = context.at;
    if (text.substr(at, 2) == "->") {
        auto error = Error(ErrorKind::syntax, "a second '->'").at(text, here(at, 2));
        if (context.arrow) error.also(*context.arrow);
        throw std::move(error).help("a pattern has one input side and one output side");
    }
    if (text[at] == ',')
        throw Error(ErrorKind::syntax, "',' on the output side")
            .at(text, here(at))
            .help("',' separates einsum inputs; every operation has exactly one output");
    unexpected_character(text, context);
}

}  // namespace

void fail(Failure failure, std::string_view text, const FailureContext& context) {
    switch (failure) {
    case Failure::missing_separator: missing_separator(text, context);
    case Failure::unexpected_character: unexpected_character(text, context);
    case Failure::group_member: group_member(text, context);
    case Failure::trailing_output: trailing_output(text, context);
    }
    EINC_ASSERT(false);
}

}  // namespace einc::grammar
