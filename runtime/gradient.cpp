#include "runtime/gradient.hpp"

#include <fmt/format.h>

#include "compiler/lower.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"

namespace einc {

struct Gradient::State {
    Program forward;
    std::vector<Gradient::Step> steps;
    std::vector<TensorSpec> inputs;     // the forward inputs' layouts: the gradients' dtypes and shapes
    bool into = false;                  // written into the caller's gradients
    std::vector<TensorSpec> gradients;  // the input gradients' layouts as written (row-major unless `into`)
    Epilogue epilogue;                  // into the caller's: alpha * gradient + beta * old
};

Gradient gradient(const Expression& call, std::span<const TensorView> inputs,
                  std::span<const TensorView> output_gradients) {
    return Gradient::bind(call, inputs, output_gradients, nullptr, Options{});
}

Gradient gradient(const Expression& call, std::span<const TensorView> inputs,
                  std::span<const TensorView> output_gradients, std::span<const TensorView> input_gradients,
                  const Options& options) {
    return Gradient::bind(call, inputs, output_gradients, &input_gradients, options);
}

Gradient Gradient::bind(const Expression& call, std::span<const TensorView> inputs,
                        std::span<const TensorView> output_gradients,
                        const std::span<const TensorView>* input_gradients, const Options& options) {
    Program forward = call.bind(inputs);
    // Whether there is a gradient at all comes first: what the output gradients should be is moot without.
    const std::vector<TensorSpec>& forward_inputs = forward.plan().inputs;
    check_differentiable(forward.bound().op, forward_inputs.empty() ? DType::f32 : forward_inputs[0].dtype);
    for (const TensorSpec& input : forward_inputs)
        if (input.dtype != forward_inputs[0].dtype)
            throw Error(ErrorKind::unsupported,
                        fmt::format("gradients of operands of mixed dtypes ({} and {}) are not supported",
                                    name_of(forward_inputs[0].dtype), name_of(input.dtype)))
                .help("convert the operands to one dtype first");
    const std::vector<TensorSpec>& outputs = forward.plan().outputs;
    const TensorView first = inputs.empty() ? TensorView{} : inputs[0];
    if (!output_gradients.empty() && output_gradients.size() != outputs.size())
        throw Error(
            ErrorKind::usage,
            fmt::format("the call has {}, got {}",
                        counted(static_cast<std::int64_t>(outputs.size()), "result"),
                        counted(static_cast<std::int64_t>(output_gradients.size()), "output gradient")));
    std::vector<TensorSpec> gradients;  // the output gradients' layouts, as programs are planned for them
    for (std::size_t k = 0; k < outputs.size(); ++k) {
        const TensorSpec& out = outputs[k];
        if (output_gradients.empty()) {
            gradients.push_back(
                spec_of(TensorView{nullptr, out.dtype, out.shape, row_major_strides(out.shape)}));
            continue;
        }
        const TensorView& g = output_gradients[k];
        if (g.shape != out.shape || g.dtype != out.dtype || g.strides.size() != g.shape.size())
            throw Error(ErrorKind::shape, fmt::format("the gradient of output {} must be {} {}", k,
                                                      name_of(out.dtype), format_shape(out.shape)))
                .note(fmt::format("got {}", describe(g)));
        gradients.push_back(spec_of(g));
    }
    const auto row_major = [](const TensorView& x) {
        return spec_of(TensorView{nullptr, x.dtype, x.shape, row_major_strides(x.shape)});
    };
    std::vector<TensorSpec> specs, written;
    for (const TensorView& input : inputs) {
        specs.push_back(spec_of(input));
        written.push_back(row_major(input));
    }
    if (input_gradients) {  // the caller's: each of its input's dtype and shape, on its device, no element
                            // twice
        if (input_gradients->size() != inputs.size())
            throw Error(ErrorKind::usage,
                        fmt::format("the call takes {}, got {} input gradients",
                                    counted(static_cast<std::int64_t>(inputs.size()), "input"),
                                    input_gradients->size()));
        for (std::size_t k = 0; k < inputs.size(); ++k) {
            const TensorView& g = (*input_gradients)[k];
            if (g.shape != inputs[k].shape || g.dtype != inputs[k].dtype ||
                g.strides.size() != g.shape.size() || g.device != first.device ||
                g.device_index != first.device_index)
                throw Error(ErrorKind::shape,
                            fmt::format("the gradient of input {} must be {} {} on {}", k,
                                        name_of(inputs[k].dtype), format_shape(inputs[k].shape),
                                        name_of(first.device)))
                    .note(fmt::format("got {}", describe(g)));
            if (g.numel() > 1 && may_overlap(make_layout(g.shape, g.strides)))
                throw Error(ErrorKind::usage,
                            fmt::format("input gradient {} has strides that write some elements twice: {}", k,
                                        describe(g)));
            written[k] = spec_of(g);
        }
    }
    const Epilogue epilogue{options.alpha, options.beta};

    auto state = std::make_shared<Gradient::State>(
        Gradient::State{std::move(forward), {}, specs, input_gradients != nullptr, written, epilogue});
    const std::string what = fmt::format("the backward of {} \"{}\" on {}", name_of(call.call().op),
                                         call.call().pattern, describe(first));
    for (BackwardPlan& backward :
         plan_backward(state->forward.bound(), specs, gradients,
                       input_gradients ? written : std::vector<TensorSpec>{}, epilogue)) {
        for (const GradientTarget& target :
             backward.call.results)  // (zeroing a strided gradient is not planned)
            if (target.to_input && target.zero_first && epilogue.beta == 0 &&
                written[target.input].strides != row_major(inputs[target.input]).strides)
                throw Error(
                    ErrorKind::unsupported,
                    fmt::format("the gradient of input {} (a diagonal) must be row-major to be zeroed first",
                                target.input))
                    .help("give a row-major gradient, or accumulate into it (beta = 1)");
        const Options step_options{.alpha = backward.epilogue.alpha, .beta = backward.epilogue.beta};
        Program program = Program::from_lowered(Lowered{.stage = Stage::planned,
                                                        .bound = std::move(backward.bound),
                                                        .plan = std::move(backward.plan)},
                                                step_options, first.device, first.device_index, what);
        state->steps.push_back(Gradient::Step{std::move(backward.call), std::move(program)});
    }
    Gradient gradient;
    gradient.state_ = std::move(state);
    return gradient;
}

const Program& Gradient::forward() const {
    return state_->forward;
}
std::span<const Gradient::Step> Gradient::steps() const {
    return state_->steps;
}
Cost Gradient::forward_cost() const {
    return scheduled_cost(state_->forward.plan(), state_->forward.schedule());
}

Cost Gradient::backward_cost() const {
    Cost total;
    for (const Step& step : state_->steps)
        total += scheduled_cost(step.program.plan(), step.program.schedule());
    return total;
}

std::string Gradient::explain(std::string_view device) const {
    const DeviceModel& model = state_->forward.device_model(device);
    std::vector<BackwardPlan> plans;
    std::vector<Schedule> schedules;
    for (const Step& step : state_->steps) {
        plans.push_back(BackwardPlan{step.call, step.program.bound(), step.program.plan(),
                                     Epilogue{step.program.options().alpha, step.program.options().beta}});
        schedules.push_back(step.program.schedule());
    }
    return print_backward(state_->forward.plan(), state_->forward.schedule(), plans, schedules, model);
}

namespace {

void check_counts(std::size_t inputs, std::size_t expected_inputs, std::size_t gradients,
                  std::size_t outputs) {
    if (inputs != expected_inputs)
        throw Error(ErrorKind::usage,
                    fmt::format("the call takes {}, got {}",
                                counted(static_cast<std::int64_t>(expected_inputs), "input"), inputs));
    if (gradients != outputs)
        throw Error(ErrorKind::usage,
                    fmt::format("the call has {}, got {}",
                                counted(static_cast<std::int64_t>(outputs), "result"),
                                counted(static_cast<std::int64_t>(gradients), "output gradient")));
}

}  // namespace

void Gradient::run_steps(std::span<const Input> inputs, std::span<const Input> output_gradients,
                         std::vector<Tensor>& gradients, void* stream) const {
    const State& s = *state_;
    const TensorView first = inputs.empty() ? TensorView{} : inputs[0].view();
    std::vector<Tensor> partials(s.steps.size());
    std::vector<Input> operands;
    std::vector<TensorView> views;
    for (std::size_t c = 0; c < s.steps.size(); ++c) {
        const Step& step = s.steps[c];
        operands.clear();
        for (const GradientOperand& operand : step.call.operands) {
            switch (operand.kind) {
            case GradientOperand::Kind::output_gradient:
                operands.push_back(output_gradients[operand.index]);
                break;
            case GradientOperand::Kind::input: operands.push_back(inputs[operand.index]); break;
            case GradientOperand::Kind::partial: operands.push_back(partials[operand.index]); break;
            }
        }
        const std::vector<GradientTarget>& targets = step.call.results;
        const GradientTarget& target0 = targets.front();
        if (!target0.to_input ||
            (!s.into && !target0.view)) {  // what the program returns: a view where it can be
            std::vector<Tensor> results = step.program.run(operands, stream);
            for (std::size_t k = 0; k < targets.size(); ++k)
                (targets[k].to_input ? gradients[targets[k].input] : partials[c]) = std::move(results[k]);
            continue;
        }
        views.clear();
        for (const GradientTarget& target : targets) {
            const TensorSpec& x = s.inputs[target.input];
            Tensor& g = gradients[target.input];
            if (!s.into) g = allocate(x.dtype, x.shape, first.device, first.device_index, stream);
            if (target.zero_first && s.epilogue.beta == 0)
                fill_zero(g.view());  // (dense: checked when bound)
            const TensorSpec view = gradient_view(s.forward.bound(), s.gradients[target.input], target);
            views.push_back(
                TensorView{g.data(), x.dtype, view.shape, view.strides, first.device, first.device_index});
        }
        step.program.run(operands, views, stream);
    }
}

std::vector<Tensor> Gradient::run(std::span<const Input> inputs, std::span<const Input> output_gradients,
                                  void* stream) const {
    const State& s = *state_;
    if (s.into)
        throw Error(ErrorKind::usage,
                    "this gradient was bound to write into your gradients: run it into them")
            .help("call run(inputs, output_gradients, input_gradients)");
    check_counts(inputs.size(), s.inputs.size(), output_gradients.size(), s.forward.plan().outputs.size());
    std::vector<Tensor> gradients(inputs.size());
    run_steps(inputs, output_gradients, gradients, stream);
    return gradients;
}

void Gradient::run(std::span<const Input> inputs, std::span<const Input> output_gradients,
                   std::span<const TensorView> input_gradients, void* stream) const {
    const State& s = *state_;
    if (!s.into)
        throw Error(ErrorKind::usage,
                    "this gradient was bound to return fresh gradients: run(inputs, output_gradients)")
            .help("bind with einc::gradient(call, inputs, output_gradients, input_gradients) to write into "
                  "yours");
    check_counts(inputs.size(), s.inputs.size(), output_gradients.size(), s.forward.plan().outputs.size());
    if (input_gradients.size() != s.inputs.size())
        throw Error(ErrorKind::usage,
                    fmt::format("the call takes {}, got {} input gradients",
                                counted(static_cast<std::int64_t>(s.inputs.size()), "input"),
                                input_gradients.size()));
    const TensorView first = inputs.empty() ? TensorView{} : inputs[0].view();
    std::vector<Tensor> gradients;
    for (std::size_t k = 0; k < input_gradients.size(); ++k) {
        const TensorView& g = input_gradients[k];
        if (!has_layout(g, s.gradients[k]) || g.device != first.device ||
            g.device_index != first.device_index)
            throw Error(ErrorKind::shape,
                        fmt::format("input gradient {} is not what the gradient was bound to write", k))
                .note(fmt::format("bound to {} ({}):({})", name_of(s.gradients[k].dtype),
                                  fmt::join(s.gradients[k].shape, ","),
                                  fmt::join(s.gradients[k].strides, ",")))
                .note(fmt::format("got {}", describe(g)));
        if (g.data == nullptr && g.numel() > 0)
            throw Error(ErrorKind::usage, fmt::format("input gradient {} has no data", k));
        gradients.emplace_back(g, nullptr);
    }
    run_steps(inputs, output_gradients, gradients, stream);
}

std::vector<Tensor> Gradient::run(std::initializer_list<Input> inputs,
                                  std::initializer_list<Input> output_gradients, void* stream) const {
    return run(std::span<const Input>(inputs.begin(), inputs.size()),
               std::span<const Input>(output_gradients.begin(), output_gradients.size()), stream);
}

}  // namespace einc
