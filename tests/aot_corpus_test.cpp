// The corpus `einc aot` reads: every kernel a line's plans may launch is collected, over its dtypes and,
// for `?` extents, over sizes that reach every plan shape; a bad line is an error at its file, line and
// column. And the kernel registry the generated code fills. No GPU or CUDA needed.
#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <sstream>

#include "cli/aot_corpus.hpp"
#include "cli/arguments.hpp"
#include "compiler/bind.hpp"
#include "compiler/gradient.hpp"
#include "compiler/lower.hpp"
#include "compiler/schedule.hpp"
#include "runtime/kernel_registry.hpp"
#include "tests/cli_capture.hpp"
#include "tests/environment.hpp"
#include "tests/sanitized.hpp"
#include "tests/shell_words.hpp"

using namespace einc;

namespace {

std::vector<std::string> kernel_names(const cli::CorpusEntry& entry) {
    std::vector<std::string> names;
    for (const KernelSignature& k : entry.kernels) names.push_back(k.name());
    return names;
}

bool any_contains(const std::vector<std::string>& names, std::string_view part) {
    return std::any_of(names.begin(), names.end(),
                       [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

std::string rendered_errors(const std::string& text) {
    std::string out;
    for (const Error& e : cli::read_corpus_text(text, "kernels.txt").errors) out += e.what();
    return out;
}

}  // namespace

TEST_CASE("aot corpus: blank lines and comments are skipped; each call keeps its file and line") {
    const cli::Corpus corpus =
        cli::read_corpus_text("# a comment\n\nrearrange \"a b -> b a\" 64x64  # transposed\r\n"
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
    const cli::Corpus corpus =
        cli::read_corpus_text("reduce \"a b -> a\" max 300x1000 --dtype f32,bf16,i8\n", "k.txt");
    REQUIRE(corpus.errors.empty());
    const std::vector<std::string> names = kernel_names(corpus.entries[0]);
    for (const char* dtype : {"max_f32", "max_bf16", "max_i8"})
        CHECK_MESSAGE(any_contains(names, dtype), dtype);
    CHECK_FALSE(any_contains(names, "_f16_"));  // (bf16 is asked for, f16 is not)
}

TEST_CASE("aot corpus: `?` extents collect kernels for every size, 64-bit indexing included") {
    const cli::Corpus concrete =
        cli::read_corpus_text("rearrange \"b c h w -> b h w c\" 8x3x32x32\n", "k.txt");
    const cli::Corpus symbolic = cli::read_corpus_text("rearrange \"b c h w -> b h w c\" ?x3x?x?\n", "k.txt");
    REQUIRE(concrete.errors.empty());
    REQUIRE(symbolic.errors.empty());
    const std::vector<std::string> few = kernel_names(concrete.entries[0]),
                                   many = kernel_names(symbolic.entries[0]);
    CHECK_FALSE(any_contains(few, "_i64"));
    CHECK(any_contains(many, "_i64"));
    for (const std::string& name : few)
        CHECK_MESSAGE(std::find(many.begin(), many.end(), name) != many.end(), name);
    CHECK(many.size() > few.size());
    // Sizes that divide by a group's factor are among those tried.
    CHECK(cli::read_corpus_text("reduce \"b (h 7) (w 13) -> b h w\" max ?x?x?\n", "k.txt").errors.empty());
}

TEST_CASE("aot corpus: --backward adds the kernels of the call's gradients, those their schedules launch "
          "among them") {
    const cli::Corpus corpus =
        cli::read_corpus_text("reduce \"b (h 2) -> b h\" max ?x? --dtype f32,bf16\n"
                              "reduce \"b (h 2) -> b h\" max ?x? --dtype f32,bf16 --backward\n",
                              "k.txt");
    REQUIRE(corpus.errors.empty());
    const std::vector<std::string> forward = kernel_names(corpus.entries[0]),
                                   both = kernel_names(corpus.entries[1]);
    CHECK_FALSE(any_contains(forward, "route"));
    CHECK(any_contains(both, "route_max_bf16"));
    for (const std::string& name : forward)
        CHECK_MESSAGE(std::find(both.begin(), both.end(), name) != both.end(), name);
    // what the GPU schedule of the backward launches at some sizes is among them
    for (const Shape& shape : {Shape{3, 8}, Shape{4096, 2}, Shape{1, 1 << 20}}) {
        const Call call{Op::reduce, "b (h 2) -> b h", Reduction::max, {}, false, {}};
        const std::vector<Shape> shapes{shape};
        const Bound bound = bind(call, shapes);
        const std::vector<TensorSpec> inputs{TensorSpec{DType::bf16, shape, row_major_strides(shape)}};
        const Shape out = bound.outputs[0].shape();
        const std::vector<TensorSpec> gradients{TensorSpec{DType::bf16, out, row_major_strides(out)}};
        for (const BackwardPlan& backward : plan_backward(bound, inputs, gradients))
            for (const KernelSignature& k : kernels_of(schedule(backward.plan, Target::gpu(132))))
                CHECK_MESSAGE(std::find(both.begin(), both.end(), k.name()) != both.end(), k.name());
    }
}

TEST_CASE(
    "aot corpus: a bad line is an error at file:line:column, with a caret, and the others still count") {
    const cli::Corpus corpus =
        cli::read_corpus_text("rearrange \"a b -> b a\" 3x4\nrearrange \"a b -> b c\" 3x4\n", "kernels.txt");
    CHECK(corpus.entries.size() == 1);
    REQUIRE(corpus.errors.size() == 1);
    CHECK(
        std::string(corpus.errors[0].what()) ==
        "kernels.txt:2:12: error: 'a' only on the left side, 'c' only on the right side\n"
        "  rearrange \"a b -> b c\" 3x4\n"
        "             ^        ~\n"
        "  help: rearrange keeps every axis, by name on both sides: reduce removes axes, repeat adds them\n");
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
    // A `?` that another operand fixes is not free: the line is bound with every `?` at 0 to find them.
    const std::string fixed = rendered_errors("einsum \"i j, j k -> i k\" ?x? 3x4\n");
    CHECK(
        fixed.starts_with("kernels.txt:1:11: error: axis 'j' has length 0 in operand 0 but 3 in operand 1"));
    CHECK(fixed.find("a `?` must be free to take any length its dim allows") != std::string::npos);
    CHECK(rendered_errors("reduce \"a b -> a\" sum ?x? --dtype f8e4m3\n")
              .find("note: at every size the `?` extents can take") != std::string::npos);
    CHECK(rendered_errors("rearrange \"a b -> b a\" ?x4 (3,4):(1,3)\n")
              .find("`?` sizes go with row-major operands") != std::string::npos);
    CHECK(rendered_errors("rearrange \"a b -> b a\" x.npy\n").find("a corpus gives shapes, not .npy files") !=
          std::string::npos);
}

TEST_CASE(
    "aot corpus: a `?` is any length its dim allows; lines whose kernels no finite set holds, or with too "
    "many size classes, are errors") {
    // (h 17) takes multiples of 17, 0 included: h at 0, 1 and longer.
    const cli::Corpus groups = cli::read_corpus_text("reduce \"(a 17) b -> a\" sum ?x5\n", "k.txt");
    CHECK(groups.errors.empty());
    // The gradient of mean carries 1/n in its kernel: one per length of a `?` it reduces over.
    CHECK(rendered_errors("reduce \"b s e -> b e\" mean ?x?x768 --backward\n") ==
          "kernels.txt:1:11: error: the gradient of mean scales by 1/n, a constant of its kernel: with 's' a "
          "`?` "
          "extent, there is a kernel for every length\n"
          "  reduce \"b s e -> b e\" mean ?x?x768 --backward\n"
          "            ^\n"
          "  help: give the reduced extents, or leave out --backward (the gradient's kernels are then "
          "compiled at "
          "run time)\n");
    CHECK(cli::read_corpus_text("reduce \"b s e -> b s\" mean ?x?x768 --backward\n", "k.txt").errors.empty());
    // Each axis a `?` sizes three ways: nine of them are 3^9 classes, more than the 3^8 planned.
    CHECK(rendered_errors("rearrange \"a b c d e f g h i -> i h g f e d c b a\" ?x?x?x?x?x?x?x?x?\n")
              .starts_with("kernels.txt:1:12: error: this line has 19683 size classes"));
    CHECK(cli::read_corpus_text("rearrange \"a b c d e f g h -> h g f e d c b a\" ?x?x?x?x?x?x?x?\n", "k.txt")
              .errors.empty());
}

TEST_CASE("aot corpus: a missing file is an error that names it") {
    CHECK_THROWS_WITH_AS(cli::read_corpus("/nonexistent/kernels.txt"),
                         doctest::Contains("/nonexistent/kernels.txt"), Error);
}

TEST_CASE("kernel registry: a cubin serves its architecture and newer minors; PTX serves newer majors") {
    static const std::string cubin80 = "cubin for sm_80", cubin90 = "cubin for sm_90",
                             ptx90 = "ptx for compute_90";
    const auto bytes = [](const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); };
    CHECK_FALSE(find_ahead_of_time("einc_test_kernel", 90));
    register_ahead_of_time({"einc_test_kernel", 80, BinaryFormat::cubin, bytes(cubin80)});
    register_ahead_of_time({"einc_test_kernel", 90, BinaryFormat::cubin, bytes(cubin90)});
    const auto found = [](int device_arch) {
        const auto k = find_ahead_of_time("einc_test_kernel", device_arch);
        return k ? fmt::format("{} {}", k->format == BinaryFormat::cubin ? "cubin" : "ptx", k->arch)
                 : std::string("none");
    };
    CHECK(found(80) == "cubin 80");
    CHECK(found(86) == "cubin 80");  // same major, newer minor
    CHECK(found(90) == "cubin 90");
    CHECK(found(75) == "none");   // older than anything registered
    CHECK(found(100) == "none");  // a new major: a cubin does not run there
    register_ahead_of_time({"einc_test_kernel", 90, BinaryFormat::ptx, bytes(ptx90)});
    CHECK(found(100) == "ptx 90");   // the driver compiles the PTX
    CHECK(found(90) == "cubin 90");  // a cubin is still preferred where it runs
    CHECK_FALSE(find_ahead_of_time("einc_other_kernel", 90));
}

namespace {

// A corpus line with every `?` replaced by a size from `size`, and --dtype's list by one dtype: a call as
// `einc explain` takes it.
std::vector<std::string> concrete_call(const std::vector<std::string>& words, const std::string& dtype,
                                       const auto& size) {
    std::vector<std::string> args;
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (words[i] == "--dtype") {
            args.insert(args.end(), {"--dtype", dtype});
            ++i;
            continue;
        }
        std::string word;
        for (const char c : words[i]) word += c == '?' ? std::to_string(size()) : std::string(1, c);
        args.push_back(word);
    }
    return args;
}

}  // namespace

TEST_CASE("aot corpus: the example's kernels serve its calls at random sizes on random GPUs (the kernels are "
          "derived, not sampled)") {
    const cli::Corpus corpus = cli::read_corpus(EINC_EXAMPLE_AOT_CORPUS);
    REQUIRE(corpus.errors.empty());
    const std::vector<KernelSignature> compiled = cli::corpus_kernels(corpus);
    std::mt19937 rng(11);
    // Sizes from 1 to 2^18, log-uniform: unit dims, odd, short and long extents, some past 32-bit counts.
    std::uniform_real_distribution<double> log_size(0, 18);
    const auto size = [&] { return static_cast<std::int64_t>(std::exp2(log_size(rng))); };
    std::uniform_int_distribution<int> multiprocessors(1, 1000);
    std::size_t scheduled = 0, kernels_checked = 0;
    for (const cli::CorpusEntry& entry : corpus.entries) {
        const std::vector<std::string> words = *testing::shell_words(entry.text);
        std::vector<std::string> dtypes{"f32"};
        if (const auto it = std::find(words.begin(), words.end(), "--dtype"); it != words.end()) {
            dtypes.clear();
            std::stringstream list(*(it + 1));
            for (std::string name; std::getline(list, name, ',');) dtypes.push_back(name);
        }
        for (const std::string& dtype : dtypes)
            for (int trial = 0; trial < 40; ++trial) {
                const cli::CallArgs call = cli::parse_call_args(concrete_call(words, dtype, size));
                CAPTURE(entry.text);
                std::vector<Shape> shapes;
                std::vector<TensorSpec> specs;
                for (const cli::OperandArg& operand : call.operands) {
                    shapes.push_back(operand.shape);
                    specs.push_back(
                        TensorSpec{*dtype_named(dtype), operand.shape, row_major_strides(operand.shape)});
                }
                try {
                    const Bound bound = bind(call.call, shapes);
                    for (const bool contiguous : {false, true}) {
                        PlanOptions options;
                        options.contiguous = contiguous;
                        const Schedule gpu =
                            schedule(plan(bound, specs, options), Target::gpu(multiprocessors(rng)));
                        ++scheduled;
                        for (const KernelSignature& k : kernels_of(gpu)) {
                            ++kernels_checked;
                            CHECK_MESSAGE(
                                std::find(compiled.begin(), compiled.end(), k) != compiled.end(), k.name(),
                                " at ",
                                fmt::format("{}",
                                            fmt::join(concrete_call(words, dtype, [&] { return 0; }), " ")));
                        }
                    }
                } catch (const Error&) {
                    // sizes this pattern does not take (a group that does not divide) or too large to address
                }
            }
    }
    MESSAGE(scheduled, " schedules at random sizes, ", kernels_checked,
            " kernel launches, all compiled ahead of time");
    CHECK(scheduled > 2000);
}

// ---- the size classes of `?` extents, against brute force ------------------------------------------------

namespace {

// Lines with `?` extents for every kind of step: views and copies (transposes, vector copies), reductions
// (inner, outer, full; every op), repeats, pack and unpack, einsums of two operands (GEMMs in cuBLAS and,
// for integers, in kernels; elementwise products; copies for a GEMM; diagonals) and of three and four
// (contraction orders), and gradients (routes, repeats, reductions, einsums).
constexpr const char* every_step_kind[] = {
    "rearrange \"a b -> b a\" ?x? --dtype f32,i8",
    "rearrange \"a b c -> b a c\" ?x?x? --dtype f16",
    "rearrange \"a (b c) -> c a b\" ?x? -a c=4 --dtype f64",
    "rearrange \"b c h w -> b (h w c)\" ?x3x?x? --backward",
    "reduce \"a b -> a\" sum ?x? --dtype f32,i32",
    "reduce \"a b -> b\" mean ?x? --dtype bf16",
    "reduce \"a b -> \" max ?x?",
    "reduce \"a b c -> a c\" min ?x?x? --dtype i8",
    "reduce \"a b -> a\" prod ?x? --dtype f64",
    "reduce \"a b c -> b\" any ?x?x? --dtype bool",
    "reduce \"a b -> b\" all ?x? --dtype bool",
    "reduce \"a (b 2) c -> a b\" max ?x?x? --backward",
    "reduce \"a b c -> a c\" prod ?x?x? --backward",
    "reduce \"a b c -> a b\" sum ?x?x? --backward",
    "reduce \"a b -> a\" mean ?x8 --backward",
    "repeat \"a b -> a r b\" ?x? -a r=3 --backward",
    "repeat \"a -> (a 2) b\" ? -a b=5 --dtype bf16",
    "pack \"b * e\" ?x? ?x?x? --backward",
    "unpack \"b * e\" ?x7x? --packed 3 --packed 4 --backward",
    "einsum \"i j, j k -> i k\" ?x? ?x? --dtype i32",
    "einsum \"i j, j k -> k i\" ?x? ?x? --backward",
    "einsum \"b i j, b k j -> b k i\" ?x?x? ?x?x? --dtype i32",
    "einsum \"i l j, j k -> l k i\" ?x?x? ?x? --dtype i32,f32",
    "einsum \"i, i ->\" ? ? --dtype f16",
    "einsum \"i, j -> i j\" ? ? --dtype i32",
    "einsum \"i i -> i\" ?x?",
    "einsum \"b i, b i j -> b j\" ?x? ?x?x? --backward",
    "einsum \"i j, j k, k l -> i l\" ?x? ?x? ?x? --dtype i32,f32",
    "einsum \"b i j, b j k, b k -> b i\" ?x?x? ?x?x? ?x? --backward",
    "einsum \"a b, b c, c d, d e -> a e\" ?x? ?x? ?x? ?x? --dtype i32",
    "einsum \"i j l, l j k -> i k\" ?x?x? ?x?x?",
    "einsum \"a b c, c d, d e -> e b a\" ?x?x? ?x? ?x? --dtype i32",
    "einsum \"a b, c d, b d -> a c\" ?x? ?x? ?x? --dtype i32",
    "einsum \"a b, b c, a c -> b\" ?x? ?x? ?x? --dtype f32",
    "einsum \"i j, j k, k i -> \" ?x? ?x? ?x? --dtype i32",
    "einsum \"b i j, b j k, b k l -> b l i\" 2x?x? 2x?x? 2x?x? --dtype f32",
    "einsum \"a b d, b, d -> a\" ?x?x? ? ? --dtype f32",
    "einsum \"b e, b c, c e -> \" ?x? ?x? ?x? --dtype i32",
};

struct BruteForce {
    std::vector<KernelSignature> kernels;
    std::size_t sizes = 0;  // `?` extents tried, over the dtypes
};

// Whether a line binds with its `?` extents (in order) at `sizes`, and those it has beyond them at 1.
bool binds(const std::vector<std::string>& words, const std::vector<std::int64_t>& sizes) {
    std::size_t next = 0;
    const cli::CallArgs call = cli::parse_call_args(
        concrete_call(words, "f32", [&] { return next < sizes.size() ? sizes[next++] : 1; }));
    std::vector<Shape> shapes;
    for (const cli::OperandArg& operand : call.operands) shapes.push_back(operand.shape);
    try {
        (void)bind(call.call, shapes);
        return true;
    } catch (const Error&) {
        return false;
    }
}

// Adds the `?` extents that take each value of values[i] for the i-th `?`, depth first, to `tuples`;
// false when that would be more than `limit`. An einsum's prefix that does not bind with the rest at 1 is
// dropped: its lone dims of length 1 broadcast, so the rest cannot mend it (what keeps lines whose `?`
// share axes affordable).
bool add_tuples(const std::vector<std::string>& words, const std::vector<std::vector<std::int64_t>>& values,
                bool prune, std::size_t limit, std::vector<std::vector<std::int64_t>>& tuples,
                std::vector<std::int64_t> prefix = {}) {
    if (prefix.size() == values.size()) {
        tuples.push_back(prefix);
        return tuples.size() <= limit;
    }
    for (const std::int64_t v : values[prefix.size()]) {
        prefix.push_back(v);
        if ((!prune || binds(words, prefix)) && !add_tuples(words, values, prune, limit, tuples, prefix))
            return false;
        prefix.pop_back();
    }
    return true;
}

// Every kernel the GPU schedules of a corpus line launch - results as views and fresh, its gradients with
// --backward, on GPUs of 1 and 2^20 multiprocessors (which make every choice of split between them) -
// with each `?` from 0 to 8 (to 5, 3, 2 or 1 where that would be more than 9^4 extents that bind), with
// one `?` past 32-bit counts (2^31 + 1, 2^32) and the others at 1 or 2, and for einsum with each `?` at 1,
// 2, 64 or 4096 (fewer where that is too many).
BruteForce brute_force(const std::string& line) {
    const std::vector<std::string> words = *testing::shell_words(line);
    std::vector<std::string> dtypes{"f32"};
    if (const auto it = std::find(words.begin(), words.end(), "--dtype"); it != words.end()) {
        dtypes.clear();
        std::stringstream list(*(it + 1));
        for (std::string name; std::getline(list, name, ',');) dtypes.push_back(name);
    }
    std::size_t n = 0;
    for (const std::string& word : words)
        n += static_cast<std::size_t>(std::count(word.begin(), word.end(), '?'));
    const bool einsum = words.front() == "einsum";
    // (under the sanitizers 3^4: fewer sizes where a line has three `?` or more)
    constexpr std::size_t limit = testing::sanitized ? 81 : 6561;
    std::vector<std::vector<std::int64_t>> tuples;
    // The first of `value_sets` whose extents are at most `limit`, each `?` taking its values (one `?`
    // at a time taking `one` instead, if given).
    const auto add_first_that_fits = [&](std::initializer_list<std::vector<std::int64_t>> value_sets,
                                         const std::vector<std::int64_t>& one = {}) {
        for (const std::vector<std::int64_t>& values : value_sets)
            for (std::size_t at = 0; at < (one.empty() ? 1 : n); ++at) {
                std::vector<std::vector<std::int64_t>> per_position(n, values), more;
                if (!one.empty()) per_position[at] = one;
                if (!add_tuples(words, per_position, einsum, limit, more)) break;
                tuples.insert(tuples.end(), more.begin(), more.end());
                if (at + 1 == (one.empty() ? 1 : n)) return;
            }
    };
    add_first_that_fits({{0, 1, 2, 3, 4, 5, 6, 7, 8}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3}, {0, 1, 2}, {0, 1}});
    add_first_that_fits({{1, 2}}, {(std::int64_t{1} << 31) + 1, std::int64_t{1} << 32});
    // Einsum's choices that compare sizes (the contraction order, the operands a GEMM copies) want
    // extents far apart.
    if (einsum) add_first_that_fits({{1, 2, 64, 4096}, {1, 64, 4096}, {2, 4096}});

    BruteForce result;
    const auto add = [&](const Schedule& s) {
        for (const KernelSignature& k : kernels_of(s))
            if (std::find(result.kernels.begin(), result.kernels.end(), k) == result.kernels.end())
                result.kernels.push_back(k);
    };
    for (const std::string& dtype : dtypes)
        for (const std::vector<std::int64_t>& tuple : tuples) {
            std::size_t next = 0;
            const cli::CallArgs call =
                cli::parse_call_args(concrete_call(words, dtype, [&] { return tuple[next++]; }));
            ++result.sizes;
            std::vector<TensorSpec> specs;
            for (const cli::OperandArg& operand : call.operands) {
                specs.push_back(
                    TensorSpec{*dtype_named(dtype), operand.shape, row_major_strides(operand.shape)});
            }
            try {
                // Planned as a run plans them: through lower(), which plans the operands' strides.
                const Lowered front = lower(call.call, specs, {.until = Stage::bound});
                for (const bool contiguous : {false, true}) {
                    const Lowered p =
                        lower(front, {.until = Stage::planned, .plan = {.contiguous = contiguous}});
                    for (const int multiprocessors : {1, 1 << 20})
                        add(schedule(p.plan, Target::gpu(multiprocessors)));
                }
                if (call.backward)
                    for (const BackwardPlan& backward :
                         plan_backward(front.bound, front.inputs,
                                       row_major_gradients(lower(front, {.until = Stage::planned}).plan)))
                        for (const int multiprocessors : {1, 1 << 20})
                            add(schedule(backward.plan, Target::gpu(multiprocessors)));
            } catch (const Error&) {
                // sizes the pattern does not take (groups that do not divide, einsum axes that disagree)
            }
        }
    return result;
}

std::vector<std::string> lines_with_unknown_extents(const std::filesystem::path& file) {
    std::vector<std::string> lines;
    for (const cli::CorpusEntry& entry : cli::read_corpus(file).entries)
        if (entry.text.find('?') != std::string::npos) lines.push_back(entry.text);
    return lines;
}

}  // namespace

// The enumeration (cli/aot_corpus.cpp: each axis a `?` sizes at 0, 1 and a prime; each planner choice
// that compares sizes walked every way; each GPU fact both ways) must hold every kernel brute force finds.
// It may hold more, and does: what brute force over small ranges does not reach - splits of reductions
// (many terms and few outputs), vector copies and transposes whose 16-byte words or tiles small extents
// rarely fill, 64-bit variants of kernels whose counts only the large values pass - and what no size
// reaches: each GPU fact is taken both ways for every step (possible_kernels), even where the step's
// nest rules one out, and every GEMM copy and contraction order the planner could take for some sizes,
// even where its cost model never prefers it.
TEST_CASE("aot corpus: the kernels of `?` extents hold every kernel brute force over small sizes finds") {
    std::vector<std::string> lines = lines_with_unknown_extents(EINC_EXAMPLE_AOT_CORPUS);
    for (const std::string& line : lines_with_unknown_extents(EINC_TEST_AOT_CORPUS)) lines.push_back(line);
    lines.insert(lines.end(), std::begin(every_step_kind), std::end(every_step_kind));
    testing::sanitizer_sample(lines);  // (the planner's code is the same for every line)
    std::size_t sizes = 0, found = 0, enumerated = 0;
    for (const std::string& line : lines) {
        CAPTURE(line);
        const cli::Corpus corpus = cli::read_corpus_text(line + "\n", "k.txt");
        REQUIRE(corpus.errors.empty());
        const std::vector<KernelSignature>& derived = corpus.entries[0].kernels;
        const BruteForce brute = brute_force(line);
        for (const KernelSignature& k : brute.kernels)
            CHECK_MESSAGE(std::find(derived.begin(), derived.end(), k) != derived.end(), k.name());
        sizes += brute.sizes;
        found += brute.kernels.size();
        enumerated += derived.size();
    }
    MESSAGE(lines.size(), " lines; brute force tried ", sizes, " sizes and found ", found,
            " kernels (by line); the size classes give ", enumerated);
}

// What `einc aot --list` shows: each line's kernels by name (as a KernelSignature prints), and for a line
// that needs none - a GEMM - that it needs none.
TEST_CASE("aot corpus: --list names each line's kernels, and says which lines need none") {
    const testing::TemporaryDirectory dir("einc-aot-list");
    const std::filesystem::path corpus = dir.path() / "kernels.txt";
    std::ofstream(corpus) << "einsum \"i k, k j -> i j\" 64x64 64x64\n"
                             "reduce \"a b -> a\" sum 300x1000\n";
    const testing::CliResult result = testing::einc_cli({"aot", corpus.string(), "--list"});
    INFO(result.err);
    REQUIRE(result.status == cli::exit_ok);
    const cli::Corpus read = cli::read_corpus(corpus);
    REQUIRE(read.entries.size() == 2);
    REQUIRE(read.entries[0].kernels.empty());
    REQUIRE(!read.entries[1].kernels.empty());
    std::ostringstream printed;
    printed << read.entries[1].kernels[0];
    CHECK(printed.str() == read.entries[1].kernels[0].name());
    std::string expected = fmt::format("{}:1: einsum \"i k, k j -> i j\" 64x64 64x64\n"
                                       "  no kernels: cuBLAS calls and views only\n"
                                       "{}:2: reduce \"a b -> a\" sum 300x1000\n",
                                       corpus.string(), corpus.string());
    for (const KernelSignature& k : read.entries[1].kernels) expected += fmt::format("  {}\n", k.name());
    CHECK(result.out ==
          expected +
              fmt::format("2 calls, {}\n", counted(static_cast<std::int64_t>(read.entries[1].kernels.size()),
                                                   "distinct kernel")));
}
