// The reference interpreter: evaluates a bound expression the slow, obvious way - one nested loop over
// every combination of elementary-axis values - so that every executor of einc (CPU plans, CUDA kernels,
// GEMMs) can be tested against it. It shares no logic with them: no layouts, no merged axes, no strides
// beyond reading element (i0, i1, ...) at sum(ik * strides[k]). Meant for small arrays (~1e5 elements).
//
// Semantics (einops 0.8 / numpy):
//   - an operand dim's index is the row-major flattening of its axes' values (no axes: index 0);
//   - rearrange, repeat, pack, unpack copy each element's bytes, so every dtype moves bit-exactly;
//   - reduce folds the reduced axes; integers and bool accumulate in int64 (wrapping), floats in double;
//   - einsum sums, over the reduced axes, the product of every operand's element, in the same precision;
//   - results are rounded once, to nearest, to result_dtype(op, reduction, input dtype), where the input
//     dtype is the operands' promoted one (promote_types: numpy's result_type); pack converts each part.
//   - mean of integers and bool: in double, as numpy (einops refuses it; einc follows numpy).
#pragma once

#include <span>
#include <vector>

#include "compiler/bound.hpp"
#include "compiler/plan.hpp"
#include "runtime/tensor.hpp"

namespace einc::reference {

// Evaluates `bound` on `inputs` (CPU memory, any strides incl. 0 and negative; any dtypes).
// Returns the outputs, row-major, of dtype result_dtype(bound.op, bound.reduction, promote_types(the
// inputs' dtypes), !bound.reduced.empty());
// none for parse_shape. Throws einc::Error when the inputs do not match the bound expression, and for
// max/min over an empty set.
std::vector<Tensor> evaluate(const Bound& bound, std::span<const TensorView> inputs);

// A row-major tensor holding `values` converted to `dtype`: floats rounded to nearest, integers by a
// wrapping cast (values must lie within int64), bool as v != 0; complex: one value a element (its real
// part, the imaginary 0) or two (real, imaginary) - as values_of gives them.
Tensor make_tensor(DType dtype, const Shape& shape, const std::vector<double>& values);

// The elements of `view` in row-major order, as double (exact except for i64 beyond 2^53); a complex
// element as two (real, imaginary).
std::vector<double> values_of(const TensorView& view);

// Runs `plan` step by step with naive loops over each step's index space - no executor code - so that
// the planner can be tested apart from the executors. Outputs made by View steps alias the inputs.
// @pre the plan's outputs are row-major (PlanOptions::output_strides empty)
struct PlanRun {
    std::vector<Tensor> storage;      // what the run allocated
    std::vector<TensorView> outputs;  // one per plan output
};
PlanRun run_plan(const Plan& plan, std::span<const TensorView> inputs);

}  // namespace einc::reference
