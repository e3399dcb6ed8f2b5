#include "cli/measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "cli/commands.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"
#include "runtime/gradient.hpp"
#include "runtime/narrow_float.hpp"
#include "runtime/program.hpp"
#if EINC_HAS_CUDA
#include "cuda/cuda.hpp"
#endif

namespace einc::cli {
namespace {

using Clock = std::chrono::steady_clock;

int parse_count(const std::string& option, const std::string& text, int minimum) {
    int value = 0;
    std::istringstream stream(text);
    if (!(stream >> value) || !stream.eof() || value < minimum)
        throw UsageError(fmt::format("{} needs a whole number >= {}, got '{}'", option, minimum, text));
    return value;
}

// Element `i` of the T array at `data`, set to `value` converted to T.
template <typename T>
void put(void* data, std::int64_t i, auto value) {
    static_cast<T*>(data)[i] = static_cast<T>(value);
}

// Uniform values in [-1, 1) (small integers for integer dtypes, 0..16 for unsigned ones; complex: both
// parts), so that no value is a NaN, an infinity or a subnormal that would make a kernel slower than it is
// on real data.
void fill_random(const Tensor& tensor, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> real(-1, 1);
    std::uniform_int_distribution<int> integer(-8, 8);
    const std::int64_t n = tensor.numel();
    void* data = tensor.data();
    for (std::int64_t i = 0; i < n; ++i) {
        switch (tensor.dtype()) {
        case DType::f64: put<double>(data, i, real(rng)); break;
        case DType::f32: put<float>(data, i, real(rng)); break;
        case DType::f16: put<std::uint16_t>(data, i, f32_to_f16(real(rng))); break;
        case DType::bf16: put<std::uint16_t>(data, i, f32_to_bf16(real(rng))); break;
        case DType::f8e4m3: put<std::uint8_t>(data, i, f32_to_f8e4m3(real(rng))); break;
        case DType::f8e5m2: put<std::uint8_t>(data, i, f32_to_f8e5m2(real(rng))); break;
        case DType::i8: put<std::int8_t>(data, i, integer(rng)); break;
        case DType::i16: put<std::int16_t>(data, i, integer(rng)); break;
        case DType::i32: put<std::int32_t>(data, i, integer(rng)); break;
        case DType::i64: put<std::int64_t>(data, i, integer(rng)); break;
        case DType::u8: put<std::uint8_t>(data, i, integer(rng) + 8); break;
        case DType::u16: put<std::uint16_t>(data, i, integer(rng) + 8); break;
        case DType::u32: put<std::uint32_t>(data, i, integer(rng) + 8); break;
        case DType::u64: put<std::uint64_t>(data, i, integer(rng) + 8); break;
        case DType::boolean: put<std::uint8_t>(data, i, integer(rng) > 0); break;
        case DType::c64:
            put<float>(data, 2 * i, real(rng));
            put<float>(data, 2 * i + 1, real(rng));
            break;
        case DType::c128:
            put<double>(data, 2 * i, real(rng));
            put<double>(data, 2 * i + 1, real(rng));
            break;
        }
    }
}

#if EINC_HAS_CUDA
// What waiting for an idle device costs (median of 5), subtracted from each timed batch.
double gpu_sync_overhead() {
    std::vector<double> idle;
    for (int i = 0; i < 5; ++i) {
        const auto start = Clock::now();
        cuda::synchronize();
        idle.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::sort(idle.begin(), idle.end());
    return idle[2];
}
#endif

// Operands for the call: the .npy files' data, or random data of the call's dtype and layout, on `device`.
struct Operands {
    std::vector<Tensor> storage;
    std::vector<TensorView> views;
};

Operands make_operands(const LoadedOperands& loaded, Device device) {
    Operands operands;
    std::size_t file = 0;
    for (std::size_t i = 0; i < loaded.views.size(); ++i) {
        const TensorView& spec = loaded.views[i];
        Tensor host;
        std::int64_t origin = 0;     // where element (0, ...) is in `host`, in elements
        if (spec.data != nullptr) {  // read from a .npy file (row-major)
            host = loaded.files.at(file++);
        } else {  // random data in a flat buffer that the layout's strides address
            // Negative strides reach below element (0, ...): the buffer starts at the lowest offset.
            const OffsetRange range = offset_range(make_layout(spec.shape, spec.strides));
            host = Tensor::empty(spec.dtype, {range.end - range.begin});
            origin = -range.begin;
            fill_random(host, static_cast<unsigned>(i + 1));
        }
        const Shape strides = spec.data != nullptr ? host.view().strides : spec.strides;
#if EINC_HAS_CUDA
        if (device == Device::cuda) try {  // the storage its strides address, flat
                host = cuda::to_device(TensorView{host.data(), host.dtype(), {host.numel()}, {1}});
            } catch (Error& e) {
                throw std::move(e.note(
                    fmt::format("for operand {}: {} {}", i, name_of(spec.dtype), format_shape(spec.shape))));
            }
#endif
        operands.views.push_back(TensorView{static_cast<std::byte*>(host.data()) +
                                                origin * static_cast<std::int64_t>(size_of(spec.dtype)),
                                            spec.dtype, spec.shape, strides, device, 0});
        operands.storage.push_back(std::move(host));
    }
    return operands;
}

// A reader for the flat JSON objects `einc bench --json` writes: strings, numbers, true/false/null.
class JsonReader {
public:
    JsonReader(std::string text, std::string path) : text_(std::move(text)), path_(std::move(path)) {}

    std::vector<std::map<std::string, std::string>> objects() {
        std::vector<std::map<std::string, std::string>> result;
        skip_blanks();
        const bool array = peek() == '[';
        if (array) ++at_;
        for (skip_blanks(); at_ < text_.size() && peek() != ']'; skip_blanks()) {
            result.push_back(object());
            skip_blanks();
            if (peek() == ',') ++at_;
        }
        if (array && peek() != ']') fail("expected ']'");
        return result;
    }

private:
    char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
    void skip_blanks() {
        while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    }
    [[noreturn]] void fail(std::string_view what) const {
        const auto line =
            1 + std::count(text_.begin(),
                           text_.begin() + static_cast<std::ptrdiff_t>(std::min(at_, text_.size())), '\n');
        throw Error(ErrorKind::file,
                    fmt::format("{}:{}: {} (expected the output of einc bench --json)", path_, line, what));
    }
    void expect(char c) {
        skip_blanks();
        if (peek() != c) fail(fmt::format("expected '{}'", c));
        ++at_;
    }
    std::string string() {
        expect('"');
        std::string out;
        for (; at_ < text_.size() && text_[at_] != '"'; ++at_) {
            if (text_[at_] == '\\' && at_ + 1 < text_.size()) ++at_;
            out += text_[at_];
        }
        if (at_ >= text_.size()) fail("unterminated string");
        ++at_;
        return out;
    }
    std::string scalar() {
        skip_blanks();
        if (peek() == '"') return string();
        const std::size_t begin = at_;
        while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) ||
                                      std::string_view("+-.").find(text_[at_]) != std::string_view::npos))
            ++at_;
        if (begin == at_) fail("expected a value");
        return text_.substr(begin, at_ - begin);
    }
    std::map<std::string, std::string> object() {
        expect('{');
        std::map<std::string, std::string> fields;
        for (skip_blanks(); peek() != '}'; skip_blanks()) {
            std::string key = string();
            expect(':');
            fields[std::move(key)] = scalar();
            skip_blanks();
            if (peek() == ',')
                ++at_;
            else if (peek() != '}')
                fail("expected ',' or '}'");
        }
        ++at_;
        return fields;
    }

