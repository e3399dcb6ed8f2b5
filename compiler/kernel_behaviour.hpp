// What each kernel design does to memory, declared by the design from its launch alone: the description
// the GPU performance model reads (gpu_model.hpp), and that the emulator's trace of the kernel's own text
// is checked against (tests/emulation_model_test.cpp). Plain computation: no CUDA, no emulator.
//
// The description has two parts:
//  - per kernel kind, its lane program (kernel_behaviour.cpp): the global and shared accesses one thread
//    makes, in program order, with the places where a batch of independent loads ends - the same places
//    codegen marks in the kernel's text with EINC_BATCH, EINC_SYNC and EINC_SHFL_DOWN. Run for sampled
//    warps and read by the same statistics as the emulator's trace (warp_statistics), it gives the figures
//    per warp instruction: whole sectors, bytes in flight per batch, bank ways, the busiest thread's chain;
//  - per kernel kind, in closed form: the HBM bytes (distinct 32-byte sectors, with the re-reads of
//    sectors that come back after more than the L2 keeps), the instructions the lanes issue, and whether
//    loads and stores are separated by barriers (rounds) or stream.
// A new KernelKind fails to compile until behaviour_of() has its case (an exhaustive switch).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kernel_abi.hpp"
#include "layout.hpp"

namespace einc {

// Where a batch of independent loads ends in the kernels' loops. The compiler unrolls them - the SASS
// (sm_90, CUDA 13.0) shows the loads of several iterations issued together - so a loop's loads are in
// flight `unroll` iterations at a time; codegen ends each loop body with EINC_BATCH(unroll), and the lane
// programs count batches the same way.
int term_loop_unroll(const KernelSignature& signature);  // a loop over one output's terms (16 or 4)
inline constexpr int copy_loop_unroll = 4;    // the grid-stride loop of an elementwise kernel without terms
inline constexpr int vector_loop_unroll = 2;  // the grid-stride loop of vector_copy
// a grid-stride loop around an inner loop, or whose body batches its loads by hand (permute, short_side):
// not unrolled
inline constexpr int item_loop_unroll = 1;
// reduce_one_pass: an iteration of its main loop is one batch (its one_pass_batch loads written out); the
// remainder loop's few loads, unrolled, go with the partial vectors' into one batch.
inline constexpr int one_pass_batch_unroll = 1;
inline constexpr int one_pass_remainder_unroll = one_pass_batch;

// One event of one thread, in program order. Addresses are bytes; global and shared memory are separate
// spaces (shared addresses are offsets into the block's shared memory).
struct LaneEvent {
    enum class Kind : std::uint8_t {
        load,          // global
        store,         // global
        shared_load,   // shared memory
        shared_store,  // shared memory
        batch_mark,    // EINC_BATCH(size): the end of an iteration of a loop that nvcc unrolls `size` times
        barrier,       // EINC_SYNC: ends the batch
        shuffle,       // EINC_SHFL_DOWN: uses loaded values, so ends the batch
    };
    Kind kind = Kind::load;
    std::uint32_t site = 0;  // which access (or mark) of the kernel's text
    std::uint32_t size = 0;  // bytes accessed; for a batch mark, its unroll
    std::uint64_t address = 0;
};

// Statistics of the warp instructions of a set of warps. A warp instruction is the lanes of one warp that
// execute the same site for the same time (their n-th execution of it); a batch ends at a barrier, a
// shuffle, or the `unroll`-th batch mark of one site since it began; a warp
// batch is the loads of one warp's lanes in their n-th batch. (A mark of another site starts its count
// afresh without ending the batch: the loads before a loop go with its first iterations.)
// Bytes are what the lanes ask for; used bytes, the distinct bytes of the sectors they touch (lanes that
// read one address, as a broadcast does, use it once).
struct TraceStatistics {
    double load_instructions = 0, load_lanes = 0, load_bytes = 0, load_used_bytes = 0, load_sectors = 0,
           load_whole_sectors = 0;
    double store_instructions = 0, store_lanes = 0, store_bytes = 0, store_used_bytes = 0, store_sectors = 0,
           store_whole_sectors = 0;
    double shared_instructions = 0, shared_wavefronts = 0;  // wavefronts: the most ways on one bank
    double warp_batches = 0, batch_sectors = 0;             // Σ distinct sectors of each warp batch
    double longest_chain = 0;                               // batches of the busiest thread
    double threads = 0;                                     // threads with any event
    double issued = 0;  // instructions the warps issue (lane programs only: the emulator cannot count them)

