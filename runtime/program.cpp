#include "runtime/program.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <fmt/format.h>

#include "compiler/bind.hpp"
#include "compiler/lower.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"
#include "runtime/calibration.hpp"
#include "runtime/execute.hpp"
#include "runtime/run_memory.hpp"

namespace einc {

struct Expression::State {
    Call call;
    syntax::Pattern syntax;
};

struct Program::State {
    Bound bound;
    Plan plan;
    Schedule schedule;
    Options options;
    Device device = Device::cpu;
    int device_index = 0;
    std::vector<std::optional<std::uint32_t>> view_sources;  // per output: the input it is a view of
    bool only_views = false;                                 // every step is a View: nothing to execute
    std::shared_ptr<const void> prepared;                    // the GPU backend's preparation of the plan
};

Expression::Expression(Call call) {
    auto state = std::make_shared<State>();
    state->syntax = parse(call);
    state->call = std::move(call);
    state_ = std::move(state);
}

const Call& Expression::call() const {
    return state_->call;
}
const syntax::Pattern& Expression::syntax() const {
    return state_->syntax;
}

Expression compile(Op op, std::string_view pattern, const AxisSizes& sizes, Reduction reduction) {
    return Expression(Call{op, std::string(pattern), reduction, sizes, false, {}});
}

TensorSpec spec_of(const TensorView& view) {
    TensorSpec spec{view.dtype, view.shape, view.strides};
    const bool empty = view.numel() == 0;
    for (std::size_t d = 0; d < spec.shape.size(); ++d) spec.strides[d] = planned_stride(view, d, empty);
    return spec;
}

bool has_layout(const TensorView& view, const TensorSpec& spec) {
    if (view.dtype != spec.dtype || view.shape != spec.shape || view.strides.size() != spec.strides.size())
        return false;
    const bool empty = view.numel() == 0;
    for (std::size_t d = 0; d < view.shape.size(); ++d)
        if (planned_stride(view, d, empty) != (empty || spec.shape[d] == 1 ? 0 : spec.strides[d]))
            return false;
    return true;
}

namespace {

// The strides the plan writes caller outputs with, once their count, shapes and devices are checked
// against the bound call; an output that would write an element twice is refused here, once.
std::vector<Shape> output_strides(const Bound& bound, std::span<const TensorView> inputs,
                                  std::span<const TensorView> outputs) {
    if (outputs.size() != bound.outputs.size())
        throw Error(ErrorKind::usage,
                    fmt::format("the call has {}, got {}",
                                counted(static_cast<std::int64_t>(bound.outputs.size()), "result"),
                                counted(static_cast<std::int64_t>(outputs.size()), "output")));
    std::vector<Shape> strides;
    for (std::size_t k = 0; k < outputs.size(); ++k) {
        const TensorView& out = outputs[k];
        const Shape shape = bound.outputs[k].shape();
        if (out.shape != shape || out.strides.size() != out.shape.size())
            throw Error(ErrorKind::shape, fmt::format("output {} has shape {}, the call's result {}", k,
                                                      format_shape(out.shape), format_shape(shape)))
                .note(fmt::format("got {}", describe(out)));
        if (!inputs.empty() && (out.device != inputs[0].device || out.device_index != inputs[0].device_index))
            throw Error(ErrorKind::usage,
                        fmt::format("output {} is on {} {}, the inputs on {} {}", k, name_of(out.device),
                                    out.device_index, name_of(inputs[0].device), inputs[0].device_index));
        if (out.numel() > 1 && may_overlap(make_layout(out.shape, out.strides)))
            throw Error(
                ErrorKind::usage,
                fmt::format("output {} has strides that write some elements twice: {}", k, describe(out)))
                .help("give every element of an output its own address (no stride 0 along a dim longer than "
                      "1)");
        strides.push_back(spec_of(out).strides);
    }
    return strides;
}

// The dtypes the plan writes are the outputs' (the layouts are theirs by construction).
void check_bound_outputs(const Plan& plan, std::span<const TensorView> inputs,
                         std::span<const TensorView> outputs) {
    for (std::size_t k = 0; k < outputs.size(); ++k)
        if (outputs[k].dtype != plan.outputs[k].dtype)
            throw Error(ErrorKind::shape,
                        fmt::format("output {} is {}, the call's result {}", k, name_of(outputs[k].dtype),
                                    name_of(plan.outputs[k].dtype)))
                .note(fmt::format("the inputs are {}", inputs.empty() ? "none" : describe(inputs[0])));
}

}  // namespace

Program Expression::bind(std::span<const TensorView> inputs, const Options& options) const {
    return bind_to(inputs, nullptr, options);
}

Program Expression::bind(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                         const Options& options) const {
    Options writing = options;
    writing.contiguous = true;
    return bind_to(inputs, &outputs, writing);
}

Program Expression::bind_to(std::span<const TensorView> inputs, const std::span<const TensorView>* outputs,
                            const Options& options) const {
    std::vector<TensorSpec> specs;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].strides.size() != inputs[i].shape.size())
            throw Error(ErrorKind::usage, fmt::format("input {} has {} strides for {} dims", i,
                                                      inputs[i].strides.size(), inputs[i].shape.size()));
        if (inputs[i].device != inputs[0].device || inputs[i].device_index != inputs[0].device_index)
            throw Error(ErrorKind::usage,
                        fmt::format("inputs are on different devices: input 0 on {} {}, input {} on {} {}",
                                    name_of(inputs[0].device), inputs[0].device_index, i,
                                    name_of(inputs[i].device), inputs[i].device_index));
        specs.push_back(spec_of(inputs[i]));
    }
    // Lowered in two goes: the caller's outputs are checked against the bound call before planning.
    Lowered lowered = lower(state_->call, state_->syntax, specs, {.until = Stage::bound});
    PlanOptions plan_options = plan_options_of(options);
    if (outputs) plan_options.output_strides = output_strides(lowered.bound, inputs, *outputs);
    lowered = lower(std::move(lowered), {.until = Stage::planned, .plan = std::move(plan_options)});
    if (outputs) check_bound_outputs(lowered.plan, inputs, *outputs);
    const TensorView first = inputs.empty() ? TensorView{} : inputs[0];
    return Program::from_lowered(
        std::move(lowered), options, first.device, first.device_index,
        fmt::format("{} \"{}\" on {}", name_of(state_->call.op), state_->call.pattern, describe(first)));
}

