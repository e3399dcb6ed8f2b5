#include "runtime/calibration.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <sstream>
#include <sys/utsname.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "grammar/diagnostic.hpp"
#include "runtime/cpu/parallel.hpp"
#include "runtime/program.hpp"
#include "runtime/tensor.hpp"

namespace einc {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int format_version = 2;  // 2: step_seconds
constexpr std::int64_t MiB = std::int64_t{1} << 20;

// Where the bandwidth loops leave a result, so that the compiler cannot drop them as unused.
volatile std::uint64_t observed = 0;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---- what the system says about itself ----------------------------------------------------------------

std::string trimmed(std::string_view text) {
    const std::size_t begin = text.find_first_not_of(" \t\r\n");
    if (begin == std::string_view::npos) return {};
    const std::size_t end = text.find_last_not_of(" \t\r\n");
    return std::string(text.substr(begin, end - begin + 1));
}

std::string read_small_file(const fs::path& path) {
    std::ifstream file(path);
    std::string text;
    std::getline(file, text, '\0');
    return trimmed(text);
}

// x86 says "model name"; ARM kernels say "Hardware" or "Processor" (older) or nothing useful.
std::string cpu_name() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::map<std::string, std::string> fields;
    for (std::string line; std::getline(cpuinfo, line);) {
        const std::size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        fields.emplace(trimmed(std::string_view(line).substr(0, colon)),
                       trimmed(std::string_view(line).substr(colon + 1)));
    }
    for (const char* key : {"model name", "Hardware", "Processor", "cpu model", "cpu"})
        if (const auto it = fields.find(key); it != fields.end() && !it->second.empty()) return it->second;
    if (utsname system{}; ::uname(&system) == 0) return fmt::format("{} CPU", system.machine);
    return "unknown CPU";
}

// Physical cores: distinct (package, core) pairs among the online CPUs; 0 where sysfs says nothing.
int physical_cores() {
    std::set<std::pair<std::string, std::string>> cores;
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator("/sys/devices/system/cpu", error)) {
        const std::string name = entry.path().filename().string();
        if (name.size() < 4 || !name.starts_with("cpu") || !std::isdigit(static_cast<unsigned char>(name[3])))
            continue;
        const std::string core = read_small_file(entry.path() / "topology/core_id");
        if (!core.empty())
            cores.emplace(read_small_file(entry.path() / "topology/physical_package_id"), core);
    }
    return static_cast<int>(cores.size());
}

// "32K", "1024K", "32M": bytes; 0 for anything else.
std::int64_t parse_cache_size(const std::string& text) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || value <= 0) return 0;
    const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
    if (unit.empty()) return value;
    if (unit == "K") return value << 10;
    if (unit == "M") return value << 20;
    if (unit == "G") return value << 30;
    return 0;
}

// "0-7,64-71": how many CPUs.
int count_cpu_list(const std::string& list) {
    int count = 0;
    std::istringstream ranges(list);
    for (std::string range; std::getline(ranges, range, ',');) {
        int first = 0, last = 0;
        const char* begin = range.data();
        const char* end = range.data() + range.size();
        auto [after_first, error] = std::from_chars(begin, end, first);
        if (error != std::errc{}) continue;
        last = first;
        if (after_first != end && *after_first == '-') std::from_chars(after_first + 1, end, last);
        count += std::max(0, last - first + 1);
    }
    return count;
}

struct Caches {
    std::int64_t l1d = 0, l2 = 0, l3 = 0;
    int l3_sharers = 0;  // CPUs sharing cpu0's L3 (0: unknown)
};

Caches cache_sizes() {
    Caches caches;
    std::error_code error;
    for (const fs::directory_entry& entry :
         fs::directory_iterator("/sys/devices/system/cpu/cpu0/cache", error)) {
        if (!entry.path().filename().string().starts_with("index")) continue;
        const std::string level = read_small_file(entry.path() / "level"),
                          type = read_small_file(entry.path() / "type");
        const std::int64_t size = parse_cache_size(read_small_file(entry.path() / "size"));
        if (level == "1" && (type == "Data" || type == "Unified")) caches.l1d = size;
        if (level == "2") caches.l2 = size;
        if (level == "3") {
            caches.l3 = size;
            caches.l3_sharers = count_cpu_list(read_small_file(entry.path() / "shared_cpu_list"));
        }
    }
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
    // glibc's answer where sysfs has none (containers may hide it).
    const auto configured = [](int name) { return std::max<std::int64_t>(0, ::sysconf(name)); };
    if (caches.l1d == 0) caches.l1d = configured(_SC_LEVEL1_DCACHE_SIZE);
    if (caches.l2 == 0) caches.l2 = configured(_SC_LEVEL2_CACHE_SIZE);
    if (caches.l3 == 0) caches.l3 = configured(_SC_LEVEL3_CACHE_SIZE);
#endif
    return caches;
}

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    std::array<char, 32> text{};
    std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text.data();
}

