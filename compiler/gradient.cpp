#include "compiler/gradient.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "compiler/lower.hpp"
#include "compiler/plan_builder.hpp"
#include "compiler/reduction.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

// A name for every elementary axis that a pattern can spell: its own where it has one, `e0`, `e1`, ...
// for the dims `...` stood for, `n2` for an anonymous axis of length 2 (each made unique).
class AxisNames {
public:
    explicit AxisNames(const Bound& bound) : bound_(bound) {
        std::set<std::string> taken;
        for (const Axis& axis : bound.axes)
            if (axis.origin == AxisOrigin::named) taken.insert(axis.name);
        for (const Axis& axis : bound.axes) {
            if (axis.origin == AxisOrigin::named) {
                names_.push_back(axis.name);
                continue;
            }
            const std::string base = axis.origin == AxisOrigin::ellipsis
                                         ? fmt::format("e{}", std::string_view(axis.name).substr(3))
                                         : fmt::format("n{}", axis.size);
            std::string name = base;
            for (int k = 1; taken.contains(name); ++k) name = fmt::format("{}v{}", base, k);
            taken.insert(name);
            names_.push_back(name);
        }
    }

    const std::string& operator()(AxisId axis) const { return names_.at(static_cast<std::size_t>(axis)); }

    std::string axes(const std::vector<AxisId>& axes) const {
        std::vector<std::string> names;
        for (const AxisId a : axes) names.push_back((*this)(a));
        return fmt::format("{}", fmt::join(names, " "));
    }
    std::string operand(const BoundOperand& operand) const {
        std::vector<std::string> dims;
        for (const BoundDim& dim : operand.dims)
            dims.push_back(dim.axes.empty()       ? "()"
                           : dim.axes.size() == 1 ? (*this)(dim.axes[0])
                                                  : fmt::format("({})", axes(dim.axes)));
        return fmt::format("{}", fmt::join(dims, " "));
    }
    // Every axis's size, by name: what a rearrange, reduce or repeat of these names needs.
    AxisSizes sizes(const std::vector<AxisId>& axes) const {
        AxisSizes sizes;
        for (const AxisId a : axes) sizes.push_back(AxisSize{(*this)(a), bound_.size(a)});
        return sizes;
    }

private:
    const Bound& bound_;
    std::vector<std::string> names_;
};

// The distinct axes of an operand, in the order they first appear.
std::vector<AxisId> distinct_axes(const BoundOperand& operand) {
    return detail::axes_of(detail::dim_axes_of(operand));
}

bool contains(const std::vector<AxisId>& axes, AxisId a) {
    return std::find(axes.begin(), axes.end(), a) != axes.end();
}

GradientOperand output_gradient(std::uint32_t k = 0) {
    return {GradientOperand::Kind::output_gradient, k};
}
GradientOperand input(std::uint32_t i) {
    return {GradientOperand::Kind::input, i};
}

// The target that writes a result over `axes` into input i's gradient: the gradient itself when its dims
// are exactly these axes in order; else the view along the dims holding each axis (a diagonal: several).
GradientTarget target_over(const Bound& bound, std::uint32_t i, const std::vector<AxisId>& axes) {
    const BoundOperand& operand = bound.inputs[i];
    GradientTarget target{true, i, false, {}, false};
    bool identity = operand.dims.size() == axes.size();
    for (std::size_t d = 0; identity && d < axes.size(); ++d)
        identity = operand.dims[d].axes.size() == 1 && operand.dims[d].axes[0] == axes[d];
    if (identity) return target;
    target.view = true;
    target.axes = axes;
    std::int64_t covered = 1, elements = 1;
    for (const AxisId a : axes) covered *= bound.size(a);
    for (const std::int64_t e : operand.shape()) elements *= e;
    target.zero_first = covered < elements;
    return target;
}

