// Pass: gradient. The backward of a bound call, as calls again: the gradient of every einops call is an
// einops call of its output's gradient (with the other operands), which einc binds and plans like any
// other - so a backward GEMM is a GEMM, a backward rearrange a view.
//
//   rearrange        the inverse rearrange
//   repeat           a sum over the repeated axes (reduce sum)
//   reduce sum       a repeat along the reduced axes; mean: the same scaled by 1/n (the epilogue's alpha)
//   reduce max, min  a Route step (plan_route): the gradient to the elements that attain the extremum,
//                    ties sharing it evenly (as torch.amax)
//   reduce prod      a Route step: the product of the other elements of the group, exact with zeros
//   reduce any, all  not differentiable: einc::Error
//   einsum           per operand, an einsum of the output's gradient with the other operands over the
//                    operand's axes (complex: with their conjugates, torch's convention - the gradient of
//                    a real loss L is dL/d(re) + i dL/d(im)); an axis only that operand has (summed inside
//                    it) is broadcast back by a repeat; a diagonal (`i i`) is written into the diagonal of a
//                    zeroed gradient
//   pack, unpack     each other
//
// Each backward call names what it reads (the output's gradient, the forward's inputs, an earlier call's
// partial result) and where its results go; runtime/gradient.hpp binds and runs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bound.hpp"
#include "plan.hpp"
#include "schedule.hpp"

namespace einc {

// A tensor a backward call reads.
struct GradientOperand {
    enum class Kind : std::uint8_t {
        output_gradient,  // the gradient of forward output `index`
        input,            // forward input `index`, as given (einsum: the other operands; max, min, prod: x)
        partial,          // the result of the backward call `index`
    };
    Kind kind = Kind::output_gradient;
    std::uint32_t index = 0;
};

// Where a backward call's result goes: the gradient of forward input `input`, all of it - or, as a
// `view`, the view of it with one dim per axis of `axes` (gradient_view): an axis in two dims (`i i`)
// has their strides summed, the diagonal; a broadcast `()` dim has no axis. The gradient is zeroed first
// when the view does not cover it. A partial result (`to_input` false) is kept for a later call.
struct GradientTarget {
    bool to_input = true;
    std::uint32_t input = 0;
    bool view = false;
    std::vector<AxisId> axes;
    bool zero_first = false;
};

struct BackwardCall {
    Call call;           // what runs; for a Route, the forward reduce itself (planned by plan_route)
    bool route = false;  // reduce max, min, prod: plan_route(forward bound, x, output gradient)
    std::vector<GradientOperand> operands;
    std::vector<GradientTarget> results;  // one per result of the call
    double alpha = 1;                     // stored as alpha * result (mean: 1 / n)
    std::string why;                      // "d(in 1) = ...": what it is the gradient of
};

// The backward of `forward`, in the order to run: every input's gradient is written by exactly one call
// (pack's by one unpack). Throws einc::Error (unsupported) for what has no gradient: reduce any and all,
// parse_shape, integer and bool dtypes (`dtype`: the forward inputs').
// @post the calls' patterns name every axis and give every size: they bind to the shapes of the forward
//       inputs and outputs alone
std::vector<BackwardCall> backward_calls(const Bound& forward, DType dtype);

// Throws the error a call of `op` on inputs of `dtype` has no gradient (parse_shape; integer, bool and
// 8-bit float inputs), before anything else about the gradient is checked.
void check_differentiable(Op op, DType dtype);

// A backward call bound and planned: its operands' layouts are the forward inputs' (as given), the output
// gradients' and the partial results' (as planned); its results are written as its target says.
struct BackwardPlan {
    BackwardCall call;
    Bound bound;
    Plan plan;
    Epilogue epilogue;  // how its results are stored (the call's alpha, and the caller's alpha and beta)
};

// The output gradients a training loop passes, and what `einc explain --backward` assumes: row-major,
// of the forward plan's outputs' dtypes and shapes.
std::vector<TensorSpec> row_major_gradients(const Plan& forward);

// The backward of `forward` over inputs laid out as `inputs` and output gradients as `output_gradients`
// (one per forward output, of its shape and dtype), each call planned. The input gradients are written
// row-major (where a result is a view of an output gradient, it may stay one) - or, given their layouts
// (`input_gradients`, one per input), into those, stored as alpha * gradient + beta * old (`epilogue`).
// `choices`, if given, one per backward call (backward_calls), takes each call's choices that compare
// sizes (PlanChoices, plan.hpp): no call's plan depends on another's choices (a partial result is
// row-major however it was computed), so they can be walked each on its own.
std::vector<BackwardPlan> plan_backward(const Bound& forward, std::span<const TensorSpec> inputs,
                                        std::span<const TensorSpec> output_gradients,
                                        std::span<const TensorSpec> input_gradients = {},
                                        Epilogue epilogue = {}, std::span<PlanChoices> choices = {});

// The layout of target's view of `gradient`, the gradient of forward input target.input (all of it
// unless target.view).
TensorSpec gradient_view(const Bound& forward, const TensorSpec& gradient, const GradientTarget& target);

// `einc explain --backward`: the forward plan, each backward call and its plan, and the totals - forward,
// backward and training-step FLOPs, bytes and roofline time on `device`. Schedules are one per plan.
std::string print_backward(const Plan& forward, const Schedule& forward_schedule,
                           std::span<const BackwardPlan> backward, std::span<const Schedule> schedules,
                           const DeviceModel& device);
// The same as the JSON object `"backward"`: {"flops", "bytes", "predicted_seconds", "calls": [{"call", "why",
// "plan": <plan_to_json>}]}, for `einc explain --backward --json`.
std::string backward_to_json(std::span<const BackwardPlan> backward, std::span<const Schedule> schedules,
                             const DeviceModel& device);
// The backward plans' costs added up.
Cost backward_cost(std::span<const BackwardPlan> backward, std::span<const Schedule> schedules);

// The pattern `forward` would have with its elementary axes named as backward_calls names them (original
// names where they have one): e.g. "b (h w) c -> b h w c". For printing and tests.
std::string named_pattern(const Bound& forward);

}  // namespace einc