    // used bytes / 32 bytes per sector touched, over loads, stores, or both (1 where there are none)
    double load_sector_efficiency() const;
    double store_sector_efficiency() const;
    double sector_efficiency() const;
    // the share of touched sectors whose 32 bytes one instruction uses in full
    double whole_sector_share() const;
    double batch_bytes() const;        // sector bytes one warp has in flight per batch (mean)
    double bank_ways() const;          // shared memory: mean wavefronts per instruction (1: conflict-free)
    double active_lane_share() const;  // of 32, per global memory instruction
    void add(const TraceStatistics& other, double weight);  // sums weighted; the chain's maximum
};

// The statistics of one warp from its lanes' events (lanes[l]: lane l's, empty for a lane that does not
// exist or does nothing).
TraceStatistics warp_statistics(std::span<const std::vector<LaneEvent>> lanes);

// Distinct 32-byte sectors touched by a layout of elements of `element_bytes` bytes, its first element on
// a sector boundary (stride-0 modes count once).
double sector_footprint(const Layout& layout, std::size_t element_bytes);

struct BehaviourOptions {
    // Each pointer argument's address modulo 4096 (launch.arguments' order): where sectors begin.
    std::array<std::uint32_t, 4> argument_alignment{};
    // A sector that comes back after more than this many bytes of the kernel's traffic is read from HBM
    // again (the GPU model's L2 reuse limit: gpu_model.hpp).
    double reuse_limit_bytes = 25e6;
    // Warps whose lanes run (evenly spread over the grid, the first and the last included; every warp
    // where the grid has no more), the items of each lane that emit events and the terms of each item:
    // the rest is counted, not emitted. 0: no limit (the exact description the emulator test compares).
    int sampled_warps = 16;
    std::int64_t emitted_items = 8, emitted_terms = 256;
    // Instead of sampled warps, every warp of these blocks (what a trace of sampled blocks compares with).
    std::vector<unsigned> blocks{};
};

// What one launch does to memory: the GPU model's input.
struct KernelBehaviour {
    // From the lane programs (per warp instruction; over sampled warps where the launch is large)
    double load_sector_efficiency = 1, store_sector_efficiency = 1, sector_efficiency = 1;
    double whole_sector_share = 1;
    double active_lane_share = 1;  // of a warp's 32 lanes, per global memory instruction
    double batch_bytes = 0;        // sector bytes one warp has in flight per batch of independent loads
    double bank_ways = 1;          // shared memory
    double serial_chain = 0;       // batches of loads, one after another, of the busiest thread
    double warp_batches = 0;       // over the launch
    double load_bytes = 0, store_bytes = 0;  // useful bytes over the launch
    double warp_instructions = 0;            // issued over the launch (an estimate: see kernel_behaviour.cpp)
    // In closed form
    double hbm_read_bytes = 0, hbm_write_bytes = 0;  // distinct sectors, with re-reads; scratch included
    double reread_factor = 1;                        // how many times the sources' sectors are read from HBM
    bool barrier_rounds = false;  // loads, a barrier, stores: each batch is a round of the whole block
    bool reads_scratch = false;   // its loads read what the launch before it wrote (finalize)
    bool exact = true;            // every warp's every event ran (no sampling, no limit reached)
    TraceStatistics statistics;   // the lane programs' own, over the warps that ran (unweighted)
};

KernelBehaviour behaviour_of(const KernelLaunch& launch, const BehaviourOptions& options = {});

// The events one thread (`block`, linear `thread`) of the launch makes, as its lane program declares them
// (no limit): what the emulator test compares a traced thread with, event by event, when they differ.
std::vector<LaneEvent> lane_events(const KernelLaunch& launch, const BehaviourOptions& options,
                                   unsigned block, unsigned thread);

}  // namespace einc
