#include "grammar/parse.hpp"

#include <charconv>
#include <fmt/format.h>

#include "grammar/diagnostic.hpp"
#include "grammar/errors.hpp"
#include "grammar/grammar.hpp"

namespace einc {
namespace {

namespace pegtl = tao::pegtl;
namespace g = grammar;
using syntax::Span;

// What the actions build while the input is read.
struct ParseState {
    syntax::Pattern pattern;
    std::vector<syntax::Dim> dims;     // the operand being read
    std::optional<syntax::Dim> group;  // the group being read, inside that operand
    g::FailureContext context;         // for the error messages

    void add(syntax::Atom atom) {
        const Span span = syntax::span_of(atom);
        context.last_atom = span;
        if (group) {
            group->atoms.push_back(std::move(atom));
        } else {
            dims.push_back(syntax::Dim{{std::move(atom)}, false, span});
        }
    }

    syntax::Operand take_operand(Span matched) {
        // The operand's span covers its dims, not the spaces around them; an empty operand is a point.
        Span span{matched.end, matched.end};
        if (!dims.empty()) span = {dims.front().span.begin, dims.back().span.end};
        return syntax::Operand{std::exchange(dims, {}), span};
    }
};

template <typename ActionInput>
Span span_of(const ActionInput& in) {
    const auto begin = static_cast<std::uint32_t>(in.iterator().byte);
    return Span{begin, begin + static_cast<std::uint32_t>(in.size())};
}

[[noreturn]] void invalid_word(std::string_view text, Span span, std::string_view word, std::string_view why,
                               std::string help) {
    throw Error(ErrorKind::syntax, fmt::format("'{}' is not a valid axis name: {}", word, why))
        .at(text, span)
        .help(std::move(help));
}

// "rename it, e.g. `h`; <why>" for a name with leading or trailing underscores (`_h`, `h_`).
std::string rename_help(std::string_view word, std::string_view why) {
    const std::size_t begin = word.find_first_not_of('_');
    const std::string_view trimmed = begin == std::string_view::npos
                                         ? std::string_view{}
                                         : word.substr(begin, word.find_last_not_of('_') - begin + 1);
    if (!is_axis_name(trimmed)) return std::string(why);
    return fmt::format("rename it, e.g. `{}`; {}", trimmed, why);
}

// A word of the einops notation is a number (an anonymous axis, or 1 for a unit axis) or a name.
syntax::Atom classify_word(std::string_view text, std::string_view word, Span span) {
    if (word.find_first_not_of("0123456789") == std::string_view::npos) {
        std::int64_t value = 0;
        const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
        if (error != std::errc{} || end != word.data() + word.size())
            throw Error(ErrorKind::syntax, fmt::format("axis length {} is too large", word))
                .at(text, span)
                .help("lengths must fit in a signed 64-bit integer");
        if (value == 0)
            throw Error(ErrorKind::syntax, "an anonymous axis must have a positive length, not 0")
                .at(text, span)
                .help("write `1` or `()` for a unit axis, or name the axis and give its size, e.g. `c` with "
                      "c=0");
        return syntax::Number{value, span};
    }
    if (is_axis_name(word, /*allow_underscore=*/true)) return syntax::Name{std::string(word), span};
    if (word.front() >= '0' && word.front() <= '9') {
        const std::size_t digits = word.find_first_not_of("0123456789");
        invalid_word(
            text, span, word, "names start with a letter",
            fmt::format(
                "start the name with a letter, or separate a length from a name with a space: `{} {}`",
                word.substr(0, digits), word.substr(digits)));
    }
    invalid_word(text, span, word, "names may not start or end with '_'",
                 rename_help(word, "einops reserves leading and trailing underscores; a lone `_` is allowed "
                                   "only in einsum and parse_shape"));
}

template <typename Rule>
struct action : pegtl::nothing<Rule> {};

template <>
struct action<g::einops::word> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.add(classify_word(state.pattern.text, in.string_view(), span_of(in)));
    }
};

template <>
struct action<g::ellipsis> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.add(syntax::Ellipsis{span_of(in)});
    }
};

template <>
struct action<g::einops::open_group> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.group = syntax::Dim{{}, true, span_of(in)};
        state.context.open_group = span_of(in);
    }
};

template <>
struct action<g::einops::close_group> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        syntax::Dim group = std::move(*state.group);
        group.span.end = span_of(in).end;
        state.group.reset();
        state.context.open_group.reset();
        state.dims.push_back(std::move(group));
    }
};

template <>
struct action<g::compact::letter> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.add(syntax::Name{in.string(), span_of(in)});
    }
};

