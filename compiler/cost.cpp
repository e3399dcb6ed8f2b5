#include "compiler/cost.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <iterator>
#include <memory>
#include <mutex>
#include <vector>

#include "compiler/checked.hpp"
#include "compiler/reduction.hpp"
#include "compiler/schedule.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {

double Cost::intensity() const {
    return bytes() > 0 ? flops / bytes() : 0;
}

Cost& Cost::operator+=(const Cost& other) {
    flops += other.flops;
    bytes_read += other.bytes_read;
    bytes_written += other.bytes_written;
    workspace_bytes += other.workspace_bytes;
    return *this;
}

namespace {

constexpr double T = 1e12;

const std::array devices{
    // NVIDIA H100 SXM5 80 GB. Source: NVIDIA H100 Tensor Core GPU datasheet (2023), dense rates:
    // FP64 tensor 67 TF, FP32 67 TF, TF32 494.7 TF, BF16/FP16 989.4 TF, FP8 1978.9 TF, INT8 1978.9 TOPS;
    // HBM3 3.35 TB/s.
    DeviceModel{"h100", "NVIDIA H100 SXM5 80GB", 3.35 * T, 67 * T, 67 * T, 494.7 * T, 989.4 * T, 989.4 * T,
                1978.9 * T, 1978.9 * T, 132, hopper_launch_seconds},
    // NVIDIA H200 SXM 141 GB. Source: NVIDIA H200 datasheet (2024): the H100 SXM's compute, HBM3e 4.8 TB/s.
    DeviceModel{"h200", "NVIDIA H200 SXM 141GB", 4.8 * T, 67 * T, 67 * T, 494.7 * T, 989.4 * T, 989.4 * T,
                1978.9 * T, 1978.9 * T, 132, hopper_launch_seconds},
    // NVIDIA A100 SXM4 80 GB. Source: NVIDIA A100 datasheet (2021), dense rates: FP64 tensor 19.5 TF,
    // FP32 19.5 TF, TF32 156 TF, BF16/FP16 312 TF, INT8 624 TOPS, no FP8; HBM2e 2.039 TB/s. Its launch is
    // taken to be Hopper's (not measured).
    DeviceModel{"a100", "NVIDIA A100 SXM4 80GB", 2.039 * T, 19.5 * T, 19.5 * T, 156 * T, 312 * T, 312 * T, 0,
                624 * T, 108, hopper_launch_seconds},
    // The development machine, measured (numpy's OpenBLAS, 2048^3 GEMM and a 64 MiB copy, 2026-11-21):
    // AMD EPYC (Zen 4, AVX-512), 2 cores: f32 GEMM 193 GFLOP/s, f64 104 GFLOP/s, copy 25 GB/s read + write.
    // No native bf16/f16 GEMM: they run through f32 conversion at about the f32 rate. A step costs at least
    // 0.25 us: `einc bench` of calls of 6 to 32 elements (matmuls, a sum, a copy) took 0.49-0.9 us each
    // (2026-11-28); half the fastest, as a floor must hold on a quiet machine.
    DeviceModel{"cpu", "AMD EPYC, 2 cores (development machine)", 25e9, 104e9, 193e9, 193e9, 193e9, 193e9, 0,
                193e9, 0, 0.25e-6},
};

std::atomic<LocalDeviceLoader> local_device_loader{nullptr};

// A model with its own copies of its strings; never moved once made, so its views stay valid.
struct KeptModel {
    std::string key, name;
    DeviceModel model;
};

bool same_model(const DeviceModel& a, const DeviceModel& b) {
    return a.key == b.key && a.name == b.name && a.bandwidth == b.bandwidth && a.peak_f64 == b.peak_f64 &&
           a.peak_f32 == b.peak_f32 && a.peak_tf32 == b.peak_tf32 && a.peak_bf16 == b.peak_bf16 &&
           a.peak_f16 == b.peak_f16 && a.peak_fp8 == b.peak_fp8 && a.peak_i8 == b.peak_i8 &&
           a.multiprocessors == b.multiprocessors && a.step_seconds == b.step_seconds;
}

}  // namespace

