// The GPU model (compiler/gpu_model.hpp) beside a gpu_bench JSON: for every permutation and reduction row,
// the kernels the schedule chooses for that call now, their predicted time beside the measured one, the
// error, and the checks the model is held to (median error <= 25%; every row measured below half of the
// HBM peak predicted below 0.6 of it). Needs no GPU: rerun it on the next GPU's JSON.
//
//   model_vs_measured RESULTS.json [--device h200] [--set NAME=VALUE]... [--title TEXT]
//
// --set replaces a fitted parameter (bandwidth, launch, tau_stream, tau_round, t_c, l2_reuse; seconds,
// bytes) for a what-if; the committed table uses none.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "compiler/cost.hpp"
#include "compiler/gpu_model.hpp"
#include "compiler/lower.hpp"

namespace {

// ---- just enough JSON to read gpu_bench's output --------------------------------------------------------

struct Json;
using JsonObject = std::map<std::string, Json>;
using JsonArray = std::vector<Json>;
struct Json {
    std::variant<std::nullptr_t, bool, double, std::string, JsonArray, JsonObject> value;
    const Json& operator[](const std::string& key) const {
        const auto& object = std::get<JsonObject>(value);
        const auto it = object.find(key);
        if (it == object.end()) throw std::runtime_error(fmt::format("no \"{}\" in the JSON", key));
        return it->second;
    }
    bool has(const std::string& key) const {
        const auto* object = std::get_if<JsonObject>(&value);
        return object && object->contains(key);
    }
    const std::string& text() const { return std::get<std::string>(value); }
    double number() const { return std::get<double>(value); }
    const JsonArray& array() const { return std::get<JsonArray>(value); }
};

class JsonReader {
public:
    explicit JsonReader(std::string text) : text_(std::move(text)) {}
    Json read() {
        Json json = value();
        space();
        if (at_ != text_.size()) fail("trailing text");
        return json;
    }

private:
    [[noreturn]] void fail(const char* what) const {
        throw std::runtime_error(fmt::format("JSON: {} at byte {}", what, at_));
    }
    void space() {
        while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    }
    bool take(char c) {
        space();
        if (at_ < text_.size() && text_[at_] == c) return ++at_, true;
        return false;
    }
    std::string string() {
        if (!take('"')) fail("expected a string");
        std::string out;
        while (at_ < text_.size() && text_[at_] != '"') {
            char c = text_[at_++];
            if (c == '\\') {
                if (at_ >= text_.size()) fail("unfinished escape");
                c = text_[at_++];
                if (c == 'n')
                    c = '\n';
                else if (c == 't')
                    c = '\t';
                else if (c == 'u') {  // (gpu_bench writes only ASCII escapes)
                    c = static_cast<char>(std::stoi(text_.substr(at_, 4), nullptr, 16));
                    at_ += 4;
                }
            }
            out += c;
        }
        if (!take('"')) fail("unfinished string");
        return out;
    }
    Json value() {
        space();
        if (at_ >= text_.size()) fail("expected a value");
        const char c = text_[at_];
        if (c == '{') {
            ++at_;
            JsonObject object;
            if (!take('}')) {
                do {
                    std::string key = string();
                    if (!take(':')) fail("expected ':'");
                    object.emplace(std::move(key), value());
                } while (take(','));
                if (!take('}')) fail("expected '}'");
            }
            return Json{std::move(object)};
        }
        if (c == '[') {
            ++at_;
            JsonArray array;
            if (!take(']')) {
                do array.push_back(value());
                while (take(','));
                if (!take(']')) fail("expected ']'");
            }
            return Json{std::move(array)};
        }
        if (c == '"') return Json{string()};
        for (const auto& [word, json] : {std::pair{"true", Json{true}}, std::pair{"false", Json{false}},
                                         std::pair{"null", Json{nullptr}}})
            if (text_.compare(at_, std::string_view(word).size(), word) == 0) {
                at_ += std::string_view(word).size();
                return json;
            }
        std::size_t used = 0;
        const double number = std::stod(text_.substr(at_, 40), &used);
        at_ += used;
        return Json{number};
    }
    std::string text_;
    std::size_t at_ = 0;
};

// ---- gpu_bench's rows as calls ---------------------------------------------------------------------------

// The axis sizes a row's case text does not show (gpu_bench passes them to the call).
const std::map<std::string, einc::AxisSizes> axis_sizes{
    {"heads_split", {{"h", 16}}},
    {"qkv_split", {{"k", 3}, {"h", 16}}},
};

struct BenchCall {
    einc::Call call;
    std::vector<einc::TensorSpec> inputs;
    bool contiguous = false;  // permutations are timed into a new contiguous output
};

// "a b -> b a f32 4096x4096" (a permutation) or "sum a b -> a f32 32768x32" (a reduction).
BenchCall bench_call(const std::string& group, const std::string& key, const std::string& text) {
    std::vector<std::string> words;
    std::istringstream in(text);
    for (std::string w; in >> w;) words.push_back(w);
    if (words.size() < 4) throw std::runtime_error("a case that is not `[op] pattern dtype shape`");
    BenchCall b;
    std::size_t first = 0;
    if (group == "reduction") {
        b.call.op = einc::Op::reduce;
        const auto op = einc::reduction_named(words[0]);
        if (!op) throw std::runtime_error("unknown reduction " + words[0]);
        b.call.reduction = *op;
        first = 1;
    } else {
        b.call.op = einc::Op::rearrange;
        b.contiguous = true;
    }
    const std::string shape_text = words.back(), dtype_text = words[words.size() - 2];
    for (std::size_t w = first; w + 2 < words.size(); ++w)
        b.call.pattern += (b.call.pattern.empty() ? "" : " ") + words[w];
    const auto dtype = einc::dtype_named(dtype_text);
    if (!dtype) throw std::runtime_error("unknown dtype " + dtype_text);
    einc::Shape shape;
    for (std::size_t begin = 0; begin <= shape_text.size();) {
        const std::size_t end = std::min(shape_text.find('x', begin), shape_text.size());
        shape.push_back(std::stoll(shape_text.substr(begin, end - begin)));
        begin = end + 1;
    }
    if (const auto it = axis_sizes.find(key); it != axis_sizes.end()) b.call.sizes = it->second;
    b.inputs.push_back({*dtype, shape, einc::row_major_strides(shape)});
    return b;
}

struct Row {
    std::string group, key, text, note;
    double measured = 0, baseline = 0, bytes = 0;
    std::vector<einc::StepKernels> steps;  // the generated kernels' steps (empty: not modelled)
    bool modelled() const { return !steps.empty(); }
};

struct Predicted {
    double seconds = 0;
    einc::GpuLimit limited_by = einc::GpuLimit::launch;
    std::vector<std::pair<const einc::KernelLaunch*, einc::KernelPrediction>> kernels;
};

Predicted predict(const Row& row, const einc::GpuParameters& gpu) {
    Predicted p;
    double slowest = -1;
    for (const einc::StepKernels& step : row.steps) {
        const einc::StepPrediction s = einc::predict_step(step, gpu);
        p.seconds += s.seconds;
        for (std::size_t k = 0; k < s.kernels.size(); ++k) {
            p.kernels.emplace_back(&step.launches[k], s.kernels[k]);
            if (s.kernels[k].seconds > slowest) {
                slowest = s.kernels[k].seconds;
                p.limited_by = s.kernels[k].limited_by;
            }
        }
    }
    return p;
}

std::string short_kernel(const einc::KernelSignature& s) {
    return fmt::format("{}{}", einc::name_of(s.kind), s.partials ? " (partials)" : "");
}

double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The fitted parameters (compiler/gpu_model.cpp), each from the rows that isolate it, the others held,
// until none moves: BW straight from the copy baselines; tau_round and tau_stream so that their row's
// prediction equals its measurement; T_L and t_c together, by least squares of log(predicted / measured)
// over the rows made of launches and serial chains.
struct Calibration {
    const char* name;
    double einc::GpuParameters::*field;
    double low, high;
    std::vector<std::string> rows;
};
const Calibration calibrations[] = {
    {"tau_round", &einc::GpuParameters::round_latency, 10e-9, 50e-6, {"transpose_4096"}},
    {"tau_stream", &einc::GpuParameters::stream_latency, 10e-9, 10e-6, {"sum_scores_outer"}},
    {"T_L",
     &einc::GpuParameters::launch_seconds,
     0,
     20e-6,
     {"sum_inner_32768x32", "sum_outer_32768x32", "sum_all_32768x32", "sum_outer_7840000x4",
      "sum_all_7840000x4"}},
    {"t_c",
     &einc::GpuParameters::chain_step_seconds,
     1e-9,
     10e-6,
     {"sum_inner_32768x32", "sum_outer_32768x32", "sum_all_32768x32", "sum_outer_7840000x4",
      "sum_all_7840000x4"}},
};

struct Fit {
    einc::GpuParameters gpu;
    std::vector<std::string> missing;  // calibration rows not in the JSON
};

Fit calibrate(const std::vector<Row>& rows, einc::GpuParameters gpu) {
    Fit fit;
    std::vector<double> copies;
    for (const Row& r : rows)
        if (r.group == "permutation" && r.baseline > 0) copies.push_back(r.bytes / r.baseline);
    if (copies.empty())
        fit.missing.push_back("BW (no copy baseline)");
    else
        gpu.bandwidth = median(copies);
    const auto rows_of = [&](const Calibration& c) {
        std::vector<const Row*> found;
        for (const std::string& key : c.rows) {
            const auto it =
                std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.key == key; });
            if (it != rows.end() && it->modelled())
                found.push_back(&*it);
            else if (std::find(fit.missing.begin(), fit.missing.end(), key) == fit.missing.end())
                fit.missing.push_back(key);
        }
        return found;
    };
    for (int round = 0; round < 30; ++round)
        for (const Calibration& c : calibrations) {
            const std::vector<const Row*> found = rows_of(c);
            if (found.empty()) continue;
            double low = c.low, high = c.high;
            if (found.size() == 1) {  // the prediction grows with each parameter: bisect to the measurement
                for (int step = 0; step < 60; ++step) {
                    gpu.*c.field = (low + high) / 2;
                    (predict(*found[0], gpu).seconds < found[0]->measured ? low : high) = gpu.*c.field;
                }
                continue;
            }
            const auto squares = [&](double value) {  // Σ log²(predicted / measured)
                gpu.*c.field = value;
                double sum = 0;
                for (const Row* r : found)
                    sum += std::pow(std::log(predict(*r, gpu).seconds / r->measured), 2);
                return sum;
            };
            for (int step = 0; step < 80; ++step) {  // golden-section search
                const double a = high - (high - low) * 0.618, b = low + (high - low) * 0.618;
                (squares(a) < squares(b) ? high : low) = squares(a) < squares(b) ? b : a;
            }
            gpu.*c.field = (low + high) / 2;
        }
    fit.gpu = gpu;
    return fit;
}