Program Program::from_lowered(Lowered lowered, const Options& options, Device device, int device_index,
                              std::string_view what) {
    auto state = std::make_shared<Program::State>();
    state->options = options;
    state->device = device;
    state->device_index = device_index;
    const Plan& plan = lowered.plan;
    for (std::size_t k = 0; k < plan.outputs.size(); ++k) state->view_sources.push_back(plan.view_source(k));
    // (A plan without steps - a pack of empty tensors - still has results to allocate.)
    state->only_views =
        !plan.steps.empty() && std::all_of(plan.steps.begin(), plan.steps.end(), [](const PlanStep& step) {
            return std::holds_alternative<View>(step.step);
        });
    try {
        // A plan of views runs nowhere: its schedule needs no device (nor a GPU backend).
        Target target = !state->only_views             ? target_of(state->device, state->device_index)
                        : state->device == Device::cpu ? cpu_target()
                                                       : Target::gpu(1);
        target.allow_tf32 = options.allow_tf32 && target.backend == Backend::cuda;
        lowered = lower(std::move(lowered), {.until = Stage::scheduled, .target = target});
        if (!state->only_views)
            state->prepared = prepare(lowered.schedule, state->device, state->device_index);
    } catch (Error& e) {  // a step the device cannot run, a kernel that cannot be compiled or found: say
                          // which call needed it
        throw std::move(e.note(fmt::format("needed by {}", what)));
    }
    state->bound = std::move(lowered.bound);
    state->plan = std::move(lowered.plan);
    state->schedule = std::move(lowered.schedule);
    return Program(std::move(state));
}

Program Expression::bind(std::initializer_list<TensorView> inputs, const Options& options) const {
    return bind(std::span<const TensorView>(inputs.begin(), inputs.size()), options);
}

Program Expression::bind(std::initializer_list<TensorView> inputs, std::initializer_list<TensorView> outputs,
                         const Options& options) const {
    return bind(std::span<const TensorView>(inputs.begin(), inputs.size()),
                std::span<const TensorView>(outputs.begin(), outputs.size()), options);
}

const Bound& Program::bound() const {
    return state_->bound;
}
const Plan& Program::plan() const {
    return state_->plan;
}
const Schedule& Program::schedule() const {
    return state_->schedule;
}
const Options& Program::options() const {
    return state_->options;
}

