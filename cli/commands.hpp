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

int explain(const CallArgs& args, std::ostream& out);
int run_call(const CallArgs& args, std::ostream& out);
int emit(const CallArgs& args, std::ostream& out);
// bench and roofline read their own options (--repeat, --measure, -o, ...) before the call's.
int bench(std::span<const std::string> args, std::ostream& out);
int roofline(std::span<const std::string> args, std::ostream& out);
// aot draws a progress bar on `err` when it is a terminal.
int aot(std::span<const std::string> args, std::ostream& out, std::ostream& err, bool err_is_terminal);

// The operands as tensors: .npy files are read; shape literals become tensors of that layout holding
// nothing (explain only looks at their dtype, shape and strides).
struct LoadedOperands {
    std::vector<Tensor> files;         // the data read from .npy operands
    std::vector<TensorSpec> specs;     // every operand's dtype, shape and strides
    std::vector<TensorView> views;     // every operand (views of shape literals have no data)
};
LoadedOperands load_operands(const CallArgs& args);
DType parse_dtype(const std::string& name);
// Where `--backend NAME` runs calls: cpu (also when NAME is empty), or cuda when this build has the GPU
// backend and this machine a usable GPU (einc::Error otherwise; UsageError for another name).
Device execution_device(const std::string& backend);
const DeviceModel& parse_device(const std::string& key);
// The target `explain` and `emit` schedule for: --backend, else the device's kind; a GPU with the
// device's multiprocessors (an H100's where the device is a CPU), the CPU as einc runs on this machine.
Target schedule_target(const CallArgs& args, const DeviceModel& device);

}  // namespace einc::cli