std::span<const DeviceModel> device_models() {
    return devices;
}

const DeviceModel* device_model_of_gpu(std::string_view gpu_name) {
    for (const char* key : {"H200", "H100", "A100"})  // (an H200's name does not contain "H100")
        if (gpu_name.find(key) != std::string_view::npos) return device_model_named(key);
    return nullptr;
}

const DeviceModel* device_model_named(std::string_view key) {
    std::string lower;
    for (const char c : key) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.ends_with("-sxm") || lower.ends_with("_sxm")) lower.resize(lower.size() - 4);
    for (const DeviceModel& device : devices)
        if (lower == device.key) return &device;
    if (lower == "local") {
        const LocalDeviceLoader loader = local_device_loader.load(std::memory_order_acquire);
        if (!loader)
            throw Error(
                ErrorKind::unsupported,
                "the local device model is read by einc's runtime, which this program does not include")
                .help("include <einc/einc.hpp> (or runtime/calibration.hpp), which installs the reader");
        return &loader();
    }
    return nullptr;
}

void set_local_device_loader(LocalDeviceLoader loader) {
    local_device_loader.store(loader, std::memory_order_release);
}

const DeviceModel& keep_device_model(const DeviceModel& model) {
    // Every model kept stays until the process ends: callers hold references. A calibration read again
    // finds its earlier copy, so only a changed file adds one.
    static std::mutex mutex;
    static std::vector<std::unique_ptr<KeptModel>> kept;
    const std::lock_guard lock(mutex);
    for (const auto& k : kept)
        if (same_model(k->model, model)) return k->model;
    auto copy =
        std::make_unique<KeptModel>(KeptModel{std::string(model.key), std::string(model.name), model});
    copy->model.key = copy->key;
    copy->model.name = copy->name;
    kept.push_back(std::move(copy));
    return kept.back()->model;
}

double peak_flops(const DeviceModel& device, DType dtype, bool allow_tf32) {
    switch (dtype) {
    case DType::f64:
    case DType::c128: return device.peak_f64;
    case DType::c64:
    case DType::f32: return allow_tf32 ? device.peak_tf32 : device.peak_f32;
    case DType::bf16: return device.peak_bf16;
    case DType::f16: return device.peak_f16;
    case DType::f8e4m3:
    case DType::f8e5m2: return device.peak_fp8;
    case DType::i8:
    case DType::u8:
    case DType::boolean: return device.peak_i8;
    case DType::i16:
    case DType::u16:
    case DType::i32:
    case DType::u32:
    case DType::i64:
    case DType::u64: return device.peak_f32;
    }
    return device.peak_f32;
}

double attainable_flops(const DeviceModel& device, DType dtype, double intensity, bool allow_tf32) {
    return std::min(peak_flops(device, dtype, allow_tf32), intensity * device.bandwidth);
}

Roofline roofline(const Cost& cost, const DeviceModel& device, DType dtype, bool allow_tf32) {
    const double peak = peak_flops(device, dtype, allow_tf32);
    Roofline r;
    const double compute = peak > 0 ? cost.flops / peak : (cost.flops > 0 ? INFINITY : 0);
    const double memory = cost.bytes() / device.bandwidth;
    r.seconds = std::max(compute, memory);
    r.compute_bound = compute > memory;
    r.ridge = peak / device.bandwidth;
    r.attainable_flops = attainable_flops(device, dtype, cost.intensity(), allow_tf32);
    return r;
}

double step_seconds(const Cost& cost, const DeviceModel& device, DType dtype, bool allow_tf32) {
    if (cost.flops == 0 && cost.bytes() == 0) return 0;
    return device.step_seconds + roofline(cost, device, dtype, allow_tf32).seconds;
}

RooflineBound roofline_bound(const Cost& cost, const DeviceModel& device, DType dtype, bool allow_tf32) {
    if (cost.flops == 0 && cost.bytes() == 0) return RooflineBound::free;
    return roofline(cost, device, dtype, allow_tf32).compute_bound ? RooflineBound::compute
                                                                   : RooflineBound::memory;
}