// ---- measuring ----------------------------------------------------------------------------------------

// The best (shortest) time of `run`: at least `min_repeats` calls, more while `budget` seconds last. The
// best, not the median: interference only ever slows a run down, and the model wants what is attainable.
template <typename Run>
double best_seconds(Run&& run, int min_repeats, double budget) {
    double best = std::numeric_limits<double>::infinity();
    const Clock::time_point start = Clock::now();
    for (int repeat = 0; repeat < min_repeats || (seconds_since(start) < budget && repeat < 10'000);
         ++repeat) {
        const Clock::time_point begin = Clock::now();
        run();
        best = std::min(best, seconds_since(begin));
    }
    return std::max(best, 1e-9);
}

// Large enough that no cache holds a meaningful part of it: four times all the last-level cache there
// is (cpu0's L3 times the L3s the machine has), at least 256 MiB; at most 2 GiB and an eighth of memory.
std::int64_t bandwidth_buffer_bytes(const Caches& caches, bool quick) {
    if (quick) return 32 * MiB;
    const long cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    const long l3_count = caches.l3_sharers > 0 ? (cpus + caches.l3_sharers - 1) / caches.l3_sharers : 1;
    std::int64_t bytes = std::max<std::int64_t>(256 * MiB, 4 * caches.l3 * l3_count);
    bytes = std::min<std::int64_t>(bytes, 2048 * MiB);
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0)
        bytes = std::min<std::int64_t>(bytes, std::int64_t{pages} * page_size / 8);
    return std::max<std::int64_t>(bytes, 16 * MiB) / MiB * MiB;
}

struct Bandwidths {
    double read = 0, copy = 0;
};

Bandwidths measure_bandwidth(std::int64_t bytes, int min_repeats, double budget) {
    const std::int64_t n = bytes / static_cast<std::int64_t>(sizeof(std::uint64_t));
    const auto source = std::make_unique_for_overwrite<std::uint64_t[]>(static_cast<std::size_t>(n));
    const auto destination = std::make_unique_for_overwrite<std::uint64_t[]>(static_cast<std::size_t>(n));
    // Written first, in the chunks that will read them, so that no page fault is timed.
    cpu::parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i)
            source[i] = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15u;
        std::memset(destination.get() + begin, 0,
                    static_cast<std::size_t>(end - begin) * sizeof(std::uint64_t));
    });

    // Integer sums, four at a time: the compiler vectorises them, so the loads outrun the memory.
    std::atomic<std::uint64_t> checksum{0};
    const auto read = [&] {
        cpu::parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
            const std::uint64_t* p = source.get();
            std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            std::int64_t i = begin;
            for (; i + 4 <= end; i += 4) {
                s0 += p[i];
                s1 += p[i + 1];
                s2 += p[i + 2];
                s3 += p[i + 3];
            }
            for (; i < end; ++i) s0 += p[i];
            checksum.fetch_add(s0 + s1 + s2 + s3, std::memory_order_relaxed);
        });
    };
    // As einc's CPU executor copies a contiguous run: memcpy, a part per thread.
    const auto copy = [&] {
        cpu::parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
            std::memcpy(destination.get() + begin, source.get() + begin,
                        static_cast<std::size_t>(end - begin) * sizeof(std::uint64_t));
        });
    };
    const double read_bytes = static_cast<double>(n) * sizeof(std::uint64_t);
    Bandwidths result;
    result.read = read_bytes / best_seconds(read, min_repeats, budget / 2);
    // A copy moves its bytes twice, read and written, as the cost model counts them.
    result.copy = 2 * read_bytes / best_seconds(copy, min_repeats, budget / 2);
    observed = checksum.load() ^ destination[static_cast<std::size_t>(n / 2)];
    return result;
}

