// `einc calibrate`: measures this machine (runtime/calibration.hpp) and saves what it found, which
// `--device local` reads, and which `einc bench` and `einc roofline --measure` compare the CPU with by
// default.
#include <chrono>
#include <cmath>
#include <fmt/ostream.h>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/calibration.hpp"

namespace einc::cli {
namespace {

// Cache and buffer sizes in binary units, as the hardware makes them: 32 KiB, 1 MiB.
std::string binary_size(std::int64_t bytes) {
    if (bytes <= 0) return "unknown";
    constexpr std::array<const char*, 4> units{"B", "KiB", "MiB", "GiB"};
    std::size_t unit = 0;
    double value = static_cast<double>(bytes);
    while (value >= 1024 && unit + 1 < units.size()) {
        value /= 1024;
        ++unit;
    }
    return fmt::format("{:.4g} {}", value, units[unit]);
}

double parse_seconds(const std::string& text) {
    double value = 0;
    std::size_t used = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || !std::isfinite(value) || value < 1 || value > 600)
        throw UsageError(fmt::format("--seconds needs a number of seconds from 1 to 600, got '{}'", text));
    return value;
}

}  // namespace

int calibrate(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
    CalibrationOptions options;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--quick") {
            options.quick = true;
        } else if (args[i] == "--seconds") {
            if (i + 1 >= args.size()) throw UsageError("option --seconds needs a value");
            options.seconds = parse_seconds(args[++i]);
        } else {
            throw UsageError(
                fmt::format("unknown argument '{}' for calibrate (--quick, --seconds N)", args[i]));
        }
    }
    // Where it goes is known before ten seconds are spent measuring.
    const std::optional<std::filesystem::path> path = calibration_path();
    if (!path)
        throw Error(ErrorKind::file,
                    "cannot tell where to save the calibration: neither XDG_CONFIG_HOME nor HOME is set")
            .help("set XDG_CONFIG_HOME (or HOME) to a directory of your own");

    fmt::print(err, "calibrating this machine: {}\n",
               options.quick
                   ? "rough numbers in under a second (--quick)"
                   : fmt::format("about {:g} s (--quick for rough numbers at once)", options.seconds));
    options.progress = &err;
    const auto start = std::chrono::steady_clock::now();
    const Calibration c = einc::calibrate(options);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    save_calibration(c, *path);

    fmt::print(out, "calibrated {} in {:.3g} s\n", c.cpu_name, took);
    fmt::print(out, "  cpu        {}: {}, {}\n", c.cpu_name, counted(c.hardware_threads, "hardware thread"),
               c.cores > 0 ? counted(c.cores, "core") : std::string("cores unknown"));
    fmt::print(out, "  threads    {} (einc's CPU executor; EINC_NUM_THREADS sets it)\n", c.threads);
    fmt::print(out, "  caches     L1d {}, L2 {}, L3 {}\n", binary_size(c.l1d_bytes), binary_size(c.l2_bytes),
               binary_size(c.l3_bytes));
    fmt::print(out, "  read       {}/s (summing {}, best time)\n", format_bytes(c.read_bandwidth),
               binary_size(c.buffer_bytes));
    fmt::print(out, "  copy       {}/s read + written (copying {})\n", format_bytes(c.copy_bandwidth),
               binary_size(c.buffer_bytes));
    fmt::print(out, "  bandwidth  {}/s (the model's: the larger of the two)\n", format_bytes(c.bandwidth));
    const std::string gemm = fmt::format("einsum \"i k, k j -> i j\" up to {0}x{0}x{0}, {1}", c.gemm_size,
                                         EINC_HAS_BLAS ? "BLAS: " EINC_BLAS_VENDOR : "einc's GEMM (no BLAS)");
    fmt::print(out, "  f32 GEMM   {}/s ({})\n", format_flops(c.peak_f32), gemm);
    fmt::print(out, "  f64 GEMM   {}/s\n", format_flops(c.peak_f64));
    fmt::print(out, "saved {}\n", path->string());
    fmt::print(
        out,
        "  `--device local` reads it; einc bench and einc roofline --measure compare CPU timings with it\n");
    return exit_ok;
}

}  // namespace einc::cli
