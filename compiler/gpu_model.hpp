// The GPU performance model: the predicted time of each generated kernel, from what its design declares it
// does to memory (kernel_behaviour.hpp), its launch geometry and registers, and the parameters of a GPU
// fitted once on measurements (gpu_model.cpp says which, and from where). Plain computation: no CUDA.
//
// Per kernel, with O blocks resident per SM (threads, registers, shared memory), W warps resident per SM,
// waves = ceil(blocks / (SMs * O)), R the rounds of batches the busiest warp slot runs
// (max(warp batches / (SMs used * W), the busiest thread's chain)):
//
//   T = T_L + max(D / BW, latency, I / (SMs * 4 * f)) + C * t_c
//     D        HBM bytes: distinct 32-byte sectors read and written, with re-reads; where stores fill only
//              part of their sectors and write more than the L2 holds, each sector once more per share
//              of it the stores leave out (W / store sector efficiency)
//     latency  R * tau, Little's law: D_batch / (SMs * Q / tau), Q = bytes in flight per SM
//              = batch bytes * W; for data that stays in L2, waves * tau (each block's first round trip)
//     tau      tau_stream for barrier-free kernels, tau_round for load-barrier-store rounds
//     I        warp instructions issued; f the clock; 4 schedulers per SM
//     C        the rounds after each block's first over data that stays in L2 (a finalize folding its
//              partials; operands the L2 keeps between calls), each t_c
// A step's time is the sum of its kernels'. A step whose operands fit in the L2 reuse limit is predicted
// as gpu_bench times it: called again and again, its data already in L2.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "cost.hpp"
#include "kernel_abi.hpp"
#include "kernel_behaviour.hpp"
#include "plan.hpp"
#include "schedule.hpp"

namespace einc {

// One GPU model's parameters: the SM limits of its architecture, and the fitted ones.
struct GpuParameters {
    std::string_view key;  // the DeviceModel's: "h100", "h200"
    int multiprocessors = 132;
    double clock_hz = 1.98e9;  // f: the boost clock
    int max_threads_per_sm = 2048, max_blocks_per_sm = 32, registers_per_sm = 65536;
    int shared_bytes_per_sm = 228 * 1024, shared_reserved_per_block = 1024;
    double bandwidth = 0;           // BW: bytes per second HBM sustains (read + write)
    double launch_seconds = 0;      // T_L: per kernel launch, as back-to-back calls see it
    double stream_latency = 0;      // tau_stream: one round of a barrier-free kernel's batch
    double round_latency = 0;       // tau_round: one load-barrier-store round
    double chain_step_seconds = 0;  // t_c: one batch over data in L2, after the block's first
    double l2_reuse_bytes = 0;      // a sector used again after more traffic than this is read again
    double l2_bytes = 50e6;         // the L2 cache (H100 SXM and H200: 50 MB)
};

// The parameters of a DeviceModel's GPU (by its key), or null where none were fitted (a100, CPUs).
const GpuParameters* gpu_parameters(std::string_view device_key);

// Registers per thread and shared memory per block of a kernel, as `ptxas -arch=sm_90 -v` reports them:
// from a table of the kernels ptxas was asked about (compiler/kernel_registers.inc, pinned by
// tests/kernel_resources_test.cpp where the CUDA toolkit is installed), else estimated.
struct KernelResources {
    int registers = 32;
    int shared_bytes = 0;
    bool estimated = false;  // not in the table
};
KernelResources kernel_resources(const KernelSignature& signature);
// For a kernel not in the table: what most of those in it take.
int estimated_registers(const KernelSignature& signature);

// Blocks of `launch` resident on one SM at once.
int resident_blocks(const KernelLaunch& launch, const KernelResources& resources, const GpuParameters& gpu);

enum class GpuLimit : std::uint8_t { launch, bandwidth, latency, issue, serial_chain };
std::string_view name_of(GpuLimit limit);

struct KernelPrediction {
    double seconds = 0;
    double launch_seconds = 0, bandwidth_seconds = 0, latency_seconds = 0, issue_seconds = 0,
           chain_seconds = 0;
    GpuLimit limited_by = GpuLimit::launch;
    double hbm_bytes = 0;               // D
    double sector_efficiency = 1;       // useful bytes per sector byte, loads and stores
    double bytes_in_flight_per_sm = 0;  // Q
    double waves = 0;                   // of blocks over the SMs
    double rounds = 0;                  // R
    double serial_chain = 0;            // the busiest thread's batches
    int resident_blocks = 0;
    bool l2_resident = false;
    double useful_bytes = 0;  // what its loads and stores ask for (for % of HBM)
};

KernelPrediction predict_kernel(const KernelLaunch& launch, const KernelBehaviour& behaviour,
                                const GpuParameters& gpu, bool l2_resident);

struct StepPrediction {
    double seconds = 0;
    double useful_bytes = 0;                // the step's cost: bytes read + written (for % of HBM)
    std::vector<KernelPrediction> kernels;  // one per launch, in order
    GpuLimit limited_by() const;            // the slowest kernel's
};

// What the model reads of a step scheduled as generated kernels: its launches and what each does to
// memory (which no fitted parameter changes: a fit computes it once).
struct StepKernels {
    double useful_bytes = 0, scratch_bytes = 0;
    std::vector<KernelLaunch> launches;
    std::vector<KernelBehaviour> behaviours;
};
// Nothing for a view, a library GEMM or a step with no launch.
std::optional<StepKernels> step_kernels(const Plan& plan, const Schedule& schedule, std::size_t step,
                                        double reuse_limit_bytes);
StepPrediction predict_step(const StepKernels& kernels, const GpuParameters& gpu);
std::optional<StepPrediction> predict_step(const Plan& plan, const Schedule& schedule, std::size_t step,
                                           const GpuParameters& gpu);

}  // namespace einc