// FLOP/s of einc's own n x n x n GEMM: the plan einc::einsum makes (BLAS where linked), run into a
// result allocated once. The size doubles from `first` while the larger GEMM fits the budget.
double measure_gemm(DType dtype, int first, int largest, int min_repeats, double budget, int* size) {
    const Expression matmul = compile(Op::einsum, "i k, k j -> i j");
    const Clock::time_point start = Clock::now();
    for (int n = first;; n *= 2) {
        Tensor a = Tensor::empty(dtype, {n, n}), b = Tensor::empty(dtype, {n, n}),
               c = Tensor::empty(dtype, {n, n});
        // Values in [0.5, 1.5): no zero, subnormal or NaN that could change the speed.
        for (Tensor* t : {&a, &b}) {
            const std::int64_t count = t->numel();
            for (std::int64_t i = 0; i < count; ++i) {
                const double value = 0.5 + static_cast<double>((i * 7919) % 1000) / 1000;
                if (dtype == DType::f64)
                    static_cast<double*>(t->data())[i] = value;
                else
                    static_cast<float*>(t->data())[i] = static_cast<float>(value);
            }
        }
        const Program program = matmul.bind({a.view(), b.view()});
        const std::array<Input, 2> inputs{Input(a), Input(b)};
        const std::array<TensorView, 1> outputs{c.view()};
        const auto run = [&] { program.run(inputs, outputs); };
        const Clock::time_point warm = Clock::now();
        run();  // warm-up: BLAS threads, packing buffers, the caches
        const double once = seconds_since(warm);
        // Larger while that GEMM (8x the work) could run min_repeats + 1 times in what is left.
        if (n < largest && once * 8 * (min_repeats + 1) < budget - seconds_since(start)) continue;
        *size = n;
        const double flops = 2.0 * n * n * static_cast<double>(n);
        return flops / best_seconds(run, min_repeats, std::max(0.0, budget - seconds_since(start)));
    }
}

// What running one step costs however little it does: the best time of a program that sums a 4 x 8
// matrix's rows into a result allocated once.
double measure_step(int min_repeats, double budget) {
    Tensor x = Tensor::empty(DType::f32, {4, 8}), y = Tensor::empty(DType::f32, {4});
    std::fill_n(static_cast<float*>(x.data()), x.numel(), 1.0f);
    const Program program = compile(Op::reduce, "a b -> a", {}, Reduction::sum).bind({x.view()});
    const std::array<Input, 1> inputs{Input(x)};
    const std::array<TensorView, 1> outputs{y.view()};
    const auto run = [&] { program.run(inputs, outputs); };
    run();  // warm-up
    return best_seconds(run, min_repeats, budget);
}

// ---- the file -----------------------------------------------------------------------------------------

// The keys, in the order they are written; every one must be in a file.
constexpr std::array<std::string_view, 17> keys{
    "format",   "cpu_name",     "threads",        "hardware_threads", "cores",      "l1d_bytes",
    "l2_bytes", "l3_bytes",     "read_bandwidth", "copy_bandwidth",   "bandwidth",  "peak_f32",
    "peak_f64", "buffer_bytes", "gemm_size",      "step_seconds",     "measured_at"};

// Text from a file, safe to print: control bytes as '?', at most 60 bytes.
std::string printable(std::string_view text) {
    std::string out;
    for (const char c : text.substr(0, 60)) out += std::iscntrl(static_cast<unsigned char>(c)) ? '?' : c;
    return text.size() > 60 ? out + "..." : out;
}

Error malformed(const std::string& where, std::size_t line, std::string message) {
    Diagnostic diagnostic;
    diagnostic.kind = ErrorKind::file;
    diagnostic.location = line > 0 ? fmt::format("{}:{}", where, line) : where;
    diagnostic.message = fmt::format("malformed calibration: {}", message);
    diagnostic.help = "run `einc calibrate` to measure this machine again";
    return Error(std::move(diagnostic));
}

struct Field {
    std::string value;
    std::size_t line = 0;
};

class FieldReader {
public:
    FieldReader(std::map<std::string, Field, std::less<>> fields, std::string where)
        : fields_(std::move(fields)), where_(std::move(where)) {}

