// The grammar, rule by rule, and the syntax tree the actions build.
#include <doctest/doctest.h>
#include <tao/pegtl/contrib/analyze.hpp>

#include "grammar/diagnostic.hpp"
#include "grammar/grammar.hpp"
#include "grammar/parse.hpp"
#include "grammar/print.hpp"

namespace pegtl = tao::pegtl;
namespace g = einc::grammar;
using namespace einc;

namespace {

// Whether `Rule` matches all of `text` (actions off, must<> failures count as no match).
template <typename Rule>
bool matches(std::string_view text) {
    pegtl::memory_input in(text.data(), text.size(), "test");
    try {
        return pegtl::parse<pegtl::seq<Rule, pegtl::eof>>(in);
    } catch (const pegtl::parse_error&) {
        return false;
    }
}

// The error a pattern raises, rendered.
std::string error_of(std::string_view text, syntax::Pattern (*parser)(std::string_view) = parse_einops) {
    try {
        parser(text);
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::syntax);
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("the grammars have no rule that can loop without consuming input") {
    CHECK(pegtl::analyze<g::einops::pattern>(-1) == 0);
    CHECK(pegtl::analyze<g::compact::pattern>(-1) == 0);
    CHECK(pegtl::analyze<g::pack::pattern>(-1) == 0);
}

TEST_CASE("word: letters, digits and underscores") {
    CHECK(matches<g::einops::word>("h"));
    CHECK(matches<g::einops::word>("seq_len2"));
    CHECK(matches<g::einops::word>("42"));
    CHECK(matches<g::einops::word>("_"));
    CHECK_FALSE(matches<g::einops::word>(""));
    CHECK_FALSE(matches<g::einops::word>("h-w"));
    CHECK_FALSE(matches<g::einops::word>("é"));
}

TEST_CASE("ellipsis and arrow are exact tokens") {
    CHECK(matches<g::ellipsis>("..."));
    CHECK_FALSE(matches<g::ellipsis>(".."));
    CHECK_FALSE(matches<g::ellipsis>("...."));
    CHECK(matches<g::arrow>("->"));
    CHECK_FALSE(matches<g::arrow>("-"));
}

TEST_CASE("atom: a word or an ellipsis followed by a separator") {
    CHECK(matches<g::einops::atom>("h"));
    CHECK(matches<g::einops::atom>("..."));
    CHECK_FALSE(matches<g::einops::atom>("b..."));  // must<separator> fails
    CHECK_FALSE(matches<g::einops::atom>("...b"));
}

TEST_CASE("group: one level of parentheses") {
    CHECK(matches<g::einops::group>("(h w)"));
    CHECK(matches<g::einops::group>("()"));
    CHECK(matches<g::einops::group>("( h  2 )"));
    CHECK(matches<g::einops::group>("(...)"));
    CHECK_FALSE(matches<g::einops::group>("(h (w))"));
    CHECK_FALSE(matches<g::einops::group>("(h w"));
}

TEST_CASE("operand: dims separated by spaces, up to ',' '->' or the end") {
    CHECK(matches<g::einops::operand>("b (h w) c"));
    CHECK(matches<g::einops::operand>("  b  "));
    CHECK(matches<g::einops::operand>(""));
    CHECK(matches<g::einops::operand>("h(w)"));  // brackets separate like spaces, as in einops
}

TEST_CASE("pattern: inputs, optional arrow and output") {
    CHECK(matches<g::einops::pattern>("b c -> c b"));
    CHECK(matches<g::einops::pattern>("b i d, b j d -> b i j"));
    CHECK(matches<g::einops::pattern>("a b"));
    CHECK(matches<g::einops::pattern>(" -> "));
    CHECK_FALSE(matches<g::einops::pattern>("a -> b -> c"));
    CHECK_FALSE(matches<g::einops::pattern>("a -> b, c"));
}

TEST_CASE("compact and pack grammars") {
    CHECK(matches<g::compact::pattern>("bij,bjk->bik"));
    CHECK(matches<g::compact::pattern>("...ij,...jk"));
    CHECK(matches<g::compact::pattern>("ii"));
    CHECK_FALSE(matches<g::compact::pattern>("b1"));
    CHECK(matches<g::pack::pattern>("b * c"));
    CHECK(matches<g::pack::pattern>("\tb\n*  c "));
    CHECK_FALSE(matches<g::pack::pattern>("b*c"));
}

TEST_CASE("the syntax tree keeps every atom with its span") {
    const syntax::Pattern p = parse_einops("b (h w) 1 () ... -> b h w");
    REQUIRE(p.inputs.size() == 1);
    REQUIRE(p.output);
    const syntax::Operand& in = p.inputs[0];
    REQUIRE(in.dims.size() == 5);
    CHECK(std::get<syntax::Name>(in.dims[0].atoms[0]).text == "b");
    CHECK(in.dims[1].grouped);
    CHECK(in.dims[1].span == syntax::Span{2, 7});
    CHECK(std::get<syntax::Name>(in.dims[1].atoms[1]).span == syntax::Span{5, 6});
    CHECK(std::get<syntax::Number>(in.dims[2].atoms[0]).value == 1);
    CHECK(in.dims[3].grouped);
    CHECK(in.dims[3].atoms.empty());
    CHECK(std::holds_alternative<syntax::Ellipsis>(in.dims[4].atoms[0]));
    CHECK(in.span == syntax::Span{0, 16});
    CHECK(*p.arrow == syntax::Span{17, 19});
    CHECK(to_string(p) == "b (h w) 1 () ... -> b h w");
}

TEST_CASE("einsum operands and their commas") {
    const syntax::Pattern p = parse_einops("b i d,b j d -> b i j");
    REQUIRE(p.inputs.size() == 2);
    CHECK(p.commas.size() == 1);
    CHECK(p.commas[0] == syntax::Span{5, 6});
    CHECK(to_string(p) == "b i d, b j d -> b i j");
    CHECK(parse_einops(" , a -> a").inputs[0].dims.empty());  // a scalar operand
}

TEST_CASE("compact subscripts: every letter is a dim") {
    const syntax::Pattern p = parse_compact("...ij,jk");
    REQUIRE(p.inputs.size() == 2);
    CHECK(p.inputs[0].dims.size() == 3);
    CHECK_FALSE(p.output);
    CHECK(to_string(p) == "... i j, j k");
}

TEST_CASE("numbers: anonymous axes, and their limits") {
    CHECK(std::get<syntax::Number>(parse_einops("(h 16)").inputs[0].dims[0].atoms[1]).value == 16);
    CHECK(error_of("(h 0)").find("positive length, not 0") != std::string::npos);
    CHECK(error_of("h 99999999999999999999").find("too large") != std::string::npos);
}

TEST_CASE("names follow einops: no leading or trailing underscore, no leading digit") {
    CHECK(is_axis_name("seq_len"));
    CHECK_FALSE(is_axis_name("_b"));
    CHECK_FALSE(is_axis_name("b_"));
    CHECK_FALSE(is_axis_name("2h"));
    CHECK_FALSE(is_axis_name("_"));
    CHECK(is_axis_name("_", /*allow_underscore=*/true));
    CHECK(error_of("b _c -> b").find("'_c' is not a valid axis name") != std::string::npos);
    CHECK(error_of("2h -> h").find("names start with a letter") != std::string::npos);
}

TEST_CASE("syntax errors point at the offending byte") {
    CHECK(error_of("b (h w -> b h w") == "error: unclosed '('\n  b (h w -> b h w\n    ^    ~\n  help: close "
                                         "the group with ')' before the end of this side\n");
    CHECK(error_of("b (h (w)) -> b") ==
          "error: axis groups cannot be nested\n  b (h (w)) -> b\n    ~  ^\n  help: einops allows one level "
          "of grouping: write `(a b c)` instead of `(a (b c))`\n");
    CHECK(error_of("b h) -> b").find("unmatched ')'\n  b h) -> b\n     ^\n") != std::string::npos);
    CHECK(error_of("b% -> b").find("unexpected '%'") != std::string::npos);
    CHECK(error_of("b... -> b").find("missing space between 'b' and '...'") != std::string::npos);
    CHECK(error_of(".... -> b").find("too many dots") != std::string::npos);
    CHECK(error_of("a . b -> a").find("'.' is not an ellipsis") != std::string::npos);
    CHECK(error_of("a - b").find("stray '-'") != std::string::npos);
    CHECK(error_of("a -> b -> c").find("a second '->'\n  a -> b -> c\n    ~~   ^^\n") != std::string::npos);
    CHECK(error_of("a -> b, c").find("',' on the output side") != std::string::npos);
    CHECK(error_of("a\tb -> a b").find("a tab in the pattern") != std::string::npos);
    CHECK(error_of("a * b -> a b").find("'*' outside a pack pattern") != std::string::npos);
    CHECK(error_of("ij,j1->i", parse_compact).find("'1' in compact subscripts") != std::string::npos);
    CHECK(error_of("b ** c", parse_pack).find("missing space between '*' and '*'") != std::string::npos);
}

TEST_CASE("bytes that are not printable ASCII are shown escaped, with the caret aligned") {
    const std::string text = "a \xff b -> a b";
    CHECK(error_of(text) ==
          "error: unexpected byte 0xFF (not ASCII) in pattern\n  a \\xFF b -> a b\n    ^^^^\n"
          "  help: patterns are made of axis names, numbers, `...`, `(`, `)`, `,` and `->`\n");
}
