// The corpus `einc aot` reads: every kernel a line's plans may launch is collected, over its dtypes and,
// for `?` extents, over sizes that reach every plan shape; a bad line is an error at its file, line and
// column. And the kernel registry the generated code fills. No GPU or CUDA needed.
#include <algorithm>
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "cli/aot_corpus.hpp"
#include "runtime/kernel_registry.hpp"

using namespace einc;

namespace {

std::vector<std::string> kernel_names(const cli::CorpusEntry& entry) {
    std::vector<std::string> names;
    for (const KernelSignature& k : entry.kernels) names.push_back(k.name());
    return names;
}

bool any_contains(const std::vector<std::string>& names, std::string_view part) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

std::string rendered_errors(const std::string& text) {
    std::string out;
    for (const Error& e : cli::read_corpus_text(text, "kernels.txt").errors) out += e.what();
    return out;
}

}  // namespace

TEST_CASE("aot corpus: blank lines and comments are skipped; each call keeps its file and line") {
    const cli::Corpus corpus = cli::read_corpus_text("# a comment\n\nrearrange \"a b -> b a\" 64x64  # transposed\r\n"
                                                     "   \nreduce \"a b -> a\" sum 4x1000\n",
                                                     "kernels.txt");
    REQUIRE(corpus.errors.empty());
    REQUIRE(corpus.entries.size() == 2);
    CHECK(corpus.entries[0].location == "kernels.txt:3");
    CHECK(corpus.entries[0].text == "rearrange \"a b -> b a\" 64x64  # transposed");
    CHECK(corpus.entries[1].location == "kernels.txt:5");
    CHECK(any_contains(kernel_names(corpus.entries[1]), "reduce_rows_sum_f32"));
}

TEST_CASE("aot corpus: --dtype takes a list, and each dtype gets its kernels") {
    const cli::Corpus corpus = cli::read_corpus_text("reduce \"a b -> a\" max 300x1000 --dtype f32,bf16,i8\n", "k.txt");
    REQUIRE(corpus.errors.empty());
    const std::vector<std::string> names = kernel_names(corpus.entries[0]);
    for (const char* dtype : {"max_f32", "max_bf16", "max_i8"}) CHECK_MESSAGE(any_contains(names, dtype), dtype);
    CHECK_FALSE(any_contains(names, "_f16_"));  // (bf16 is asked for, f16 is not)
}

TEST_CASE("aot corpus: `?` extents collect kernels for every size, 64-bit indexing included") {
    const cli::Corpus concrete = cli::read_corpus_text("rearrange \"b c h w -> b h w c\" 8x3x32x32\n", "k.txt");
    const cli::Corpus symbolic = cli::read_corpus_text("rearrange \"b c h w -> b h w c\" ?x3x?x?\n", "k.txt");
    REQUIRE(concrete.errors.empty());
    REQUIRE(symbolic.errors.empty());
    const std::vector<std::string> few = kernel_names(concrete.entries[0]), many = kernel_names(symbolic.entries[0]);
    CHECK_FALSE(any_contains(few, "_i64"));
    CHECK(any_contains(many, "_i64"));
    for (const std::string& name : few) CHECK_MESSAGE(std::find(many.begin(), many.end(), name) != many.end(), name);
    CHECK(many.size() > few.size());
    // Sizes that divide by a group's factor are among those tried.
    CHECK(cli::read_corpus_text("reduce \"b (h 7) (w 13) -> b h w\" max ?x?x?\n", "k.txt").errors.empty());
}

