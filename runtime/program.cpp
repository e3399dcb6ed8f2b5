#include "runtime/program.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "compiler/bind.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"
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
    bool only_views = false;                                  // every step is a View: nothing to execute
    std::shared_ptr<const void> prepared;                     // the GPU backend's preparation of the plan
};

Expression::Expression(Call call) {
    auto state = std::make_shared<State>();
    state->syntax = parse(call);
    state->call = std::move(call);
    state_ = std::move(state);
}

const Call& Expression::call() const { return state_->call; }
const syntax::Pattern& Expression::syntax() const { return state_->syntax; }

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
    if (view.dtype != spec.dtype || view.shape != spec.shape || view.strides.size() != spec.strides.size()) return false;
    const bool empty = view.numel() == 0;
    for (std::size_t d = 0; d < view.shape.size(); ++d)
        if (planned_stride(view, d, empty) != spec.strides[d]) return false;
    return true;
}

Program Expression::bind(std::span<const TensorView> inputs, const Options& options) const {
    auto state = std::make_shared<Program::State>();
    std::vector<Shape> shapes;
    std::vector<TensorSpec> specs;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].strides.size() != inputs[i].shape.size())
            throw Error(ErrorKind::usage, fmt::format("input {} has {} strides for {} dims", i, inputs[i].strides.size(), inputs[i].shape.size()));
        if (inputs[i].device != inputs[0].device || inputs[i].device_index != inputs[0].device_index)
            throw Error(ErrorKind::usage, fmt::format("inputs are on different devices: input 0 on {} {}, input {} on {} {}",
                                                      name_of(inputs[0].device), inputs[0].device_index, i,
                                                      name_of(inputs[i].device), inputs[i].device_index));
        shapes.push_back(inputs[i].shape);
        specs.push_back(spec_of(inputs[i]));
    }
    state->bound = einc::bind(state_->syntax, state_->call, shapes);
    PlanOptions plan_options;
    plan_options.require_view = options.require_view;
    plan_options.contiguous = options.contiguous;
    state->plan = einc::plan(state->bound, specs, plan_options);
    state->options = options;
    for (std::size_t k = 0; k < state->plan.outputs.size(); ++k) state->view_sources.push_back(state->plan.view_source(k));
    // (A plan without steps - a pack of empty tensors - still has results to allocate.)
    state->only_views = !state->plan.steps.empty() &&
                        std::all_of(state->plan.steps.begin(), state->plan.steps.end(),
                                    [](const PlanStep& step) { return std::holds_alternative<View>(step.step); });
    if (!inputs.empty()) {
        state->device = inputs[0].device;
        state->device_index = inputs[0].device_index;
    }
    try {
        // A plan of views runs nowhere: its schedule needs no device (nor a GPU backend).
        const Target target = !state->only_views                 ? target_of(state->device, state->device_index)
                              : state->device == Device::cpu ? cpu_target()
                                                             : Target::gpu(1);
        state->schedule = einc::schedule(state->plan, target);
        if (!state->only_views) state->prepared = prepare(state->schedule, state->device, state->device_index);
    } catch (Error& e) {  // a step the device cannot run, a kernel that cannot be compiled or found: say which call needed it
        throw std::move(e.note(fmt::format("needed by {} \"{}\" on {}", name_of(state_->call.op), state_->call.pattern,
                                           describe(inputs.empty() ? TensorView{} : inputs[0]))));
    }
    return Program(std::move(state));
}

Program Expression::bind(std::initializer_list<TensorView> inputs, const Options& options) const {
    return bind(std::span<const TensorView>(inputs.begin(), inputs.size()), options);
}

const Bound& Program::bound() const { return state_->bound; }
const Plan& Program::plan() const { return state_->plan; }
const Schedule& Program::schedule() const { return state_->schedule; }
const Options& Program::options() const { return state_->options; }

std::string Program::explain(std::string_view device) const {
    const DeviceModel* model = device_model_named(device);
    if (!model) throw Error(ErrorKind::usage, fmt::format("unknown device '{}' (h100 h200 a100 cpu)", device));
    return print_plan(state_->plan, state_->schedule, *model);
}

