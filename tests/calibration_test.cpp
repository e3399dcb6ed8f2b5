// `einc calibrate` and the "local" device model: a quick calibration saves a file that reads back with
// sane numbers; `--device local` predicts with the saved numbers (checked against costs computed by hand);
// bench and roofline --measure use it by default where it exists; a missing or malformed file is a clear
// error naming the file; the file is found where the XDG Base Directory rules put it. No timing is
// asserted. Each test has a configuration directory of its own (tests/environment.hpp).
#include <cstdio>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "cli/cli.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/calibration.hpp"
#include "runtime/cpu/parallel.hpp"
#include "runtime/program.hpp"
#include "tests/cli_capture.hpp"
#include "tests/environment.hpp"

using namespace einc;
namespace fs = std::filesystem;

namespace {

using Result = testing::CliResult;
using testing::einc_cli;

// The `einc` tool in a process of its own, with `environment` (NAME=value ...) set before it.
Result einc_process(const std::string& environment, const std::string& arguments) {
    const std::string command = fmt::format("env {} '{}' {} 2>&1", environment, EINC_TOOL, arguments);
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    Result result{-1, {}, {}};
    for (int c; (c = std::fgetc(pipe)) != EOF;) result.out += static_cast<char>(c);
    const int status = ::pclose(pipe);
    if (WIFEXITED(status)) result.status = WEXITSTATUS(status);
    return result;
}

// The plan's total predicted time in `einc explain --json` output (the last "predicted_seconds").
double predicted_seconds(const std::string& json) {
    const std::string key = "\"predicted_seconds\":";
    const std::size_t at = json.rfind(key);
    REQUIRE(at != std::string::npos);
    return std::stod(json.substr(at + key.size()));
}

// A calibration of this machine (its CPU's name, its hardware threads) with round numbers, for costs
// computed by hand.
Calibration round_numbers() {
    Calibration c;
    c.cpu_name = this_machine().cpu_name;
    c.threads = 4;
    c.hardware_threads = this_machine().hardware_threads;
    c.cores = 4;
    c.l1d_bytes = 48 << 10;
    c.l2_bytes = 2 << 20;
    c.l3_bytes = 64 << 20;
    c.read_bandwidth = 2e10;
    c.copy_bandwidth = 1.5e10;
    c.bandwidth = 2e10;
    c.peak_f32 = 1e11;
    c.peak_f64 = 5e10;
    c.buffer_bytes = 256 << 20;
    c.gemm_size = 2048;
    c.step_seconds = 1e-6;
    c.measured_at = "2026-01-02T03:04:05Z";
    return c;
}

// The saved calibration's text with `key`'s line replaced by `line` (removed when empty).
std::string with_line(const std::string& key, const std::string& line) {
    std::istringstream in(format_calibration(round_numbers()));
    std::string text;
    for (std::string l; std::getline(in, l);) {
        if (l.starts_with(key + " =")) {
            if (!line.empty()) text += line + "\n";
        } else {
            text += l + "\n";
        }
    }
    return text;
}

void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

const std::vector<std::string> copy_call{"explain",   "rearrange", "a b -> (b a)",
                                         "1000x1000", "--device",  "local"};

}  // namespace

TEST_CASE("calibrate --quick saves this machine's numbers, and --device local predicts with them") {
    const testing::IsolatedConfigHome config;
    const Result calibrated = einc_cli({"calibrate", "--quick"});
    INFO(calibrated.out, calibrated.err);
    REQUIRE(calibrated.status == 0);
    const fs::path path = config.path() / "einc" / "calibration.conf";
    CHECK(calibrated.out.find("saved " + path.string() + "\n") != std::string::npos);
    CHECK(calibration_path() == path);

    const std::optional<Calibration> saved = load_calibration(path);
    REQUIRE(saved);
    CHECK(!saved->cpu_name.empty());
    CHECK(saved->threads == cpu::thread_count());
    CHECK(saved->hardware_threads >= 1);
    CHECK(saved->cores >= 0);
    CHECK(saved->read_bandwidth > 0);
    CHECK(saved->copy_bandwidth > 0);
    CHECK(saved->bandwidth == std::max(saved->read_bandwidth, saved->copy_bandwidth));
    CHECK(saved->peak_f32 > 0);
    CHECK(saved->peak_f64 > 0);
    CHECK(saved->gemm_size >= 1);
    CHECK(saved->step_seconds > 0);
    CHECK(saved->step_seconds < 1e-3);  // a sum of 32 numbers

    // A copy of a 1000x1000 f32 matrix reads and writes 4 MB each: its bound is 8e6 B / the bandwidth,
    // after the measured dispatch of a step.
    std::vector<std::string> as_json = copy_call;
    as_json.push_back("--json");
    const Result json = einc_cli(as_json);
    INFO(json.err);
    REQUIRE(json.status == 0);
    CHECK(json.out.find("\"device\":\"local\"") != std::string::npos);
    CHECK(predicted_seconds(json.out) ==
          doctest::Approx(saved->step_seconds + 8e6 / saved->bandwidth).epsilon(1e-12));
    const Result text = einc_cli(copy_call);
    REQUIRE(text.status == 0);
    const std::string name = std::string(local_device_model(*saved).name);
    CHECK(name.find(saved->cpu_name) == 0);
    CHECK(text.out.find(" on " + name + " (roofline") != std::string::npos);

    // The C++ API reads the same file.
    const DeviceModel* local = device_model_named("local");
    REQUIRE(local != nullptr);
    CHECK(local->key == "local");
    CHECK(local->bandwidth == saved->bandwidth);
    CHECK(local == &local_device_model());  // read again, kept once
    const Tensor x = Tensor::empty(DType::f32, {1000, 1000});
    const Program program = compile(Op::rearrange, "a b -> (b a)").bind({x.view()});
    CHECK(program.explain("local").find(name) != std::string::npos);
}

