// `einc roofline` and `einc bench`: the SVG is well-formed XML, every point sits where the cost model puts
// it (checked against costs computed here, through the chart's own axis mapping), views go to the caption,
// measured points come from timings; bench reports what it measured, and fails clearly without a GPU.
#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include "cli/cli.hpp"
#include "cli/measure.hpp"
#include "cli/roofline_chart.hpp"
#include "einc_build_info.hpp"
#include "runtime/backend.hpp"
#include "runtime/program.hpp"
#include "tests/cli_capture.hpp"
#include "tests/environment.hpp"
#if EINC_HAS_CUDA
#include "cuda/cuda.hpp"
#endif

using namespace einc;
namespace fs = std::filesystem;

namespace {

struct Element {
    std::string name;
    std::map<std::string, std::string> attributes;
};

// A small XML well-formedness checker: one root, every start tag closed by its own end tag (a stack),
// attributes quoted and not repeated, '<' and '&' in text and attributes only as markup or entities.
// Returns every element; throws std::runtime_error at the first violation.
std::vector<Element> parse_xml(const std::string& text) {
    std::vector<Element> elements;
    std::vector<std::string> open;
    bool root_seen = false;
    std::size_t at = 0;
    const auto fail = [&](const std::string& what) {
        throw std::runtime_error(fmt::format("byte {}: {}", at, what));
    };
    const auto check_entities = [&](std::string_view chunk) {
        for (std::size_t i = chunk.find('&'); i != std::string_view::npos; i = chunk.find('&', i + 1)) {
            const std::size_t end = chunk.find(';', i);
            if (end == std::string_view::npos) fail("'&' without ';'");
            const std::string_view entity = chunk.substr(i + 1, end - i - 1);
            if (entity != "amp" && entity != "lt" && entity != "gt" && entity != "quot" && entity != "apos" &&
                !entity.starts_with("#"))
                fail(fmt::format("unknown entity &{};", entity));
        }
    };
    const auto is_name_char = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.';
    };
    while (at < text.size()) {
        const std::size_t lt = text.find('<', at);
        const std::string_view chunk =
            std::string_view(text).substr(at, lt == std::string::npos ? std::string::npos : lt - at);
        check_entities(chunk);
        if (open.empty() && chunk.find_first_not_of(" \t\r\n") != std::string_view::npos)
            fail("text outside the root element");
        if (lt == std::string::npos) break;
        at = lt;
        if (text.compare(at, 5, "<?xml") == 0) {
            if (at != 0) fail("XML declaration not at the start");
            at = text.find("?>", at);
            if (at == std::string::npos) fail("unterminated declaration");
            at += 2;
            continue;
        }
        if (text.compare(at, 4, "<!--") == 0) {
            at = text.find("-->", at);
            if (at == std::string::npos) fail("unterminated comment");
            at += 3;
            continue;
        }
        const bool closing = text.compare(at, 2, "</") == 0;
        at += closing ? 2 : 1;
        const std::size_t name_begin = at;
        while (at < text.size() && is_name_char(text[at])) ++at;
        const std::string name = text.substr(name_begin, at - name_begin);
        if (name.empty()) fail("a tag without a name");
        if (closing) {
            while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
            if (at >= text.size() || text[at] != '>') fail("malformed end tag");
            ++at;
            if (open.empty() || open.back() != name)
                fail(fmt::format("</{}> closes <{}>", name, open.empty() ? "" : open.back()));
            open.pop_back();
            continue;
        }
        if (open.empty() && root_seen) fail("a second root element");
        root_seen = true;
        Element element{name, {}};
        for (;;) {
            while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
            if (at >= text.size()) fail("unterminated tag");
            if (text[at] == '>' || text.compare(at, 2, "/>") == 0) break;
            const std::size_t key_begin = at;
            while (at < text.size() && is_name_char(text[at])) ++at;
            const std::string key = text.substr(key_begin, at - key_begin);
            if (key.empty() || at + 1 >= text.size() || text[at] != '=' ||
                (text[at + 1] != '"' && text[at + 1] != '\''))
                fail(fmt::format("malformed attribute in <{}>", name));
            const char quote = text[at + 1];
            const std::size_t end = text.find(quote, at + 2);
            if (end == std::string::npos) fail("unterminated attribute value");
            const std::string value = text.substr(at + 2, end - at - 2);
            if (value.find('<') != std::string::npos) fail("'<' in an attribute value");
            check_entities(value);
            if (!element.attributes.emplace(key, value).second)
                fail(fmt::format("attribute {} repeated", key));
            at = end + 1;
        }
        const bool empty = text[at] == '/';
        at += empty ? 2 : 1;
        if (!empty) open.push_back(name);
        elements.push_back(std::move(element));
    }
    if (!open.empty()) throw std::runtime_error(fmt::format("<{}> is never closed", open.back()));
    if (!root_seen) throw std::runtime_error("no root element");
    return elements;
}