std::string_view name_of(RooflineBound roof) {
    static constexpr std::string_view names[] = {"free", "memory", "compute"};
    static_assert(std::size(names) == static_cast<std::size_t>(RooflineBound::compute) + 1,
                  "one name per RooflineBound, in order");
    return names[static_cast<std::size_t>(roof)];
}

std::string describe_step_floor(const DeviceModel& device) {
    return fmt::format("a {} {}", format_seconds(device.step_seconds),
                       device.multiprocessors > 0 ? "launch" : "dispatch");
}

std::string describe_bound(const Cost& cost, const DeviceModel& device, DType dtype, bool allow_tf32) {
    const Roofline r = roofline(cost, device, dtype, allow_tf32);
    std::string key(device.key);
    for (char& c : key) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::string_view precision = dtype == DType::f32 && allow_tf32 ? "tf32" : name_of(dtype);
    const RooflineBound roof = roofline_bound(cost, device, dtype, allow_tf32);
    if (roof == RooflineBound::free) return "free: no FLOPs, no bytes moved";
    if (cost.flops == 0) return fmt::format("memory-bound: 0 FLOP/B (pure data movement) on {}", key);
    return fmt::format("{}-bound: {:.3g} FLOP/B {} {:.3g} FLOP/B ridge of {} ({})", name_of(roof),
                       cost.intensity(), roof == RooflineBound::compute ? ">" : "<", r.ridge, key, precision);
}

// ---- counting ---------------------------------------------------------------------------------------

namespace {

// The bytes of the distinct elements a layout reaches: broadcast elements count once.
double distinct_bytes(const Layout& layout, DType dtype) {
    return static_cast<double>(distinct_elements(layout)) * static_cast<double>(size_of(dtype));
}

// A destination layout with the reduced modes (stride 0) removed: what is written.
Layout written(const Layout& dst) {
    Layout out;
    for (const Mode& m : dst.modes)
        if (m.stride != 0) out.modes.push_back(m);
    return out;
}

}  // namespace

