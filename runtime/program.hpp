// The compiled forms, for hot loops: an Expression is a pattern parsed once; a Program is an Expression
// bound to its inputs' shapes, strides, dtype and device and planned once - then run many times on new
// data pointers with no parsing, binding or planning.
//
//   const einc::Expression scores = einc::compile(einc::Op::einsum, "b i d, b j d -> b i j");
//   const einc::Program program = scores.bind({q, k});
//   for (...) { einc::Tensor s = program.run({q, k})[0]; }
//   std::cout << program.explain();   // the plan and its cost
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../compiler/bound.hpp"
#include "../compiler/call.hpp"
#include "../compiler/plan.hpp"
#include "../compiler/schedule.hpp"
#include "tensor.hpp"

namespace einc {

// A tensor given to einc: a view, plus - when it came from an owning Tensor - its storage, so that a
// result that is a view of it keeps that memory alive.
class Input {
public:
    Input(const TensorView& view) : view_(view) {}  // NOLINT: implicit by design
    Input(const Tensor& tensor) : view_(tensor.view()), storage_(tensor.storage()) {}  // NOLINT
    const TensorView& view() const { return view_; }
    const std::shared_ptr<void>& storage() const { return storage_; }

private:
    TensorView view_;
    std::shared_ptr<void> storage_;
};

struct Options {
    bool contiguous = false;    // always return fresh memory, never a view of an input
    bool require_view = false;  // fail unless every result is a view of an input (zero-copy)
    void* stream = nullptr;  // one-line calls on GPU tensors: the CUDA stream (cudaStream_t); null: default
    double alpha = 1.0;  // results are stored as out = alpha * result + beta * out (bound, as BLAS's GEMM)
    double beta = 0.0;  // != 0 reads the outputs: run into them (Program::run(inputs, outputs), einc::*_into)
    bool allow_tf32 = false;  // GPU: f32 GEMMs in TF32 on tensor cores (faster, about 1e-3 relative error)
    // einsum of 3+ operands: the largest intermediate its contraction order may make, in bytes (0: no
    // limit; the outputs are not intermediates). The cheapest order within it; bind throws einc::Error
    // naming the smallest peak there is when none fits.
    std::size_t max_intermediate_bytes = 0;
};

// What of the options the planner reads: require_view, contiguous, alpha and beta, max_intermediate_bytes.
PlanOptions plan_options_of(const Options& options);

class Program;
class Gradient;
struct Lowered;  // compiler/lower.hpp: what binding a program lowers (not an installed header)

// Scratch memory the caller owns, for Program::run: at least program.workspace_bytes() bytes on the
// program's device, aligned to 64 bytes on the CPU and 256 on a GPU. With one, a run into caller outputs
// allocates nothing (no heap, no device memory), and on a GPU is capturable in a CUDA graph. The same
// workspace must not be used by two runs at once.
struct Workspace {
    void* data = nullptr;
    std::size_t bytes = 0;
};

class Expression {
public:
    explicit Expression(Call call);  // parses; throws einc::Error
    const Call& call() const;
    const syntax::Pattern& syntax() const;

    // Binds to tensors like these (their dtype, shape, strides and device; data pointers are not kept).
    Program bind(std::span<const TensorView> inputs, const Options& options = {}) const;
    Program bind(std::initializer_list<TensorView> inputs, const Options& options = {}) const;
    // Binds to inputs and to the outputs the program will write: any strides (a slice, a column block, a
    // KV-cache slot; negative or 0 strides are refused where two elements would land on one address),
    // as Program::run(inputs, outputs) then requires. Every result is written (Options::contiguous).
    Program bind(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                 const Options& options = {}) const;
    Program bind(std::initializer_list<TensorView> inputs, std::initializer_list<TensorView> outputs,
                 const Options& options = {}) const;

private:
    // `outputs`: the caller's outputs to plan for, or null for row-major results.
    Program bind_to(std::span<const TensorView> inputs, const std::span<const TensorView>* outputs,
                    const Options& options) const;
    struct State;
    std::shared_ptr<const State> state_;
    friend class Program;
};

Expression compile(Op op, std::string_view pattern, const AxisSizes& sizes = {},
                   Reduction reduction = Reduction::none);

// The stride a program is planned with for dim d of `view` (`empty`: view.numel() == 0): the compiler's
// rule (compiler/plan.hpp), without building a TensorSpec - the plan cache matches views by it.
inline std::int64_t planned_stride(const TensorView& view, std::size_t d, bool empty) {
    return einc::planned_stride(view.shape[d], view.strides[d], empty);
}
// The layout a program is planned for: the view's dtype and shape, its planned strides.
TensorSpec spec_of(const TensorView& view);
// Whether a view has the layout `spec` (as spec_of gives it), without allocating.
bool has_layout(const TensorView& view, const TensorSpec& spec);

class Program {
public:
    const Bound& bound() const;
    const Plan& plan() const;
    const Schedule& schedule() const;  // how the plan runs where the inputs are
    const Options& options() const;
    // The plan with its cost, as `einc explain`, compared with `device` (h100 h200 a100 cpu local), by
    // default with the device the program runs on: its GPU's model, or this CPU (default_device_model).
    std::string explain(std::string_view device = {}) const;
    // The model explain compares with: the one `device` names (einc::Error of kind usage for an unknown
    // name), by default the program's own device's.
    const DeviceModel& device_model(std::string_view device = {}) const;

    // Runs on new tensors with the dtype, shape and strides the program was bound to. Results the plan
    // makes views alias an input (and keep an owning input alive); the others are fresh row-major tensors.
    // GPU work is queued on `stream` (a cudaStream_t; null: the default stream) without synchronising.
    std::vector<Tensor> run(std::span<const Input> inputs, void* stream = nullptr) const;
    std::vector<Tensor> run(std::initializer_list<Input> inputs, void* stream = nullptr) const;
    // Runs writing into caller-provided results, of the planned dtype, shape and strides (row-major, or
    // those of the outputs given to bind); a program whose plan returns views must be bound with
    // Options::contiguous (or to outputs) to write into outputs. Outputs must not overlap the inputs.
    void run(std::span<const Input> inputs, std::span<const TensorView> outputs,
             void* stream = nullptr) const;
    // The same with the caller's scratch: no heap or device allocation at all (the hot path of an
    // inference engine; bind once, run millions of times). Workspace{}: none, einc allocates it.
    void run(std::span<const Input> inputs, std::span<const TensorView> outputs, Workspace workspace,
             void* stream = nullptr) const;
    // Bytes of scratch a run needs (temporaries and kernel scratch; 0 for most calls), on the program's
    // device.
    std::size_t workspace_bytes() const;

private:
    struct State;
    explicit Program(std::shared_ptr<const State> state) : state_(std::move(state)) {}
    // Schedules and prepares a call lowered up to its plan (compiler/lower.hpp) for inputs on `device`;
    // `what` ("einsum \"...\" on ...") names the call in errors.
    static Program from_lowered(Lowered lowered, const Options& options, Device device, int device_index,
                                std::string_view what);
    std::shared_ptr<const State> state_;
    friend class Expression;
    friend class PlanCache;
    friend class Gradient;
};

}  // namespace einc
