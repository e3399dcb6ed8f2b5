// One function per einc command. Each returns the exit status and throws einc::Error or UsageError.
#pragma once

#include <iosfwd>
#include <span>
#include <string>

#include "cli/arguments.hpp"
#include "compiler/plan.hpp"
#include "compiler/schedule.hpp"
#include "runtime/tensor.hpp"

namespace einc::cli {

int explain(const CallArgs& args, std::ostream& out, std::ostream& err);
int run_call(const CallArgs& args, std::ostream& out);
int emit(const CallArgs& args, std::ostream& out);
// bench and roofline read their own options (--repeat, --measure, -o, ...) before the call's; notes that
// are not their result (which device model they chose) go to `err`.
int bench(std::span<const std::string> args, std::ostream& out, std::ostream& err);
int roofline(std::span<const std::string> args, std::ostream& out, std::ostream& err);
// calibrate measures this machine and saves the "local" device model; progress goes to `err`.
int calibrate(std::span<const std::string> args, std::ostream& out, std::ostream& err);
// aot draws a progress bar on `err` when it is a terminal.
int aot(std::span<const std::string> args, std::ostream& out, std::ostream& err, bool err_is_terminal);

// The operands as tensors: .npy files are read; shape literals become tensors of that layout holding
// nothing (explain only looks at their dtype, shape and strides).
struct LoadedOperands {
    std::vector<Tensor> files;      // the data read from .npy operands
    std::vector<TensorSpec> specs;  // every operand's dtype, shape and strides
    std::vector<TensorView> views;  // every operand (views of shape literals have no data)
};
LoadedOperands load_operands(const CallArgs& args);
DType parse_dtype(const std::string& name);
// Where `--backend NAME` runs calls: cpu (also when NAME is empty), or cuda when this build has the GPU
// backend and this machine a usable GPU (einc::Error otherwise; UsageError for another name).
Device execution_device(const std::string& backend);
// The cost model's device named by --device (h100 when empty); "local" reads this machine's calibration.
const DeviceModel& parse_device(const std::string& key);
// The model a GPU command compares with: `key` where given, else the GPU this machine has (an H200's
// where it is one), else an H100's.
const DeviceModel& gpu_device(const std::string& key);
// What CPU timings are compared with when no --device is given: this machine's saved calibration
// ("local"), else the development machine's entry ("cpu"), with a note on `err` saying so.
const DeviceModel& default_cpu_device(std::ostream& err);
// What a command compares calls with: the device `device_key` names, else where the calls run: the
// `backend`'s device, else (no backend named) this machine's GPU, else its CPU (default_cpu_device).
const DeviceModel& call_device(const std::string& device_key, const std::string& backend, std::ostream& err);
// The GPU the commands schedule for: one with the device's multiprocessors, or where the device is a CPU,
// default_multiprocessors (an H100's). `emit` always schedules for it.
Target gpu_target(const DeviceModel& device);
// The target `explain` schedules for: --backend, else the device's kind; gpu_target(device), or the CPU
// as einc runs on this machine.
Target schedule_target(const CallArgs& args, const DeviceModel& device);

}  // namespace einc::cli