Cost step_cost(const Plan& plan, const Step& step) {
    const auto dtype = [&](Buffer buffer) { return plan.dtype_of(buffer); };
    // A temporary's bytes are workspace, counted where it is written.
    const auto workspace = [&](Buffer dst) {
        if (dst.kind != Buffer::Kind::temporary) return 0.0;
        const TensorSpec& t = plan.spec(dst);
        return static_cast<double>(*checked_product(t.shape)) * static_cast<double>(size_of(t.dtype));
    };
    Cost cost = std::visit(
        Overloaded{
            [](const View&) { return Cost{}; },
            [&](const Copy& copy) {
                return Cost{0, distinct_bytes(copy.src.layout, dtype(copy.src.buffer)),
                            distinct_bytes(copy.dst.layout, dtype(copy.dst.buffer)),
                            workspace(copy.dst.buffer)};
            },
            [&](const Reduce& reduce) {
                const Layout out = written(reduce.dst.layout);
                const ReductionInfo& op = info_of(reduce.op);  // mean also divides, once per output
                const double flops = op.flops_per_term * static_cast<double>(reduce.src.layout.size()) +
                                     (op.divides ? static_cast<double>(out.size()) : 0);
                return Cost{flops, distinct_bytes(reduce.src.layout, dtype(reduce.src.buffer)),
                            distinct_bytes(out, dtype(reduce.dst.buffer)), workspace(reduce.dst.buffer)};
            },
            [&](const Contract& contract) {
                const Layout out = written(contract.dst.layout);
                const bool summed = out.size() < contract.dst.layout.size();
                // (operands - 1) multiplications per element of the nest, plus one add where products are
                // summed
                const double flops =
                    static_cast<double>(contract.dst.layout.size()) *
                    (static_cast<double>(std::max<std::size_t>(1, contract.srcs.size() - 1)) +
                     (summed ? 1 : 0));
                double read = 0;
                for (const Access& src : contract.srcs) read += distinct_bytes(src.layout, dtype(src.buffer));
                return Cost{flops, read, distinct_bytes(out, dtype(contract.dst.buffer)),
                            workspace(contract.dst.buffer)};
            },
            [&](const Route& route) {
                // Two passes over the terms (find the extremum or product, then share it out): two
                // operations per element; x and the output's gradient read once, x's gradient written once.
                return Cost{2.0 * static_cast<double>(route.src.layout.size()),
                            distinct_bytes(route.src.layout, dtype(route.src.buffer)) +
                                distinct_bytes(route.grad.layout, dtype(route.grad.buffer)),
                            distinct_bytes(route.dst.layout, dtype(route.dst.buffer)),
                            workspace(route.dst.buffer)};
            },
            [&](const Gemm& gemm) {
                // A matrix broadcast over the batch (batch stride 0) is read once.
                const auto matrix_bytes = [&](const GemmMatrix& m, std::int64_t rows, std::int64_t cols) {
                    return static_cast<double>(m.batch_stride == 0 ? 1 : gemm.batch) *
                           static_cast<double>(m.outer_stride == 0 ? 1 : gemm.outer) *
                           static_cast<double>(rows) * static_cast<double>(cols) *
                           static_cast<double>(size_of(dtype(m.buffer)));
                };
                return Cost{2.0 * static_cast<double>(gemm.outer) * static_cast<double>(gemm.batch) *
                                static_cast<double>(gemm.m) * static_cast<double>(gemm.n) *
                                static_cast<double>(gemm.k),
                            matrix_bytes(gemm.a, gemm.m, gemm.k) + matrix_bytes(gemm.b, gemm.k, gemm.n),
                            matrix_bytes(gemm.c, gemm.m, gemm.n), workspace(gemm.c.buffer)};
            },
        },
        step);
    // out = alpha * r + beta * out: 2 FLOPs per element written; beta != 0 reads the output as well.
    if (const Epilogue e = epilogue_of(step); !e.identity()) {
        const Buffer dst = std::visit(Overloaded{[](const View& v) { return v.source.buffer; },
                                                 [](const Gemm& g) { return g.c.buffer; },
                                                 [](const auto& s) { return s.dst.buffer; }},
                                      step);
        cost.flops += 2 * cost.bytes_written / static_cast<double>(size_of(dtype(dst)));
        if (e.reads_output()) cost.bytes_read += cost.bytes_written;
    }
    return cost;
}

Cost scheduled_cost(const Plan& plan, const Schedule& schedule) {
    Cost total = plan.total;
    total.workspace_bytes = static_cast<double>(schedule.workspace_bytes);
    return total;
}

Cost scheduled_step_cost(const Plan& plan, const Schedule& schedule, std::size_t step) {
    Cost cost = plan.steps[step].cost;
    cost.workspace_bytes += static_cast<double>(schedule.steps[step].scratch_bytes);
    return cost;
}

namespace {

std::string with_prefix(double value, std::string_view unit) {
    static constexpr std::array<std::pair<double, const char*>, 6> prefixes{
        {{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}};
    for (const auto& [scale, prefix] : prefixes)
        if (std::fabs(value) >= scale) return fmt::format("{:.3g} {}{}", value / scale, prefix, unit);
    return fmt::format("{:.3g} {}", value, unit);
}

}  // namespace

std::string format_flops(double flops) {
    return with_prefix(flops, "FLOP");
}
std::string format_bytes(double bytes) {
    return with_prefix(bytes, "B");
}

std::string format_seconds(double seconds) {
    if (seconds == 0) return "0 s";
    if (seconds < 1e-6) return fmt::format("{:.3g} ns", seconds * 1e9);
    if (seconds < 1e-3) return fmt::format("{:.3g} us", seconds * 1e6);
    if (seconds < 1) return fmt::format("{:.3g} ms", seconds * 1e3);
    return fmt::format("{:.3g} s", seconds);
}

}  // namespace einc
