#include "tests/fuzz/harness.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <numeric>
#include <random>
#include <string_view>

#include "cli/aot_corpus.hpp"
#include "compiler/bind.hpp"
#include "compiler/checked.hpp"
#include "compiler/cost.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/npy.hpp"
#include "runtime/plan_cache.hpp"
#include "runtime/program.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"

namespace einc::fuzz {
namespace {

// Operands run only when this small: the reference interpreter loops over every combination of axis
// values, and the fuzzer should spend its time on many cases, not on big ones.
constexpr std::int64_t max_run_elements = 512;     // per operand and per result
constexpr std::int64_t max_run_iterations = 4096;  // product of every axis size
constexpr std::size_t max_operands = 64;
constexpr std::size_t max_rank = 128;

[[noreturn]] void bug(std::string_view what, std::string_view detail, std::string_view input) {
    const std::string head =
        fmt::format("\n*** einc fuzz: {}\n{}\n--- input ({} bytes) ---\n", what, detail, input.size());
    std::fwrite(head.data(), 1, head.size(), stderr);
    std::fwrite(input.data(), 1, input.size(), stderr);
    std::fputs("\n---\n", stderr);
    std::abort();
}

std::string_view as_text(std::span<const std::uint8_t> bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    std::size_t begin = 0;
    for (std::size_t i = 0; i <= text.size(); ++i)
        if (i == text.size() || text[i] == separator) {
            if (separator != ' ' || i > begin) parts.push_back(text.substr(begin, i - begin));
            begin = i + 1;
        }
    return parts;
}

std::optional<std::int64_t> integer(std::string_view text) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// `2x3x4`, `scalar` (or `-`) for 0-d; nullopt if unreadable.
std::optional<Shape> shape_literal(std::string_view text) {
    if (text == "scalar" || text == "-") return Shape{};
    Shape shape;
    for (const std::string_view part : split(text, 'x')) {
        const auto value = integer(part);
        if (!value || shape.size() >= max_rank) return std::nullopt;
        shape.push_back(*value);
    }
    return shape;
}

std::uint64_t fnv1a(std::string_view text) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    return h;
}

// ---- running small cases ---------------------------------------------------------------------------

struct Operands {
    std::vector<Tensor> storage;
    std::vector<TensorView> views;
    std::vector<Input> inputs;
};

int uniform(std::mt19937_64& rng, int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(rng);
}

// Each operand at a random place in its own buffer: dims permuted, padded, broadcast or reversed.
Operands make_operands(const PatternCase& c, std::mt19937_64& rng) {
    Operands out;
    for (const Shape& shape : c.shapes) {
        const std::size_t rank = shape.size();
        std::vector<std::size_t> order(rank);
        std::iota(order.begin(), order.end(), 0);
        if (uniform(rng, 0, 1)) std::shuffle(order.begin(), order.end(), rng);
        Shape strides(rank, 0);  // an empty tensor (whose other extents may be huge) keeps strides 0
        std::int64_t stride = 1;
        for (std::size_t k = rank; k-- > 0 && *checked_product(shape) > 0;) {
            strides[order[k]] = stride;
            stride *= std::max<std::int64_t>(shape[order[k]], 1) + (uniform(rng, 0, 4) == 0 ? 1 : 0);
        }
        for (std::size_t d = 0; d < rank; ++d) {
            const int pick = uniform(rng, 0, 11);
            if (shape[d] > 1 && pick == 0) strides[d] = 0;
            if (shape[d] > 1 && pick == 1) strides[d] = -strides[d];
        }
        const OffsetRange range = offset_range(make_layout(shape, strides));
        const std::int64_t span = std::max<std::int64_t>(range.end - range.begin, 1);
        std::vector<double> values;
        for (std::int64_t i = 0; i < span; ++i)
            values.push_back(c.dtype == DType::boolean ? uniform(rng, 0, 1) : uniform(rng, -2, 2));
        out.storage.push_back(reference::make_tensor(c.dtype, Shape{span}, values));
        std::byte* origin = static_cast<std::byte*>(out.storage.back().data()) -
                            range.begin * static_cast<std::int64_t>(size_of(c.dtype));
        out.views.push_back(TensorView{origin, c.dtype, shape, strides});
        out.inputs.emplace_back(out.views.back());
    }
    return out;
}

void compare(std::string_view how, const std::vector<TensorView>& got, const std::vector<Tensor>& expected,
             std::string_view input) {
    if (got.size() != expected.size())
        bug(how, fmt::format("{} results, the reference has {}", got.size(), expected.size()), input);
    for (std::size_t k = 0; k < got.size(); ++k) {
        std::string difference;
        if (!testing::same_values(got[k], expected[k].view(), &difference))
            bug(how, fmt::format("result {} differs from the reference: {}", k, difference), input);
    }
}

std::vector<TensorView> views_of(const std::vector<Tensor>& tensors) {
    std::vector<TensorView> views;
    for (const Tensor& t : tensors) views.push_back(t.view());
    return views;
}

bool small_enough(const PatternCase& c) {
    for (const Shape& shape : c.shapes) {
        if (std::any_of(shape.begin(), shape.end(), [](std::int64_t e) { return e < 0; })) return false;
        const auto n = checked_product(shape);
        if (!n || *n > max_run_elements) return false;
    }
    return true;
}

bool small_enough(const Bound& bound) {
    std::int64_t iterations = 1;
    for (const Axis& axis : bound.axes) {
        const auto next = checked_mul(iterations, std::max<std::int64_t>(axis.size, 1));
        if (!next || *next > max_run_iterations) return false;
        iterations = *next;
    }
    for (const BoundOperand& output : bound.outputs) {
        const auto n = checked_product(output.shape());
        if (!n || *n > max_run_elements) return false;
    }
    return true;
}

void run_small(const PatternCase& c, const Expression& expression, std::string_view input) {
    std::mt19937_64 rng(fnv1a(input));
    const Operands operands = make_operands(c, rng);
    const Program program = expression.bind(operands.views);
    if (!small_enough(program.bound())) return;
    std::vector<Tensor> expected;
    try {
        expected = reference::evaluate(program.bound(), operands.views);
    } catch (const Error& error) {
        bug("einc accepted a case the reference interpreter refuses", error.what(), input);
    }
    // 1. The compiled program.
    compare("Program::run", views_of(program.run(operands.inputs)), expected, input);
    // 2. The plan, step by step, by the naive plan interpreter.
    const reference::PlanRun run = reference::run_plan(program.plan(), operands.views);
    compare("the plan interpreter", run.outputs, expected, input);
    // 3. A contiguous program writing into caller outputs.
    const Program contiguous = expression.bind(operands.views, Options{.contiguous = true});
    std::vector<Tensor> outputs;
    for (const TensorSpec& spec : contiguous.plan().outputs)
        outputs.push_back(Tensor::zeros(spec.dtype, spec.shape));
    const std::vector<TensorView> output_views = views_of(outputs);
    contiguous.run(operands.inputs, output_views);
    compare("Program::run into outputs", output_views, expected, input);
    // 4. The plan cache the one-line calls use.
    const CallRef ref{c.call.op,     c.call.pattern, c.call.reduction,
                      &c.call.sizes, c.call.compact, &c.call.packed_shapes};
    const Program cached = default_plan_cache().get(ref, operands.inputs, {});
    compare("the default plan cache", views_of(cached.run(operands.inputs)), expected, input);
    // 5. Zero-copy, when the planner says it can.
    std::optional<Program> viewing;
    try {
        viewing = expression.bind(operands.views, Options{.require_view = true});
    } catch (const Error&) {}
    if (viewing) {
        const std::vector<Tensor> results = viewing->run(operands.inputs);
        for (std::size_t k = 0; k < results.size(); ++k)
            if (!viewing->plan().view_source(k))
                bug("require_view gave a result that is not a view", viewing->explain(), input);
        compare("require_view", views_of(results), expected, input);
    }
}

// Operands too large to run: bind and plan them, on row-major or broadcast layouts (no memory).
void plan_only(const PatternCase& c, const Expression& expression) {
    std::vector<TensorView> views;
    for (const Shape& shape : c.shapes) {
        const bool valid = std::none_of(shape.begin(), shape.end(), [](std::int64_t e) { return e < 0; }) &&
                           checked_product(shape);
        views.push_back(
            TensorView{nullptr, c.dtype, shape, valid ? row_major_strides(shape) : Shape(shape.size(), 0)});
    }
    for (const Options& options : {Options{}, Options{.contiguous = true}}) {
        const Program program = expression.bind(views, options);
        (void)program.explain("h100");
        (void)print_bound(program.bound());
        (void)plan_to_json(program.plan(), program.schedule(), *device_model_named("cpu"));
        // The GPU rules too (no GPU needed): a launch for every step, and every kernel aot would compile.
        (void)print_schedule(program.plan(), schedule(program.plan(), Target::gpu(132)));
        (void)possible_kernels(program.plan(), true);
    }
    std::vector<TensorView> broadcast = views;
    for (TensorView& view : broadcast) std::fill(view.strides.begin(), view.strides.end(), 0);
    (void)expression.bind(broadcast).explain("a100");
}

template <typename Body>
void guard(std::string_view input, Body body) {
    try {
        body();
    } catch (const Error& error) {
        (void)error.what();  // the diagnostic renders
    } catch (const InternalError& error) {
        bug("InternalError", error.what(), input);
    } catch (const std::exception& error) {
        bug("an exception that is not einc::Error", error.what(), input);
    } catch (...) {
        bug("an exception that is not einc::Error", "(not a std::exception)", input);
    }
}

}  // namespace