PlanOptions plan_options_of(const Options& options) {
    return PlanOptions{.require_view = options.require_view,
                       .contiguous = options.contiguous,
                       .epilogue = {options.alpha, options.beta},
                       .max_intermediate_bytes = options.max_intermediate_bytes};
}

const DeviceModel& Program::device_model(std::string_view device) const {
    if (device.empty()) {
        const bool gpu = state_->schedule.target.backend == Backend::cuda;
        const std::string gpu_name =
            gpu && gpu_backend() ? gpu_backend()->describe_device(state_->device_index) : "";
        return default_device_model(gpu, gpu_name);
    }
    const DeviceModel* model = device_model_named(device);
    if (!model)
        throw Error(ErrorKind::usage, fmt::format("unknown device '{}' (h100 h200 a100 cpu local)", device));
    return *model;
}

std::string Program::explain(std::string_view device) const {
    return print_plan(state_->plan, state_->schedule, device_model(device));
}

namespace {

void check_inputs(const Program& program, std::span<const Input> inputs, Device device, int device_index) {
    const Plan& plan = program.plan();
    if (inputs.size() != plan.inputs.size())
        throw Error(ErrorKind::usage,
                    fmt::format("the program takes {}, got {}",
                                counted(static_cast<std::int64_t>(plan.inputs.size()), "input"),
                                inputs.size()));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const TensorView& view = inputs[i].view();
        const TensorSpec& expected = plan.inputs[i];
        if (!has_layout(view, expected) || view.device != device || view.device_index != device_index)
            throw Error(ErrorKind::shape,
                        fmt::format("input {} does not match what the program was bound to", i))
                .note(fmt::format("bound to {} ({}):({}) on {}", name_of(expected.dtype),
                                  fmt::join(expected.shape, ","), fmt::join(expected.strides, ","),
                                  name_of(device)))
                .note(fmt::format("got {}", describe(view)))
                .help("bind the expression again for these tensors, or call einc::rearrange & co., which "
                      "cache a program per layout");
        if (view.data == nullptr && view.numel() > 0)
            throw Error(ErrorKind::usage, fmt::format("input {} has no data", i));
    }
}

// (Out of line: the check on the hot path is one comparison.)
[[noreturn]] void throw_beta_without_outputs() {
    throw Error(ErrorKind::usage,
                "beta reads the outputs: this program was bound with beta != 0, so run it into outputs")
        .help("call run(inputs, outputs) (or einc::einsum_into & co.) with the tensors to accumulate into");
}

// Views for the executors, held on the stack up to 8 (the hot path allocates nothing; a pack of more
// inputs goes to the heap).
class Views {
public:
    explicit Views(std::span<const Input> inputs) : Views(inputs.size()) {
        for (std::size_t i = 0; i < inputs.size(); ++i) views_[i] = inputs[i].view();
    }
    explicit Views(std::span<const TensorView> views) : Views(views.size()) {
        std::copy(views.begin(), views.end(), views_.begin());
    }
    explicit Views(std::size_t count) {
        if (count > inline_.size()) heap_.resize(count);
        views_ = {count > inline_.size() ? heap_.data() : inline_.data(), count};
    }
    Views(const Views&) = delete;  // views_ may point into inline_
    Views& operator=(const Views&) = delete;

    TensorView& operator[](std::size_t i) { return views_[i]; }
    operator std::span<TensorView>() { return views_; }              // NOLINT: implicit by design
    operator std::span<const TensorView>() const { return views_; }  // NOLINT

private:
    std::array<TensorView, 8> inline_;
    std::vector<TensorView> heap_;
    std::span<TensorView> views_;
};