    std::string text_, path_;
    std::size_t at_ = 0;
};

// Times run_once: warm-up runs, then the median of the samples (calls under 50 us in batches).
template <typename Run>
Measurement time_runs(const Run& run_once, Device device, const BenchSettings& settings) {
#if EINC_HAS_CUDA
    const bool on_gpu = device == Device::cuda;
    const double sync_overhead = on_gpu ? gpu_sync_overhead() : 0;
#else
    (void)device;
#endif
    // Seconds per call over `batch` calls, the device synchronised before and after.
    const auto time_batch = [&](int batch) {
#if EINC_HAS_CUDA
        if (on_gpu) cuda::synchronize();
#endif
        const auto start = Clock::now();
        for (int i = 0; i < batch; ++i) run_once();
        double overhead = 0;
#if EINC_HAS_CUDA
        if (on_gpu) {
            cuda::synchronize();
            overhead = sync_overhead;
        }
#endif
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count() - overhead;
        return std::max(seconds, 1e-12) / batch;
    };

    for (int i = 0; i < settings.warmup; ++i) run_once();
    // Calls under 50 us are timed in batches of about 200 us.
    const double once = time_batch(1);
    const int batch =
        once >= 50e-6 ? 1 : static_cast<int>(std::min(10000.0, std::ceil(200e-6 / std::max(once, 1e-9))));
    std::vector<double> samples;
    for (int i = 0; i < settings.repeat; ++i) samples.push_back(time_batch(batch));
    std::sort(samples.begin(), samples.end());
    const std::size_t n = samples.size();
    Measurement m;
    m.seconds = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    m.min_seconds = samples.front();
    m.max_seconds = samples.back();
    m.batch = batch;
    m.settings = settings;
    return m;
}