PatternCase read_pattern_case(std::span<const std::uint8_t> bytes) {
    const std::vector<std::string_view> lines = split(as_text(bytes), '\n');
    const auto line = [&](std::size_t i) { return i < lines.size() ? lines[i] : std::string_view{}; };
    PatternCase c;
    for (const std::string_view word : split(line(0), ' ')) {
        if (const auto op = op_named(word))
            c.call.op = *op;
        else if (const auto reduction = reduction_named(word))
            c.call.reduction = *reduction;
        else if (const auto dtype = dtype_named(word))
            c.dtype = *dtype;
        else if (word == "compact")
            c.call.compact = true;
    }
    c.call.pattern = std::string(line(1));
    for (const std::string_view word : split(line(2), ' '))
        if (const auto shape = shape_literal(word); shape && c.shapes.size() < max_operands)
            c.shapes.push_back(*shape);
    for (const std::string_view word : split(line(3), ' ')) {
        const std::size_t equals = word.find('=');
        if (equals == std::string_view::npos) continue;
        if (const auto size = integer(word.substr(equals + 1)))
            c.call.sizes.push_back(AxisSize{std::string(word.substr(0, equals)), *size});
    }
    for (const std::string_view word : split(line(4), ' '))
        if (const auto shape = shape_literal(word); shape && c.call.packed_shapes.size() < max_operands)
            c.call.packed_shapes.push_back(*shape);
    return c;
}