std::string side(const AxisNames& names, const std::vector<BoundOperand>& operands) {
    std::vector<std::string> parts;
    for (const BoundOperand& operand : operands) parts.push_back(names.operand(operand));
    return fmt::format("{}", fmt::join(parts, ", "));
}

// The call of `op` from one side of `forward`'s pattern to the other, every axis sized.
Call call_between(Op op, const AxisNames& names, const BoundOperand& from, const BoundOperand& to,
                  Reduction reduction = Reduction::none) {
    std::vector<AxisId> used = distinct_axes(from);  // every axis the call mentions
    for (const AxisId a : distinct_axes(to))
        if (!contains(used, a)) used.push_back(a);
    return Call{op, names.operand(from) + " -> " + names.operand(to), reduction, names.sizes(used), false,
                {}};
}

std::vector<BackwardCall> einsum_backward(const Bound& forward, const AxisNames& names) {
    std::vector<BackwardCall> calls;
    const BoundOperand& out = forward.outputs[0];
    for (std::uint32_t k = 0; k < forward.inputs.size(); ++k) {
        const BoundOperand& operand = forward.inputs[k];
        const std::vector<AxisId> axes = distinct_axes(operand);
        // The axes the output's gradient and the other operands know; the rest are summed inside this one.
        std::vector<AxisId> known = distinct_axes(out);
        std::vector<BoundOperand> operands{out};
        std::vector<GradientOperand> sources{output_gradient()};
        std::vector<std::string> others;
        for (std::uint32_t j = 0; j < forward.inputs.size(); ++j) {
            if (j == k) continue;
            others.push_back(fmt::format("in {}", j));
            operands.push_back(forward.inputs[j]);
            sources.push_back(input(j));
            for (const AxisId a : distinct_axes(forward.inputs[j]))
                if (!contains(known, a)) known.push_back(a);
        }
        std::vector<AxisId> present, missing;
        for (const AxisId a : axes) (contains(known, a) ? present : missing).push_back(a);
        const std::string what = fmt::format("d(in {})", k);
        const bool just_the_gradient =
            operands.size() == 1 && present == distinct_axes(out) && present.size() == out.dims.size();
        // The sizes of the axes of dims like `(i j)`, which one length does not give.
        std::vector<AxisId> grouped;
        for (const BoundOperand& operand_of_call : operands)
            for (const BoundDim& dim : operand_of_call.dims)
                if (dim.axes.size() > 1)
                    for (const AxisId a : dim.axes)
                        if (!contains(grouped, a)) grouped.push_back(a);
        BackwardCall product{Call{Op::einsum,
                                  side(names, operands) + " -> " + names.axes(present),
                                  Reduction::none,
                                  names.sizes(grouped),
                                  false,
                                  {}},
                             false,
                             sources,
                             {},
                             1,
                             fmt::format("{} = d(out){}{} -> {}", what, others.empty() ? "" : " with ",
                                         fmt::join(others, ", "),
                                         present.empty() ? "scalar" : names.axes(present))};
        if (missing.empty()) {
            product.results.push_back(target_over(forward, k, present));
            calls.push_back(std::move(product));
            continue;
        }
        GradientOperand source = output_gradient();
        if (!just_the_gradient) {
            product.results.push_back(GradientTarget{false, 0, false, {}, false});
            source =
                GradientOperand{GradientOperand::Kind::partial, static_cast<std::uint32_t>(calls.size())};
            calls.push_back(std::move(product));
        }
        calls.push_back(
            BackwardCall{Call{Op::repeat,
                              names.axes(present) + " -> " + names.axes(axes),
                              Reduction::none,
                              names.sizes(missing),
                              false,
                              {}},
                         false,
                         {source},
                         {target_over(forward, k, axes)},
                         1,
                         fmt::format("{}: broadcast back along {}, summed inside operand {} alone", what,
                                     names.axes(missing), k)});
    }
    return calls;
}

}  // namespace

std::string named_pattern(const Bound& forward) {
    const AxisNames names(forward);
    return side(names, forward.inputs) + " -> " + side(names, forward.outputs);
}