namespace {

void check_inputs(const Program& program, std::span<const Input> inputs, Device device, int device_index) {
    const Plan& plan = program.plan();
    if (inputs.size() != plan.inputs.size())
        throw Error(ErrorKind::usage, fmt::format("the program takes {}, got {}", counted(static_cast<std::int64_t>(plan.inputs.size()), "input"),
                                                  inputs.size()));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const TensorView& view = inputs[i].view();
        const TensorSpec& expected = plan.inputs[i];
        if (!has_layout(view, expected) || view.device != device || view.device_index != device_index)
            throw Error(ErrorKind::shape, fmt::format("input {} does not match what the program was bound to", i))
                .note(fmt::format("bound to {} ({}):({}) on {}", name_of(expected.dtype), fmt::join(expected.shape, ","),
                                  fmt::join(expected.strides, ","), name_of(device)))
                .note(fmt::format("got {}", describe(view)))
                .help("bind the expression again for these tensors, or call einc::rearrange & co., which cache a program per layout");
        if (view.data == nullptr && view.numel() > 0) throw Error(ErrorKind::usage, fmt::format("input {} has no data", i));
    }
}

std::vector<TensorView> views_of(std::span<const Input> inputs) {
    std::vector<TensorView> views;
    views.reserve(inputs.size());
    for (const Input& input : inputs) views.push_back(input.view());
    return views;
}

}  // namespace

std::vector<Tensor> Program::run(std::span<const Input> inputs, void* stream) const {
    const State& s = *state_;
    check_inputs(*this, inputs, s.device, s.device_index);
    if (s.only_views) {  // the hot path of a rearrange that is free: no allocation but the results
        std::vector<Tensor> results(s.plan.outputs.size());
        for (const PlanStep& step : s.plan.steps) {
            const View& view = std::get<View>(step.step);
            results[view.output] = Tensor(viewed(s.plan, view, inputs[view.source.buffer.index].view()), inputs[view.source.buffer.index].storage());
        }
        return results;
    }
    std::vector<Tensor> results(s.plan.outputs.size());
    std::vector<TensorView> outputs(s.plan.outputs.size());
    for (std::size_t k = 0; k < outputs.size(); ++k) {
        if (s.view_sources[k]) continue;
        results[k] = allocate(s.plan.outputs[k].dtype, s.plan.outputs[k].shape, s.device, s.device_index, stream);
        outputs[k] = results[k].view();
    }
    const std::vector<TensorView> input_views = views_of(inputs);
    execute(s.plan, s.schedule, s.prepared.get(), input_views, outputs, s.device, stream);
    for (std::size_t k = 0; k < outputs.size(); ++k)
        if (const auto source = s.view_sources[k]) results[k] = Tensor(outputs[k], inputs[*source].storage());
    return results;
}

std::vector<Tensor> Program::run(std::initializer_list<Input> inputs, void* stream) const {
    return run(std::span<const Input>(inputs.begin(), inputs.size()), stream);
}

void Program::run(std::span<const Input> inputs, std::span<const TensorView> outputs, void* stream) const {
    const State& s = *state_;
    check_inputs(*this, inputs, s.device, s.device_index);
    if (outputs.size() != s.plan.outputs.size())
        throw Error(ErrorKind::usage, fmt::format("the program has {}, got {}", counted(static_cast<std::int64_t>(s.plan.outputs.size()), "result"),
                                                  counted(static_cast<std::int64_t>(outputs.size()), "output")));
    for (std::size_t k = 0; k < outputs.size(); ++k) {
        if (s.view_sources[k])
            throw Error(ErrorKind::usage, "this program's results are views of its inputs: there is nothing to write")
                .help("bind with Options::contiguous to have the results written into outputs");
        const TensorSpec& expected = s.plan.outputs[k];
        const TensorView& out = outputs[k];
        const TensorView planned{nullptr, expected.dtype, expected.shape, expected.strides};
        if (out.dtype != expected.dtype || out.shape != expected.shape || spec_of(out).strides != spec_of(planned).strides ||
            out.device != s.device)
            throw Error(ErrorKind::shape, fmt::format("output {} is not what the program writes", k))
                .note(fmt::format("the program writes {} ({}):({}) on {}", name_of(expected.dtype), fmt::join(expected.shape, ","),
                                  fmt::join(expected.strides, ","), name_of(s.device)))
                .note(fmt::format("got {}", describe(out)));
        if (out.data == nullptr && out.numel() > 0) throw Error(ErrorKind::usage, fmt::format("output {} has no data", k));
    }
    check_no_aliasing(inputs, outputs);
    std::vector<TensorView> output_views(outputs.begin(), outputs.end());
    const std::vector<TensorView> input_views = views_of(inputs);
    execute(s.plan, s.schedule, s.prepared.get(), input_views, output_views, s.device, stream);
}

}  // namespace einc
