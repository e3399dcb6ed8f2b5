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

std::vector<std::string> cpu_lines(const ScheduledStep& step) {
    switch (step.strategy) {
    case Strategy::view:
    case Strategy::library_gemm:
    case Strategy::library_gemv:
    case Strategy::packed_gemm:
    case Strategy::kernels: return {};
    default: break;
    }
    const CpuNest& nest = step.nest;
    std::vector<std::string> lines{fmt::format("dst  {}", to_string(nest.dst)),
                                   fmt::format("src  {}", to_string(nest.src))};
    const bool products = step.strategy == Strategy::contract_elementwise ||
                          step.strategy == Strategy::contract_rows ||
                          step.strategy == Strategy::contract_accumulate;
    if (products) lines.push_back(fmt::format("src  {}", to_string(nest.src1)));
    if (step.accumulators > 0) lines.push_back(fmt::format("acc  {}", to_string(nest.acc)));
    if (step.strategy == Strategy::transpose) {
        lines.push_back(fmt::format("tiles between mode {} (unit-stride in the source) and mode {}: {}",
                                    step.transpose_mode, nest.dst.rank() - 1, name_of(step.transpose_kind)));
        const TransposeTiles& tiles = step.tiles;
        if (step.transpose_kind != TransposeKind::short_side)
            lines.push_back(fmt::format("{} tiles of ({}) walked along modes [{}], read along [{}], written "
                                        "along [{}] (innermost first)",
                                        tiles.count, fmt::join(tiles.extents, ","),
                                        fmt::join(tiles.tile_order, ","), fmt::join(tiles.read_order, ","),
                                        fmt::join(tiles.write_order, ",")));
    }
    if (step.strategy == Strategy::reduce_windows)
        lines.push_back(fmt::format("window of {} terms per output", step.window));
    if (step.accumulators > 0)
        lines.push_back(fmt::format(
            "{} accumulators{}{}", step.accumulators,
            step.partial_arrays > 0 ? fmt::format(", and {} arrays of partials", step.partial_arrays) : "",
            step.rows_in_order ? "; rows folded in memory order" : ""));
    return lines;
}

}  // namespace

std::string print_schedule(const Plan& plan, const Schedule& schedule) {
    std::string out = fmt::format("schedule ({}; workspace {})\n", describe_target(schedule.target),
                                  format_bytes(static_cast<double>(schedule.workspace_bytes)));
    for (std::size_t t = 0; t < plan.temporaries.size(); ++t)
        out += fmt::format("  t{}: at byte {} of the workspace\n", t, schedule.temporary_offsets[t]);
    for (std::size_t s = 0; s < schedule.steps.size(); ++s) {
        const ScheduledStep& step = schedule.steps[s];
        std::string head =
            fmt::format("  {}. {:<8} {}", s + 1, step_kind(plan.steps[s].step), name_of(step.strategy));
        const bool library =
            step.strategy == Strategy::library_gemm || step.strategy == Strategy::library_gemv;
        if (library) head += schedule.target.backend == Backend::cpu ? " (CBLAS)" : " (cuBLAS)";
        if (step.strategy != Strategy::view)
            head += fmt::format("  accumulator {}", name_of(step.accumulator));
        if (schedule.target.backend == Backend::cpu && step.split != Split::none)
            head += fmt::format("  split {}", name_of(step.split));
        if (step.scratch_bytes > 0)
            head += fmt::format("  scratch {}", format_bytes(static_cast<double>(step.scratch_bytes)));
        if (step.streaming_stores) head += "  streaming stores";
        out += head + "\n";
        for (const std::string& line : cpu_lines(step)) out += fmt::format("       {}\n", line);
        for (const KernelLaunch& launch : step.launches)
            out += fmt::format("       {}\n", launch_line(launch));
        for (const KernelLaunch& launch : step.unaligned_launches)
            out += fmt::format("       unaligned buffers: {}\n", launch_line(launch));
    }
    return out;
}

}  // namespace einc
