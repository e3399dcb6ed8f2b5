// Conformance with einops: every rearrange / reduce / repeat / einsum / pack / unpack / parse_shape example
// of einops' documentation, replayed through einc's one-line API and compared with what einops returned
// (tests/conformance/einops_examples.txt, written by scripts/generate-conformance; its header describes
// the format). Shapes, dtypes and every value must agree: integers exactly, floats within a relative
// tolerance (einops' mean is numpy's mean, summed in another order). A case einops refuses must make einc
// throw einc::Error too; a case marked `einc-error` is one einc deliberately refuses, with that message, and
// one marked `einc-extension` one einops refuses but einc deliberately accepts (compared with einops' result
// for an equivalent call).
// "conformance: live einops" runs a few random calls through einops itself, when python3 has it.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "einc/einc.hpp"
#include "tests/reference/reference.hpp"

using namespace einc;

namespace {

// ----------------------------------------------------------------------------------------------------------
// The data file

struct Operand {
    DType dtype = DType::f64;
    Shape shape;
};

struct Result {
    DType dtype = DType::f64;
    Shape shape;
    std::vector<double> values;  // row-major; exact for the integers of the file (all below 2^53)
};

struct Case {
    int number = 0;
    int line = 0;  // of `case` in the file
    std::string op, source, call, note, pattern, reduction;
    bool compact = false;
    bool list = false;
    AxisSizes sizes;
    std::vector<Operand> inputs;
    std::vector<Shape> packed;         // unpack: given
    std::vector<Shape> packed_shapes;  // pack: returned by einops
    AxisSizes axes;                    // parse_shape: returned by einops
    std::vector<Result> outputs;
    bool einops_refuses = false;
    std::string einops_error;
    std::string einc_error;      // einc deliberately refuses; its message contains this
    std::string einc_extension;  // einops refuses but einc deliberately accepts; outputs from this equivalent