std::string share_text(double x) {
    return fmt::format("{:.0f}%", 100 * x);
}

int run(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: model_vs_measured RESULTS.json [--device h200] [--set NAME=VALUE]... "
                             "[--refit] [--title TEXT]\n");
        return 2;
    }
    std::string path = argv[1], device_key = "h200", title;
    bool refit = false;
    std::vector<std::pair<std::string, double>> settings;
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--refit") {
            refit = true;
            continue;
        }
        if (i + 1 >= argc) throw std::runtime_error("option " + arg + " needs a value");
        const std::string value = argv[++i];
        if (arg == "--device")
            device_key = value;
        else if (arg == "--title")
            title = value;
        else if (arg == "--set" && value.find('=') != std::string::npos)
            settings.emplace_back(value.substr(0, value.find('=')),
                                  std::stod(value.substr(value.find('=') + 1)));
        else
            throw std::runtime_error("unknown option " + arg);
    }
    const einc::GpuParameters* fitted = einc::gpu_parameters(device_key);
    const einc::DeviceModel* device = einc::device_model_named(device_key);
    if (!fitted || !device) throw std::runtime_error("no GPU model for device " + device_key);

    std::ifstream file(path);
    if (!file) throw std::runtime_error("cannot read " + path);
    std::stringstream text;
    text << file.rdbuf();
    const Json results = JsonReader(text.str()).read();

    std::vector<Row> rows;
    for (const Json& r : results["rows"].array()) {
        Row row;
        row.group = r["group"].text();
        if (row.group != "permutation" && row.group != "reduction") continue;
        row.key = r["key"].text();
        row.text = r["case"].text();
        row.measured = r["einc_seconds"].number();
        row.baseline = r["baseline_seconds"].number();
        row.bytes = r["bytes"].number();
        try {
            const BenchCall b = bench_call(row.group, row.key, row.text);
            einc::LowerOptions options;
            options.plan.contiguous = b.contiguous;
            options.target = einc::Target::gpu(fitted->multiprocessors);
            const einc::Lowered lowered = einc::lower(b.call, b.inputs, options);
            for (std::size_t s = 0; s < lowered.plan.steps.size(); ++s)
                if (auto step = einc::step_kernels(lowered.plan, lowered.schedule, s, fitted->l2_reuse_bytes))
                    row.steps.push_back(std::move(*step));
            if (!row.modelled()) row.note = "no generated kernel";
        } catch (const std::exception& e) {
            row.note = e.what();
        }
        rows.push_back(std::move(row));
    }

    const Fit fit = calibrate(rows, *fitted);
    einc::GpuParameters gpu = refit ? fit.gpu : *fitted;
    for (const auto& [name, value] : settings) {
        double* field = name == "bandwidth"    ? &gpu.bandwidth
                        : name == "launch"     ? &gpu.launch_seconds
                        : name == "tau_stream" ? &gpu.stream_latency
                        : name == "tau_round"  ? &gpu.round_latency
                        : name == "t_c"        ? &gpu.chain_step_seconds
                        : name == "l2_reuse"   ? &gpu.l2_reuse_bytes
                                               : nullptr;
        if (!field) throw std::runtime_error("unknown parameter " + name);
        *field = value;
    }
    const auto is_calibration = [](const std::string& key) {
        return std::any_of(std::begin(calibrations), std::end(calibrations), [&](const Calibration& c) {
            return std::find(c.rows.begin(), c.rows.end(), key) != c.rows.end();
        });
    };

    const double peak = device->bandwidth;
    const auto share = [&](double bytes, double seconds) { return bytes / seconds / peak; };
    const std::string file_name = path.substr(path.find_last_of('/') + 1);
    fmt::print("# {}\n\n",
               title.empty() ? fmt::format("The GPU model beside {}", results["device"].text()) : title);
    fmt::print(
        "Measured: `{}` ({}, {}). Predicted: the model of `{}` (compiler/gpu_model.hpp){} for the kernels "
        "the schedule chooses now.\nRegenerate: `build/bench/model_vs_measured {}{}{}{}`.\n\n",
        file_name, results["device"].text(), results["date"].text(), device_key,
        refit              ? ", refitted on this file"
        : settings.empty() ? ""
                           : ", with parameters replaced (--set)",
        path.substr(path.find("bench/") == std::string::npos ? 0 : path.find("bench/")),
        device_key == "h200" ? "" : " --device " + device_key, refit ? " --refit" : "",
        title.empty() ? "" : fmt::format(" --title \"{}\"", title));
    fmt::print("Error = predicted / measured - 1. % HBM = the row's bytes (gpu_bench's: read + write for a "
               "permutation, read for a reduction) / time / {}/s, the HBM peak of `{}`. Rows marked * "
               "calibrate a parameter (below); the checks are given over all rows and over the others.\n\n",
               einc::format_bytes(peak), device_key);
    fmt::print("| row | case | kernels (predicted each) | measured | predicted | error | % HBM measured | "
               "% HBM predicted | limited by |\n|---|---|---|---|---|---|---|---|---|\n");
    std::vector<double> errors, held_out;
    std::vector<std::pair<double, std::string>> by_error;
    std::vector<std::string> misses, terms;
    int slow = 0, slow_predicted_slow = 0;
    for (const Row& r : rows) {
        const std::string key = r.key + (is_calibration(r.key) ? "*" : "");
        if (!r.modelled()) {
            fmt::print("| {} | {} | not modelled: {} | {} | | | {} | | |\n", key, r.text, r.note,
                       einc::format_seconds(r.measured), share_text(share(r.bytes, r.measured)));
            continue;
        }
        const Predicted p = predict(r, gpu);
        const double error = p.seconds / r.measured - 1;
        errors.push_back(std::fabs(error));
        if (!is_calibration(r.key)) held_out.push_back(std::fabs(error));
        by_error.emplace_back(std::fabs(error), fmt::format("{} {:+.0f}%", r.key, 100 * error));
        std::vector<std::string> kernels;
        for (std::size_t k = 0; k < p.kernels.size(); ++k) {
            const auto& [launch, kp] = p.kernels[k];
            kernels.push_back(
                fmt::format("{} {}", short_kernel(launch->signature), einc::format_seconds(kp.seconds)));
            terms.push_back(fmt::format(
                "| {} | {}<<<{}, {}>>> | {} | {} | {} | {} | {} | {:.2f} | {} | {:.3g} | {:.3g} | {:.3g} | "
                "{} |",
                r.key, short_kernel(launch->signature), launch->grid.x, launch->block.x * launch->block.y,
                einc::format_seconds(kp.launch_seconds), einc::format_seconds(kp.bandwidth_seconds),
                einc::format_seconds(kp.latency_seconds), einc::format_seconds(kp.issue_seconds),
                einc::format_seconds(kp.chain_seconds), kp.sector_efficiency,
                einc::format_bytes(kp.bytes_in_flight_per_sm), kp.waves, kp.rounds, kp.serial_chain,
                kp.l2_resident ? "L2" : "HBM"));
        }
        fmt::print("| {} | {} | {} | {} | {} | {:+.0f}% | {} | {} | {} |\n", key, r.text,
                   fmt::join(kernels, " + "), einc::format_seconds(r.measured),
                   einc::format_seconds(p.seconds), 100 * error, share_text(share(r.bytes, r.measured)),
                   share_text(share(r.bytes, p.seconds)), einc::name_of(p.limited_by));
        if (share(r.bytes, r.measured) < 0.5) {
            ++slow;
            if (share(r.bytes, p.seconds) < 0.6)
                ++slow_predicted_slow;
            else
                misses.push_back(
                    fmt::format("{} ({} predicted)", r.key, share_text(share(r.bytes, p.seconds))));
        }
    }
    std::sort(by_error.rbegin(), by_error.rend());
    int within = 0;
    for (const double e : errors) within += e <= 0.25 ? 1 : 0;
    const double median_error = median(errors);

    fmt::print("\n## Against the targets\n\n");
    fmt::print("- Median |error| over {} rows: {:.1f}% (target <= 25%): {}. Over the {} rows that calibrate "
               "nothing: {:.1f}%.\n",
               errors.size(), 100 * median_error, median_error <= 0.25 ? "met" : "NOT met", held_out.size(),
               100 * median(held_out));
    std::vector<std::string> worst;
    for (std::size_t k = 0; k < std::min<std::size_t>(3, by_error.size()); ++k)
        worst.push_back(by_error[k].second);
    fmt::print("- Rows within 25%: {} of {}. Largest errors: {}.\n", within, errors.size(),
               fmt::join(worst, ", "));
    fmt::print("- Rows measured below half of the HBM peak: {}; predicted below 0.6 of it: {} ({}){}.\n",
               slow, slow_predicted_slow, slow == slow_predicted_slow ? "met" : "NOT met",
               misses.empty() ? "" : fmt::format(": not {}", fmt::join(misses, ", ")));

    fmt::print(
        "\n## The terms of each kernel\n\nT = T_L + max(D/BW, latency, issue) + chain "
        "(compiler/gpu_model.hpp). Q: bytes in flight per SM; R: rounds of batches per warp slot; C: the "
        "busiest thread's batches; data: where the kernel's loads find their data, called again and "
        "again.\n\n");
    fmt::print(
        "| row | kernel | T_L | D/BW | latency | issue | chain | sector efficiency | Q | waves | R | C | "
        "data |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const std::string& line : terms) fmt::print("{}\n", line);

    fmt::print(
        "\n## Calibration\n\nEach fitted parameter from the rows that isolate it, the others held, until "
        "none moves: BW the median cudaMemcpy bandwidth of the permutation rows' baselines; tau_round and "
        "tau_stream so that their row is predicted exactly; T_L and t_c together, by least squares of "
        "log(predicted / measured) over the five rows made of launches and serial chains. Used: the "
        "values in compiler/gpu_model.cpp{}.\n\n",
        refit ? ", replaced by those this file implies (--refit)" : "");
    fmt::print("| parameter | from | this file implies | compiler/gpu_model.cpp |\n|---|---|---|---|\n");
    fmt::print("| BW | cudaMemcpy baselines | {:.4g} B/s | {:.4g} B/s |\n", fit.gpu.bandwidth,
               fitted->bandwidth);
    for (const Calibration& c : calibrations)
        fmt::print("| {} | {} | {:.4g} s | {:.4g} s |\n", c.name, fmt::join(c.rows, ", "), fit.gpu.*c.field,
                   (*fitted).*c.field);
    for (const std::string& m : fit.missing) fmt::print("\nNot calibrated here: {}.\n", m);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "model_vs_measured: %s\n", e.what());
        return 1;
    }
}
