// Pass 3: plan. Turns a bound expression and the operands' layouts into a Plan - a short list of steps,
// each small, printable and costed - that an executor (runtime/ on the CPU, cuda/ on a GPU) runs as is.
//
//   View      the result is an input's memory with a new layout                     0 FLOPs, 0 bytes
//   Copy      materialise a permutation / broadcast / merge into a new layout
//   Reduce    sum mean max min prod any all over some modes
//   Contract  elementwise product of several accesses, summed over some modes (no GEMM shape)
//   Gemm      one strided-batched GEMM
//   Route     the gradient of a max, min or prod reduction: each element's share of its output's gradient
//
// Copy, Reduce and Contract are loop nests: their accesses share one index space (the layouts' common
// shape); a destination stride of 0 marks a mode that is reduced (or summed).
//
// A step that writes an output carries the caller's epilogue (Options::alpha, beta): what it stores is
// alpha * value + beta * out (epilogue.hpp). Steps writing temporaries always carry the identity.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "bound.hpp"
#include "cost.hpp"
#include "dtype.hpp"
#include "epilogue.hpp"
#include "layout.hpp"

namespace einc {

struct Buffer {
    enum class Kind : std::uint8_t { input, output, temporary };
    Kind kind = Kind::input;
    std::uint32_t index = 0;
    // A complex buffer's memory as its (real, imaginary) parts: c64 read as f32, c128 as f64, offsets
    // and strides counted in parts (plan_complex.cpp computes complex values on them).
    bool parts = false;
    friend bool operator==(const Buffer&, const Buffer&) = default;
};

// What a step sees of a buffer: the element at offset + layout(i) for every index i of the step.
struct Access {
    Buffer buffer;
    std::int64_t offset = 0;  // in elements
    Layout layout;
};

// Output `output` is `source.buffer`'s memory at source.offset with source.layout (its shape is the
// output's shape).
struct View {
    std::uint32_t output = 0;
    Access source;
};

// dst[i] = src[i] for every index i; src stride 0 broadcasts. Converts the dtype where the buffers differ.
struct Copy {
    Access src, dst;
    Epilogue epilogue;
};

// dst[i] = op(src[j] for every j that agrees with i on the modes where dst's stride is non-zero).
// Reducing an empty set gives op's identity (sum 0, prod 1, any false, all true, mean NaN).
struct Reduce {
    Reduction op = Reduction::sum;
    Access src, dst;
    Epilogue epilogue;  // applied after the reduction (after mean's division)
};

// dst[i] = sum over the modes where dst's stride is 0 of the product of srcs[k][i].
struct Contract {
    std::vector<Access> srcs;
    Access dst;
    Epilogue epilogue;
};

// One matrix of a GEMM: element (o, b, row, col) at
// offset + o*outer_stride + b*batch_stride + row*row_stride + col*col_stride.
// The planner normalises it for BLAS: exactly one of row_stride, col_stride is 1 (row-major when
// col_stride is 1) and the other is at least the extent of the dim whose stride is 1.
struct GemmMatrix {
    Buffer buffer;
    std::int64_t offset = 0;
    std::int64_t batch_stride = 0, row_stride = 0, col_stride = 0;
    std::int64_t outer_stride = 0;
    bool row_major() const { return col_stride == 1; }
    std::int64_t leading_dimension() const { return row_major() ? row_stride : col_stride; }
    // The matrix as a layout over (outer, batch, row, col).
    Layout layout(std::int64_t outer, std::int64_t batch, std::int64_t rows, std::int64_t cols) const {
        return Layout{{Mode{outer, outer_stride}, Mode{batch, batch_stride}, Mode{rows, row_stride},
                       Mode{cols, col_stride}}};
    }
};

// C[o, b] = A[o, b] (m x k) * B[o, b] (k x n) for every o < outer, b < batch: one strided-batched GEMM
// per o. `outer` is 1 unless the batch axes are not one stride in some operand's memory (attention's
// `b i h d`: b and h), where they split in two, an outer loop of GEMMs reading every operand in place.
struct Gemm {
    std::int64_t batch = 1, m = 1, n = 1, k = 1;
    GemmMatrix a, b, c;
    Epilogue epilogue;  // C = alpha * A B + beta * C, as BLAS's own alpha and beta
    std::int64_t outer = 1;
};

// The gradient of `op` (max, min or prod) reduced over some modes: src is the reduced tensor x, grad the
// gradient of the reduction's output (stride 0 along the reduced modes), dst gets x's gradient. The
// first `kept` modes of the index space are kept (one group of terms per output), the rest reduced.
//   max, min  dst = grad / ties where src attains its group's extremum, else 0 (ties share evenly, as
//             torch.amax; a group holding NaN has NaN for extremum, and no element attains it)
//   prod      dst = grad * (product of the group's other elements), exact where the group holds zeros
struct Route {
    Reduction op = Reduction::max;
    Access src, grad, dst;
    std::uint32_t kept = 0;
    Epilogue epilogue;
};

using Step = std::variant<View, Copy, Reduce, Contract, Gemm, Route>;

// For visiting a Step exhaustively - std::visit(Overloaded{[](const View&) {...}, ...}, step) - so that a
// new kind of step fails to compile wherever it is not handled.
template <typename... F>
struct Overloaded : F... {
    using F::operator()...;
};
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;  // (Clang 14 does not deduce aggregates' template arguments)

struct PlanStep {
    Step step;
    Cost cost;
    std::string why;  // what the step does in terms of the pattern, and why it is needed
};

// A buffer's dtype and layout as the plan addresses it (strides in elements, from the buffer's base).
struct TensorSpec {
    DType dtype = DType::f32;
    Shape shape;
    Shape strides;

