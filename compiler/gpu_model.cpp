#include "compiler/gpu_model.hpp"

#include <algorithm>
#include <cmath>

#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

// The parameters, in one place. Hopper's SM limits (2048 threads, 32 blocks, 64 K registers, 228 KB shared
// memory per SM) are NVIDIA's (CUDA C Programming Guide, compute capability 9.0); 1.98 GHz is the H100 SXM
// and H200 boost clock (NVIDIA datasheets).
//
// Fitted once, on the H200 rows of gpu_bench at 35bcf9a (bench/results/gpu-h200-35bcf9a.json), by
// bench/model_vs_measured (its calibration; every row's error beside it in
// bench/results/model-vs-h200-35bcf9a.md), each from the rows that isolate it, the others held:
//   BW       the median device-to-device cudaMemcpy bandwidth of the permutation rows' baselines
//   tau_r    a b -> b a f32 4096x4096: 15.5 rounds of 32x32 tiles per block slot, predicted exactly
//   tau_s    sum b h i j -> b h j bf16: reduce_columns, 512 dependent batches per thread, predicted exactly
//   T_L, t_c least squares of log(predicted / measured) over the rows made of launches and serial chains:
//            sum a b -> a, -> b and -> of f32 32768x32, and -> b and -> of f32 7840000x4
// The H100 keeps the H200's latencies (the same SM and L2) with its own BW: the median cudaMemcpy
// bandwidth gpu_bench measured on a lent H100 on 2026-11-23 (../shared/gpu/h100-2026-11-23.md).
constexpr GpuParameters h200{
    .key = "h200",
    .bandwidth = 4.045e12,
    .launch_seconds = hopper_launch_seconds,  // (the cost model's step floor on Hopper too)
    .stream_latency = 0.619e-6,
    .round_latency = 3.032e-6,
    .chain_step_seconds = 260.6e-9,
    .l2_reuse_bytes = 25e6,  // half the 50 MB L2: an SM reaches the far half's copies at a cost
};
constexpr GpuParameters h100 = [] {
    GpuParameters p = h200;
    p.key = "h100";
    p.bandwidth = 2.78e12;
    return p;
}();
constexpr GpuParameters all_gpus[] = {h100, h200};

}  // namespace

const GpuParameters* gpu_parameters(std::string_view device_key) {
    for (const GpuParameters& p : all_gpus)
        if (p.key == device_key) return &p;
    return nullptr;
}

namespace {

// Registers per thread ptxas allocates for sm_90 (CUDA 13.0) to each kernel the corpus's plans and the route
// gradients use, by name without its epilogue; written by tests/kernel_resources_test.cpp
// (EINC_WRITE_REGISTERS=compiler/kernel_registers.inc), which fails when a kernel differs from it.
struct KernelRegisters {
    std::string_view name;
    int registers;
};
constexpr KernelRegisters kernel_registers[] = {
#include "compiler/kernel_registers.inc"
};

std::string_view without_epilogue(std::string_view name) {
    const std::size_t alpha = name.find("_alpha");
    return alpha == std::string_view::npos ? name : name.substr(0, alpha);
}

}  // namespace

int estimated_registers(const KernelSignature&) {
    return 32;  // what most kernels of the table take: 350 of 406 fit 8 blocks of 256 threads per SM
}