template <>
struct action<g::pack::word> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        const std::string_view word = in.string_view();
        if (!is_axis_name(word)) {
            const bool digit = word.front() >= '0' && word.front() <= '9';
            const std::string_view why = "a pack pattern lists axis names and one `*`, e.g. `b * c`";
            invalid_word(state.pattern.text, span_of(in), word,
                         digit ? "names start with a letter" : "names may not start or end with '_'",
                         digit ? std::string(why) : rename_help(word, why));
        }
        state.add(syntax::Name{std::string(word), span_of(in)});
    }
};

template <>
struct action<g::pack::star> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.add(syntax::Star{span_of(in)});
    }
};

struct take_input {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.pattern.inputs.push_back(state.take_operand(span_of(in)));
    }
};
struct take_output {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.pattern.output = state.take_operand(span_of(in));
    }
};
template <>
struct action<g::einops::input> : take_input {};
template <>
struct action<g::einops::output> : take_output {};
template <>
struct action<g::compact::input> : take_input {};
template <>
struct action<g::compact::output> : take_output {};
template <>
struct action<g::pack::pattern> : take_input {};

template <>
struct action<g::comma> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.pattern.commas.push_back(span_of(in));
    }
};

template <>
struct action<g::arrow> {
    template <typename ActionInput>
    static void apply(const ActionInput& in, ParseState& state) {
        state.pattern.arrow = span_of(in);
        state.context.arrow = span_of(in);
    }
};

// The error-message table: which rules are commitment points, and which failure each one reports.
template <typename Rule>
inline constexpr std::optional<g::Failure> failure_of = std::nullopt;
template <>
inline constexpr std::optional<g::Failure> failure_of<g::einops::separator> = g::Failure::missing_separator;
template <>
inline constexpr std::optional<g::Failure> failure_of<g::pack::separator> = g::Failure::missing_separator;
template <>
inline constexpr std::optional<g::Failure> failure_of<g::unexpected_character> =
    g::Failure::unexpected_character;
template <>
inline constexpr std::optional<g::Failure> failure_of<g::einops::group_member> = g::Failure::group_member;
template <>
inline constexpr std::optional<g::Failure> failure_of<g::einops::end> = g::Failure::trailing_output;
template <>
inline constexpr std::optional<g::Failure> failure_of<g::compact::end> = g::Failure::trailing_output;

template <typename Rule>
struct control : pegtl::normal<Rule> {
    template <typename ParseInput>
    [[noreturn]] static void raise(const ParseInput& in, ParseState& state) {
        state.context.at = static_cast<std::size_t>(in.current() - in.begin());
        if constexpr (failure_of<Rule>.has_value())
            g::fail(*failure_of<Rule>, state.pattern.text, state.context);
        // must<> also instantiates raise() for rules that cannot fail (they match the empty string).
        throw InternalError(fmt::format("einc internal error: grammar rule {} failed at byte {} of '{}'",
                                        pegtl::demangle<Rule>(), state.context.at, state.pattern.text));
    }
};

template <typename Grammar>
syntax::Pattern parse_with(std::string_view text, syntax::Notation notation) {
    if (text.size() > max_pattern_bytes)
        throw Error(ErrorKind::syntax, fmt::format("pattern of {} bytes is longer than einc reads ({} bytes)",
                                                   text.size(), max_pattern_bytes));
    ParseState state;
    state.pattern.text = std::string(text);
    state.pattern.notation = notation;
    state.context.notation = notation;
    pegtl::memory_input input(state.pattern.text.data(), state.pattern.text.size(), "pattern");
    const bool matched = pegtl::parse<Grammar, action, control>(input, state);
    EINC_ASSERT(matched);  // the grammars end in must<eof> or raise on every failure
    return std::move(state.pattern);
}

}  // namespace

syntax::Pattern parse_einops(std::string_view text) {
    return parse_with<grammar::einops::pattern>(text, syntax::Notation::einops);
}

syntax::Pattern parse_compact(std::string_view text) {
    return parse_with<grammar::compact::pattern>(text, syntax::Notation::compact);
}

syntax::Pattern parse_pack(std::string_view text) {
    return parse_with<grammar::pack::pattern>(text, syntax::Notation::pack);
}

bool is_axis_name(std::string_view text, bool allow_underscore) {
    if (text.empty()) return false;
    if (text == "_") return allow_underscore;
    const auto is_alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    if (!is_alpha(text.front()) && text.front() != '_') return false;
    if (text.front() == '_' || text.back() == '_') return false;
    for (const char c : text)
        if (!is_alpha(c) && !is_digit(c) && c != '_') return false;
    return true;
}

}  // namespace einc