    std::int64_t
    bytes() const;  // of its elements (not of the memory its strides span); saturates at INT64_MAX
    Layout layout() const { return make_layout(shape, strides); }
};

// The stride a plan reads dim `d` of an operand with: 0 along a dim of extent 1 and for an empty operand
// (`empty`: some extent is 0), which are never stepped along; the operand's own otherwise. One rule, for
// lower() and for the runtime's plan cache, so that what `explain` shows is what runs.
constexpr std::int64_t planned_stride(std::int64_t extent, std::int64_t stride, bool empty) {
    return empty || extent == 1 ? 0 : stride;
}
// `spec` with its planned strides.
TensorSpec planned(TensorSpec spec);

// The order in which einsum contracts three or more operands, as opt_einsum reports it: each pair
// indexes the current operand list; the two are removed and their result appended.
// How the order was found (compiler/contraction_order.hpp).
enum class PathSearch {
    exhaustive,           // every split of every subset: optimal
    dynamic_programming,  // subsets under a raised cost cap: optimal
    greedy,               // the pair that removes the most elements, step by step: not proven optimal
    random_greedy,        // the best of randomised greedy runs: not proven optimal
    chosen,               // the pairs PlanChoices took (einc aot)
};

struct ContractionPath {
    std::vector<std::pair<std::size_t, std::size_t>> pairs;
    double naive_flops = 0;           // one loop over every axis, opt_einsum's count
    double optimized_flops = 0;       // the same count, contraction by contraction
    double largest_intermediate = 0;  // elements, the output's included
    bool optimal = true;              // proven optimal (exhaustive or dynamic programming)
    PathSearch search = PathSearch::exhaustive;
    std::size_t greedy_runs = 0;         // random_greedy: the runs it took the best of
    std::size_t subtrees_reordered = 0;  // greedy searches: subtrees the local search then made cheaper
};

struct Plan {
    Op op = Op::rearrange;
    std::vector<TensorSpec> inputs;
    std::vector<TensorSpec> outputs;      // a viewed output's strides point into its input
    std::vector<TensorSpec> temporaries;  // scratch buffers, row-major, allocated by the executor
    std::vector<PlanStep> steps;
    std::optional<ContractionPath> path;  // einsum with three or more operands
    Cost total;

