// `einc roofline`: the roofline chart of some calls as an SVG file. Each call is planned as `einc explain`
// plans it; each plan step with FLOPs becomes a point where the cost model puts it, and a call with a
// measured time (--measure, or --timings from `einc bench --json`) gets its achieved point beside it.
//
// Calls on the command line: one unquoted call (`einc roofline einsum "i, i ->" 1000 1000`), or several,
// each quoted as one argument (`einc roofline 'einsum "i, i ->" 1000 1000' 'reduce "a b -> a" sum 64x64'`),
// or a file of calls, one per line (--calls FILE; `#` starts a comment line).
#include <algorithm>
#include <fmt/ostream.h>
#include <fstream>
#include <ostream>
#include <utility>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/measure.hpp"
#include "cli/roofline_chart.hpp"
#include "compiler/bind.hpp"
#include "compiler/gradient.hpp"
#include "compiler/lower.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::cli {
namespace {

// Splits one call the way a POSIX shell would for the quoting calls use: '...' verbatim, "..." with \" and
// \\ escapes, words separated by blanks.
std::vector<std::string> split_words(const std::string& line, const std::string& where) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (c == ' ' || c == '\t' || c == '\r') {
            if (in_word) words.push_back(std::exchange(word, {}));
            in_word = false;
            continue;
        }
        in_word = true;
        if (c == '\'' || c == '"') {
            std::size_t j = i + 1;
            for (; j < line.size() && line[j] != c; ++j) {
                if (c == '"' && line[j] == '\\' && j + 1 < line.size() &&
                    (line[j + 1] == '"' || line[j + 1] == '\\'))
                    ++j;
                word += line[j];
            }
            if (j >= line.size())
                throw UsageError(fmt::format("{}: unterminated {} in the call: {}", where, c, line));
            i = j;
        } else {
            word += c;
        }
    }
    if (in_word) words.push_back(word);
    return words;
}

// A call, with the dtype given for all calls unless it names its own.
CallArgs parse_call(std::vector<std::string> words, const std::string& default_dtype) {
    CallArgs call = parse_call_args(words);
    if (!call.dtype_given && !default_dtype.empty()) call.dtype = default_dtype;  // (shape operands only)
    return call;
}

std::vector<std::string> read_call_lines(const std::string& path) {
    std::ifstream file(path);
    if (!file) throw Error(ErrorKind::file, fmt::format("cannot read the calls file '{}'", path));
    std::vector<std::string> lines;
    for (std::string line; std::getline(file, line);) {
        const std::size_t first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line[first] == '#') continue;
        lines.push_back(line);
    }
    return lines;
}

// What a plan is for, in a line: `einsum i, i -> · 1000x1000 · f32`.
std::string call_summary(const CallArgs& args, const Plan& plan) {
    std::vector<std::string> operands;
    for (const OperandArg& operand : args.operands)
        operands.push_back(operand.is_file || operand.strides ? operand.text : format_shape(operand.shape));
    return fmt::format(
        "{} {}{} · {} · {}", name_of(args.call.op), args.call.pattern,
        args.call.reduction != Reduction::none ? fmt::format(" ({})", name_of(args.call.reduction)) : "",
        fmt::format("{}", fmt::join(operands, " ")),
        name_of(plan.inputs.empty() ? parse_dtype(args.dtype) : plan.inputs.front().dtype));
}

// The plans a call puts on the chart: its own, or with --backward its backward calls' (labelled).
struct ChartPlan {
    Plan plan;
    std::string label;  // "" or "backward 2"
};
std::vector<ChartPlan> plan_call(const CallArgs& args) {
    const syntax::Pattern pattern = parse(args.call);  // a syntax error first, before the operands are read
    const std::vector<TensorSpec> inputs = load_operands(args).specs;
    Lowered forward = lower(args.call, pattern, inputs,
                            {.until = Stage::planned, .plan = plan_options_of(options_of(args))});
    if (!args.backward) return {ChartPlan{std::move(forward.plan), ""}};
    std::vector<ChartPlan> plans;
    for (BackwardPlan& b : plan_backward(forward.bound, inputs, row_major_gradients(forward.plan)))
        plans.push_back(ChartPlan{std::move(b.plan), fmt::format("backward {}", plans.size() + 1)});
    return plans;
}

}  // namespace

