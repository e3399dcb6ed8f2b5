// Random calls for differential tests: valid einops patterns of every operation, with inputs laid out
// at random in memory - permuted, sliced (padded strides), broadcast (stride 0) and reversed (negative
// strides) - filled with small integers, so that float results are exact wherever no division happens.
#pragma once

#include <random>
#include <span>
#include <string>
#include <vector>

#include "compiler/bound.hpp"
#include "compiler/call.hpp"
#include "compiler/plan.hpp"
#include "runtime/tensor.hpp"

namespace einc::testing {

struct RandomCase {
    Call call;
    DType dtype = DType::f32;
    std::vector<Tensor> storage;     // the buffers the inputs live in: input k in storage k
    std::vector<TensorView> inputs;  // views into them, possibly non-contiguous
    std::string describe() const;    // the call, the shapes and strides: printed when a check fails
};

// A random valid call of `op` on inputs of `dtype` (einsum not of fp8).
RandomCase random_case(std::mt19937& rng, Op op, DType dtype);
// Likewise, each input of a dtype drawn from `dtypes` (the same small integers in each: exact in all).
RandomCase random_mixed_case(std::mt19937& rng, Op op, std::span<const DType> dtypes);

// A call bound to the inputs' shapes and planned for their layouts (throws einc::Error as bind and plan do).
struct Planned {
    Bound bound;
    Plan plan;
};
Planned bind_and_plan(const Call& call, std::span<const TensorView> inputs, const PlanOptions& options = {});

// Whether two results hold the same values (row-major order), exactly for integers and bool, within a
// tolerance for floats: 1e-6 relative for f32/f64, 2e-2 for the narrow floats. NaN equals NaN.
bool same_values(const TensorView& got, const TensorView& expected, std::string* difference = nullptr);

}  // namespace einc::testing