    const Field& field(std::string_view key) const {
        const auto it = fields_.find(key);
        if (it == fields_.end())
            throw malformed(where_, 0, fmt::format("no '{}' (the file is incomplete)", key));
        return it->second;
    }
    std::string text(std::string_view key) const {
        const Field& f = field(key);
        if (f.value.empty()) throw malformed(where_, f.line, fmt::format("{} is empty", key));
        return f.value;
    }
    // A finite number > 0.
    double positive(std::string_view key) const {
        const Field& f = field(key);
        double value = 0;
        const auto [end, error] = std::from_chars(f.value.data(), f.value.data() + f.value.size(), value);
        if (error != std::errc{} || end != f.value.data() + f.value.size() || f.value.empty())
            throw malformed(where_, f.line, fmt::format("{} is '{}', not a number", key, printable(f.value)));
        if (!std::isfinite(value) || value <= 0)
            throw malformed(where_, f.line,
                            fmt::format("{} is {}; it must be a positive number", key, printable(f.value)));
        return value;
    }
    std::int64_t whole(std::string_view key, std::int64_t minimum, std::int64_t maximum) const {
        const Field& f = field(key);
        std::int64_t value = 0;
        const auto [end, error] = std::from_chars(f.value.data(), f.value.data() + f.value.size(), value);
        if (error != std::errc{} || end != f.value.data() + f.value.size() || f.value.empty())
            throw malformed(where_, f.line,
                            fmt::format("{} is '{}', not a whole number", key, printable(f.value)));
        if (value < minimum || value > maximum)
            throw malformed(where_, f.line,
                            fmt::format("{} is {}; it must be from {} to {}", key, value, minimum, maximum));
        return value;
    }

private:
    std::map<std::string, Field, std::less<>> fields_;
    std::string where_;
};

}  // namespace

Calibration calibrate(const CalibrationOptions& options) {
    const auto progress = [&](std::string_view what) {
        if (options.progress) *options.progress << "  measuring " << what << '\n' << std::flush;
    };
    Calibration c;
    const Machine here = this_machine();
    c.cpu_name = here.cpu_name;
    c.threads = cpu::thread_count();
    c.hardware_threads = here.hardware_threads;
    c.cores = physical_cores();
    const Caches caches = cache_sizes();
    c.l1d_bytes = caches.l1d;
    c.l2_bytes = caches.l2;
    c.l3_bytes = caches.l3;
    c.measured_at = utc_now();

    // A third of the time for memory, two thirds for the GEMMs (their sizes and their repeats).
    const double budget = options.quick ? 0.2 : std::max(options.seconds, 1.0);
    const int min_repeats = options.quick ? 2 : 3;
    c.buffer_bytes = bandwidth_buffer_bytes(caches, options.quick);
    progress(fmt::format("memory bandwidth: reading and copying {} MiB with {}", c.buffer_bytes / MiB,
                         counted(c.threads, "thread")));
    const Bandwidths bandwidths = measure_bandwidth(c.buffer_bytes, min_repeats, budget / 3);
    c.read_bandwidth = bandwidths.read;
    c.copy_bandwidth = bandwidths.copy;
    c.bandwidth = std::max(c.read_bandwidth, c.copy_bandwidth);

    const int first = options.quick ? 128 : 1024, largest = options.quick ? 256 : 2048;
    progress("f32 GEMM peak: einsum \"i k, k j -> i j\"");
    c.peak_f32 = measure_gemm(DType::f32, first, largest, min_repeats, budget / 3, &c.gemm_size);
    progress("f64 GEMM peak");
    int f64_size = 0;
    c.peak_f64 = measure_gemm(DType::f64, first, largest, min_repeats, budget / 3, &f64_size);
    c.gemm_size = std::max(c.gemm_size, f64_size);
    progress("einc's dispatch of a step: reduce \"a b -> a\" sum of 4x8");
    c.step_seconds = measure_step(min_repeats, options.quick ? 0.01 : 0.1);
    return c;
}

std::optional<fs::path> calibration_path() {
    // XDG Base Directory: a relative XDG_CONFIG_HOME is invalid and ignored, as an empty one is.
    if (const char* config = std::getenv("XDG_CONFIG_HOME"); config && config[0] == '/')
        return fs::path(config) / "einc" / "calibration.conf";
    if (const char* home = std::getenv("HOME"); home && home[0] != '\0')
        return fs::path(home) / ".config" / "einc" / "calibration.conf";
    return std::nullopt;
}

