// The cost of a plan step, by the conventions of docs/cost-model.md, and the roofline bound it sits
// under on a device. Every count is made in cost.cpp: a step's (step_cost, declared with the Plan) and a
// scheduled plan's, whose workspace the schedule knows (scheduled_cost, declared with the Schedule).
//   GEMM                  2 * batch * M * N * K FLOPs
//   elementwise product   (operands - 1) multiplications per output element (plus one add per summed element)
//   reduction             one operation per reduced input element; mean adds one per output element
//   view, copy            0 FLOPs; a view also moves 0 bytes
//   bytes                 bytes read + bytes written, each distinct element once, at its dtype's size
//   intensity             FLOPs / bytes
//   time bound            max(FLOPs / peak(dtype), bytes / bandwidth), dense (non-sparse) peaks;
//                         a step that moves anything also pays its device's start-up (step_seconds)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "dtype.hpp"

namespace einc {

struct Cost {
    double flops = 0;
    double bytes_read = 0;
    double bytes_written = 0;
    double workspace_bytes = 0;  // memory allocated for the step's result or scratch

    double bytes() const { return bytes_read + bytes_written; }
    double intensity() const;  // FLOPs per byte; 0 when nothing moves
    Cost& operator+=(const Cost& other);
};

// A device of the cost model's table: memory bandwidth and dense peaks per dtype (FLOP/s, 0 = not
// supported). Sources are cited beside each entry in cost.cpp.
struct DeviceModel {
    std::string_view key;   // "h100", "h200", "a100", "cpu", "local"
    std::string_view name;  // what the GPU or CPU is
    double bandwidth = 0;   // bytes per second, read + write
    double peak_f64 = 0, peak_f32 = 0, peak_tf32 = 0, peak_bf16 = 0, peak_f16 = 0, peak_fp8 = 0, peak_i8 = 0;
    int multiprocessors =
        0;  // a GPU's streaming multiprocessors (what its schedule is made for); 0 for a CPU
    // What starting one step costs, however small: a kernel launch on a GPU, einc's dispatch of a step on a
    // CPU. The floor under every step that is not a view.
    double step_seconds = 0;
};

// A kernel launch on an H100 or H200 as back-to-back calls see it: T_L of the GPU model, fitted to the
// H200 (compiler/gpu_model.cpp says how).
inline constexpr double hopper_launch_seconds = 3.275e-6;

// The fixed table: h100, h200, a100 and cpu (the development machine). Not "local".
std::span<const DeviceModel> device_models();
// "h100" (also "H100", "h100-sxm"), "h200", "a100", "cpu"; null for an unknown key. "local" is this
// machine as `einc calibrate` measured it, read from the saved calibration through the loader that the
// runtime installs (runtime/calibration.hpp; the compiler reads no files): throws einc::Error when there
// is no calibration, or it is malformed.
const DeviceModel* device_model_named(std::string_view key);
// The model of a GPU by the name its driver gives ("NVIDIA H200", "NVIDIA H100 80GB HBM3" ...): the
// table's entry whose name it contains; null for a GPU the table does not know.
const DeviceModel* device_model_of_gpu(std::string_view gpu_name);

// Where device_model_named("local") gets its model: a function that returns one kept by
// keep_device_model, or throws einc::Error saying why there is none.
using LocalDeviceLoader = const DeviceModel& (*)();
void set_local_device_loader(LocalDeviceLoader loader);

// A copy of `model` whose key and name live as long as the process, for models made at run time (the
// table's own point into string literals). Asking again for an identical model returns the same copy,
// so reading one calibration many times keeps one model.
const DeviceModel& keep_device_model(const DeviceModel& model);

// The peak a step computing in `dtype` can reach: the tensor-core peak for bf16/f16/fp8/i8 (and for
// f32 when tf32 is allowed), the vector peak for f32/f64; integers wider than 8 bits use the f32 rate.
double peak_flops(const DeviceModel& device, DType dtype, bool allow_tf32 = false);
// The FLOP/s a step of `intensity` (FLOP/B) computing in `dtype` can attain: min(peak, intensity *
// bandwidth), the roof it sits under.
double attainable_flops(const DeviceModel& device, DType dtype, double intensity, bool allow_tf32 = false);

struct Roofline {
    double seconds = 0;           // max(compute time, memory time)
    bool compute_bound = false;   // compute time > memory time
    double ridge = 0;             // FLOP/B where the roofs meet for this dtype
    double attainable_flops = 0;  // min(peak, intensity * bandwidth)
};
Roofline roofline(const Cost& cost, const DeviceModel& device, DType dtype, bool allow_tf32 = false);

// The least time a step of `cost` takes: its roofline time after its device's step_seconds (0 for a view,
// which moves nothing and runs nothing).
double step_seconds(const Cost& cost, const DeviceModel& device, DType dtype, bool allow_tf32 = false);

// Which roof a cost sits under: none (no FLOPs, no bytes: a view), memory or compute.
enum class RooflineBound : std::uint8_t { free, memory, compute };
RooflineBound roofline_bound(const Cost& cost, const DeviceModel& device, DType dtype,
                             bool allow_tf32 = false);
std::string_view name_of(RooflineBound roof);  // "free", "memory", "compute"

// "a 3.27 us launch" (a GPU), "a 250 ns dispatch" (a CPU): the device's step floor.
std::string describe_step_floor(const DeviceModel& device);

// "memory-bound: 0.25 FLOP/B < 295 FLOP/B ridge of H100 (bf16)"
std::string describe_bound(const Cost& cost, const DeviceModel& device, DType dtype, bool allow_tf32 = false);

// Human-readable quantities: 68.7 GFLOP, 134 MB, 1.25 ms.
std::string format_flops(double flops);
std::string format_bytes(double bytes);
std::string format_seconds(double seconds);

}  // namespace einc
