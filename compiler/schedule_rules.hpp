// Internal to compiler/: the rules schedule() applies to each kind of step, one file per backend
// (schedule_cpu.cpp, schedule_gpu.cpp), and the constants they share.
#pragma once

#include <optional>
#include <vector>

#include "compiler/schedule.hpp"

namespace einc::detail {

// Bytes of work below which a CPU step runs on the calling thread alone: handing work to the pool costs
// a few microseconds.
inline constexpr std::int64_t parallel_threshold_bytes = 1 << 20;
// FLOPs of GEMMs below which they run on the calling thread's library call alone (4 MFLOP: about 0.1 ms
// on one core).
inline constexpr double parallel_threshold_flops = 1 << 22;

// A CPU transpose with a side of at most this many elements streams along the other side, untiled.
inline constexpr std::int64_t short_side = 8;

// A CPU step whose source is larger than this reads it from memory, not from the caches (the last-level
// cache of the machines measured is 32 MiB; Target does not know the cache sizes yet).
inline constexpr std::int64_t beyond_caches_bytes = 32 << 20;

// A CPU step that moves at least this many bytes (read and written) stores its destination around the
// caches, where its kernel can: half the last-level cache (schedule_cpu_step says what was measured).
inline constexpr std::int64_t streaming_bytes = beyond_caches_bytes / 2;

// The mode a copy can be tiled along as a transpose: the destination is unit-stride along its last mode,
// the source along mode p (another one; its last mode is neither unit-stride nor broadcast), and both
// modes have at least `min_extent` elements. One rule for both backends; the CPU tiles from 4, a GPU
// (32x32 tiles of a warp each) from 8.
std::optional<std::size_t> transpose_mode(const Layout& dst, const Layout& src, std::int64_t min_extent);

inline ScheduledStep scheduled(StepStrategy strategy, DType accumulator) {
    ScheduledStep step;
    step.strategy = std::move(strategy);
    step.accumulator = accumulator;
    return step;
}

ScheduledStep schedule_cpu_step(const Plan& plan, const PlanStep& step, const Target& target);
ScheduledStep schedule_gpu_step(const Plan& plan, const Step& step, const Target& target);

// Every kernel the GPU rules can choose for a step, whatever its extents and the GPU.
std::vector<KernelSignature> possible_gpu_kernels(const Plan& plan, const Step& step);

}  // namespace einc::detail