TEST_CASE("--device local: costs by hand against a saved calibration of round numbers") {
    const testing::IsolatedConfigHome config;
    save_calibration(round_numbers(), config.path() / "einc" / "calibration.conf");
    std::vector<std::string> call = copy_call;
    call.push_back("--json");
    CHECK(predicted_seconds(einc_cli(call).out) == doctest::Approx(1e-6 + 8e6 / 2e10));  // 401 us
    const Result copy = einc_cli(copy_call);
    INFO(copy.err);
    CHECK(copy.out.find(fmt::format("time:  >= 401 us on {}, 4 threads, calibrated 2026-01-02 (roofline, "
                                    "a 1 us dispatch per step",
                                    this_machine().cpu_name)) != std::string::npos);
    CHECK(copy.out.find("memory-bound: 0 FLOP/B (pure data movement) on LOCAL") != std::string::npos);

    // GEMMs are compute-bound at the saved peaks: 2 * 1000^3 FLOPs at 1e11 (f32) and 5e10 (f64) FLOP/s,
    // after the 1 us dispatch.
    for (const auto& [dtype, seconds] : {std::pair{"f32", 0.020001}, std::pair{"f64", 0.040001}}) {
        const Result gemm = einc_cli({"explain", "einsum", "i k, k j -> i j", "1000x1000", "1000x1000",
                                      "--dtype", dtype, "--device", "local", "--json"});
        REQUIRE(gemm.status == 0);
        CHECK(predicted_seconds(gemm.out) == doctest::Approx(seconds));
    }

    // bench and roofline --measure compare CPU timings with it, unasked and without a note.
    const Result bench = einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--repeat", "1", "--json"});
    REQUIRE(bench.status == 0);
    CHECK(bench.out.find("\"device\": \"local\"") != std::string::npos);
    CHECK(bench.out.find("\"peak_flops_per_second\": 100000000000") != std::string::npos);
    CHECK(bench.err.empty());
    const Result roofline =
        einc_cli({"roofline", "einsum \"i, i ->\" 1000 1000", "--measure", "--repeat", "1"});
    INFO(roofline.err);
    REQUIRE(roofline.status == 0);
    CHECK(roofline.out.find("Roofline of " + this_machine().cpu_name) != std::string::npos);
    // A GPU's chart is still a usage error for CPU timings; --device local names the CPU's.
    CHECK(einc_cli({"roofline", "einsum \"i, i ->\" 10 10", "--measure", "--device", "h100"}).status ==
          cli::exit_usage);
    CHECK(
        einc_cli({"roofline", "einsum \"i, i ->\" 10 10", "--measure", "--device", "local", "--repeat", "1"})
            .status == 0);
}

