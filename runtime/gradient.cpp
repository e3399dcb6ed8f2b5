#include "runtime/gradient.hpp"

#include <fmt/format.h>

#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"

namespace einc {

struct Gradient::State {
    Program forward;
    std::vector<Gradient::Step> steps;
    std::vector<TensorSpec> inputs;  // the forward inputs' layouts: the gradients' dtypes and shapes
};

Gradient gradient(const Expression& call, std::span<const TensorView> inputs,
                  std::span<const TensorView> output_gradients) {
    Program forward = call.bind(inputs);
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
    std::vector<TensorSpec> specs;
    for (const TensorView& input : inputs) specs.push_back(spec_of(input));

    auto state = std::make_shared<Gradient::State>(Gradient::State{std::move(forward), {}, specs});
    const std::string what = fmt::format("the backward of {} \"{}\" on {}", name_of(call.call().op),
                                         call.call().pattern, describe(first));
    for (BackwardPlan& backward : plan_backward(state->forward.bound(), specs, gradients)) {
        Options options;
        options.alpha = backward.call.alpha;
        Program program = Program::from_plan(std::move(backward.bound), std::move(backward.plan), options,
                                             first.device, first.device_index, what);
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
    const DeviceModel* model = device_model_named(device);
    if (!model)
        throw Error(ErrorKind::usage, fmt::format("unknown device '{}' (h100 h200 a100 cpu)", device));
    std::vector<BackwardPlan> plans;
    std::vector<Schedule> schedules;
    for (const Step& step : state_->steps) {
        plans.push_back(BackwardPlan{step.call, step.program.bound(), step.program.plan()});
        schedules.push_back(step.program.schedule());
    }
    return print_backward(state_->forward.plan(), state_->forward.schedule(), plans, schedules, *model);
}

std::vector<Tensor> Gradient::run(std::span<const Input> inputs, std::span<const Input> output_gradients,
                                  void* stream) const {
    const State& s = *state_;
    if (inputs.size() != s.inputs.size())
        throw Error(ErrorKind::usage,
                    fmt::format("the call takes {}, got {}",
                                counted(static_cast<std::int64_t>(s.inputs.size()), "input"), inputs.size()));
    if (output_gradients.size() != s.forward.plan().outputs.size())
        throw Error(
            ErrorKind::usage,
            fmt::format("the call has {}, got {}",
                        counted(static_cast<std::int64_t>(s.forward.plan().outputs.size()), "result"),
                        counted(static_cast<std::int64_t>(output_gradients.size()), "output gradient")));
    const TensorView first = inputs.empty() ? TensorView{} : inputs[0].view();
    std::vector<Tensor> gradients(inputs.size());
    std::vector<Tensor> partials(s.steps.size());
    std::vector<Input> operands;
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
        if (!targets.front().view) {  // whole gradients (or a partial): what the program returns, a
                                      // view where it can be
            std::vector<Tensor> results = step.program.run(operands, stream);
            for (std::size_t k = 0; k < targets.size(); ++k)
                (targets[k].to_input ? gradients[targets[k].input] : partials[c]) = std::move(results[k]);
            continue;
        }
        std::vector<TensorView> views;
        for (const GradientTarget& target : targets) {
            const TensorSpec& x = s.inputs[target.input];
            Tensor& g = gradients[target.input];
            g = target.zero_first ? Tensor::zeros(x.dtype, x.shape, first.device, first.device_index)
                                  : allocate(x.dtype, x.shape, first.device, first.device_index, stream);
            const TensorSpec view = gradient_view(x, target);
            views.push_back(
                TensorView{g.data(), x.dtype, view.shape, view.strides, first.device, first.device_index});
        }
        step.program.run(operands, views, stream);
    }
    return gradients;
}

std::vector<Tensor> Gradient::run(std::initializer_list<Input> inputs,
                                  std::initializer_list<Input> output_gradients, void* stream) const {
    return run(std::span<const Input>(inputs.begin(), inputs.size()),
               std::span<const Input>(output_gradients.begin(), output_gradients.size()), stream);
}

}  // namespace einc
