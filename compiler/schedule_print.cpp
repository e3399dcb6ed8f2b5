// Printing schedules: what `einc explain --print schedule` shows.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/cost.hpp"
#include "compiler/schedule.hpp"

namespace einc {
namespace {

std::string describe_target(const Target& target) {
    if (target.backend == Backend::cuda)
        return fmt::format("cuda: {} multiprocessors", target.multiprocessors);
    return fmt::format("cpu: {} thread{}, {}, {}", target.threads, target.threads == 1 ? "" : "s",
                       target.vector_bytes == 32   ? "AVX2 register transposes"
                       : target.vector_bytes == 16 ? "SSE2 register transposes"
                                                   : "no register transposes",
                       target.blas ? "CBLAS" : "no BLAS");
}

std::string launch_line(const KernelLaunch& launch) {
    const KernelParams& p = launch.params;
    return fmt::format("{}<<<{}, ({}, {})>>>  outputs {}  terms {}  split {}", launch.signature.name(),
                       launch.grid.x, launch.block.x, launch.block.y, p.kept_count, p.reduced_count, p.split);
}

std::vector<std::string> nest_lines(const Layout& dst, const Layout& src, const Layout* src1 = nullptr) {
    std::vector<std::string> lines{fmt::format("dst  {}", to_string(dst)),
                                   fmt::format("src  {}", to_string(src))};
    if (src1) lines.push_back(fmt::format("src  {}", to_string(*src1)));
    return lines;
}

// What a step's strategy shows: on its head line, and in the lines under it.
struct Printed {
    bool library = false;  // a library call: CBLAS or cuBLAS, named after the strategy
    Split split = Split::none;
    std::string compute{};  // a library GEMM's compute type, where it is not the dtype's own
    bool streaming_stores = false;
    std::vector<std::string> lines{};
};

// The lines of an accumulator array (none where it is empty).
void add_accumulators(Printed& out, const strategy::Accumulators& acc, bool rows_in_order) {
    if (acc.count == 0) return;
    out.lines.push_back(fmt::format("acc  {}", to_string(acc.layout)));
    out.lines.push_back(fmt::format(
        "{} accumulators{}{}", acc.count,
        acc.partial_arrays > 0 ? fmt::format(", and {} arrays of partials", acc.partial_arrays) : "",
        rows_in_order ? "; rows folded in memory order" : ""));
}

Printed print_strategy(const StepStrategy& step) {
    return std::visit(
        Overloaded{
            [](const strategy::View&) { return Printed{}; },
            [](const strategy::Move& s) {
                return Printed{.split = s.split, .lines = nest_lines(s.dst, s.src)};
            },
            [](const strategy::Convert& s) {
                return Printed{.split = s.split, .lines = nest_lines(s.dst, s.src)};
            },
            [](const strategy::Transpose& s) {
                Printed out{.split = s.split,
                            .streaming_stores = s.streaming_stores,
                            .lines = nest_lines(s.dst, s.src)};
                out.lines.push_back(
                    fmt::format("tiles between mode {} (unit-stride in the source) and mode {}: {}",
                                s.source_mode, s.dst.rank() - 1, name_of(s.kind)));
                if (s.kind == TransposeKind::direct)
                    out.lines.push_back(fmt::format(
                        "{} strips of ({}) walked along modes [{}], written along [{}] (innermost first), "
                        "read straight from the source",
                        s.tiles.count, fmt::join(s.tiles.extents, ","), fmt::join(s.tiles.tile_order, ","),
                        fmt::join(s.tiles.write_order, ",")));
                else if (s.kind != TransposeKind::short_side)
                    out.lines.push_back(fmt::format(
                        "{} tiles of ({}) walked along modes [{}], read along [{}], written along [{}] "
                        "(innermost first)",
                        s.tiles.count, fmt::join(s.tiles.extents, ","), fmt::join(s.tiles.tile_order, ","),
                        fmt::join(s.tiles.read_order, ","), fmt::join(s.tiles.write_order, ",")));
                return out;
            },
            [](const strategy::ReduceRows& s) {
                return Printed{.split = s.split, .lines = nest_lines(s.dst, s.src)};
            },
            [](const strategy::ReduceWindows& s) {
                Printed out{.split = s.split, .lines = nest_lines(s.dst, s.src)};
                out.lines.push_back(fmt::format("window of {} terms per output", s.window));
                return out;
            },
            [](const strategy::ReduceAccumulate& s) {
                Printed out{.split = s.split, .lines = nest_lines(s.dst, s.src)};
                add_accumulators(out, s.acc, s.rows_in_order);
                return out;
            },
            [](const strategy::ContractElementwise& s) {
                return Printed{.split = s.split,
                               .streaming_stores = s.streaming_stores,
                               .lines = nest_lines(s.dst, s.src, &s.src1)};
            },
            [](const strategy::ContractRows& s) {
                return Printed{.split = s.split, .lines = nest_lines(s.dst, s.src, &s.src1)};
            },
            [](const strategy::ContractAccumulate& s) {
                Printed out{.split = s.split, .lines = nest_lines(s.dst, s.src, &s.src1)};
                add_accumulators(out, s.acc, false);
                return out;
            },
            [](const strategy::LibraryGemm& s) {
                // (f32 and f64 compute in their own dtype: only TF32 is worth saying.)
                return Printed{.library = true,
                               .split = s.split,
                               .compute = s.compute == strategy::GemmCompute::tf32 ? "tf32" : ""};
            },
            [](const strategy::LibraryGemv& s) { return Printed{.library = true, .split = s.split}; },
            [](const strategy::PackedGemm&) { return Printed{}; },
            [](const strategy::Route& s) {
                return Printed{.split = s.split, .lines = nest_lines(s.dst, s.src)};
            },
            [](const strategy::Kernels& s) {
                Printed out;
                for (const KernelLaunch& launch : s.launches) out.lines.push_back(launch_line(launch));
                for (const KernelLaunch& launch : s.unaligned_launches)
                    out.lines.push_back("unaligned buffers: " + launch_line(launch));
                return out;
            },
        },
        step);
}

}  // namespace

std::string print_schedule(const Plan& plan, const Schedule& schedule) {
    std::string out = fmt::format("schedule ({}; workspace {})\n", describe_target(schedule.target),
                                  format_bytes(static_cast<double>(schedule.workspace_bytes)));
    for (std::size_t t = 0; t < plan.temporaries.size(); ++t)
        out += fmt::format("  t{}: at byte {} of the workspace\n", t, schedule.temporary_offsets[t]);
    for (std::size_t s = 0; s < schedule.steps.size(); ++s) {
        const ScheduledStep& step = schedule.steps[s];
        const Printed printed = print_strategy(step.strategy);
        std::string head =
            fmt::format("  {}. {:<8} {}", s + 1, step_kind(plan.steps[s].step), name_of(step.strategy));
        if (printed.library) head += schedule.target.backend == Backend::cpu ? " (CBLAS)" : " (cuBLAS)";
        if (!std::holds_alternative<strategy::View>(step.strategy))
            head += fmt::format("  accumulator {}", name_of(step.accumulator));
        if (!printed.compute.empty()) head += fmt::format("  compute {}", printed.compute);
        if (printed.split != Split::none) head += fmt::format("  split {}", name_of(printed.split));
        if (step.scratch_bytes > 0)
            head +=
                fmt::format("  scratch {}{}", format_bytes(static_cast<double>(step.scratch_bytes)),
                            step.zeroed_scratch_bytes > 0
                                ? fmt::format(" (its first {} zeroed before it)",
                                              format_bytes(static_cast<double>(step.zeroed_scratch_bytes)))
                                : "");
        if (printed.streaming_stores) head += "  streaming stores";
        out += head + "\n";
        for (const std::string& line : printed.lines) out += fmt::format("       {}\n", line);
    }
    return out;
}

}  // namespace einc