std::string read_file(const fs::path& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

using Result = testing::CliResult;
using testing::einc_cli;

fs::path temp_path(const std::string& name) {
    return fs::temp_directory_path() / fmt::format("einc-roofline-test-{}-{}", ::getpid(), name);
}

// The calls under test and their costs computed here, without the CLI: f32 row-major operands.
struct ExpectedStep {
    std::string tag;
    double intensity, attainable;
};

ExpectedStep expected_step(const std::string& tag, Op op, const std::string& pattern,
                           const std::vector<Shape>& shapes, const DeviceModel& device,
                           Reduction reduction = Reduction::none) {
    std::vector<TensorView> views;
    for (const Shape& shape : shapes)
        views.push_back(TensorView{nullptr, DType::f32, shape, row_major_strides(shape)});
    const Program program = compile(op, pattern, {}, reduction).bind(views);
    REQUIRE(program.plan().steps.size() == 1);
    const Cost& cost = program.plan().steps[0].cost;
    return {tag, cost.flops / cost.bytes(),
            std::min(device.peak_f32, cost.flops / cost.bytes() * device.bandwidth)};
}

std::vector<cli::CallArgs> parsed_calls(const std::vector<std::vector<std::string>>& calls) {
    std::vector<cli::CallArgs> parsed;
    for (const auto& words : calls) parsed.push_back(cli::parse_call_args(words));
    return parsed;
}

std::vector<const Element*> with_class(const std::vector<Element>& elements, const std::string& cls) {
    std::vector<const Element*> found;
    for (const Element& e : elements) {
        const auto it = e.attributes.find("class");
        if (it != e.attributes.end() && it->second == cls) found.push_back(&e);
    }
    return found;
}

double number(const Element& e, const std::string& key) {
    return std::stod(e.attributes.at(key));
}

}  // namespace

TEST_CASE("roofline: the XML checker catches what it must") {
    CHECK_NOTHROW(parse_xml("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/><c>t &amp; u</c></a>\n"));
    CHECK_THROWS(parse_xml("<a><b></a></b>"));
    CHECK_THROWS(parse_xml("<a><b></a>"));
    CHECK_THROWS(parse_xml("<a x=1></a>"));
    CHECK_THROWS(parse_xml("<a x=\"1\" x=\"2\"></a>"));
    CHECK_THROWS(parse_xml("<a>i < j</a>"));
    CHECK_THROWS(parse_xml("<a>R&D</a>"));
    CHECK_THROWS(parse_xml("<a></a><b></b>"));
}

