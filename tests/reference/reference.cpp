#include "tests/reference/reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <type_traits>

#include "grammar/diagnostic.hpp"
#include "runtime/narrow_float.hpp"
#include "tests/reference/elements.hpp"

namespace einc::reference {
namespace {

using namespace detail;

// The current value of every elementary axis, indexed by AxisId.
using AxisValues = std::vector<std::int64_t>;

// ------------------------------------------------------------------------------------------------
// Iterating over axis values, and mapping them to each operand's indices
// ------------------------------------------------------------------------------------------------

// Calls visit() once for every combination of values of `axes` (each axis in [0, size); the first
// varies slowest), with the combination written into `values`. No call if an axis has size 0.
template <typename Visit>
void for_each_combination(const Bound& bound, std::span<const AxisId> axes, AxisValues& values,
                          const Visit& visit) {
    if (axes.empty()) {
        visit();
        return;
    }
    const AxisId first = axes.front();
    for (std::int64_t v = 0; v < bound.size(first); ++v) {
        values[static_cast<std::size_t>(first)] = v;
        for_each_combination(bound, axes.subspan(1), values, visit);
    }
}

// The distinct axes of an operand, in the order they first appear (an einsum diagonal repeats one).
std::vector<AxisId> axes_of(const BoundOperand& operand) {
    std::vector<AxisId> axes;
    for (const BoundDim& dim : operand.dims)
        for (const AxisId a : dim.axes)
            if (std::find(axes.begin(), axes.end(), a) == axes.end()) axes.push_back(a);
    return axes;
}

// The row-major flattening of the values of `axes`: `(h w)` at h=1, w=2 with w=8 is 1*8 + 2 = 10.
std::int64_t flat_index(const Bound& bound, const std::vector<AxisId>& axes, const AxisValues& values) {
    std::int64_t index = 0;
    for (const AxisId a : axes) index = index * bound.size(a) + values[static_cast<std::size_t>(a)];
    return index;
}

// The index into each dim of an operand (a dim without axes, like `1` or a broadcast one, is 0). (Not a
// std::vector: the interpreter visits every element, and an allocation for each made it malloc-bound.)
Shape indices_of(const Bound& bound, const BoundOperand& operand, const AxisValues& values) {
    Shape indices;
    for (const BoundDim& dim : operand.dims) indices.push_back(flat_index(bound, dim.axes, values));
    return indices;
}

std::int64_t product_of_sizes(const Bound& bound, const std::vector<AxisId>& axes) {
    std::int64_t product = 1;
    for (const AxisId a : axes) product *= bound.size(a);
    return product;
}

// ------------------------------------------------------------------------------------------------
// The operations
// ------------------------------------------------------------------------------------------------

// rearrange, repeat: every output element is one input element; axes only in the output (repeat's new
// axes) do not index the input, so its value repeats along them.
Tensor move_data(const Bound& bound, const TensorView& input) {
    EINC_ASSERT(bound.reduced.empty() && bound.outputs.size() == 1);
    const BoundOperand& output = bound.outputs.front();
    Tensor result = Tensor::empty(input.dtype, output.shape());
    AxisValues values(bound.axes.size());
    for_each_combination(bound, axes_of(output), values, [&] {
        copy_element(element_at(result, indices_of(bound, output, values)),
                     element_at(input, indices_of(bound, bound.inputs.front(), values)), input.dtype);
    });
    return result;
}

// reduce: each output element folds the input over every combination of the reduced axes.
template <typename Accumulator>
Tensor reduce(const Bound& bound, const TensorView& input, DType result_type) {
    const BoundOperand& output = bound.outputs.front();
    Tensor result = Tensor::empty(result_type, output.shape());
    const bool extremum = bound.reduction == Reduction::max || bound.reduction == Reduction::min;
    if (extremum && product_of_sizes(bound, bound.reduced) == 0 && result.numel() > 0) {
        std::string empty_axis;
        for (const AxisId a : bound.reduced)
            if (bound.size(a) == 0) empty_axis = bound.axis(a).name;
        throw Error(ErrorKind::shape, fmt::format("{} of an empty set: the reduced axis '{}' has length 0",
                                                  name_of(bound.reduction), empty_axis))
            .help("max and min have no identity; sum, prod, any and all do");
    }
    AxisValues values(bound.axes.size());
    for_each_combination(bound, axes_of(output), values, [&] {
        std::vector<Accumulator> reduced_values;
        for_each_combination(bound, bound.reduced, values, [&] {
            const std::byte* element = element_at(input, indices_of(bound, bound.inputs.front(), values));
            reduced_values.push_back(load<Accumulator>(element, input.dtype));
        });
        store(element_at(result, indices_of(bound, output, values)), result_type,
              fold(bound.reduction, reduced_values));
    });
    return result;
}

// einsum: each output element is the sum, over the summed axes, of the product of every operand's element.
template <typename Accumulator>
Tensor einsum(const Bound& bound, std::span<const TensorView> inputs, DType result_type) {
    const BoundOperand& output = bound.outputs.front();
    Tensor result = Tensor::empty(result_type, output.shape());
    AxisValues values(bound.axes.size());
    for_each_combination(bound, axes_of(output), values, [&] {
        Accumulator total{0};
        for_each_combination(bound, bound.reduced, values, [&] {
            Accumulator product{1};
            for (std::size_t i = 0; i < inputs.size(); ++i) {
                const std::byte* element = element_at(inputs[i], indices_of(bound, bound.inputs[i], values));
                product = multiply(product, load<Accumulator>(element, inputs[i].dtype));
            }
            total = add(total, product);
        });
        store(element_at(result, indices_of(bound, output, values)), result_type, total);
    });
    return result;
}

// pack: input i fills positions [offsets[i], offsets[i] + its part's length) of the concatenated dim,
// at offset + the row-major flattening of its part axes; the other dims match one to one.
// Inputs of another dtype than the result's are converted (numpy.concatenate's promotion).
Tensor pack(const Bound& bound, std::span<const TensorView> inputs, DType result_type) {
    const Concat& concat = *bound.concat;
    const BoundOperand& output = bound.outputs.front();
    EINC_ASSERT(concat.parts.size() == inputs.size() && output.dims[concat.dim].axes.empty());
    Tensor result = Tensor::empty(result_type, output.shape());
    AxisValues values(bound.axes.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        for_each_combination(bound, axes_of(bound.inputs[i]), values, [&] {
            Shape packed = indices_of(bound, output, values);
            packed[concat.dim] = concat.offsets[i] + flat_index(bound, concat.parts[i], values);
            const std::byte* element = element_at(inputs[i], indices_of(bound, bound.inputs[i], values));
            if (inputs[i].dtype == result_type)
                copy_element(element_at(result, packed), element, result_type);
            else if (is_complex(result_type))
                store_complex(element_at(result, packed), result_type, load_real(element, inputs[i].dtype),
                              load_imaginary(element, inputs[i].dtype));
            else if (is_floating(result_type))
                store(element_at(result, packed), result_type, load_real(element, inputs[i].dtype));
            else
                store(element_at(result, packed), result_type, load_integer(element, inputs[i].dtype));
        });
    }
    return result;
}

// unpack: the reverse of pack; output p is part p of the concatenated dim.
std::vector<Tensor> unpack(const Bound& bound, const TensorView& input) {
    const Concat& concat = *bound.concat;
    const BoundOperand& packed_operand = bound.inputs.front();
    EINC_ASSERT(concat.parts.size() == bound.outputs.size() && packed_operand.dims[concat.dim].axes.empty());
    std::vector<Tensor> results;
    AxisValues values(bound.axes.size());
    for (std::size_t p = 0; p < bound.outputs.size(); ++p) {
        const BoundOperand& output = bound.outputs[p];
        Tensor result = Tensor::empty(input.dtype, output.shape());
        for_each_combination(bound, axes_of(output), values, [&] {
            Shape packed = indices_of(bound, packed_operand, values);
            packed[concat.dim] = concat.offsets[p] + flat_index(bound, concat.parts[p], values);
            copy_element(element_at(result, indices_of(bound, output, values)), element_at(input, packed),
                         input.dtype);
        });
        results.push_back(std::move(result));
    }
    return results;
}

// ------------------------------------------------------------------------------------------------
// Checking what the caller passed
// ------------------------------------------------------------------------------------------------

void check_readable(const TensorView& view, std::string_view what) {
    if (view.device != Device::cpu)
        throw Error(ErrorKind::usage,
                    fmt::format("the reference interpreter reads CPU memory only, but {} is {}", what,
                                describe(view)));
    if (view.strides.size() != view.shape.size())
        throw Error(ErrorKind::usage, fmt::format("{} has {} dims but {} strides", what, view.shape.size(),
                                                  view.strides.size()));
    if (view.data == nullptr && view.numel() > 0)
        throw Error(ErrorKind::usage, fmt::format("{} has {} elements but no data", what, view.numel()));
}

void check_inputs(const Bound& bound, std::span<const TensorView> inputs) {
    if (inputs.size() != bound.inputs.size())
        throw Error(ErrorKind::usage, fmt::format("{} expects {} input tensor(s), but {} were given",
                                                  name_of(bound.op), bound.inputs.size(), inputs.size()));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const std::string what = fmt::format("input {}", i);
        check_readable(inputs[i], what);
        const Shape expected = bound.inputs[i].shape();
        if (inputs[i].shape != expected)
            throw Error(ErrorKind::shape,
                        fmt::format("input {} has shape {}, but the bound expression expects {}", i,
                                    format_shape(inputs[i].shape), format_shape(expected)));
    }
}

// Calls visit(indices) for every index of `shape`, in row-major order.
template <typename Visit>
void for_each_index(const Shape& shape, std::vector<std::int64_t>& indices, std::size_t dim,
                    const Visit& visit) {
    if (dim == shape.size()) {
        visit(indices);
        return;
    }
    for (indices[dim] = 0; indices[dim] < shape[dim]; ++indices[dim])
        for_each_index(shape, indices, dim + 1, visit);
}

}  // namespace