    std::string title() const {
        return "case " + std::to_string(number) + ": " + call + "  [" + source + "]";
    }
};

[[noreturn]] void malformed(const std::string& path, int line, const std::string& what) {
    throw std::runtime_error(path + ":" + std::to_string(line) + ": " + what);
}

std::vector<std::string> words(std::string_view text) {
    std::vector<std::string> out;
    std::istringstream in{std::string(text)};
    for (std::string word; in >> word;) out.push_back(word);
    return out;
}

std::int64_t integer(const std::string& text, const std::string& path, int line) {
    std::size_t used = 0;
    std::int64_t value = 0;
    try {
        value = std::stoll(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || text.empty()) malformed(path, line, "not an integer: '" + text + "'");
    return value;
}

// `[6,96,96,3]`, `[]` for a scalar
Shape shape_of(const std::string& text, const std::string& path, int line) {
    if (text.size() < 2 || text.front() != '[' || text.back() != ']')
        malformed(path, line, "not a shape: " + text);
    Shape shape;
    std::string inner = text.substr(1, text.size() - 2);
    std::istringstream in(inner);
    for (std::string extent; std::getline(in, extent, ',');) shape.push_back(integer(extent, path, line));
    return shape;
}

DType dtype_of(const std::string& text, const std::string& path, int line) {
    const std::optional<DType> dtype = dtype_named(text);
    if (!dtype) malformed(path, line, "unknown dtype: " + text);
    return *dtype;
}

AxisSizes sizes_of(std::string_view text, const std::string& path, int line) {
    AxisSizes sizes;
    for (const std::string& item : words(text)) {
        const std::size_t equals = item.find('=');
        if (equals == std::string::npos) malformed(path, line, "not name=size: " + item);
        sizes.push_back({item.substr(0, equals), integer(item.substr(equals + 1), path, line)});
    }
    return sizes;
}

// Values, with `a..b` for the consecutive integers a, a+1, ..., b.
void append_values(std::string_view text, std::vector<double>& values, const std::string& path, int line) {
    for (const std::string& token : words(text)) {
        const std::size_t dots = token.find("..");
        if (dots != std::string::npos && dots > 0) {
            const std::int64_t first = integer(token.substr(0, dots), path, line);
            const std::int64_t last = integer(token.substr(dots + 2), path, line);
            if (last < first) malformed(path, line, "empty run: " + token);
            for (std::int64_t v = first; v <= last; ++v) values.push_back(static_cast<double>(v));
            continue;
        }
        char* end = nullptr;
        const double value = std::strtod(token.c_str(), &end);
        if (end != token.c_str() + token.size()) malformed(path, line, "not a number: " + token);
        values.push_back(value);
    }
}

std::vector<Case> read_cases(const std::string& path) {
    std::ifstream file(path);
    if (!file) throw std::runtime_error("cannot open " + path);
    std::vector<Case> cases;
    Case* open = nullptr;
    int line_number = 0;
    for (std::string line; std::getline(file, line);) {
        ++line_number;
        if (line.empty() || line.front() == '#') continue;
        const std::size_t space = line.find(' ');
        const std::string keyword = line.substr(0, space);
        const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
        if (keyword == "case") {
            if (open) malformed(path, line_number, "`case` inside a case");
            const std::vector<std::string> fields = words(rest);
            if (fields.size() != 2) malformed(path, line_number, "expected `case N OP`");
            cases.emplace_back();
            open = &cases.back();
            open->number = static_cast<int>(integer(fields[0], path, line_number));
            open->op = fields[1];
            open->line = line_number;
            continue;
        }
        if (!open) malformed(path, line_number, "`" + keyword + "` outside a case");
        Case& c = *open;
        if (keyword == "end") {
            if (c.outputs.empty() != (c.einops_refuses && c.einc_extension.empty()) && c.op != "parse_shape")
                malformed(path, line_number, "a case without output or error");
            open = nullptr;
        } else if (keyword == "source") {
            c.source = rest;
        } else if (keyword == "call") {
            c.call = rest;
        } else if (keyword == "note") {
            c.note = rest;
        } else if (keyword == "pattern") {
            c.pattern = rest;
        } else if (keyword == "reduction") {
            c.reduction = rest;
        } else if (keyword == "compact") {
            c.compact = true;
        } else if (keyword == "list") {
            c.list = true;
        } else if (keyword == "sizes") {
            c.sizes = sizes_of(rest, path, line_number);
        } else if (keyword == "axes") {
            c.axes = sizes_of(rest, path, line_number);
        } else if (keyword == "input" || keyword == "output") {
            const std::vector<std::string> fields = words(rest);
            if (fields.size() != 2) malformed(path, line_number, "expected `" + keyword + " DTYPE SHAPE`");
            const DType dtype = dtype_of(fields[0], path, line_number);
            const Shape shape = shape_of(fields[1], path, line_number);
            if (keyword == "input")
                c.inputs.push_back({dtype, shape});
            else
                c.outputs.push_back({dtype, shape, {}});
        } else if (keyword == "values") {
            if (c.outputs.empty()) malformed(path, line_number, "`values` before `output`");
            append_values(rest, c.outputs.back().values, path, line_number);
        } else if (keyword == "packed" || keyword == "packed_shapes") {
            std::vector<Shape>& shapes = keyword == "packed" ? c.packed : c.packed_shapes;
            for (const std::string& text : words(rest)) shapes.push_back(shape_of(text, path, line_number));
        } else if (keyword == "error") {
            c.einops_refuses = true;
            c.einops_error = rest;
        } else if (keyword == "einc-error") {
            c.einc_error = rest;
        } else if (keyword == "einc-extension") {
            c.einc_extension = rest;
        } else {
            malformed(path, line_number, "unknown keyword `" + keyword + "`");
        }
    }
    if (open) malformed(path, line_number, "the last case has no `end`");
    return cases;
}

const std::vector<Case>& documented_cases() {
    static const std::vector<Case> cases = read_cases(EINC_CONFORMANCE_FILE);
    return cases;
}

// ----------------------------------------------------------------------------------------------------------
// Running a case through einc

std::int64_t element_count(const Shape& shape) {
    std::int64_t n = 1;
    for (const std::int64_t extent : shape) n *= extent;
    return n;
}

// Operand k, as the generator makes it: raw = (i + 31 k) % 251; raw - 125, raw for unsigned integers, or
// raw % 3 != 0 for bool; complex: raw - 125 + (raw % 7 - 3) i.
Tensor make_input(const Operand& operand, std::int64_t k) {
    const std::int64_t n = element_count(operand.shape);
    std::vector<double> values;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t raw = (i + 31 * k) % 251;
        values.push_back(operand.dtype == DType::boolean ? (raw % 3 != 0 ? 1.0 : 0.0)
                         : is_unsigned(operand.dtype)    ? static_cast<double>(raw)
                                                         : static_cast<double>(raw - 125));
        if (is_complex(operand.dtype)) values.push_back(static_cast<double>(raw % 7 - 3));
    }
    return reference::make_tensor(operand.dtype, operand.shape, values);
}

// What einc returns for the case: its results, and for pack the packed shapes, for parse_shape the axes.
struct Outcome {
    std::vector<Tensor> results;
    std::vector<Shape> packed_shapes;
    AxisSizes axes;
};

Outcome run(const Case& c) {
    std::vector<Tensor> storage;
    for (std::size_t k = 0; k < c.inputs.size(); ++k)
        storage.push_back(make_input(c.inputs[k], static_cast<std::int64_t>(k)));
    const std::vector<Input> inputs(storage.begin(), storage.end());
    const std::span<const Input> all(inputs);
    Outcome outcome;
    if (c.op == "rearrange") {
        outcome.results.push_back(c.list ? rearrange(all, c.pattern, c.sizes)
                                         : rearrange(inputs.at(0), c.pattern, c.sizes));
    } else if (c.op == "reduce") {
        outcome.results.push_back(reduce(inputs.at(0), c.pattern, c.reduction, c.sizes));
    } else if (c.op == "repeat") {
        outcome.results.push_back(repeat(inputs.at(0), c.pattern, c.sizes));
    } else if (c.op == "einsum") {
        outcome.results.push_back(c.compact ? einsum(Subscripts{c.pattern}, all) : einsum(c.pattern, all));
    } else if (c.op == "pack") {
        Packed packed = pack(all, c.pattern);
        outcome.results.push_back(std::move(packed.tensor));
        outcome.packed_shapes = std::move(packed.packed_shapes);
    } else if (c.op == "unpack") {
        outcome.results = unpack(inputs.at(0), c.packed, c.pattern);
    } else if (c.op == "parse_shape") {
        outcome.axes = parse_shape(inputs.at(0).view(), c.pattern);
    } else {
        throw std::runtime_error("unknown operation " + c.op);
    }
    return outcome;
}

// ----------------------------------------------------------------------------------------------------------
// Comparing with einops

// Relative tolerance for floating results: numpy and einc may round means (and f16 results) differently.
double tolerance(DType dtype) {
    switch (dtype) {
    case DType::f64:
    case DType::f32:
    case DType::c128:
    case DType::c64: return 1e-6;  // (the values are written with 12 digits; complex: each part)
    case DType::f16: return 1e-3;
    case DType::bf16: return 1e-2;
    default: return 0;  // integers and bool: exact
    }
}

std::string shape_text(const Shape& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) text += ',';
        text += std::to_string(shape[i]);
    }
    return text + "]";
}