// --backward: the backward of the call, given random output gradients; each run makes fresh gradients.
Measurement measure_backward(const CallArgs& args, const BenchSettings& settings, const Operands& operands,
                             Device device) {
    const Gradient gradient = einc::gradient(Expression(args.call), operands.views);
    LoadedOperands loaded;  // random output gradients, of the outputs' dtypes and shapes, row-major
    for (const TensorSpec& g : row_major_gradients(gradient.forward().plan()))
        loaded.views.push_back(TensorView{nullptr, g.dtype, g.shape, g.strides});
    const Operands output_gradients = make_operands(loaded, device);
    const std::vector<Input> inputs(operands.views.begin(), operands.views.end());
    const std::vector<Input> gradients(output_gradients.views.begin(), output_gradients.views.end());
    Measurement m = time_runs([&] { (void)gradient.run(inputs, gradients); }, device, settings);
    for (const Gradient::Step& step : gradient.steps()) {
        m.plans.push_back(step.program.plan());
        m.schedules.push_back(step.program.schedule());
    }
    return m;
}

}  // namespace

BenchSettings take_bench_options(std::vector<std::string>& args) {
    BenchSettings settings;
    std::vector<std::string> rest;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg == "--repeat" || arg == "--warmup") {
            if (i + 1 >= args.size()) throw UsageError(fmt::format("option {} needs a value", arg));
            if (arg == "--repeat")
                settings.repeat = parse_count(arg, args[++i], 1);
            else
                settings.warmup = parse_count(arg, args[++i], 0);
        } else {
            rest.push_back(arg);
        }
    }
    args = std::move(rest);
    return settings;
}

std::string call_key(const CallArgs& args) {
    std::string key = format_call(args.call);
    if (args.backward) key += " --backward";
    for (const OperandArg& operand : args.operands)
        key += " " + (operand.is_file || operand.strides ? operand.text : format_shape(operand.shape));
    // .npy operands carry their own dtype; --dtype is part of the call only for shape operands.
    const bool all_files = std::all_of(args.operands.begin(), args.operands.end(),
                                       [](const OperandArg& operand) { return operand.is_file; });
    return all_files ? key : key + fmt::format(" --dtype {}", name_of(parse_dtype(args.dtype)));
}

Measurement measure(const CallArgs& args, const BenchSettings& settings) {
    const Device device = execution_device(settings.backend);

    const LoadedOperands loaded = load_operands(args);
    const Operands operands = make_operands(loaded, device);
    const std::vector<Input> inputs(operands.views.begin(), operands.views.end());
    if (args.backward) return measure_backward(args, settings, operands, device);
    const Program program = Expression(args.call).bind(operands.views, options_of(args));
    const Plan& plan = program.plan();

    // Results that are views are made afresh by each run (that is the work); the others are written into
    // outputs allocated once, so that allocation is not timed.
    bool any_view = false;
    for (std::size_t k = 0; k < plan.outputs.size(); ++k)
        any_view = any_view || plan.view_source(k).has_value();
    std::vector<Tensor> output_storage;
    std::vector<TensorView> outputs;
    if (!any_view)
        for (const TensorSpec& spec : plan.outputs) {
            output_storage.push_back(device == Device::cpu ? Tensor::empty(spec.dtype, spec.shape)
                                                           : allocate(spec.dtype, spec.shape, device, 0));
            outputs.push_back(output_storage.back().view());
        }
    const auto run_once = [&] {
        if (any_view)
            (void)program.run(inputs);
        else
            program.run(inputs, outputs);
    };
    Measurement m = time_runs(run_once, device, settings);
    m.plans = {plan};
    m.schedules = {program.schedule()};
    return m;
}

std::vector<TimingRecord> read_timings(const std::string& path) {
    std::ifstream file(path);
    if (!file) throw Error(ErrorKind::file, fmt::format("cannot read the timings file '{}'", path));
    std::stringstream text;
    text << file.rdbuf();
    std::vector<TimingRecord> records;
    for (const auto& fields : JsonReader(text.str(), path).objects()) {
        const auto get = [&](const std::string& key) {
            const auto it = fields.find(key);
            if (it == fields.end())
                throw Error(
                    ErrorKind::file,
                    fmt::format("{}: a timing without \"{}\" (expected the output of einc bench --json)",
                                path, key));
            return it->second;
        };
        TimingRecord record{get("call"), get("device"), get("backend"), 0, 0};
        try {
            record.seconds = std::stod(get("seconds"));
            record.repeat = std::stoi(get("repeat"));
        } catch (const std::logic_error&) {
            throw Error(ErrorKind::file,
                        fmt::format("{}: \"seconds\" or \"repeat\" is not a number in the timing of {}", path,
                                    record.call));
        }
        if (!(record.seconds > 0))
            throw Error(
                ErrorKind::file,
                fmt::format("{}: the timing of {} is not a positive number of seconds", path, record.call));
        records.push_back(std::move(record));
    }
    return records;
}

std::string percent(double fraction) {
    return fmt::format("{:.3g}%", 100 * fraction);
}

bool beats_model(double fraction) {
    return fraction > 1.005;  // (1.005: the clock's rounding)
}

std::string beyond_model(double fraction) {
    return beats_model(fraction) ? fmt::format(": {}", model_beaten) : "";
}

}  // namespace einc::cli