// `view_sources`: per output, the input it is a view of.
void check_outputs(const Plan& plan, std::span<const std::optional<std::uint32_t>> view_sources,
                   Device device, int device_index, std::span<const Input> inputs,
                   std::span<const TensorView> outputs) {
    if (outputs.size() != plan.outputs.size())
        throw Error(ErrorKind::usage,
                    fmt::format("the program has {}, got {}",
                                counted(static_cast<std::int64_t>(plan.outputs.size()), "result"),
                                counted(static_cast<std::int64_t>(outputs.size()), "output")));
    for (std::size_t k = 0; k < outputs.size(); ++k) {
        if (view_sources[k])
            throw Error(ErrorKind::usage,
                        "this program's results are views of its inputs: there is nothing to write")
                .help("bind with Options::contiguous, or to the outputs, to have the results written into "
                      "outputs");
        const TensorSpec& expected = plan.outputs[k];
        const TensorView& out = outputs[k];
        if (!has_layout(out, expected) || out.device != device || out.device_index != device_index)
            throw Error(ErrorKind::shape, fmt::format("output {} is not what the program writes", k))
                .note(fmt::format("the program writes {} ({}):({}) on {}", name_of(expected.dtype),
                                  fmt::join(expected.shape, ","), fmt::join(expected.strides, ","),
                                  name_of(device)))
                .note(fmt::format("got {}", describe(out)))
                .help("bind the expression to outputs like these: expression.bind(inputs, outputs)");
        if (out.data == nullptr && out.numel() > 0)
            throw Error(ErrorKind::usage, fmt::format("output {} has no data", k));
    }
    check_no_aliasing(inputs, outputs);
}

// (Workspace{}: none given, einc allocates.)
void check_workspace(std::size_t needed, Device device, Workspace workspace) {
    if (workspace.data == nullptr && workspace.bytes == 0) return;
    const std::size_t alignment = device == Device::cpu ? 64 : 256;
    if (workspace.bytes < needed)
        throw Error(ErrorKind::usage,
                    fmt::format("the workspace holds {} B, the program needs {} B", workspace.bytes, needed))
            .help("allocate program.workspace_bytes() bytes");
    if (needed > 0 &&
        (workspace.data == nullptr || reinterpret_cast<std::uintptr_t>(workspace.data) % alignment != 0))
        throw Error(ErrorKind::usage,
                    fmt::format("the workspace at {} is not aligned to {} bytes", workspace.data, alignment))
            .help(device == Device::cpu ? "allocate it with std::aligned_alloc(64, ...) or operator "
                                          "new(bytes, std::align_val_t{64})"
                                        : "allocate it with cudaMalloc, which aligns to 256 bytes");
}

}  // namespace

std::vector<Tensor> Program::run(std::span<const Input> inputs, void* stream) const {
    const State& s = *state_;
    if (s.options.beta != 0) throw_beta_without_outputs();
    check_inputs(*this, inputs, s.device, s.device_index);
    if (s.only_views) {  // the hot path of a rearrange that is free: no allocation but the results
        std::vector<Tensor> results(s.plan.outputs.size());
        for (const PlanStep& step : s.plan.steps) {
            const View& view = std::get<View>(step.step);
            results[view.output] = Tensor(viewed(s.plan, view, inputs[view.source.buffer.index].view()),
                                          inputs[view.source.buffer.index].storage());
        }
        return results;
    }
    std::vector<Tensor> results(s.plan.outputs.size());
    std::vector<TensorView> outputs(s.plan.outputs.size());
    for (std::size_t k = 0; k < outputs.size(); ++k) {
        if (s.view_sources[k]) continue;
        results[k] =
            allocate(s.plan.outputs[k].dtype, s.plan.outputs[k].shape, s.device, s.device_index, stream);
        outputs[k] = results[k].view();
    }
    const Views input_views(inputs);
    execute(s.plan, s.schedule, s.prepared.get(), input_views, outputs, s.device, stream);
    for (std::size_t k = 0; k < outputs.size(); ++k)
        if (const auto source = s.view_sources[k]) results[k] = Tensor(outputs[k], inputs[*source].storage());
    return results;
}

std::vector<Tensor> Program::run(std::initializer_list<Input> inputs, void* stream) const {
    return run(std::span<const Input>(inputs.begin(), inputs.size()), stream);
}

void Program::run(std::span<const Input> inputs, std::span<const TensorView> outputs, void* stream) const {
    run(inputs, outputs, Workspace{}, stream);
}

void Program::run(std::span<const Input> inputs, std::span<const TensorView> outputs, Workspace workspace,
                  void* stream) const {
    const State& s = *state_;
    check_inputs(*this, inputs, s.device, s.device_index);
    check_outputs(s.plan, s.view_sources, s.device, s.device_index, inputs, outputs);
    check_workspace(workspace_bytes(), s.device, workspace);
    const Views input_views(inputs);
    Views output_views(outputs);
    execute(s.plan, s.schedule, s.prepared.get(), input_views, output_views, s.device, stream,
            workspace.data);
}

std::size_t Program::workspace_bytes() const {
    return static_cast<std::size_t>(state_->schedule.workspace_bytes);
}

}  // namespace einc