KernelResources kernel_resources(const KernelSignature& s) {
    KernelResources r;
    const std::string name = s.name();
    const auto it =
        std::lower_bound(std::begin(kernel_registers), std::end(kernel_registers), without_epilogue(name),
                         [](const KernelRegisters& k, std::string_view n) { return k.name < n; });
    if (it != std::end(kernel_registers) && it->name == without_epilogue(name)) {
        r.registers = it->registers;
    } else {
        r.estimated = true;
        r.registers = estimated_registers(s);
    }
    const int accumulator = s.accumulator == DType::f64 || !is_floating(s.accumulator) ? 8 : 4;  // bytes
    switch (s.kind) {
    case KernelKind::tiles:
        r.shared_bytes = tiles_shared_bytes(static_cast<int>(size_of(s.destination)), s.vector);
        break;
    case KernelKind::reduce_one_pass:  // its warps' columns, the last block's rows, the last-block flag
        r.shared_bytes =
            (one_pass_block_threads / kernel_warp * kernel_warp + one_pass_block_threads) * accumulator + 4;
        break;
    case KernelKind::short_side:  // short destination rows: the warps' stages
        if (!s.short_source)
            r.shared_bytes = short_side_stage_bytes(
                s.short_extent * s.vector * static_cast<int>(size_of(s.destination)) / kernel_vector_bytes);
        break;
    case KernelKind::reduce_packed_rows:  // its warps' stages
        r.shared_bytes = packed_rows_shared_bytes(s.vector, accumulator);
        break;
    case KernelKind::elementwise:
    case KernelKind::permute:
    case KernelKind::vector_copy:
    case KernelKind::reduce_rows:
    case KernelKind::reduce_columns:
    case KernelKind::finalize:
    case KernelKind::route:
    case KernelKind::reduce_short_rows: break;
    }
    return r;
}

int resident_blocks(const KernelLaunch& launch, const KernelResources& r, const GpuParameters& gpu) {
    const int threads = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
    const int warps = (threads + kernel_warp - 1) / kernel_warp;
    // Registers are allocated per warp, in units of 256.
    const int per_warp = (r.registers * kernel_warp + 255) / 256 * 256;
    int blocks = std::min(gpu.max_blocks_per_sm, gpu.max_threads_per_sm / std::max(threads, 1));
    if (per_warp > 0) blocks = std::min(blocks, gpu.registers_per_sm / per_warp / std::max(warps, 1));
    if (r.shared_bytes > 0)
        blocks = std::min(blocks, gpu.shared_bytes_per_sm / (r.shared_bytes + gpu.shared_reserved_per_block));
    return std::max(blocks, 0);
}

std::string_view name_of(GpuLimit limit) {
    switch (limit) {
    case GpuLimit::launch: return "launch";
    case GpuLimit::bandwidth: return "bandwidth";
    case GpuLimit::latency: return "latency";
    case GpuLimit::issue: return "issue";
    case GpuLimit::serial_chain: return "serial_chain";
    }
    EINC_ASSERT(false);
}

KernelPrediction predict_kernel(const KernelLaunch& launch, const KernelBehaviour& b,
                                const GpuParameters& gpu, bool l2_resident) {
    KernelPrediction k;
    const KernelResources resources = kernel_resources(launch.signature);
    k.resident_blocks = resident_blocks(launch, resources, gpu);
    EINC_ASSERT(k.resident_blocks > 0);
    const double blocks = launch.grid.x;
    const double sms = std::min<double>(gpu.multiprocessors, blocks);
    const double warps_per_block =
        std::ceil(launch.block.x * launch.block.y * launch.block.z / double{kernel_warp});
    const double blocks_per_sm = std::min<double>(k.resident_blocks, std::ceil(blocks / gpu.multiprocessors));
    const double resident_warps = blocks_per_sm * warps_per_block;
    k.waves = std::ceil(blocks / (gpu.multiprocessors * static_cast<double>(k.resident_blocks)));
    k.bytes_in_flight_per_sm = b.batch_bytes * resident_warps;
    k.serial_chain = b.serial_chain;
    k.rounds = std::max(b.warp_batches / (sms * resident_warps), b.serial_chain);
    k.sector_efficiency = b.sector_efficiency;
    k.hbm_bytes = b.hbm_read_bytes + b.hbm_write_bytes;
    // Stores of part of a sector, streaming through more than the L2 holds, cost HBM more than their
    // sectors: fitted on the H200's short_side rows at 9024dc6, whose 16-byte stores half-filled each
    // sector - 268 MB ran at 0.55 of a copy (-42% without this term, -14% with it), 38 MB at 0.85 (-11%).
    if (!l2_resident && b.hbm_write_bytes > gpu.l2_bytes && b.store_sector_efficiency < 1)
        k.hbm_bytes += b.hbm_write_bytes * (1 / b.store_sector_efficiency - 1);
    k.useful_bytes = b.load_bytes + b.store_bytes;
    k.l2_resident = l2_resident;
    const double tau = b.barrier_rounds ? gpu.round_latency : gpu.stream_latency;

    k.launch_seconds = gpu.launch_seconds;
    k.bandwidth_seconds = k.hbm_bytes / gpu.bandwidth;
    if (l2_resident) {  // each block's first batch a full round trip; the rest a step of a chain in L2
        k.latency_seconds = std::min(k.rounds, k.waves) * tau;
        k.chain_seconds = std::max(k.rounds - k.waves, 0.0) * gpu.chain_step_seconds;
    } else {
        k.latency_seconds = k.rounds * tau;
    }
    k.issue_seconds = b.warp_instructions / (sms * 4 * gpu.clock_hz);
    k.seconds = k.launch_seconds + std::max({k.bandwidth_seconds, k.latency_seconds, k.issue_seconds}) +
                k.chain_seconds;

    const std::pair<double, GpuLimit> parts[] = {{k.launch_seconds, GpuLimit::launch},
                                                 {k.bandwidth_seconds, GpuLimit::bandwidth},
                                                 {k.latency_seconds, GpuLimit::latency},
                                                 {k.issue_seconds, GpuLimit::issue},
                                                 {k.chain_seconds, GpuLimit::serial_chain}};
    k.limited_by = std::max_element(std::begin(parts), std::end(parts), [](const auto& a, const auto& b) {
                       return a.first < b.first;
                   })->second;
    return k;
}