TEST_CASE("roofline: the axis mapping is logarithmic, whole decades, and holds every point and ridge") {
    const DeviceModel& h100 = *device_model_named("h100");
    const std::vector<cli::CallArgs> calls =
        parsed_calls({{"einsum", "i, i ->", "1000000", "1000000"},
                      {"einsum", "i k, k j -> i j", "4096x4096", "4096x4096", "--dtype", "bf16"}});
    const cli::RooflineChart chart = cli::roofline_chart(calls, h100);
    const cli::ChartAxes axes = cli::chart_axes(chart);
    CHECK(axes.x(axes.x_min) == doctest::Approx(axes.left));
    CHECK(axes.x(axes.x_max) == doctest::Approx(axes.right));
    CHECK(axes.y(axes.y_min) == doctest::Approx(axes.bottom));
    CHECK(axes.y(axes.y_max) == doctest::Approx(axes.top));
    // Equal steps per decade, and each range is whole decades.
    CHECK(axes.x(10) - axes.x(1) == doctest::Approx(axes.x(1000) - axes.x(100)));
    CHECK(axes.y(1e12) - axes.y(1e13) == doctest::Approx(axes.y(1e15) - axes.y(1e16)));
    CHECK(std::log10(axes.x_min) == doctest::Approx(std::round(std::log10(axes.x_min))));
    CHECK(std::log10(axes.y_max) == doctest::Approx(std::round(std::log10(axes.y_max))));
    CHECK(axes.y(1e12) > axes.y(1e13));  // rows grow downwards
    for (const cli::ChartPoint& p : chart.points) {
        CHECK(axes.x(p.intensity) > axes.left);
        CHECK(axes.x(p.intensity) < axes.right);
        CHECK(axes.y(p.flops_per_second) > axes.top);
        CHECK(axes.y(p.flops_per_second) < axes.bottom);
    }
    for (const cli::ComputeRoof& roof : cli::compute_roofs(h100)) {
        CHECK(roof.peak / h100.bandwidth > axes.x_min);
        CHECK(roof.peak / h100.bandwidth < axes.x_max);
        CHECK(roof.peak < axes.y_max);
    }
    // The roofs: equal peaks share one (f64 and f32 on an H100), sorted by peak.
    const std::vector<cli::ComputeRoof> roofs = cli::compute_roofs(h100);
    REQUIRE(roofs.size() == 4);
    CHECK(roofs[0].dtypes == "f64 · f32");
    CHECK(roofs[2].dtypes == "bf16 · f16");
    CHECK(roofs[2].peak == 989.4e12);
    // A CPU's chart names only the roofs it has: no tf32, no fp8; bf16, f16 and int8 at the f32 rate.
    const std::vector<cli::ComputeRoof> cpu_roofs = cli::compute_roofs(*device_model_named("cpu"));
    REQUIRE(cpu_roofs.size() == 2);
    CHECK(cpu_roofs[0].dtypes == "f64");
    CHECK(cpu_roofs[1].dtypes == "f32 · bf16 · f16 · int8");
}