std::string format_sizes(const AxisSizes& sizes) {
    std::string text;
    for (const AxisSize& size : sizes) {
        if (!text.empty()) text += ' ';
        text += size.name + "=" + std::to_string(size.size);
    }
    return text.empty() ? "(none)" : text;
}

// The row-major index of flat element `flat` of `shape`, e.g. [1,0,2].
std::string index_text(std::int64_t flat, const Shape& shape) {
    Shape index(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        index[d] = flat % shape[d];
        flat /= shape[d];
    }
    return shape_text(index);
}

// Empty when `got` is what einops returned; otherwise what differs.
std::string compare(const Result& want, const TensorView& got) {
    if (got.shape != want.shape)
        return "shape " + shape_text(got.shape) + ", einops: " + shape_text(want.shape);
    if (got.dtype != want.dtype)
        return "dtype " + std::string(name_of(got.dtype)) + ", einops: " + std::string(name_of(want.dtype));
    const std::vector<double> values = reference::values_of(got);
    if (values.size() != want.values.size())
        return std::to_string(want.values.size()) + " expected values for shape " + shape_text(want.shape) +
               " (the data file is inconsistent)";
    const double rel = tolerance(want.dtype);
    std::size_t wrong = 0;
    std::string first;
    for (std::size_t i = 0; i < values.size(); ++i) {
        const double difference = std::abs(values[i] - want.values[i]);
        const bool same = values[i] == want.values[i] || difference <= rel * std::abs(want.values[i]) + 1e-12;
        if (same) continue;
        if (wrong++ == 0) {
            std::ostringstream text;
            text.precision(17);
            text << "element " << index_text(static_cast<std::int64_t>(i), want.shape) << " is " << values[i]
                 << ", einops: " << want.values[i];
            first = text.str();
        }
    }
    if (wrong == 0) return {};
    return first + " (" + std::to_string(wrong) + " of " + std::to_string(values.size()) + " values differ)";
}