GpuLimit StepPrediction::limited_by() const {
    const auto slowest = std::max_element(kernels.begin(), kernels.end(),
                                          [](const auto& a, const auto& b) { return a.seconds < b.seconds; });
    return slowest == kernels.end() ? GpuLimit::launch : slowest->limited_by;
}

std::optional<StepKernels> step_kernels(const Plan& plan, const Schedule& schedule, std::size_t step,
                                        double reuse_limit_bytes) {
    const auto* kernels = std::get_if<strategy::Kernels>(&schedule.steps[step].strategy);
    if (!kernels || kernels->launches.empty()) return std::nullopt;
    StepKernels k;
    k.useful_bytes = scheduled_step_cost(plan, schedule, step).bytes();
    k.scratch_bytes = static_cast<double>(schedule.steps[step].scratch_bytes);
    k.launches = kernels->launches;
    BehaviourOptions options;
    options.reuse_limit_bytes = reuse_limit_bytes;
    for (const KernelLaunch& launch : k.launches) k.behaviours.push_back(behaviour_of(launch, options));
    return k;
}

StepPrediction predict_step(const StepKernels& step, const GpuParameters& gpu) {
    StepPrediction prediction;
    prediction.useful_bytes = step.useful_bytes;
    // Called again and again (as gpu_bench times it), a step whose bytes the L2 keeps finds them there; a
    // finalize finds the partials the kernel before it has just written.
    const bool step_resident = step.useful_bytes + step.scratch_bytes <= gpu.l2_reuse_bytes;
    for (std::size_t k = 0; k < step.launches.size(); ++k) {
        const KernelBehaviour& behaviour = step.behaviours[k];
        const bool resident =
            step_resident || (behaviour.reads_scratch && step.scratch_bytes <= gpu.l2_reuse_bytes);
        prediction.kernels.push_back(predict_kernel(step.launches[k], behaviour, gpu, resident));
        prediction.seconds += prediction.kernels.back().seconds;
    }
    return prediction;
}

std::optional<StepPrediction> predict_step(const Plan& plan, const Schedule& schedule, std::size_t step,
                                           const GpuParameters& gpu) {
    const std::optional<StepKernels> kernels = step_kernels(plan, schedule, step, gpu.l2_reuse_bytes);
    if (!kernels) return std::nullopt;
    return predict_step(*kernels, gpu);
}

}  // namespace einc