TEST_CASE("aot corpus: a bad line is an error at file:line:column, with a caret, and the others still count") {
    const cli::Corpus corpus = cli::read_corpus_text("rearrange \"a b -> b a\" 3x4\nrearrange \"a b -> b c\" 3x4\n", "kernels.txt");
    CHECK(corpus.entries.size() == 1);
    REQUIRE(corpus.errors.size() == 1);
    CHECK(std::string(corpus.errors[0].what()) ==
          "kernels.txt:2:12: error: axis 'a' appears on the left side only\n"
          "  rearrange \"a b -> b c\" 3x4\n"
          "             ^\n"
          "  help: rearrange keeps every axis: reduce removes axes, repeat adds them\n");
    CHECK(rendered_errors("rearrange \"a b -> b a\" 3x4 --frobnicate\n") ==
          "kernels.txt:1:28: error: unknown option '--frobnicate'\n"
          "  rearrange \"a b -> b a\" 3x4 --frobnicate\n"
          "                             ^^^^^^^^^^^^\n");
    CHECK(rendered_errors("rearrange \"a b -> b a 3x4\n") ==
          "kernels.txt:1:11: error: this quote is never closed\n"
          "  rearrange \"a b -> b a 3x4\n"
          "            ^\n");
    CHECK(rendered_errors("einsum \"i j, j k -> i k\" 2x3 4x5 --dtype f32,bogus\n") ==
          "kernels.txt:1:46: error: unknown dtype 'bogus' (f64 f32 f16 bf16 f8e4m3 f8e5m2 i8 i32 i64 bool)\n"
          "  einsum \"i j, j k -> i k\" 2x3 4x5 --dtype f32,bogus\n"
          "                                               ^^^^^\n");
    CHECK(rendered_errors("--dtype bf16\n") ==  // found by fuzz_corpus: options and no call
          "kernels.txt:1:1: error: this line has options but no call\n"
          "  --dtype bf16\n"
          "  ^^^^^^^\n"
          "  help: write the call as after `einc explain`: <op> \"<pattern>\" <shapes>\n");
    const std::string no_size_fits = rendered_errors("reduce \"(a 17) b -> a\" sum ?x5\n");
    CHECK(no_size_fits.starts_with("kernels.txt:1:9: error: can't divide"));
    CHECK(no_size_fits.find("no size tried for the `?` extents fits") != std::string::npos);
    CHECK(rendered_errors("rearrange \"a b -> b a\" ?x4 (3,4):(1,3)\n").find("`?` sizes go with row-major operands") != std::string::npos);
    CHECK(rendered_errors("rearrange \"a b -> b a\" x.npy\n").find("a corpus gives shapes, not .npy files") != std::string::npos);
}

TEST_CASE("aot corpus: a missing file is an error that names it") {
    CHECK_THROWS_WITH_AS(cli::read_corpus("/nonexistent/kernels.txt"), doctest::Contains("/nonexistent/kernels.txt"), Error);
}

TEST_CASE("kernel registry: a cubin serves its architecture and newer minors; PTX serves newer majors") {
    static const std::string cubin80 = "cubin for sm_80", cubin90 = "cubin for sm_90", ptx90 = "ptx for compute_90";
    const auto bytes = [](const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); };
    CHECK_FALSE(find_ahead_of_time("einc_test_kernel", 90));
    register_ahead_of_time({"einc_test_kernel", 80, BinaryFormat::cubin, bytes(cubin80)});
    register_ahead_of_time({"einc_test_kernel", 90, BinaryFormat::cubin, bytes(cubin90)});
    const auto found = [](int device_arch) {
        const auto k = find_ahead_of_time("einc_test_kernel", device_arch);
        return k ? fmt::format("{} {}", k->format == BinaryFormat::cubin ? "cubin" : "ptx", k->arch) : std::string("none");
    };
    CHECK(found(80) == "cubin 80");
    CHECK(found(86) == "cubin 80");  // same major, newer minor
    CHECK(found(90) == "cubin 90");
    CHECK(found(75) == "none");      // older than anything registered
    CHECK(found(100) == "none");     // a new major: a cubin does not run there
    register_ahead_of_time({"einc_test_kernel", 90, BinaryFormat::ptx, bytes(ptx90)});
    CHECK(found(100) == "ptx 90");   // the driver compiles the PTX
    CHECK(found(90) == "cubin 90");  // a cubin is still preferred where it runs
    CHECK_FALSE(find_ahead_of_time("einc_other_kernel", 90));
}