RooflineChart roofline_chart(std::span<const CallArgs> calls, const DeviceModel& device,
                             std::span<const std::optional<CallTiming>> timings) {
    RooflineChart chart;
    chart.device = &device;
    for (std::size_t i = 0; i < calls.size(); ++i) {
        const CallArgs& args = calls[i];
        const std::vector<ChartPlan> plans = plan_call(args);
        const std::string summary = call_summary(args, plans.front().plan);
        const DType call_dtype = plans.front().plan.inputs.empty() ? parse_dtype(args.dtype)
                                                                   : plans.front().plan.inputs.front().dtype;
        if (std::find(chart.dtypes.begin(), chart.dtypes.end(), call_dtype) == chart.dtypes.end())
            chart.dtypes.push_back(call_dtype);

        int plotted = 0, last_point = -1;
        Cost total;
        std::size_t all_steps = 0, number = 0;
        for (const ChartPlan& p : plans) all_steps += p.plan.steps.size();
        for (const ChartPlan& chart_plan : plans) {
            const Plan& planned = chart_plan.plan;
            total += planned.total;
            const std::string what =
                chart_plan.label.empty() ? summary : fmt::format("{} · {}", summary, chart_plan.label);
            for (std::size_t k = 0; k < planned.steps.size(); ++k) {
                const PlanStep& step = planned.steps[k];
                ++number;
                const std::string tag =
                    all_steps == 1 ? fmt::format("{}", i + 1) : fmt::format("{}.{}", i + 1, number);
                const std::string_view kind = step_kind(step.step);
                const DType dtype = compute_dtype(planned, step.step);
                if (step.cost.flops == 0) {
                    chart.notes.push_back(
                        step.cost.bytes() == 0
                            ? fmt::format("{}  {} · {}: a view, 0 FLOPs and 0 bytes", tag, what, kind)
                            : fmt::format("{}  {} · {}: 0 FLOPs, {} moved (memory-bound: >= {} at {}/s)", tag,
                                          what, kind, format_bytes(step.cost.bytes()),
                                          format_seconds(step.cost.bytes() / device.bandwidth),
                                          format_bytes(device.bandwidth)));
                    continue;
                }
                const Roofline r = roofline(step.cost, device, dtype);
                ChartPoint point;
                point.tag = tag;
                point.pattern =
                    all_steps == 1 && chart_plan.label.empty()
                        ? args.call.pattern
                        : fmt::format("{} ({}{})", args.call.pattern,
                                      chart_plan.label.empty() ? "" : chart_plan.label + " ", kind);
                point.description =
                    planned.steps.size() == 1
                        ? fmt::format("{} · {}", what, kind)
                        : fmt::format("{} · step {} of {}: {}", what, k + 1, planned.steps.size(), kind);
                point.dtype = dtype;
                point.intensity = step.cost.intensity();
                point.flops_per_second = r.attainable_flops;
                point.compute_bound = r.compute_bound;
                point.call = i;
                last_point = static_cast<int>(chart.points.size());
                chart.points.push_back(point);
                ++plotted;
            }
        }

        if (i >= timings.size() || !timings[i]) continue;
        const CallTiming& timing = *timings[i];
        const std::string tag = fmt::format("{}", i + 1);
        if (total.flops == 0) {
            chart.notes.push_back(
                total.bytes() == 0
                    ? fmt::format("{}  measured: {} per call ({}; a view: the time is einc's dispatch)", tag,
                                  format_seconds(timing.seconds), timing.how)
                    : fmt::format(
                          "{}  measured: {} per call, {}/s = {} of the memory roof{} ({})", tag,
                          format_seconds(timing.seconds), format_bytes(total.bytes() / timing.seconds),
                          percent(total.bytes() / timing.seconds / device.bandwidth),
                          beyond_model(total.bytes() / timing.seconds / device.bandwidth), timing.how));
            continue;
        }
        ChartPoint point;
        point.tag = tag;
        point.pattern = args.call.pattern;
        point.description =
            fmt::format("measured: {} per call ({})", format_seconds(timing.seconds), timing.how);
        point.dtype = call_dtype;
        point.intensity = total.intensity();
        point.flops_per_second = total.flops / timing.seconds;
        point.measured = true;
        point.call = i;
        // Joined to its prediction when that one point is the whole call's work.
        if (plotted == 1 && chart.points[static_cast<std::size_t>(last_point)].intensity == point.intensity)
            point.predicted_index = last_point;
        chart.points.push_back(point);
    }
    return chart;
}

