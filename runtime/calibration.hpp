// This machine, measured: what `einc calibrate` finds (memory bandwidth, einc's own GEMM peaks, threads,
// caches, the CPU's name), the file it saves that in, and the "local" device model read back from it
// (`--device local`, einc::device_model_named("local")). docs/cost-model.md describes the measurement
// and the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "../compiler/cost.hpp"

namespace einc {

struct Calibration {
    std::string cpu_name;        // /proc/cpuinfo's "model name", or what stands for it
    int threads = 0;             // the threads einc's CPU executor used (cpu::thread_count())
    int hardware_threads = 0;    // the threads the operating system offers
    int cores = 0;               // physical cores; 0 where the system does not say
    std::int64_t l1d_bytes = 0;  // cache sizes as cpu0 sees them (its own L1d and L2, the L3 it shares);
    std::int64_t l2_bytes = 0;   // 0 where the system does not say
    std::int64_t l3_bytes = 0;
    double read_bandwidth = 0;  // bytes read per second, summing a buffer far larger than the caches
    double copy_bandwidth = 0;  // bytes read + written per second, copying such a buffer
    double bandwidth = 0;       // the model's: the larger of the two (a roof no step should pass)
    double peak_f32 = 0;        // FLOP/s of einc's square GEMM (BLAS where linked, einc's own otherwise)
    double peak_f64 = 0;
    std::int64_t buffer_bytes = 0;  // the size of each bandwidth buffer
    int gemm_size = 0;              // the largest n of the n x n x n GEMMs timed
    double step_seconds = 0;        // einc's dispatch of one step: a run of a sum of 32 numbers
    std::string measured_at;        // UTC, ISO 8601
};

struct CalibrationOptions {
    double seconds = 10;  // about how long to measure; more repeats make the best time more trustworthy
    bool quick = false;   // small buffers and GEMMs, few repeats: rough numbers in under a second (tests)
    std::ostream* progress = nullptr;  // where to say what is measured next, a line each (null: nowhere)
};

// Measures this machine with einc's CPU threads. Takes about `seconds` (under one with `quick`).
Calibration calibrate(const CalibrationOptions& options = {});

// What a calibration records of the machine it measured, to tell it from another: /proc/cpuinfo's CPU
// name (or what stands for it) and the hardware threads.
struct Machine {
    std::string cpu_name;
    int hardware_threads = 0;
};
Machine this_machine();

// Where the calibration is saved: $XDG_CONFIG_HOME/einc/calibration.conf, or $HOME/.config/einc/... where
// XDG_CONFIG_HOME is unset, empty or relative (the XDG Base Directory rules). Null when neither is usable.
std::optional<std::filesystem::path> calibration_path();

// The file's text (`key = value` lines, `#` comments), and reading it back: every key must be there once
// and hold a sane value, else an einc::Error (kind file) that names `where` and what is wrong.
std::string format_calibration(const Calibration& calibration);
Calibration parse_calibration(std::string_view text, const std::string& where);

// Writes the file (creating its directory). Throws einc::Error (kind file) when it cannot.
void save_calibration(const Calibration& calibration, const std::filesystem::path& path);
// The calibration saved at `path`; nullopt when there is no such file; einc::Error when it is unreadable
// or malformed.
std::optional<Calibration> load_calibration(const std::filesystem::path& path);

// The cost model's view of a calibration: key "local", the measured bandwidth and peaks (bf16, f16, tf32
// and int8 at the f32 rate: the CPU runs them through f32; no fp8), kept for the rest of the process.
const DeviceModel& local_device_model(const Calibration& calibration);
// The saved calibration's model, read now; einc::Error when there is none ("run `einc calibrate`",
// naming the path looked for), it is malformed, or it measured another machine (another CPU name or
// number of hardware threads).
const DeviceModel& local_device_model();
// Whether a calibration of this machine is saved (or an unreadable one): then `bench` and `roofline
// --measure` on the CPU compare with it by default.
bool has_saved_calibration();
// The model a plan is compared with where no device is named (`einc explain`, Program::explain): on a
// GPU, the model of the GPU `gpu_name` names (h100 where einc has none of it, or no name is given); on
// the CPU, this machine (`local`) where it is calibrated, else `cpu` (the development machine).
const DeviceModel& default_device_model(bool gpu, std::string_view gpu_name = {});

namespace detail {
bool install_local_device_loader();
// A program that includes this header (as <einc/einc.hpp> does) can ask device_model_named for "local":
// the compiler reaches the reader installed here, and never depends on the runtime.
inline const bool local_device_loader_installed = install_local_device_loader();
}  // namespace detail

}  // namespace einc
