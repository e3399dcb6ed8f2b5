// Internal to compiler/: the state plan() builds a Plan in, shared by plan.cpp (data movement,
// reductions, pack/unpack) and plan_einsum.cpp.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "compiler/plan.hpp"

namespace einc::detail {

// A tensor the plan can read: a buffer, and the stride of every elementary axis in it (indexed by
// AxisId; 0 where the axis is absent or broadcast).
struct Operand {
    Buffer buffer;
    std::int64_t offset = 0;
    std::vector<std::int64_t> strides;
    std::vector<AxisId> axes;  // the axes it varies along, in the order of its dims
    DType dtype = DType::f32;
};

class PlanBuilder {
public:
    PlanBuilder(const Bound& bound, std::span<const TensorSpec> inputs, const PlanOptions& options);

    const Bound& bound;
    std::span<const TensorSpec> inputs;
    const PlanOptions& options;
    DType input_dtype = DType::f32;  // what the inputs are computed in: their promoted dtype
    DType output_dtype = DType::f32;
    Plan plan;

    Operand input(std::size_t i) const;  // in its own dtype
    // `operand` in `dtype`: itself, or a temporary it is converted into by a copy (`why` says why).
    Operand converted(const Operand& operand, DType dtype, const std::string& why);
    // A complex operand's conjugate, in a temporary: its real parts copied, its imaginary parts negated.
    Operand conjugated(const Operand& operand, const std::string& why);
    Operand output(std::size_t k) const;  // where output k is written (its planned strides)
    // A new row-major temporary over `axes` (in that order).
    Operand temporary(const std::vector<AxisId>& axes, DType dtype);

    Layout layout_of(std::span<const AxisId> axes, const Operand& operand) const;
    std::int64_t size_of_axes(std::span<const AxisId> axes) const;
    std::string axis_names(std::span<const AxisId> axes) const;  // "h w c"
    const TensorSpec& spec(Buffer buffer) const;

    void add(Step step, std::string why);  // with its cost (step_cost)

    // Steps over one index space (layouts canonicalized here).
    void copy(Access src, Access dst, std::string why, Epilogue epilogue = {});  // (a temporary's: kept)
    void reduce(Reduction op, Access src, Access dst, std::string why);
    void contract(std::vector<Access> srcs, Access dst, std::string why);
};

void plan_einsum(PlanBuilder& builder);

// The steps that compute on complex values rewritten to compute on their parts (plan_complex.cpp).
void compute_complex_on_parts(Plan& plan);
// The product of a complex input `in` over the reduced axes into `out`: halved again and again by
// elementwise products (complex multiplication has no real reduction to run on the parts).
void plan_complex_product(PlanBuilder& builder, const Operand& in, const Operand& out);
// A complex buffer's access as one of its parts (Buffer::parts): offset and strides doubled, then the
// modes `added`.
Access parts_of(const Access& access, std::initializer_list<Mode> added);

// The axes of each dim of an operand, and the stride of every elementary axis in it when its dims have
// `dim_strides` (0 for absent axes; an axis in two dims, a diagonal, gets the sum).
std::vector<std::vector<AxisId>> dim_axes_of(const BoundOperand& operand);
std::vector<AxisId>
axes_of(const std::vector<std::vector<AxisId>>& dims);  // each distinct axis, in order of appearance
std::vector<std::int64_t> axis_strides(const Bound& bound, const std::vector<std::vector<AxisId>>& dims,
                                       const Shape& dim_strides);

// Moves `source` into output `k` over the output's axes: a View of an input when every output dim is
// a mode of the source's memory and views are allowed, a Copy otherwise.
void move_to_output(PlanBuilder& builder, const Operand& source, std::uint32_t k, const std::string& what);

}  // namespace einc::detail