int roofline(std::span<const std::string> command_line, std::ostream& out, std::ostream& err) {
    std::vector<std::string> words(command_line.begin(), command_line.end());
    BenchSettings settings = take_bench_options(words);
    std::string output, device_key, calls_file, timings_file, default_dtype;
    bool measure_calls = false, backward = false;  // --backward: every call's backward plans
    bool backend_given = false;
    std::vector<std::string> rest;
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& arg = words[i];
        const auto value = [&]() -> const std::string& {
            if (i + 1 >= words.size()) throw UsageError(fmt::format("option {} needs a value", arg));
            return words[++i];
        };
        if (arg == "-o" || arg == "--output")
            output = value();
        else if (arg == "--device")
            device_key = value();
        else if (arg == "--calls")
            calls_file = value();
        else if (arg == "--timings")
            timings_file = value();
        else if (arg == "--measure")
            measure_calls = true;
        else if (arg == "--backend") {
            settings.backend = value();
            backend_given = true;
        } else if (arg == "--dtype")
            default_dtype = value();
        else if (arg == "--backward")
            backward = true;
        else
            rest.push_back(arg);
    }
    if (settings.backend != "cpu" && settings.backend != "cuda")
        throw UsageError(fmt::format("unknown backend '{}' (cpu, cuda)", settings.backend));
    if (measure_calls && !timings_file.empty()) throw UsageError("give --measure or --timings, not both");

    // The calls: one unquoted call, or each argument a quoted call, and those of --calls FILE.
    std::vector<CallArgs> calls;
    if (!rest.empty() && op_named(rest.front())) {
        calls.push_back(parse_call(rest, default_dtype));
    } else {
        for (const std::string& arg : rest) {
            if (arg.starts_with("-"))
                throw UsageError(fmt::format(
                    "unknown option '{}' for roofline (a call's own options go inside its quotes)", arg));
            calls.push_back(parse_call(split_words(arg, "call"), default_dtype));
        }
    }
    if (!calls_file.empty()) {
        std::size_t line_number = 0;
        for (const std::string& line : read_call_lines(calls_file))
            calls.push_back(parse_call(
                split_words(line, fmt::format("{} call {}", calls_file, ++line_number)), default_dtype));
    }
    for (CallArgs& call : calls) call.backward = call.backward || backward;
    if (calls.empty())
        throw UsageError("roofline needs calls: einc roofline 'einsum \"i, i ->\" 1000 1000' ... -o "
                         "roofline.svg, or --calls FILE");

    // The chart of the device the --timings were compared with, else of where the calls run (--measure:
    // where they are timed): this machine's GPU, else its CPU (its calibration, else the development
    // machine's, said in a note).
    const std::vector<TimingRecord> records =
        timings_file.empty() ? std::vector<TimingRecord>{} : read_timings(timings_file);
    if (device_key.empty() && !records.empty()) device_key = records.front().device;
    const DeviceModel& device =
        call_device(device_key, backend_given || measure_calls ? settings.backend : "", err);
    // Achieved points on a GPU's chart from CPU timings (or the reverse) would mean nothing.
    const bool cpu_device = device.multiprocessors == 0;
    if (measure_calls && (settings.backend == "cpu") != cpu_device)
        throw UsageError(
            fmt::format("--measure times the calls on the {} backend: draw them on {} (--device {})",
                        settings.backend, settings.backend == "cpu" ? "the CPU's chart" : "a GPU's chart",
                        settings.backend == "cpu" ? "local or cpu" : "h100, h200 or a100"));

    std::vector<std::optional<CallTiming>> timings(calls.size());
    if (measure_calls)
        for (std::size_t i = 0; i < calls.size(); ++i) {
            const Measurement m = measure(calls[i], settings);
            timings[i] = CallTiming{
                m.seconds, fmt::format("{} backend, median of {}", settings.backend, settings.repeat)};
        }
    if (!timings_file.empty()) {
        std::size_t matched = 0;
        for (const TimingRecord& record : records) {
            if (record.device != device.key)
                throw UsageError(fmt::format(
                    "{}: {} was timed against the {} device model, but this chart is for {} (--device {})",
                    timings_file, record.call, record.device, device.key, record.device));
            for (std::size_t i = 0; i < calls.size(); ++i)
                if (call_key(calls[i]) == record.call) {
                    timings[i] = CallTiming{record.seconds, fmt::format("{} backend, median of {}",
                                                                        record.backend, record.repeat)};
                    ++matched;
                }
        }
        if (matched == 0)
            throw UsageError(fmt::format(
                "no timing in {} is for one of these calls (they are matched by the call as einc bench "
                "prints it, e.g. {})",
                timings_file, call_key(calls.front())));
    }

    const RooflineChart chart = roofline_chart(calls, device, timings);
    const std::string svg = render_svg(chart);
    if (output.empty()) {  // the SVG alone on stdout, for pipes
        fmt::print(out, "{}", svg);
        return exit_ok;
    }
    std::ofstream file(output, std::ios::binary);
    if (!file || !(file << svg) || !file.flush())
        throw Error(ErrorKind::file, fmt::format("cannot write '{}'", output));

    fmt::print(out, "roofline of {} ({}): {} call{}, {} point{}\n", device.name, device.key, calls.size(),
               calls.size() == 1 ? "" : "s", chart.points.size(), chart.points.size() == 1 ? "" : "s");
    fmt::print(out, "  {:<6} {:>12} {:>14}  {:<14} {}\n", "point", "FLOP/B", "FLOP/s", "", "call · step");
    std::string above_roof;  // the measured points above their roof
    for (const ChartPoint& p : chart.points) {
        std::string bound = p.compute_bound ? "compute-bound" : "memory-bound";
        const double of_roof = p.flops_per_second / attainable_flops(device, p.dtype, p.intensity);
        if (p.measured) bound = fmt::format("{} of roof", percent(of_roof));
        if (p.measured && beats_model(of_roof)) above_roof += (above_roof.empty() ? "" : ", ") + p.tag;
        fmt::print(out, "  {:<6} {:>12.3g} {:>14}  {:<14} {}\n", p.tag, p.intensity,
                   format_flops(p.flops_per_second) + "/s", bound, p.description);
    }
    for (const std::string& note : chart.notes) fmt::print(out, "  not plotted: {}\n", note);
    if (!above_roof.empty())
        fmt::print(out, "  note: measured above the roof ({}): {}\n", above_roof, model_beaten);
    fmt::print(out, "wrote {}\n", output);
    return exit_ok;
}

}  // namespace einc::cli
