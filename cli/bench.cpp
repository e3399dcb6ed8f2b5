// `einc bench`: times one call and sets the time beside what the cost model promises - achieved FLOP/s
// and bandwidth, MFU (achieved / peak FLOP/s of the dtype) and, for memory-bound plans, the fraction of
// the memory bandwidth reached.
#include <fmt/ostream.h>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/measure.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cli {
namespace {

// JSON has no infinity or NaN: a quantity that does not apply is null.
std::string json_number(double value, bool applies = true) {
    return applies ? fmt::format("{}", value) : "null";
}

// The cost-model device a measurement is compared with: --device; else this machine - its GPU for cuda,
// its calibration (or the development machine's entry) for the CPU backend.
const DeviceModel& bench_device(const CallArgs& args, const BenchSettings& settings, std::ostream& err) {
    if (!args.device.empty()) return parse_device(args.device);
    return settings.backend == "cuda" ? gpu_device("") : default_cpu_device(err);
}

}  // namespace

int bench(std::span<const std::string> command_line, std::ostream& out, std::ostream& err) {
    std::vector<std::string> words(command_line.begin(), command_line.end());
    BenchSettings settings = take_bench_options(words);
    const CallArgs args = parse_call_args(words);
    settings.backend = args.backend.empty() ? "cpu" : args.backend;
    const DeviceModel& device = bench_device(args, settings, err);
    const Measurement m = measure(args, settings);

    Cost cost;
    std::size_t step_count = 0;
    double least_seconds = 0;  // the steps' roofline times after the device's step floor, in sequence
    for (std::size_t p = 0; p < m.plans.size(); ++p) {
        const Plan& plan = m.plans[p];
        cost += scheduled_cost(plan, m.schedules[p]);
        step_count += plan.steps.size();
        for (std::size_t s = 0; s < plan.steps.size(); ++s)
            least_seconds += step_seconds(scheduled_step_cost(plan, m.schedules[p], s), device,
                                          compute_dtype(plan, plan.steps[s].step));
    }
    const Plan& first = m.plans.front();
    const DType dtype = first.inputs.empty() ? parse_dtype(args.dtype) : first.inputs.front().dtype;
    const double peak = peak_flops(device, dtype);
    const double achieved_flops = cost.flops / m.seconds, achieved_bytes = cost.bytes() / m.seconds;
    const RooflineBound roof = roofline_bound(cost, device, dtype);
    const bool free = roof == RooflineBound::free, memory_bound = roof == RooflineBound::memory;

    if (args.json) {
        fmt::print(out,
                   "{{\"call\": {}, \"backend\": {}, \"device\": {}, \"dtype\": {}, \"repeat\": {}, "
                   "\"warmup\": {}, \"batch\": {}, "
                   "\"seconds\": {}, \"min_seconds\": {}, \"max_seconds\": {}, \"steps\": {}, \"flops\": {}, "
                   "\"bytes\": {}, "
                   "\"intensity\": {}, \"achieved_flops_per_second\": {}, \"achieved_bytes_per_second\": {}, "
                   "\"peak_flops_per_second\": {}, \"bandwidth_bytes_per_second\": {}, \"mfu\": {}, "
                   "\"bandwidth_fraction\": {}, "
                   "\"bound\": {}, \"predicted_seconds\": {}}}\n",
                   json_quoted(call_key(args)), json_quoted(settings.backend), json_quoted(device.key),
                   json_quoted(name_of(dtype)), settings.repeat, settings.warmup, m.batch, m.seconds,
                   m.min_seconds, m.max_seconds, step_count, cost.flops, cost.bytes(),
                   json_number(cost.intensity(), cost.bytes() > 0), achieved_flops, achieved_bytes,
                   json_number(peak, peak > 0), device.bandwidth,
                   json_number(achieved_flops / peak, peak > 0 && cost.flops > 0),
                   json_number(achieved_bytes / device.bandwidth, memory_bound), json_quoted(name_of(roof)),
                   least_seconds);
        return exit_ok;
    }

    std::string steps;
    for (std::size_t p = 0; p < m.plans.size(); ++p)
        for (std::size_t s = 0; s < m.plans[p].steps.size(); ++s)
            steps += fmt::format("{}{} ({})", steps.empty() ? "" : ", ", step_kind(m.plans[p].steps[s].step),
                                 name_of(m.schedules[p].steps[s].strategy));
    const std::string where = settings.backend == "cpu" ? fmt::format("the CPU executor, {}",
                                                                      counted(cpu::thread_count(), "thread"))
                                                        : std::string("the CUDA backend, device 0");
    fmt::print(out, "bench {}\n", call_key(args));
    fmt::print(out, "  backend    {} ({}): {} warm-up run{}, median of {}{}\n", settings.backend, where,
               settings.warmup, settings.warmup == 1 ? "" : "s", settings.repeat,
               m.batch > 1 ? fmt::format(" samples of {} each", counted(m.batch, "call")) : "");
    if (args.backward)
        fmt::print(out, "  backward   {}: the gradient of every input, given the output's\n",
                   counted(static_cast<std::int64_t>(m.plans.size()), "call"));
    fmt::print(out, "  plan       {}{}{}\n", counted(static_cast<std::int64_t>(step_count), "step"),
               steps.empty() ? "" : ": " + steps,
               free ? " (nothing moves: the time is einc's dispatch)" : "");
    fmt::print(out, "  time       {} per call (min {}, max {})\n", format_seconds(m.seconds),
               format_seconds(m.min_seconds), format_seconds(m.max_seconds));
    if (free) {
        fmt::print(out, "  work       none: every result is a view of an input (0 FLOPs, 0 bytes)\n");
        return exit_ok;
    }
    fmt::print(out, "  work       {}, {} moved (read {}, write {}), intensity {:.3g} FLOP/B, workspace {}\n",
               format_flops(cost.flops), format_bytes(cost.bytes()), format_bytes(cost.bytes_read),
               format_bytes(cost.bytes_written), cost.intensity(), format_bytes(cost.workspace_bytes));
    fmt::print(out, "  achieved   {}/s, {}/s\n", format_flops(achieved_flops), format_bytes(achieved_bytes));
    fmt::print(out, "  device     {}: {}, {} peak {}/s, bandwidth {}/s\n", device.key, device.name,
               name_of(dtype), format_flops(peak), format_bytes(device.bandwidth));
    fmt::print(out, "  roofline   >= {} ({} of the measured time{}; {} per step): {}\n",
               format_seconds(least_seconds), percent(least_seconds / m.seconds),
               beyond_model(least_seconds / m.seconds), describe_step_floor(device),
               describe_bound(cost, device, dtype));
    if (cost.flops > 0 && peak > 0)
        fmt::print(out, "  MFU        {} of the {} peak ({}/s){}\n", percent(achieved_flops / peak),
                   name_of(dtype), format_flops(peak), beyond_model(achieved_flops / peak));
    else
        fmt::print(out, "  MFU        n/a: {}\n",
                   peak > 0 ? "the plan does no arithmetic" : "the device has no peak for this dtype");
    if (memory_bound)
        fmt::print(out, "  bandwidth  {} of {}/s (the plan is memory-bound){}\n",
                   percent(achieved_bytes / device.bandwidth), format_bytes(device.bandwidth),
                   beyond_model(achieved_bytes / device.bandwidth));
    return exit_ok;
}

}  // namespace einc::cli