std::string write_pattern_case(const PatternCase& c) {
    std::string text(name_of(c.call.op));
    if (c.call.reduction != Reduction::none) text += fmt::format(" {}", name_of(c.call.reduction));
    if (c.dtype != DType::f32) text += fmt::format(" {}", name_of(c.dtype));
    if (c.call.compact) text += " compact";
    const auto shapes = [](const std::vector<Shape>& list) {
        std::vector<std::string> words;
        for (const Shape& shape : list)
            words.push_back(shape.empty() ? "scalar" : fmt::format("{}", fmt::join(shape, "x")));
        return fmt::format("{}", fmt::join(words, " "));
    };
    std::vector<std::string> sizes;
    for (const AxisSize& s : c.call.sizes) sizes.push_back(fmt::format("{}={}", s.name, s.size));
    return fmt::format("{}\n{}\n{}\n{}\n{}\n", text, c.call.pattern, shapes(c.shapes), fmt::join(sizes, " "),
                       shapes(c.call.packed_shapes));
}

void check_pattern_case(std::span<const std::uint8_t> bytes) {
    const std::string_view input = as_text(bytes);
    const PatternCase c = read_pattern_case(bytes);
    guard(input, [&] {
        const Expression expression(c.call);
        if (small_enough(c))
            run_small(c, expression, input);
        else
            plan_only(c, expression);
    });
}

void check_npy_case(std::span<const std::uint8_t> bytes) {
    const std::string_view input = as_text(bytes.first(std::min<std::size_t>(bytes.size(), 512)));
    const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
    try {
        const Tensor tensor = read_npy_bytes(file, "fuzz.npy");
        if (tensor.nbytes() > bytes.size())
            bug("read_npy_bytes made a tensor larger than its file", describe(tensor.view()), input);
        const Tensor again = read_npy_bytes(npy_bytes(tensor.view()), "again.npy");
        if (again.dtype() != tensor.dtype() || again.shape() != tensor.shape() ||
            (tensor.nbytes() > 0 && std::memcmp(again.data(), tensor.data(), tensor.nbytes()) != 0))
            bug("a tensor read from a .npy file does not survive writing and reading again",
                fmt::format("{} became {}", describe(tensor.view()), describe(again.view())), input);
    } catch (const Error& error) {
        if (error.kind() != ErrorKind::file)
            bug("read_npy_bytes threw an einc::Error not of kind file", error.what(), input);
        (void)error.what();
    } catch (const std::exception& error) {
        bug("read_npy_bytes threw an exception that is not einc::Error", error.what(), input);
    }
}

void check_corpus_case(std::span<const std::uint8_t> bytes) {
    // A corpus is read line by line: a few lines show everything a long text would, and each `?` line is
    // planned for up to 3^8 size classes (up to 200000 plans with einsum's orders), so longer inputs only
    // slow the fuzzer down.
    const std::string text(as_text(bytes.first(std::min<std::size_t>(bytes.size(), 2048))));
    std::size_t lines = 0;
    for (const std::string_view line : split(text, '\n'))
        lines += line.find_first_not_of(" \t\r") != std::string_view::npos;
    try {
        const cli::Corpus corpus = cli::read_corpus_text(text, "fuzz.txt");
        if (corpus.entries.size() + corpus.errors.size() > lines)
            bug("read_corpus_text found more calls than lines",
                fmt::format("{} entries, {} errors, {} lines", corpus.entries.size(), corpus.errors.size(),
                            lines),
                text);
        for (const Error& error : corpus.errors)
            if (!std::string_view(error.what()).starts_with("fuzz.txt:"))
                bug("a corpus error does not say where it is", error.what(), text);
        (void)cli::corpus_kernels(corpus);
    } catch (const std::exception& error) {
        bug("read_corpus_text threw instead of reporting the line", error.what(), text);
    }
}

}  // namespace einc::fuzz