void check_differentiable(Op op, DType dtype) {
    const auto refuse = [&](std::string what) { return Error(ErrorKind::unsupported, std::move(what)); };
    if (op == Op::parse_shape)
        throw refuse("parse_shape returns axis sizes, not a tensor: it has no gradient");
    if (!is_floating(dtype) && !is_complex(dtype))
        throw refuse(fmt::format("gradients are defined for floating and complex dtypes; the inputs are {}",
                                 name_of(dtype)))
            .help("convert the inputs to f32 or f64 first");
}

std::vector<BackwardCall> backward_calls(const Bound& forward, DType dtype) {
    check_differentiable(forward.op, dtype);
    const AxisNames names(forward);
    switch (forward.op) {
    case Op::rearrange:
        return {BackwardCall{call_between(Op::rearrange, names, forward.outputs[0], forward.inputs[0]),
                             false,
                             {output_gradient()},
                             {GradientTarget{}},
                             1,
                             "d(in 0) = the output's gradient, rearranged back"}};
    case Op::repeat:
        return {BackwardCall{
            call_between(Op::reduce, names, forward.outputs[0], forward.inputs[0], Reduction::sum),
            false,
            {output_gradient()},
            {GradientTarget{}},
            1,
            forward.broadcast.empty()
                ? std::string("d(in 0) = the output's gradient, rearranged back")
                : fmt::format("d(in 0) = the output's gradient summed over the repeated {}",
                              names.axes(forward.broadcast))}};
    case Op::reduce: {
        const Reduction r = forward.reduction;
        double n = 1;  // terms per output
        for (const AxisId a : forward.reduced) n *= static_cast<double>(forward.size(a));
        const auto repeated = [&](double alpha, const std::string& scaled) {
            return std::vector<BackwardCall>{
                {call_between(Op::repeat, names, forward.outputs[0], forward.inputs[0]),
                 false,
                 {output_gradient()},
                 {GradientTarget{}},
                 alpha,
                 forward.reduced.empty() ? std::string("d(in 0) = the output's gradient, rearranged back")
                                         : fmt::format("d(in 0) = the output's gradient repeated along {}{}",
                                                       names.axes(forward.reduced), scaled)}};
        };
        switch (info_of(r).gradient) {
        case GradientRule::none:
            throw Error(ErrorKind::unsupported,
                        fmt::format("reduce {} is not differentiable: its result is a boolean", name_of(r)));
        case GradientRule::route: {
            if (is_complex(dtype))  // (prod: max and min of complex values are refused before)
                throw Error(ErrorKind::unsupported,
                            fmt::format("the gradient of reduce {} on {} tensors is not supported yet",
                                        name_of(r), name_of(dtype)));
            Call call{Op::reduce, named_pattern(forward), r, {}, false, {}};
            return {BackwardCall{
                std::move(call),
                true,
                {input(0), output_gradient()},
                {GradientTarget{}},
                1,
                info_of(r).combine == Combine::multiply
                    ? "d(in 0) = the output's gradient times the product of the other terms"
                    : fmt::format("d(in 0) = the output's gradient, routed to the {}ima (ties share it)",
                                  name_of(r))}};
        }
        case GradientRule::broadcast: return repeated(1, "");
        case GradientRule::scaled_broadcast:  // (an empty input has no gradient to scale)
            return repeated(n > 0 ? 1 / n : 1, fmt::format(", times 1/{}", n));
        }
        EINC_ASSERT(false);  // (the switch is exhaustive)
        return {};
    }
    case Op::einsum: return einsum_backward(forward, names);
    case Op::pack: {
        BackwardCall unpack{
            Call{Op::unpack, forward.pattern.text, Reduction::none, {}, false, packed_shapes(forward)},
            false,
            {output_gradient()},
            {},
            1,
            "d(in i) = part i of the output's gradient (unpack)"};
        for (std::uint32_t i = 0; i < forward.inputs.size(); ++i)
            unpack.results.push_back(GradientTarget{true, i, false, {}, false});
        return {std::move(unpack)};
    }
    case Op::unpack: {
        BackwardCall pack{Call{Op::pack, forward.pattern.text, Reduction::none, {}, false, {}},
                          false,
                          {},
                          {GradientTarget{}},
                          1,
                          "d(in 0) = the parts' gradients packed together"};
        for (std::uint32_t k = 0; k < forward.outputs.size(); ++k)
            pack.operands.push_back(output_gradient(k));
        return {std::move(pack)};
    }
    case Op::parse_shape: break;
    }
    EINC_ASSERT(false);
}