TEST_CASE("roofline: the SVG is well-formed and every point lands where the cost model puts it") {
    const DeviceModel& h100 = *device_model_named("h100");
    const std::vector<std::vector<std::string>> call_words{
        {"einsum", "i, i ->", "1000000", "1000000"},
        {"einsum", "i j, j -> i", "4096x4096", "4096"},
        {"einsum", "i k, k j -> i j", "2048x2048", "2048x2048"},
        {"reduce", "a b -> a", "sum", "4096x1024"},
        {"rearrange", "b c h w -> b h w c", "2x3x4x5"}};
    const fs::path svg_path = temp_path("chart.svg");
    const Result result =
        einc_cli({"roofline", "einsum \"i, i ->\" 1000000 1000000", "einsum 'i j, j -> i' 4096x4096 4096",
                  "einsum \"i k, k j -> i j\" 2048x2048 2048x2048", "reduce \"a b -> a\" sum 4096x1024",
                  "rearrange \"b c h w -> b h w c\" 2x3x4x5", "--device", "h100", "-o", svg_path.string()});
    INFO(result.err);
    REQUIRE(result.status == 0);
    CHECK(result.out.find("wrote " + svg_path.string()) != std::string::npos);
    const std::string svg = read_file(svg_path);
    fs::remove(svg_path);
    std::vector<Element> elements;
    REQUIRE_NOTHROW(elements = parse_xml(svg));
    CHECK(elements.front().name == "svg");
    CHECK(elements.front().attributes.at("xmlns") == "http://www.w3.org/2000/svg");

    // Costs computed here, independently of the command: the dot product is 2n FLOPs over 4n + 4n + 4
    // bytes, the matrix product 2n^3 over 3 * 4n^2.
    const std::vector<ExpectedStep> expected{
        expected_step("1", Op::einsum, "i, i ->", {{1000000}, {1000000}}, h100),
        expected_step("2", Op::einsum, "i j, j -> i", {{4096, 4096}, {4096}}, h100),
        expected_step("3", Op::einsum, "i k, k j -> i j", {{2048, 2048}, {2048, 2048}}, h100),
        expected_step("4", Op::reduce, "a b -> a", {{4096, 1024}}, h100, Reduction::sum),
    };
    CHECK(expected[0].intensity == doctest::Approx(2e6 / (8e6 + 4)));
    CHECK(expected[2].intensity == doctest::Approx(2.0 * 2048 / 12));
    CHECK(expected[2].attainable == h100.peak_f32);  // compute-bound: on the f32 roof

    // The same axes the command drew on: the chart of the same calls.
    const cli::ChartAxes axes = cli::chart_axes(cli::roofline_chart(parsed_calls(call_words), h100));
    const std::vector<const Element*> points = with_class(elements, "point predicted");
    REQUIRE(points.size() == expected.size());  // the view is not a point
    for (const ExpectedStep& step : expected) {
        INFO("point " << step.tag);
        const auto it = std::find_if(points.begin(), points.end(), [&](const Element* e) {
            return e->attributes.at("data-tag") == step.tag;
        });
        REQUIRE(it != points.end());
        CHECK(number(**it, "cx") == doctest::Approx(axes.x(step.intensity)).epsilon(1e-4));
        CHECK(number(**it, "cy") == doctest::Approx(axes.y(step.attainable)).epsilon(1e-4));
    }
    // The memory roof is bandwidth * intensity; the f32 ridge is at (peak / bandwidth, peak).
    const std::vector<const Element*> memory = with_class(elements, "memory-roof");
    REQUIRE(memory.size() == 1);
    CHECK(number(*memory[0], "y1") == doctest::Approx(axes.y(h100.bandwidth * axes.x_min)).epsilon(1e-4));
    bool f32_ridge = false;
    for (const Element* ridge : with_class(elements, "ridge"))
        f32_ridge = f32_ridge || (std::abs(number(*ridge, "cx") - axes.x(67e12 / 3.35e12)) < 0.01 &&
                                  std::abs(number(*ridge, "cy") - axes.y(67e12)) < 0.01);
    CHECK(f32_ridge);
    // The view has no point: the caption names it.
    CHECK(
        svg.find("5  rearrange b c h w -&gt; b h w c · 2x3x4x5 · f32 · view: a view, 0 FLOPs and 0 bytes") !=
        std::string::npos);
    CHECK(svg.find("Roofline of NVIDIA H100 SXM5 80GB") != std::string::npos);
}

TEST_CASE("roofline: one unquoted call, calls from a file, and the SVG on standard output") {
    const fs::path calls = temp_path("calls.txt");
    std::ofstream(calls)
        << "# two calls\neinsum \"i, i ->\" 1000 1000\n\n  reduce 'a b -> b' max 64x64 --dtype bf16\n";
    const Result from_file = einc_cli({"roofline", "--calls", calls.string(), "--device", "a100"});
    fs::remove(calls);
    INFO(from_file.err);
    REQUIRE(from_file.status == 0);
    const std::vector<Element> elements = parse_xml(from_file.out);
    CHECK(with_class(elements, "point predicted").size() == 2);
    CHECK(from_file.out.find("Roofline of NVIDIA A100 SXM4 80GB") != std::string::npos);
    CHECK(from_file.out.find("bf16 · f16  312 TFLOP/s") != std::string::npos);

    const Result single =
        einc_cli({"roofline", "einsum", "b i d, b j d -> b i j", "8x64x32", "8x128x32", "--dtype", "f16"});
    REQUIRE(single.status == 0);
    CHECK(with_class(parse_xml(single.out), "point predicted").size() == 1);

    // Where the calls run on the CPU and no --device is named, the chart is the CPU's (uncalibrated here:
    // the development machine's, said on standard error), with the CPU's roofs only.
    const testing::IsolatedConfigHome config;
    const Result cpu = einc_cli({"roofline", "einsum \"i, i ->\" 1000 1000", "--backend", "cpu"});
    INFO(cpu.err);
    REQUIRE(cpu.status == 0);
    CHECK(cpu.out.find("Roofline of AMD EPYC, 2 cores (development machine)") != std::string::npos);
    CHECK(cpu.out.find("tf32") == std::string::npos);
    CHECK(cpu.err.find("note: comparing with the `cpu` model") != std::string::npos);
}