std::vector<Tensor> evaluate(const Bound& bound, std::span<const TensorView> inputs) {
    check_inputs(bound, inputs);
    if (bound.op == Op::parse_shape) return {};
    EINC_ASSERT(!inputs.empty());
    std::vector<DType> dtypes;
    for (const TensorView& input : inputs) dtypes.push_back(input.dtype);
    const DType input_type = promote_types(dtypes);  // (its rule is tested against numpy's table)
    const DType result_type = result_dtype(bound.op, bound.reduction, input_type, !bound.reduced.empty());
    // Integers and bool accumulate in int64 (u64 in uint64: it compares unsigned), floats (and means, as
    // numpy's) in double.
    const DType computed = is_floating(result_type) ? result_type : input_type;
    switch (bound.op) {
    case Op::rearrange:
    case Op::repeat: return {move_data(bound, inputs.front())};
    case Op::reduce:
        if (bound.reduced.empty()) return {move_data(bound, inputs.front())};  // einops: nothing to reduce
        return {with_value_type(
            computed, [&]<typename T>(T) { return reduce<T>(bound, inputs.front(), result_type); })};
    case Op::einsum:
        return {
            with_value_type(computed, [&]<typename T>(T) { return einsum<T>(bound, inputs, result_type); })};
    case Op::pack: return {pack(bound, inputs, result_type)};
    case Op::unpack: return unpack(bound, inputs.front());
    case Op::parse_shape: break;
    }
    EINC_ASSERT(false);
}