namespace {

// The least time of a plan's steps run in sequence: each one's roofline time after the device's step floor.
double plan_seconds(const Plan& plan, const DeviceModel& device) {
    double seconds = 0;
    for (const PlanStep& step : plan.steps)
        seconds += step_seconds(step.cost, device, compute_dtype(plan, step.step));
    return seconds;
}

}  // namespace

std::vector<TensorSpec> row_major_gradients(const Plan& forward) {
    std::vector<TensorSpec> gradients;
    for (const TensorSpec& out : forward.outputs)
        gradients.push_back(TensorSpec{out.dtype, out.shape, row_major_strides(out.shape)});
    return gradients;
}

TensorSpec gradient_view(const Bound& forward, const TensorSpec& gradient, const GradientTarget& target) {
    if (!target.view) return gradient;
    const std::vector<std::int64_t> strides =
        detail::axis_strides(forward, detail::dim_axes_of(forward.inputs[target.input]), gradient.strides);
    TensorSpec view{gradient.dtype, {}, {}};
    for (const AxisId a : target.axes) {
        view.shape.push_back(forward.size(a));
        view.strides.push_back(strides[static_cast<std::size_t>(a)]);
    }
    return view;
}

std::vector<BackwardPlan> plan_backward(const Bound& forward, std::span<const TensorSpec> inputs,
                                        std::span<const TensorSpec> output_gradients,
                                        std::span<const TensorSpec> input_gradients, Epilogue epilogue,
                                        std::span<PlanChoices> choices) {
    EINC_ASSERT(inputs.size() == forward.inputs.size() && output_gradients.size() == forward.outputs.size());
    EINC_ASSERT(input_gradients.empty() || input_gradients.size() == inputs.size());
    const DType dtype = inputs.empty() ? DType::f32 : inputs[0].dtype;
    const auto gradient_of =
        [&](std::uint32_t input) {  // as it is written: the caller's layout, or row-major
            const TensorSpec& x = inputs[input];
            return input_gradients.empty() ? TensorSpec{x.dtype, x.shape, row_major_strides(x.shape)}
                                           : input_gradients[input];
        };
    std::vector<BackwardPlan> plans;
    std::vector<BackwardCall> calls = backward_calls(forward, dtype);
    EINC_ASSERT(choices.empty() || choices.size() == calls.size());
    for (BackwardCall& call : calls) {
        std::vector<TensorSpec> operands;
        for (const GradientOperand& operand : call.operands) {
            switch (operand.kind) {
            case GradientOperand::Kind::output_gradient:
                operands.push_back(output_gradients[operand.index]);
                break;
            case GradientOperand::Kind::input: operands.push_back(inputs[operand.index]); break;
            case GradientOperand::Kind::partial:
                operands.push_back(plans.at(operand.index).plan.outputs.at(0));
                break;
            }
        }
        // A result written into a gradient (into the caller's, or into a view of one) is planned for its
        // strides, with the caller's epilogue; a partial result is the identity's.
        const bool to_inputs = call.results.front().to_input;
        PlanOptions options;
        options.choices = choices.empty() ? nullptr : &choices[plans.size()];
        options.epilogue = to_inputs ? Epilogue{epilogue.alpha * call.alpha, epilogue.beta} : Epilogue{};
        if (to_inputs && (!input_gradients.empty() || call.results.front().view))
            for (const GradientTarget& target : call.results)
                options.output_strides.push_back(
                    gradient_view(forward, gradient_of(target.input), target).strides);
        // torch's gradient of a complex product: d(a) = d(out) * conj(b), for every forward input read
        if (is_complex(dtype) && call.call.op == Op::einsum)
            for (const GradientOperand& operand : call.operands)
                options.conjugated.push_back(operand.kind == GradientOperand::Kind::input);
        if (call.route) {
            Plan plan = plan_route(forward, operands[0], operands[1], options);
            plans.push_back(BackwardPlan{std::move(call), forward, std::move(plan), options.epilogue});
            continue;
        }
        Lowered lowered = lower(call.call, operands, {.until = Stage::planned, .plan = options});
        plans.push_back(BackwardPlan{std::move(call), std::move(lowered.bound), std::move(lowered.plan),
                                     options.epilogue});
    }
    return plans;
}