// Runs the case and checks einc against einops; returns what went wrong, empty when nothing did.
std::string check(const Case& c) {
    const bool einc_refuses = (c.einops_refuses && c.einc_extension.empty()) || !c.einc_error.empty();
    if (einc_refuses) {
        const std::string expected = c.einops_refuses
                                         ? "an einc::Error, as einops refuses it (" + c.einops_error + ")"
                                         : "an einc::Error saying '" + c.einc_error + "'";
        try {
            run(c);
        } catch (const Error& error) {
            const std::string message = error.what();
            if (!c.einc_error.empty() && message.find(c.einc_error) == std::string::npos)
                return "einc's error does not say '" + c.einc_error + "':\n" + message;
            return {};
        } catch (const std::exception& error) {
            return std::string("expected ") + expected + ", einc threw something else: " + error.what();
        }
        return "einc accepted the call; expected " + expected;
    }
    Outcome outcome;
    try {
        outcome = run(c);
    } catch (const std::exception& error) {
        return std::string("einc refused the call: ") + error.what();
    }
    std::string problems;
    const auto problem = [&](const std::string& text) {
        if (!problems.empty()) problems += '\n';
        problems += text;
    };
    if (c.op == "parse_shape" && outcome.axes != c.axes)
        problem("parse_shape gave " + format_sizes(outcome.axes) + ", einops: " + format_sizes(c.axes));
    if (c.op == "pack" && outcome.packed_shapes != c.packed_shapes) {
        std::string got, want;
        for (const Shape& s : outcome.packed_shapes) got += shape_text(s) + " ";
        for (const Shape& s : c.packed_shapes) want += shape_text(s) + " ";
        problem("packed shapes " + got + "einops: " + want);
    }
    if (outcome.results.size() != c.outputs.size()) {
        problem(std::to_string(outcome.results.size()) +
                " results, einops: " + std::to_string(c.outputs.size()));
        return problems;
    }
    for (std::size_t i = 0; i < c.outputs.size(); ++i) {
        const std::string difference = compare(c.outputs[i], outcome.results[i].view());
        if (!difference.empty())
            problem((c.outputs.size() > 1 ? "result " + std::to_string(i) + ": " : "") + difference);
    }
    return problems;
}

// Checks every case of `cases` whose operation is `op` (all when empty); returns how many there were.
int check_all(const std::vector<Case>& cases, std::string_view op = {}) {
    int checked = 0;
    for (const Case& c : cases) {
        if (!op.empty() && c.op != op) continue;
        ++checked;
        const std::string problems = check(c);
        if (problems.empty()) continue;
        const std::string note = c.note.empty() ? std::string() : "  note: " + c.note;
        INFO(c.title());
        INFO("pattern '" << c.pattern << "'  sizes " << format_sizes(c.sizes) << note);
        FAIL_CHECK(problems);
    }
    return checked;
}

}  // namespace

TEST_CASE("conformance: the data file covers every operation") {
    const std::vector<Case>& cases = documented_cases();
    CHECK(cases.size() >= 80);
    for (const std::string_view op :
         {"rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "parse_shape"}) {
        int count = 0;
        for (const Case& c : cases) count += c.op == op;
        CHECK_MESSAGE(count > 0, "no " << op << " case");
    }
    int number = 0;
    for (const Case& c : cases)
        CHECK_MESSAGE(c.number == ++number, "case numbers run 1, 2, ... (line " << c.line << ")");
}

TEST_CASE("conformance: rearrange as documented") {
    CHECK(check_all(documented_cases(), "rearrange") > 0);
}
TEST_CASE("conformance: reduce as documented") {
    CHECK(check_all(documented_cases(), "reduce") > 0);
}
TEST_CASE("conformance: repeat as documented") {
    CHECK(check_all(documented_cases(), "repeat") > 0);
}
TEST_CASE("conformance: einsum as documented") {
    CHECK(check_all(documented_cases(), "einsum") > 0);
}
TEST_CASE("conformance: pack as documented") {
    CHECK(check_all(documented_cases(), "pack") > 0);
}
TEST_CASE("conformance: unpack as documented") {
    CHECK(check_all(documented_cases(), "unpack") > 0);
}
TEST_CASE("conformance: parse_shape as documented") {
    CHECK(check_all(documented_cases(), "parse_shape") > 0);
}

// The random calls are reproducible: seed 1 and 12 calls unless EINC_CONFORMANCE_SEED / _COUNT say otherwise
// (e.g. EINC_CONFORMANCE_SEED=7 EINC_CONFORMANCE_COUNT=2000 einc_tests -tc="conformance: live*").
TEST_CASE("conformance: live einops") {
    if (std::system("python3 -c 'import numpy, einops' > /dev/null 2>&1") != 0) {
        MESSAGE("skipped: python3 with numpy and einops is not available (pip install numpy einops)");
        return;
    }
    const auto setting = [](const char* name, long fallback) {
        const char* text = std::getenv(name);
        return text && *text ? std::strtol(text, nullptr, 10) : fallback;
    };
    const long seed = setting("EINC_CONFORMANCE_SEED", 1);
    const long count = setting("EINC_CONFORMANCE_COUNT", 12);
    const std::filesystem::path file =
        std::filesystem::temp_directory_path() /
        ("einc-conformance-" + std::to_string(std::random_device{}()) + ".txt");
    const std::string command = "python3 '" + std::string(EINC_CONFORMANCE_SCRIPT) + "' --check '" +
                                file.string() + "' --seed " + std::to_string(seed) + " --count " +
                                std::to_string(count);
    INFO("seed " << seed << " - rerun with: " << command);
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, "the generator failed");
    const std::vector<Case> cases = read_cases(file.string());
    std::filesystem::remove(file);
    const int checked = check_all(cases);
    CHECK(checked > 0);
    MESSAGE("checked " << checked << " random calls against einops (seed " << seed << ")");
}
