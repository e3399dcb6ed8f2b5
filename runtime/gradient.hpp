// Gradients of einc's calls: the backward of a call, bound to its inputs' layouts once - one compiled
// Program per backward call (compiler/gradient.hpp says which) - then run on new data many times.
//
//   const einc::Gradient g = einc::gradient(einc::Call{einc::Op::einsum, "b d, d k -> b k"}, {x, w});
//   std::vector<einc::Tensor> d = g.run({x, w}, {dy});   // d[0] = dL/dx, d[1] = dL/dw
//   std::cout << g.explain();                             // the backward plans, with their costs
//
// The backward programs are planned like any call: the gradients of a matmul are GEMMs reading their
// operands in place, the gradient of a rearrange is the inverse rearrange (a view where it can be).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../compiler/gradient.hpp"
#include "program.hpp"

namespace einc {

class Gradient {
public:
    struct Step {
        BackwardCall call;
        Program program;
    };

    const Program& forward() const;       // the call itself, bound to the same inputs
    std::span<const Step> steps() const;  // the backward calls, in the order they run
    Cost forward_cost() const;            // FLOPs and bytes of the forward plan
    Cost backward_cost() const;           // of all the backward plans together
    // The forward and backward plans with their costs, and the totals, as `einc explain --backward`,
    // compared with `device` - by default the model of the device they run on (Program::device_model).
    std::string explain(std::string_view device = {}) const;

    // The gradient of every input, given the gradient of every output of the call (one for each; of the
    // output's dtype and shape, laid out as bound: row-major unless given to einc::gradient), on the
    // inputs' device: fresh row-major tensors, or - where a backward plan is a view, as a rearrange's
    // often is - a view of an output gradient (keeping it alive). GPU work is queued on `stream`.
    std::vector<Tensor> run(std::span<const Input> inputs, std::span<const Input> output_gradients,
                            void* stream = nullptr) const;
    std::vector<Tensor> run(std::initializer_list<Input> inputs,
                            std::initializer_list<Input> output_gradients, void* stream = nullptr) const;
    // The same written into your gradients, laid out as bound (einc::gradient with input_gradients), as
    // d = alpha * gradient + beta * d: beta = 1 accumulates (micro-batches, a weight used twice).
    void run(std::span<const Input> inputs, std::span<const Input> output_gradients,
             std::span<const TensorView> input_gradients, void* stream = nullptr) const;

private:
    Gradient() = default;  // made by einc::gradient only: a Gradient is always bound
    struct State;
    std::shared_ptr<const State> state_;
    void run_steps(std::span<const Input> inputs, std::span<const Input> output_gradients,
                   std::vector<Tensor>& gradients, void* stream) const;
    // `input_gradients`: the caller's gradients to write into, or null to return fresh ones.
    static Gradient bind(const Expression& call, std::span<const TensorView> inputs,
                         std::span<const TensorView> output_gradients,
                         const std::span<const TensorView>* input_gradients, const Options& options);
    friend Gradient gradient(const Expression&, std::span<const TensorView>, std::span<const TensorView>);
    friend Gradient gradient(const Expression&, std::span<const TensorView>, std::span<const TensorView>,
                             std::span<const TensorView>, const Options&);
};

// Binds the backward of a call to inputs like these (dtype, shape, strides, device; floating dtypes) and
// to output gradients laid out like `output_gradients` (empty: row-major, the outputs' dtype). Throws
// einc::Error for a call without a gradient (reduce any/all, parse_shape, integer inputs) and whatever
// binding the call itself throws.
Gradient gradient(const Expression& call, std::span<const TensorView> inputs,
                  std::span<const TensorView> output_gradients = {});
inline Gradient gradient(const Call& call, std::span<const TensorView> inputs,
                         std::span<const TensorView> output_gradients = {}) {
    return gradient(Expression(call), inputs, output_gradients);
}
// Binds the backward to write into gradients of yours laid out like `input_gradients` (one per input: any
// strides that give every element its own address; a diagonal's gradient, zeroed first, row-major
// unless accumulated) as d = alpha * gradient + beta * d (Options::alpha, beta). Run it with
// run(inputs, output_gradients, input_gradients).
Gradient gradient(const Expression& call, std::span<const TensorView> inputs,
                  std::span<const TensorView> output_gradients, std::span<const TensorView> input_gradients,
                  const Options& options = {});
inline Gradient gradient(const Call& call, std::span<const TensorView> inputs,
                         std::span<const TensorView> output_gradients,
                         std::span<const TensorView> input_gradients, const Options& options = {}) {
    return gradient(Expression(call), inputs, output_gradients, input_gradients, options);
}
inline Gradient gradient(const Call& call, std::initializer_list<TensorView> inputs) {
    return gradient(Expression(call), std::span<const TensorView>(inputs.begin(), inputs.size()));
}

}  // namespace einc