Tensor make_tensor(DType dtype, const Shape& shape, const std::vector<double>& values) {
    Tensor tensor = Tensor::empty(dtype, shape);
    const auto count = static_cast<std::size_t>(tensor.numel());
    if (is_complex(dtype) && values.size() == 2 * count) {  // (real, imaginary) pairs
        const bool narrow = dtype == DType::c64;
        for (std::size_t k = 0; k < values.size(); ++k) {
            auto* part = static_cast<std::byte*>(tensor.data()) + k * (narrow ? 4 : 8);
            narrow ? store_bytes(part, static_cast<float>(values[k])) : store_bytes(part, values[k]);
        }
        return tensor;
    }
    if (count != values.size())
        throw Error(ErrorKind::usage,
                    fmt::format("a tensor of shape {} has {} elements, but {} values were given",
                                format_shape(shape), tensor.numel(), values.size()));
    const std::size_t element_size = size_of(dtype);
    for (std::size_t k = 0; k < values.size(); ++k) {
        if (is_integer(dtype) &&
            !(values[k] >= -0x1p63 && values[k] < (dtype == DType::u64 ? 0x1p64 : 0x1p63)))
            throw Error(ErrorKind::usage,
                        fmt::format("{} is not an integer value for {}", values[k], name_of(dtype)));
        store_real(static_cast<std::byte*>(tensor.data()) + k * element_size, dtype, values[k]);
    }
    return tensor;
}

std::vector<double> values_of(const TensorView& view) {
    check_readable(view, "the view");
    std::vector<double> values;
    std::vector<std::int64_t> indices(view.rank());
    for_each_index(view.shape, indices, 0, [&](const std::vector<std::int64_t>& index) {
        const std::byte* element = element_at(view, index);
        values.push_back(load_real(element, view.dtype));
        if (is_complex(view.dtype)) values.push_back(load_imaginary(element, view.dtype));
    });
    return values;
}

}  // namespace einc::reference