std::string format_calibration(const Calibration& c) {
    std::string text = "# This machine, as `einc calibrate` measured it; `--device local` and "
                       "einc::device_model_named(\"local\")\n"
                       "# read it. Bandwidths in bytes per second (copy: bytes read + written), peaks in "
                       "FLOP/s, sizes in bytes;\n"
                       "# `bandwidth` is the cost model's: the larger of read and copy. docs/cost-model.md "
                       "has the details.\n";
    text += fmt::format("format = {}\n", format_version);
    text += fmt::format("cpu_name = {}\n", c.cpu_name);
    text += fmt::format("threads = {}\nhardware_threads = {}\ncores = {}\n", c.threads, c.hardware_threads,
                        c.cores);
    text +=
        fmt::format("l1d_bytes = {}\nl2_bytes = {}\nl3_bytes = {}\n", c.l1d_bytes, c.l2_bytes, c.l3_bytes);
    // {} writes the shortest text that reads back as the same double.
    text += fmt::format("read_bandwidth = {}\ncopy_bandwidth = {}\nbandwidth = {}\n", c.read_bandwidth,
                        c.copy_bandwidth, c.bandwidth);
    text += fmt::format("peak_f32 = {}\npeak_f64 = {}\n", c.peak_f32, c.peak_f64);
    text += fmt::format("buffer_bytes = {}\ngemm_size = {}\nstep_seconds = {}\nmeasured_at = {}\n",
                        c.buffer_bytes, c.gemm_size, c.step_seconds, c.measured_at);
    return text;
}

Calibration parse_calibration(std::string_view text, const std::string& where) {
    std::map<std::string, Field, std::less<>> fields;
    std::optional<std::pair<std::string, std::size_t>> unknown;  // the first unknown key and its line
    std::size_t line_number = 0;
    for (std::size_t begin = 0; begin < text.size();) {
        const std::size_t end = std::min(text.find('\n', begin), text.size());
        const std::string line = trimmed(text.substr(begin, end - begin));
        begin = end + 1;
        ++line_number;
        if (line.empty() || line.front() == '#') continue;
        const std::size_t equals = line.find('=');
        if (equals == std::string::npos)
            throw malformed(where, line_number,
                            fmt::format("expected `key = value`, got '{}'", printable(line)));
        const std::string key = trimmed(std::string_view(line).substr(0, equals));
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
            if (!unknown) unknown.emplace(key, line_number);
            continue;
        }
        const auto [it, inserted] =
            fields.try_emplace(key, Field{trimmed(std::string_view(line).substr(equals + 1)), line_number});
        if (!inserted)
            throw malformed(where, line_number,
                            fmt::format("'{}' is given twice (first on line {})", key, it->second.line));
    }
    const FieldReader read(std::move(fields), where);
    const std::int64_t format = read.whole("format", 0, std::numeric_limits<std::int64_t>::max());
    if (format != format_version)
        throw malformed(
            where, read.field("format").line,
            fmt::format("it is format {}, written by another version of einc; this one reads format {}",
                        format, format_version));
    // After the format: another version's keys are explained by its format number.
    if (unknown)
        throw malformed(where, unknown->second, fmt::format("unknown key '{}'", printable(unknown->first)));
    constexpr std::int64_t most_threads = 1 << 20, largest_cache = std::int64_t{1} << 40;
    Calibration c;
    c.cpu_name = read.text("cpu_name");
    c.threads = static_cast<int>(read.whole("threads", 1, most_threads));
    c.hardware_threads = static_cast<int>(read.whole("hardware_threads", 1, most_threads));
    c.cores = static_cast<int>(read.whole("cores", 0, most_threads));
    c.l1d_bytes = read.whole("l1d_bytes", 0, largest_cache);
    c.l2_bytes = read.whole("l2_bytes", 0, largest_cache);
    c.l3_bytes = read.whole("l3_bytes", 0, largest_cache);
    c.read_bandwidth = read.positive("read_bandwidth");
    c.copy_bandwidth = read.positive("copy_bandwidth");
    c.bandwidth = read.positive("bandwidth");
    c.peak_f32 = read.positive("peak_f32");
    c.peak_f64 = read.positive("peak_f64");
    c.buffer_bytes = read.whole("buffer_bytes", 1, std::numeric_limits<std::int64_t>::max());
    c.gemm_size = static_cast<int>(read.whole("gemm_size", 1, 1 << 20));
    c.step_seconds = read.positive("step_seconds");
    c.measured_at = read.text("measured_at");
    return c;
}

void save_calibration(const Calibration& calibration, const fs::path& path) {
    const auto fail = [&](const std::string& why) {
        return Error(ErrorKind::file,
                     fmt::format("cannot save the calibration to '{}': {}", path.string(), why));
    };
    std::error_code error;
    fs::create_directories(path.parent_path(), error);
    if (error) throw fail(error.message());
    // Written beside and renamed over the old file, so that a reader never sees half of one.
    const fs::path temporary = path.string() + fmt::format(".{}.tmp", ::getpid());
    {
        std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
        if (!file || !(file << format_calibration(calibration)) || !file.flush()) {
            fs::remove(temporary, error);
            throw fail(std::strerror(errno));
        }
    }
    fs::rename(temporary, path, error);
    if (error) {
        std::error_code ignored;
        fs::remove(temporary, ignored);
        throw fail(error.message());
    }
}

