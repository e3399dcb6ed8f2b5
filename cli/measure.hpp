// Timing a call, for `einc bench` and `einc roofline --measure`: operands of the call's dtype filled with
// random data, warm-up runs, then the median of N timed runs, the device synchronised around each.
// Fast calls (a view is a few hundred nanoseconds) are timed in batches so the clock's resolution does
// not dominate; each sample is then the batch's time divided by its size.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/arguments.hpp"
#include "compiler/plan.hpp"
#include "compiler/schedule.hpp"

namespace einc::cli {

struct BenchSettings {
    std::string backend = "cpu";  // cpu or cuda
    int repeat = 10;              // timed samples; the median is reported
    int warmup = 1;               // untimed runs first (caches, page faults, thread pool start-up)
};

// Removes --repeat N and --warmup N from `args` (the rest is a call for parse_call_args).
BenchSettings take_bench_options(std::vector<std::string>& args);

struct Measurement {
    std::vector<Plan> plans;          // what ran: the call's plan, or with --backward its backward plans
    std::vector<Schedule> schedules;  // how each ran
    double seconds = 0;               // median seconds per call
    double min_seconds = 0, max_seconds = 0;
    int batch = 1;  // calls per timed sample
    BenchSettings settings;
};

// Binds the call to operands of its shapes (or the .npy files' data), plans it and times it; with
// --backward (args.backward), its backward given random output gradients.
// Throws einc::Error (kind unsupported) for --backend cuda when no GPU backend is linked in.
Measurement measure(const CallArgs& args, const BenchSettings& settings);

// The call as one command line, normalised (`einsum "i, i ->" 1000 1000 --dtype f32`): how timings
// from `einc bench --json` are matched to the calls of `einc roofline --timings`.
std::string call_key(const CallArgs& args);

// What `einc roofline --timings FILE` reads from `einc bench --json` output (one JSON object per line,
// or an array of them).
struct TimingRecord {
    std::string call;     // call_key of the call timed
    std::string device;   // the cost-model device it was compared against
    std::string backend;  // where it ran
    double seconds = 0;   // median per call
    int repeat = 0;
};
std::vector<TimingRecord> read_timings(const std::string& path);

// A measurement as a fraction of what its cost model allows (MFU, a roof, the roofline bound), as a
// percentage; and what to say after it - nothing up to 100%, above it that the measurement beat the model
// (which a right model does not allow) and what to do.
std::string percent(double fraction);
bool beats_model(double fraction);
std::string beyond_model(double fraction);
inline constexpr std::string_view model_beaten =
    "faster than the model allows - calibrate this machine when it is idle (`einc calibrate`), or the model "
    "is wrong for it";

}  // namespace einc::cli
