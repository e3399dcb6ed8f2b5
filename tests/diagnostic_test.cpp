// Rendering of diagnostics: caret lines, escapes, long patterns.
#include <doctest/doctest.h>

#include "grammar/diagnostic.hpp"

using namespace einc;
using syntax::Span;

TEST_CASE("primary labels get ^, secondary ones ~, notes and help follow") {
    const Error e = Error(ErrorKind::pattern, "axis 'h' appears twice on the left side of rearrange")
                        .at("b h (h w) -> b w h", Span{2, 3})
                        .also(Span{5, 6})
                        .note("input has shape 2x3x12")
                        .help("use einsum for diagonals");
    CHECK(std::string(e.what()) == "error: axis 'h' appears twice on the left side of rearrange\n"
                                   "  b h (h w) -> b w h\n"
                                   "    ^  ~\n"
                                   "  note: input has shape 2x3x12\n"
                                   "  help: use einsum for diagonals\n");
}

TEST_CASE("a label spans its bytes; an empty span is one caret") {
    CHECK(render(Diagnostic{ErrorKind::pattern, "m", "ab (cd ef)", {{Span{3, 10}, true}}, {}, {}, {}}) ==
          "error: m\n  ab (cd ef)\n     ^^^^^^^\n");
    CHECK(render(Diagnostic{ErrorKind::pattern, "m", "ab", {{Span{2, 2}, true}}, {}, {}, {}}) ==
          "error: m\n  ab\n    ^\n");
}

TEST_CASE("a primary label wins where it overlaps a secondary one") {
    CHECK(render(Diagnostic{
              ErrorKind::pattern, "m", "abcdef", {{Span{1, 3}, true}, {Span{0, 6}, false}}, {}, {}, {}}) ==
          "error: m\n  abcdef\n  ~^^~~~\n");
}

TEST_CASE("no source: no caret lines") {
    CHECK(render(Diagnostic{
              ErrorKind::usage, "unknown reduction 'maen'", "", {}, {}, "did you mean 'mean'?", {}}) ==
          "error: unknown reduction 'maen'\n  help: did you mean 'mean'?\n");
}

TEST_CASE("UTF-8 counts one column per character; invalid bytes are escaped") {
    CHECK(render(Diagnostic{ErrorKind::syntax, "m", "\xc3\xa9 x", {{Span{3, 4}, true}}, {}, {}, {}}) ==
          "error: m\n  \xc3\xa9 x\n    ^\n");
    CHECK(render(Diagnostic{ErrorKind::syntax, "m", "\x01x", {{Span{1, 2}, true}}, {}, {}, {}}) ==
          "error: m\n  \\x01x\n      ^\n");
}

TEST_CASE("a long pattern is shown as a window around the error") {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "a ";
    text += "%";
    const auto at = static_cast<std::uint32_t>(text.size() - 1);
    const std::string shown =
        render(Diagnostic{ErrorKind::syntax, "m", text, {{Span{at, at + 1}, true}}, {}, {}, {}});
    const auto lines_start = shown.find('\n') + 1;
    const std::string source_line = shown.substr(lines_start, shown.find('\n', lines_start) - lines_start);
    const std::string caret_line = shown.substr(shown.find('\n', lines_start) + 1);
    CHECK(source_line.size() < 120);
    CHECK(source_line.find("...") == 2);
    CHECK(caret_line.find('^') == source_line.find('%'));
}

TEST_CASE("a diagnostic read from a file starts with its file:line:column, as compilers print") {
    CHECK(
        render(Diagnostic{ErrorKind::pattern, "m", "x y", {{Span{2, 3}, true}}, {}, {}, "kernels.txt:4:3"}) ==
        "kernels.txt:4:3: error: m\n  x y\n    ^\n");
}

TEST_CASE("internal errors are a different type") {
    CHECK_THROWS_AS(EINC_ASSERT(1 + 1 == 3), InternalError);
}