std::optional<Calibration> load_calibration(const fs::path& path) {
    std::error_code error;
    if (!fs::exists(path, error)) return std::nullopt;
    const std::string where = path.string();
    if (!fs::is_regular_file(path, error))
        throw Error(ErrorKind::file, fmt::format("the calibration '{}' is not a file", where))
            .help("remove it, then run `einc calibrate`");
    // A calibration is a few hundred bytes: anything far larger is not one (and is not read whole).
    constexpr std::uintmax_t largest = 64 * 1024;
    if (const std::uintmax_t size = fs::file_size(path, error); !error && size > largest)
        throw malformed(where, 0, fmt::format("it is {} bytes long, not a calibration", size));
    std::ifstream file(path, std::ios::binary);
    if (!file)
        throw Error(ErrorKind::file,
                    fmt::format("cannot read the calibration '{}': {}", where, std::strerror(errno)));
    std::string text(largest + 1, '\0');
    file.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(file.gcount()));
    if (text.size() > largest) throw malformed(where, 0, "it is too large to be a calibration");
    return parse_calibration(text, where);
}

const DeviceModel& local_device_model(const Calibration& c) {
    const std::string name = fmt::format("{}, {}, calibrated {}", c.cpu_name, counted(c.threads, "thread"),
                                         c.measured_at.substr(0, c.measured_at.find('T')));
    // A CPU has no tensor cores: tf32, bf16, f16 and int8 GEMMs go through f32 arithmetic, at its rate.
    return keep_device_model(DeviceModel{"local", name, c.bandwidth, c.peak_f64, c.peak_f32, c.peak_f32,
                                         c.peak_f32, c.peak_f32, 0, c.peak_f32, 0, c.step_seconds});
}

Machine this_machine() {
    return Machine{cpu_name(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
}

namespace {

// A calibration is of this machine when it names this CPU and its hardware threads (a home directory
// shared between machines, or copied to another, holds another machine's).
bool measured_here(const Calibration& c) {
    const Machine here = this_machine();
    return c.cpu_name == here.cpu_name && c.hardware_threads == here.hardware_threads;
}

}  // namespace

const DeviceModel& default_device_model(bool gpu, std::string_view gpu_name) {
    if (gpu) {
        const DeviceModel* found = device_model_of_gpu(gpu_name);
        return found ? *found : *device_model_named("h100");
    }
    return has_saved_calibration() ? local_device_model() : *device_model_named("cpu");
}

const DeviceModel& local_device_model() {
    const std::optional<fs::path> path = calibration_path();
    if (!path)
        throw Error(ErrorKind::file, "no calibration of this machine: run `einc calibrate`")
            .note(
                "neither XDG_CONFIG_HOME nor HOME is set, so there is no configuration directory to look in");
    const std::optional<Calibration> calibration = load_calibration(*path);
    if (!calibration)
        throw Error(ErrorKind::file, "no calibration of this machine: run `einc calibrate`")
            .note(fmt::format("looked for {}", path->string()));
    if (!measured_here(*calibration)) {
        const Machine here = this_machine();
        throw Error(ErrorKind::file, fmt::format("{} measured another machine", path->string()))
            .note(fmt::format("it measured {} with {}; this is {} with {}", calibration->cpu_name,
                              counted(calibration->hardware_threads, "hardware thread"), here.cpu_name,
                              counted(here.hardware_threads, "hardware thread")))
            .help("run `einc calibrate` to measure this one");
    }
    return local_device_model(*calibration);
}

bool has_saved_calibration() {
    const std::optional<fs::path> path = calibration_path();
    std::error_code error;
    if (!path || !fs::exists(*path, error)) return false;
    try {
        const std::optional<Calibration> calibration = load_calibration(*path);
        return calibration && measured_here(*calibration);
    } catch (const Error&) {  // unreadable or malformed: saved, and said so where it is used
        return true;
    }
}

namespace detail {

bool install_local_device_loader() {
    set_local_device_loader([]() -> const DeviceModel& { return local_device_model(); });
    return true;
}

}  // namespace detail

}  // namespace einc