TEST_CASE("roofline: achieved points from einc bench --json timings, beside their prediction") {
    const DeviceModel& h100 = *device_model_named("h100");
    const std::vector<std::string> dot{"einsum", "i, i ->", "1000000", "1000000"};
    const fs::path timings = temp_path("timings.jsonl");
    const std::string key = cli::call_key(cli::parse_call_args(dot));
    CHECK(key == "einsum \"i, i ->\" 1000000 1000000 --dtype f32");
    std::ofstream(timings) << fmt::format("{{\"call\": \"{}\", \"backend\": \"cuda\", \"device\": \"h100\", "
                                          "\"repeat\": 5, \"seconds\": 0.001}}\n",
                                          "einsum \\\"i, i ->\\\" 1000000 1000000 --dtype f32");
    const Result result =
        einc_cli({"roofline", "einsum \"i, i ->\" 1000000 1000000", "--timings", timings.string()});
    INFO(result.err);
    REQUIRE(result.status == 0);
    const std::vector<Element> elements = parse_xml(result.out);
    const std::vector<const Element*> measured = with_class(elements, "point measured");
    REQUIRE(measured.size() == 1);
    const cli::ChartAxes axes = cli::chart_axes(
        cli::roofline_chart(parsed_calls({dot}), h100,
                            std::vector<std::optional<cli::CallTiming>>{cli::CallTiming{0.001, "cuda"}}));
    CHECK(number(*measured[0], "cx") == doctest::Approx(axes.x(2e6 / (8e6 + 4))).epsilon(1e-4));
    CHECK(number(*measured[0], "cy") == doctest::Approx(axes.y(2e6 / 0.001)).epsilon(1e-4));

    // Timings against another device's model do not belong on this chart.
    const Result other = einc_cli({"roofline", "einsum \"i, i ->\" 1000000 1000000", "--timings",
                                   timings.string(), "--device", "a100"});
    CHECK(other.status == cli::exit_usage);
    CHECK(other.err.find("timed against the h100 device model") != std::string::npos);
    fs::remove(timings);
}

TEST_CASE("roofline: --measure times each call on the CPU backend") {
    const Result result = einc_cli({"roofline", "einsum \"i k, k j -> i j\" 64x64 64x64",
                                    "rearrange \"a b -> b a\" 8x8", "--measure", "--repeat", "3"});
    INFO(result.err);
    REQUIRE(result.status == 0);
    const std::vector<Element> elements = parse_xml(result.out);
    CHECK(with_class(elements, "point measured").size() == 1);  // the view's time is a caption line
    CHECK(result.out.find("Roofline of AMD EPYC") != std::string::npos);
    CHECK(result.out.find("2  measured: ") != std::string::npos);
}

TEST_CASE("roofline: usage errors") {
    CHECK(einc_cli({"roofline"}).status == cli::exit_usage);
    CHECK(einc_cli({"roofline", "einsum \"i, i ->\" 10 10", "--measure", "--device", "h100"}).status ==
          cli::exit_usage);
    CHECK(einc_cli({"roofline", "einsum \"i, i -> 10 10"}).status == cli::exit_usage);  // unterminated quote
    const Result bad_pattern = einc_cli({"roofline", "einsum \"i, i -> k\" 10 10"});
    CHECK(bad_pattern.status == cli::exit_error);
    CHECK(bad_pattern.err.find("output axis 'k' appears in no operand") != std::string::npos);
    CHECK(einc_cli({"roofline", "einsum \"i, i ->\" 10 10", "--calls", "/nonexistent/calls.txt"}).status ==
          cli::exit_error);
}