Cost backward_cost(std::span<const BackwardPlan> backward, std::span<const Schedule> schedules) {
    Cost total;
    for (std::size_t c = 0; c < backward.size(); ++c) total += scheduled_cost(backward[c].plan, schedules[c]);
    return total;
}

std::string print_backward(const Plan& forward, const Schedule& forward_schedule,
                           std::span<const BackwardPlan> backward, std::span<const Schedule> schedules,
                           const DeviceModel& device) {
    std::string out = "forward\n" + print_plan(forward, forward_schedule, device);
    double backward_seconds = 0;
    for (std::size_t c = 0; c < backward.size(); ++c) {
        const BackwardPlan& b = backward[c];
        out += fmt::format("\nbackward {}: {}\n  {}\n", c + 1, b.call.why,
                           b.call.route ? fmt::format("the gradient of reduce \"{}\" {}", b.call.call.pattern,
                                                      name_of(b.call.call.reduction))
                                        : format_call(b.call.call));
        out += print_plan(b.plan, schedules[c], device);
        backward_seconds += plan_seconds(b.plan, device);
    }
    const Cost f = scheduled_cost(forward, forward_schedule), g = backward_cost(backward, schedules);
    const double forward_seconds = plan_seconds(forward, device);
    const auto line = [&](std::string_view what, const Cost& cost, double seconds) {
        return fmt::format("{:<10} {:>12}  {:>10} moved  >= {} on {}\n", what, format_flops(cost.flops),
                           format_bytes(cost.bytes()), format_seconds(seconds), device.key);
    };
    Cost step = f;
    step += g;
    out += "\ntraining step (roofline, plans in sequence)\n";
    out += line("forward", f, forward_seconds);
    out += line("backward", g, backward_seconds);
    out += line("total", step, forward_seconds + backward_seconds);
    if (f.flops > 0) out += fmt::format("backward / forward FLOPs: {:.3g}\n", g.flops / f.flops);
    return out;
}

std::string backward_to_json(std::span<const BackwardPlan> backward, std::span<const Schedule> schedules,
                             const DeviceModel& device) {
    const Cost total = backward_cost(backward, schedules);
    double seconds = 0;
    std::vector<std::string> calls;
    for (std::size_t c = 0; c < backward.size(); ++c) {
        const BackwardPlan& b = backward[c];
        seconds += plan_seconds(b.plan, device);
        calls.push_back(fmt::format(R"({{"call":{},"route":{},"why":{},"plan":{}}})",
                                    json_quoted(format_call(b.call.call)), b.call.route,
                                    json_quoted(b.call.why), plan_to_json(b.plan, schedules[c], device)));
    }
    return fmt::format(
        R"({{"flops":{},"bytes":{},"bytes_read":{},"bytes_written":{},"predicted_seconds":{},"calls":[{}]}})",
        total.flops, total.bytes(), total.bytes_read, total.bytes_written, seconds, fmt::join(calls, ","));
}

}  // namespace einc