    // The input output `k` is a view of, if a View step produces it.
    std::optional<std::uint32_t> view_source(std::size_t output) const;
    // The dtype, shape and strides of an input, output or temporary.
    const TensorSpec& spec(Buffer buffer) const;
    // The dtype a step reads or writes the buffer as: its own, or its parts' (Buffer::parts).
    DType dtype_of(Buffer buffer) const;
};

// The FLOPs, bytes and temporary workspace of a step of `plan`, by the conventions of compiler/cost.hpp
// (counted in cost.cpp).
Cost step_cost(const Plan& plan, const Step& step);

// The epilogue of a step (the identity for a View).
Epilogue epilogue_of(const Step& step);

// "view", "copy", "reduce", "contract", "gemm" or "route".
std::string_view step_kind(const Step& step);
// The dtype a step computes in (its source's): what decides its peak FLOP/s.
DType compute_dtype(const Plan& plan, const Step& step);

// The planner's choices that compare sizes, rather than ask whether an extent is 0 or 1: the order in which
// einsum contracts three or more operands (contraction_order), and which operands a GEMM copies (the
// fewest bytes). Given one (PlanOptions::choices), the planner asks it at each such choice which of the
// alternatives to take - every alternative it could take for some sizes - so that `einc aot` can plan a
// call every way its `?` extents could make the planner choose (cli/aot_corpus.cpp). It walks every
// sequence of answers, depth first:
//
//   PlanChoices choices;
//   do plans.push_back(plan(bound, inputs, {.choices = &choices})); while (choices.next());
class PlanChoices {
public:
    // Which of `count` (>= 1) alternatives to take at the next choice of this walk.
    std::size_t choose(std::size_t count);
    // Starts the next walk, which answers differently; false when every sequence has been walked.
    bool next();

private:
    struct Taken {
        std::size_t index, count;
    };
    std::vector<Taken> taken_;  // the answers of the walk, in order
    std::size_t depth_ = 0;     // the choices asked so far in this walk
};

struct PlanOptions {
    bool require_view = false;            // fail unless every result is a view of an input
    bool contiguous = false;              // never return a view: materialise every result
    std::vector<Shape> output_strides{};  // strides of caller-provided outputs; empty: row-major results
    // out = alpha * result + beta * out for every output; not the identity: no View results
    Epilogue epilogue{};
    // The largest intermediate of an einsum's contraction order, in bytes (0: no limit; the output is
    // not an intermediate): the cheapest order within it, or an error naming the smallest peak there is.
    std::size_t max_intermediate_bytes = 0;
    PlanChoices* choices = nullptr;  // given: it takes the choices that compare sizes (above)
    // einsum: the complex inputs it reads as their conjugates, by index (the gradients of complex
    // einsums: d(a) = d(out) * conj(b), as torch's)
    std::vector<bool> conjugated{};
};

// @pre inputs[i].shape == bound.inputs[i].shape() and all inputs share one dtype
// @post executing the steps in order gives, for every output, the bound expression's value
Plan plan(const Bound& bound, std::span<const TensorSpec> inputs, const PlanOptions& options = {});

// The gradient of a reduce max, min or prod (`forward`) as one Route step: inputs x (as the forward's
// input) and the output's gradient `grad` (the forward output's shape); output x's gradient, row-major
// or with options.output_strides. Its Plan::op is the forward's (reduce).
Plan plan_route(const Bound& forward, const TensorSpec& x, const TensorSpec& grad,
                const PlanOptions& options = {});

struct Schedule;
// The plan as `einc explain` prints it, with each step's roofline on `device` and the workspace of its
// schedule (stable for goldens).
std::string print_plan(const Plan& plan, const Schedule& schedule, const DeviceModel& device);
// The same as JSON, with each step's strategy, accumulator, scratch and kernels.
std::string plan_to_json(const Plan& plan, const Schedule& schedule, const DeviceModel& device);
// `text` as a JSON string: quoted and escaped, as plan_to_json writes strings.
std::string json_quoted(std::string_view text);

}  // namespace einc