TEST_CASE("bench: times a call and reports what it measured") {
    const Result text = einc_cli({"bench", "einsum", "i k, k j -> i j", "64x64", "64x64", "--repeat", "3"});
    INFO(text.err);
    REQUIRE(text.status == 0);
    CHECK(text.out.find("bench einsum \"i k, k j -> i j\" 64x64 64x64 --dtype f32\n") == 0);
    CHECK(text.out.find("median of 3") != std::string::npos);
    CHECK(text.out.find("work       524 kFLOP") != std::string::npos);  // 2 * 64^3
    CHECK(text.out.find("MFU ") != std::string::npos);
    CHECK(text.out.find("of the f32 peak (193 GFLOP/s)") != std::string::npos);  // the cpu device by default

    const Result reduce =
        einc_cli({"bench", "reduce", "a b -> a", "sum", "256x256", "--repeat", "3", "--dtype", "bf16"});
    REQUIRE(reduce.status == 0);
    CHECK(reduce.out.find("of 25 GB/s (the plan is memory-bound)") != std::string::npos);

    const fs::path json = temp_path("bench.jsonl");
    const Result as_json =
        einc_cli({"bench", "einsum", "i, i ->", "1000", "1000", "--repeat", "3", "--json"});
    REQUIRE(as_json.status == 0);
    CHECK(std::count(as_json.out.begin(), as_json.out.end(), '\n') ==
          1);  // one object a line: runs concatenate
    std::ofstream(json) << as_json.out;
    const std::vector<cli::TimingRecord> records = cli::read_timings(json.string());
    fs::remove(json);
    REQUIRE(records.size() == 1);
    CHECK(records[0].call == "einsum \"i, i ->\" 1000 1000 --dtype f32");
    CHECK(records[0].device == "cpu");
    CHECK(records[0].backend == "cpu");
    CHECK(records[0].repeat == 3);
    CHECK(records[0].seconds > 0);
}

TEST_CASE("bench: usage errors, and --backend cuda without a GPU backend or a usable GPU") {
    CHECK(einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--repeat", "0"}).status == cli::exit_usage);
    CHECK(einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--repeat"}).status == cli::exit_usage);
    CHECK(einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--backend", "tpu"}).status == cli::exit_usage);
#if EINC_HAS_CUDA
    if (cuda::available()) {
        MESSAGE("a GPU is usable here: the no-GPU error is not checked");
        return;
    }
#endif
    const Result cuda = einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--backend", "cuda"});
    CHECK(cuda.status == cli::exit_error);
    CHECK(cuda.err.find(gpu_backend()
                            ? "--backend cuda: this machine has no usable NVIDIA GPU and driver"
                            : "--backend cuda needs einc's GPU backend, which this build does not have") !=
          std::string::npos);
}

TEST_CASE("roofline: attainable FLOP/s is the lower roof, as roofline() reports it") {
    const DeviceModel& h100 = *device_model_named("h100");
    const double ridge = h100.peak_bf16 / h100.bandwidth;
    CHECK(attainable_flops(h100, DType::bf16, ridge / 4) == doctest::Approx(h100.peak_bf16 / 4));
    CHECK(attainable_flops(h100, DType::bf16, ridge * 4) == h100.peak_bf16);
    CHECK(attainable_flops(h100, DType::f32, 1e6) == h100.peak_f32);
    CHECK(attainable_flops(h100, DType::f32, 1e6, /*allow_tf32=*/true) == h100.peak_tf32);
    const Cost cost{.flops = 1e9, .bytes_read = 3e6, .bytes_written = 1e6};
    CHECK(attainable_flops(h100, DType::f16, cost.intensity()) ==
          roofline(cost, h100, DType::f16).attainable_flops);
}
