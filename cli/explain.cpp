#include <fmt/ostream.h>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "compiler/bind.hpp"
#include "compiler/gradient.hpp"
#include "compiler/lower.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "grammar/print.hpp"
#include "runtime/api.hpp"
#include "runtime/calibration.hpp"
#include "runtime/execute.hpp"
#include "runtime/npy.hpp"
#if EINC_HAS_CUDA
#include "cuda/cuda.hpp"
#endif

namespace einc::cli {

DType parse_dtype(const std::string& name) {
    const auto dtype = dtype_named(name);
    if (!dtype)
        throw UsageError(
            fmt::format("unknown dtype '{}' (f64 f32 f16 bf16 f8e4m3 f8e5m2 i8 i32 i64 bool)", name));
    return *dtype;
}

const DeviceModel& parse_device(const std::string& key) {
    const DeviceModel* device = device_model_named(key.empty() ? "h100" : key);
    if (!device) throw UsageError(fmt::format("unknown device '{}' (h100 h200 a100 cpu local)", key));
    return *device;
}

namespace {

bool gpu_present() {
#if EINC_HAS_CUDA
    return cuda::available();
#else
    return false;
#endif
}

}  // namespace

const DeviceModel& gpu_device(const std::string& key) {
    if (!key.empty()) return parse_device(key);
#if EINC_HAS_CUDA
    if (gpu_present()) return default_device_model(true, cuda::describe_device());
#endif
    return default_device_model(true);
}

const DeviceModel& default_cpu_device(std::ostream& err) {
    const DeviceModel& device = default_device_model(false);  // a malformed calibration is an error
    if (device.key == "cpu")
        fmt::print(err,
                   "note: comparing with the `cpu` model, {}, not this machine: run `einc calibrate` to "
                   "measure it\n",
                   device.name);
    return device;
}

const DeviceModel& call_device(const std::string& device_key, const std::string& backend, std::ostream& err) {
    if (!device_key.empty()) return parse_device(device_key);
    const bool gpu = backend.empty() ? gpu_present() : backend == "cuda";
    return gpu ? gpu_device("") : default_cpu_device(err);
}

Target gpu_target(const DeviceModel& device) {
    return Target::gpu(device.multiprocessors > 0 ? device.multiprocessors : default_multiprocessors);
}

Target schedule_target(const CallArgs& args, const DeviceModel& device) {
    const bool gpu = args.backend.empty() ? device.multiprocessors > 0 : args.backend == "cuda";
    if (!args.backend.empty() && args.backend != "cpu" && args.backend != "cuda")
        throw UsageError(fmt::format("unknown backend '{}' (cpu, cuda)", args.backend));
    if (gpu) return gpu_target(device);
    return cpu_target();
}

namespace {

// rearrange, reduce and repeat of several operands take them as einops takes a list of tensors: stacked
// along a new first axis (each of one shape and dtype).
void stack_list(const CallArgs& args, LoadedOperands& loaded) {
    const Op op = args.call.op;
    if ((op != Op::rearrange && op != Op::reduce && op != Op::repeat) || loaded.specs.size() < 2 ||
        args.call.pattern.find(',') != std::string::npos)  // (operands listed in the pattern: bind says no)
        return;
    const TensorSpec& first = loaded.specs[0];
    for (std::size_t k = 1; k < loaded.specs.size(); ++k)
        if (loaded.specs[k].shape != first.shape || loaded.specs[k].dtype != first.dtype)
            throw Error(
                ErrorKind::shape,
                fmt::format("{} stacks its {} operands along a new first axis, as einops stacks a list, "
                            "but operand {} is {} {} and operand 0 {} {}",
                            name_of(op), loaded.specs.size(), k, name_of(loaded.specs[k].dtype),
                            format_shape(loaded.specs[k].shape), name_of(first.dtype),
                            format_shape(first.shape)))
                .help("give operands of one shape and dtype, or one operand");
    Shape shape{static_cast<std::int64_t>(loaded.specs.size())};
    shape.insert(shape.end(), first.shape.begin(), first.shape.end());
    const TensorSpec stacked{first.dtype, shape, row_major_strides(shape)};
    if (loaded.files.size() == loaded.specs.size()) {  // all data: stacked for real
        const std::vector<Input> parts(loaded.files.begin(), loaded.files.end());
        std::string dims;
        for (std::size_t d = 0; d < first.shape.size(); ++d) dims += fmt::format(" d{}", d);
        loaded.files = {pack(parts, "*" + dims).tensor};
        loaded.views = {loaded.files[0].view()};
    } else {
        loaded.files.clear();
        loaded.views = {TensorView{nullptr, stacked.dtype, stacked.shape, stacked.strides}};
    }
    loaded.specs = {stacked};
}

}  // namespace

LoadedOperands load_operands(const CallArgs& args) {
    const DType dtype = parse_dtype(args.dtype);
    LoadedOperands loaded;
    for (const OperandArg& operand : args.operands) {
        if (operand.is_file) {
            loaded.files.push_back(read_npy(operand.text));
            const TensorView& view = loaded.files.back().view();
            if (args.dtype_given && view.dtype != dtype)  // (not silently ignored: numpy would convert)
                throw Error(ErrorKind::usage, fmt::format("--dtype {} does not apply to {}, which holds {}",
                                                          args.dtype, operand.text, name_of(view.dtype)))
                    .help("a .npy operand keeps its own dtype (operands of several dtypes are promoted as "
                          "numpy does): "
                          "drop --dtype, or "
                          "save the file as " +
                          std::string(name_of(dtype)));
            loaded.specs.push_back(TensorSpec{view.dtype, view.shape, view.strides});
            loaded.views.push_back(view);
        } else {
            const Shape strides = operand.strides.value_or(row_major_strides(operand.shape));
            loaded.specs.push_back(TensorSpec{dtype, operand.shape, strides});
            loaded.views.push_back(TensorView{nullptr, dtype, operand.shape, strides});
        }
    }
    stack_list(args, loaded);
    return loaded;
}

int explain(const CallArgs& args, std::ostream& out, std::ostream& err) {
    const syntax::Pattern pattern = parse(args.call);  // a syntax error first, before the operands are read
    const std::vector<TensorSpec> inputs = load_operands(args).specs;
    // The front end alone unless a plan is printed: no planning, no plan errors.
    const bool front_end = !args.print_plan && !args.print_schedule && !args.json;
    Lowered lowered = lower(
        args.call, pattern, inputs,
        {.until = front_end ? Stage::bound : Stage::planned, .plan = plan_options_of(options_of(args))});
    if (front_end) {
        fmt::print(out, "{}{}", args.print_syntax ? print_syntax(pattern) : "",
                   args.print_bound ? print_bound(lowered.bound) : "");
        return exit_ok;
    }
    // (The note on the CPU model only where costs are printed: a schedule alone has none.)
    std::ostream quiet(nullptr);
    const DeviceModel& device =
        call_device(args.device, args.backend, args.print_plan || args.json || args.backward ? err : quiet);
    const Target target = schedule_target(args, device);  // (refuses an unknown --backend after the plan)
    lowered = lower(std::move(lowered), {.until = Stage::scheduled, .target = target});
    const Bound& bound = lowered.bound;
    const Plan& planned = lowered.plan;
    const Schedule& scheduled = lowered.schedule;
    if (args.backward) {
        const std::vector<BackwardPlan> backward = plan_backward(bound, inputs, row_major_gradients(planned));
        std::vector<Schedule> schedules;
        for (const BackwardPlan& b : backward) schedules.push_back(schedule(b.plan, target));
        if (args.json) {
            std::string json = plan_to_json(planned, scheduled, device);
            json.resize(json.find_last_of('}'));  // "backward" joins the plan's object
            fmt::print(out, "{},\"backward\":{}}}\n", json, backward_to_json(backward, schedules, device));
        } else {
            fmt::print(out, "{}", print_backward(planned, scheduled, backward, schedules, device));
        }
        return exit_ok;
    }
    if (args.json) {
        fmt::print(out, "{}", plan_to_json(planned, scheduled, device));
        return exit_ok;
    }
    if (args.print_syntax) fmt::print(out, "{}", print_syntax(pattern));
    if (args.print_bound) fmt::print(out, "{}", print_bound(bound));
    if (bound.op == Op::parse_shape) return exit_ok;
    if (args.print_plan) fmt::print(out, "{}", print_plan(planned, scheduled, device));
    if (args.print_schedule) fmt::print(out, "{}", print_schedule(planned, scheduled));
    return exit_ok;
}

}  // namespace einc::cli