TEST_CASE(
    "no calibration: --device local says so and where it looked; bench keeps the cpu model, with a note") {
    const testing::IsolatedConfigHome config;
    const Result local = einc_cli(copy_call);
    CHECK(local.status == cli::exit_error);
    CHECK(local.err == fmt::format("error: no calibration of this machine: run `einc calibrate`\n"
                                   "  note: looked for {}\n",
                                   (config.path() / "einc" / "calibration.conf").string()));
    CHECK_THROWS_WITH_AS(device_model_named("local"), doctest::Contains("no calibration of this machine"),
                         einc::Error);
    CHECK_FALSE(has_saved_calibration());

    const Result bench = einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--repeat", "1", "--json"});
    REQUIRE(bench.status == 0);
    CHECK(bench.out.find("\"device\": \"cpu\"") != std::string::npos);
    CHECK(bench.err.find(
              "note: comparing with the `cpu` model, AMD EPYC, 2 cores (development machine), not this "
              "machine: run `einc calibrate`") == 0);
    CHECK(std::count(bench.err.begin(), bench.err.end(), '\n') == 1);
    // Asked for by name, the development machine's model needs no note.
    CHECK(
        einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--repeat", "1", "--device", "cpu"}).err.empty());
}

// A calibration names the machine it measured: another machine's (a shared home directory) is not used -
// asked for, it is an error saying so; unasked, bench keeps the cpu model with its note. And a model that
// a measurement beats (here: a peak and a bandwidth far below this machine's) is said to be wrong.
TEST_CASE("another machine's calibration is not used; a measurement beyond its model says so") {
    const testing::IsolatedConfigHome config;
    const fs::path path = config.path() / "einc" / "calibration.conf";
    Calibration other = round_numbers();
    other.cpu_name = "Another CPU 9000";
    save_calibration(other, path);
    CHECK_FALSE(has_saved_calibration());
    Result result = einc_cli(copy_call);
    CHECK(result.status == cli::exit_error);
    CHECK(result.err.find(fmt::format(
              "error: {} measured another machine\n  note: it measured Another CPU 9000 "
              "with {}; this is {} with {}\n  help: run `einc calibrate` to measure this "
              "one",
              path.string(), counted(this_machine().hardware_threads, "hardware thread"),
              this_machine().cpu_name, counted(this_machine().hardware_threads, "hardware thread"))) == 0);
    other = round_numbers();
    other.hardware_threads += 1;
    save_calibration(other, path);
    CHECK(einc_cli(copy_call).err.find("measured another machine") != std::string::npos);
    result = einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--repeat", "1"});
    CHECK(result.status == cli::exit_ok);
    CHECK(result.err.find("note: comparing with the `cpu` model") == 0);

    Calibration slow = round_numbers();
    slow.bandwidth = slow.read_bandwidth = slow.copy_bandwidth = 1e3;  // 1 kB/s
    slow.peak_f32 = slow.peak_f64 = 1e3;                               // 1 kFLOP/s
    save_calibration(slow, path);
    REQUIRE(has_saved_calibration());
    result = einc_cli({"bench", "einsum", "i j, j k -> i k", "64x64", "64x64", "--repeat", "1"});
    INFO(result.out, result.err);
    REQUIRE(result.status == cli::exit_ok);
    CHECK(result.out.find(
              "of the f32 peak (1 kFLOP/s): faster than the model allows - calibrate this machine "
              "when it is idle (`einc calibrate`), or the model is wrong for it\n") != std::string::npos);
    result =
        einc_cli({"bench", "einsum", "i j, j k -> i k", "4x4", "4x4", "--repeat", "1", "--device", "cpu"});
    CHECK(result.out.find("faster than the model allows") == std::string::npos);  // a 4x4 GEMM: not near
}

TEST_CASE("a malformed calibration is an error that names the file and what is wrong, never a crash") {
    const testing::IsolatedConfigHome config;
    const fs::path path = config.path() / "einc" / "calibration.conf";
    const std::string file = path.string();
    const std::string garbage = std::string("\x01\x02 binary ") + '\0' + " junk\x7f";
    const std::pair<std::string, std::string> cases[] = {
        {with_line("bandwidth", "bandwidth = fast"),
         file + ":14: error: malformed calibration: bandwidth is 'fast', not a number"},
        {with_line("peak_f32", "peak_f32 = 1e11x"), "peak_f32 is '1e11x', not a number"},
        {with_line("peak_f64", "peak_f64 = -5"), "peak_f64 is -5; it must be a positive number"},
        {with_line("bandwidth", "bandwidth = inf"), "bandwidth is inf; it must be a positive number"},
        {with_line("threads", "threads = 0"), "threads is 0; it must be from 1 to"},
        {with_line("threads", "threads = 2.5"), "threads is '2.5', not a whole number"},
        {with_line("peak_f64", ""),
         file + ": error: malformed calibration: no 'peak_f64' (the file is incomplete)"},
        {with_line("cpu_name", "cpu_name ="), "cpu_name is empty"},
        {with_line("format", "format = 1"),  // before step_seconds
         "it is format 1, written by another version of einc; this one reads format 2"},
        {with_line("step_seconds", "step_seconds = 0"), "step_seconds is 0; it must be a positive number"},
        {with_line("cores", "cores = 4\ncores = 4"), "'cores' is given twice (first on line"},
        {with_line("cores", "cores = 4\nspeed = 11"), "unknown key 'speed'"},
        {garbage, file + ":1: error: malformed calibration: expected `key = value`, got '?? binary ? junk?'"},
        {with_line("cores", "cores = 4\n\xff\xfe = 1"), "unknown key '\xff\xfe'"},
        {"", "no 'format' (the file is incomplete)"},
        {std::string(100'000, 'x'), "it is 100000 bytes long, not a calibration"},
    };
    for (const auto& c : cases) {
        const auto& text = c.first;
        const auto& expected =
            c.second;  // (not a structured binding: INFO captures it, which Clang 14 cannot)
        write(path, text);
        const Result result = einc_cli(copy_call);
        INFO(expected);
        CHECK(result.status == cli::exit_error);
        CHECK(result.err.find(expected) != std::string::npos);
        CHECK(result.err.find(file) != std::string::npos);
        CHECK(result.err.find("help: run `einc calibrate` to measure this machine again") !=
              std::string::npos);
        // bench does not quietly fall back to another model when the saved one is broken.
        CHECK(einc_cli({"bench", "einsum", "i, i ->", "10", "10", "--repeat", "1"}).status ==
              cli::exit_error);
    }
    fs::remove(path);
    fs::create_directory(path);
    const Result directory = einc_cli(copy_call);
    CHECK(directory.status == cli::exit_error);
    CHECK(directory.err.find(fmt::format("the calibration '{}' is not a file", file)) != std::string::npos);
}

TEST_CASE("the calibration file: where the XDG rules put it, and what it holds") {
    const testing::TemporaryDirectory home("einc-home");
    const testing::ScopedEnvironment home_variable("HOME", home.path().string());
    const fs::path in_home = home.path() / ".config" / "einc" / "calibration.conf";
    {
        const testing::ScopedEnvironment empty("XDG_CONFIG_HOME", "");
        CHECK(calibration_path() == in_home);
        save_calibration(round_numbers(), in_home);
        CHECK(einc_cli(copy_call).out.find("on " + this_machine().cpu_name) != std::string::npos);
    }
    {
        const testing::ScopedEnvironment relative("XDG_CONFIG_HOME", "relative/config");  // invalid: ignored
        CHECK(calibration_path() == in_home);
    }
    {
        const testing::ScopedEnvironment unset("XDG_CONFIG_HOME", std::nullopt);
        CHECK(calibration_path() == in_home);
        const testing::ScopedEnvironment no_home("HOME", std::nullopt);
        CHECK(calibration_path() == std::nullopt);
        const Result local = einc_cli(copy_call);
        CHECK(local.status == cli::exit_error);
        CHECK(local.err.find("neither XDG_CONFIG_HOME nor HOME is set") != std::string::npos);
        const Result calibrate = einc_cli({"calibrate", "--quick"});  // fails before it measures
        CHECK(calibrate.status == cli::exit_error);
        CHECK(calibrate.err.find("cannot tell where to save the calibration") != std::string::npos);
    }

    // Every number reads back exactly as measured.
    Calibration measured = round_numbers();
    measured.read_bandwidth = 31015126658.220665;
    measured.peak_f32 = 1.0 / 3.0 * 1e12;
    const Calibration read = parse_calibration(format_calibration(measured), "test");
    CHECK(read.read_bandwidth == measured.read_bandwidth);
    CHECK(read.peak_f32 == measured.peak_f32);
    CHECK(read.cpu_name == measured.cpu_name);
    CHECK(read.measured_at == measured.measured_at);
    CHECK(read.l3_bytes == measured.l3_bytes);

    // Usage errors.
    CHECK(einc_cli({"calibrate", "--seconds", "0"}).status == cli::exit_usage);
    CHECK(einc_cli({"calibrate", "--seconds", "ten"}).status == cli::exit_usage);
    CHECK(einc_cli({"calibrate", "--seconds"}).status == cli::exit_usage);
    CHECK(einc_cli({"calibrate", "--fast"}).status == cli::exit_usage);
}

TEST_CASE("einc calibrate in a process of its own: an empty XDG_CONFIG_HOME saves under $HOME/.config") {
    const testing::TemporaryDirectory home("einc-home");
    const Result result =
        einc_process(fmt::format("XDG_CONFIG_HOME= HOME='{}'", home.path().string()), "calibrate --quick");
    INFO(result.out);
    REQUIRE(result.status == 0);
    const fs::path path = home.path() / ".config" / "einc" / "calibration.conf";
    CHECK(result.out.find("saved " + path.string()) != std::string::npos);
    const std::optional<Calibration> saved = load_calibration(path);
    REQUIRE(saved);
    CHECK(saved->bandwidth > 0);
    const Result local =
        einc_process(fmt::format("XDG_CONFIG_HOME= HOME='{}'", home.path().string()),
                     "explain rearrange 'a b -> (b a)' 1000x1000 --device local --print plan");
    CHECK(local.status == 0);
    CHECK(local.out.find(std::string(local_device_model(*saved).name)) != std::string::npos);
}
