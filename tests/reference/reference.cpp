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

namespace einc::reference {
namespace {

// The current value of every elementary axis, indexed by AxisId.
using AxisValues = std::vector<std::int64_t>;

// ------------------------------------------------------------------------------------------------
// One element: where it is, and its value
// ------------------------------------------------------------------------------------------------

// Element (i0, i1, ...) of a view lies at data + sum(ik * strides[k]) elements.
std::byte* element_at(const TensorView& view, const std::vector<std::int64_t>& indices) {
    EINC_ASSERT(indices.size() == view.rank());
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < indices.size(); ++d) {
        EINC_ASSERT(indices[d] >= 0 && indices[d] < view.shape[d]);
        offset += indices[d] * view.strides[d];
    }
    return static_cast<std::byte*>(view.data) + offset * static_cast<std::int64_t>(size_of(view.dtype));
}

// memcpy: a strided view over a byte buffer promises no alignment.
template <typename T>
T load_bytes(const std::byte* element) {
    T value;
    std::memcpy(&value, element, sizeof value);
    return value;
}

template <typename T>
void store_bytes(std::byte* element, T value) {
    std::memcpy(element, &value, sizeof value);
}

// Data movement copies bytes: NaN payloads, signed zeros and fp8 encodings survive as they are.
void copy_element(std::byte* to, const std::byte* from, DType dtype) {
    std::memcpy(to, from, size_of(dtype));
}

// Any element as a double; exact for every dtype but i64 beyond 2^53.
double load_real(const std::byte* element, DType dtype) {
    switch (dtype) {
    case DType::f64: return load_bytes<double>(element);
    case DType::f32: return load_bytes<float>(element);
    case DType::f16: return f16_to_f32(load_bytes<std::uint16_t>(element));
    case DType::bf16: return bf16_to_f32(load_bytes<std::uint16_t>(element));
    case DType::f8e4m3: return f8e4m3_to_f32(load_bytes<std::uint8_t>(element));
    case DType::f8e5m2: return f8e5m2_to_f32(load_bytes<std::uint8_t>(element));
    case DType::i8: return load_bytes<std::int8_t>(element);
    case DType::i32: return load_bytes<std::int32_t>(element);
    case DType::i64: return static_cast<double>(load_bytes<std::int64_t>(element));
    case DType::boolean: return load_bytes<std::uint8_t>(element) != 0 ? 1.0 : 0.0;
    }
    EINC_ASSERT(false);
}

// An integer or bool element as int64 (bool: any nonzero byte is true).
std::int64_t load_integer(const std::byte* element, DType dtype) {
    switch (dtype) {
    case DType::i8: return load_bytes<std::int8_t>(element);
    case DType::i32: return load_bytes<std::int32_t>(element);
    case DType::i64: return load_bytes<std::int64_t>(element);
    case DType::boolean: return load_bytes<std::uint8_t>(element) != 0 ? 1 : 0;
    default: break;
    }
    EINC_ASSERT(false);
}

// Rounds to float "to odd": toward zero, then the last mantissa bit set if anything was dropped. Rounding
// that float to nearest once more, to a format with at most 22 significant bits (f16, bf16, fp8), gives
// exactly the double rounded to nearest in that format; going double -> float -> f16 by rounding to
// nearest twice can be off by one ulp when the first rounding lands on a tie.
float round_to_odd(double value) {
    float rounded = static_cast<float>(value);
    if (std::isnan(value) || static_cast<double>(rounded) == value) return rounded;
    if (std::fabs(static_cast<double>(rounded)) > std::fabs(value)) rounded = std::nextafter(rounded, 0.0f);
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(rounded) | 1u);
}

void store_integer(std::byte* element, DType dtype, std::int64_t value);

// Stores a double, rounded to nearest. Integer dtypes truncate and wrap; the value must lie in int64.
void store_real(std::byte* element, DType dtype, double value) {
    switch (dtype) {
    case DType::f64: store_bytes(element, value); return;
    case DType::f32: store_bytes(element, static_cast<float>(value)); return;
    case DType::f16: store_bytes(element, f32_to_f16(round_to_odd(value))); return;
    case DType::bf16: store_bytes(element, f32_to_bf16(round_to_odd(value))); return;
    case DType::f8e4m3: store_bytes(element, f32_to_f8e4m3(round_to_odd(value))); return;
    case DType::f8e5m2: store_bytes(element, f32_to_f8e5m2(round_to_odd(value))); return;
    case DType::boolean: store_bytes(element, static_cast<std::uint8_t>(value != 0.0)); return;
    case DType::i8:
    case DType::i32:
    case DType::i64: {
        // 2^63 is exactly representable; anything at or past it (or NaN) has no int64 value.
        EINC_ASSERT(value >= -0x1p63 && value < 0x1p63);
        store_integer(element, dtype, static_cast<std::int64_t>(value));
        return;
    }
    }
    EINC_ASSERT(false);
}

// Stores an int64: integers wrap (C++20 conversions are modular), bool is value != 0, floats round.
void store_integer(std::byte* element, DType dtype, std::int64_t value) {
    switch (dtype) {
    case DType::i8: store_bytes(element, static_cast<std::int8_t>(value)); return;
    case DType::i32: store_bytes(element, static_cast<std::int32_t>(value)); return;
    case DType::i64: store_bytes(element, value); return;
    case DType::boolean: store_bytes(element, static_cast<std::uint8_t>(value != 0)); return;
    default: store_real(element, dtype, static_cast<double>(value)); return;
    }
}

// ------------------------------------------------------------------------------------------------
// Arithmetic in the two accumulator types: int64 (integers and bool) and double (floats)
// ------------------------------------------------------------------------------------------------

template <typename T>
T load(const std::byte* element, DType dtype) {
    if constexpr (std::is_same_v<T, double>) return load_real(element, dtype);
    else return load_integer(element, dtype);
}

void store(std::byte* element, DType dtype, double value) { store_real(element, dtype, value); }
void store(std::byte* element, DType dtype, std::int64_t value) { store_integer(element, dtype, value); }

// Integers wrap around as two's complement, without the undefined behaviour of signed overflow.
std::int64_t add(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t multiply(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}
double add(double a, double b) { return a + b; }
double multiply(double a, double b) { return a * b; }

bool is_nan(double value) { return std::isnan(value); }
bool is_nan(std::int64_t) { return false; }

// One reduction over the values of a reduced set (which may be empty, except for max and min).
template <typename T>
T fold(Reduction reduction, const std::vector<T>& values) {
    const auto nonzero = [](T v) { return v != T{0}; };  // NaN counts as nonzero, as in numpy
    switch (reduction) {
    case Reduction::sum: {
        T total{0};
        for (const T v : values) total = add(total, v);
        return total;
    }
    case Reduction::mean:
        if constexpr (std::is_same_v<T, double>) {
            if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
            return fold(Reduction::sum, values) / static_cast<double>(values.size());
        }
        break;  // result_dtype rejects the mean of integers
    case Reduction::prod: {
        T total{1};
        for (const T v : values) total = multiply(total, v);
        return total;
    }
    case Reduction::max:
    case Reduction::min: {
        EINC_ASSERT(!values.empty());
        T best = values.front();
        for (const T v : values) {
            if (is_nan(v)) return v;  // NaN propagates, as numpy's max does
            best = reduction == Reduction::max ? std::max(best, v) : std::min(best, v);
        }
        return best;
    }
    case Reduction::any: return std::any_of(values.begin(), values.end(), nonzero) ? T{1} : T{0};
    case Reduction::all: return std::all_of(values.begin(), values.end(), nonzero) ? T{1} : T{0};
    case Reduction::none: break;
    }
    EINC_ASSERT(false);
}

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

// The index into each dim of an operand (a dim without axes, like `1` or a broadcast one, is 0).
std::vector<std::int64_t> indices_of(const Bound& bound, const BoundOperand& operand,
                                     const AxisValues& values) {
    std::vector<std::int64_t> indices;
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
Tensor pack(const Bound& bound, std::span<const TensorView> inputs) {
    const Concat& concat = *bound.concat;
    const BoundOperand& output = bound.outputs.front();
    EINC_ASSERT(concat.parts.size() == inputs.size() && output.dims[concat.dim].axes.empty());
    Tensor result = Tensor::empty(inputs.front().dtype, output.shape());
    AxisValues values(bound.axes.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        for_each_combination(bound, axes_of(bound.inputs[i]), values, [&] {
            std::vector<std::int64_t> packed = indices_of(bound, output, values);
            packed[concat.dim] = concat.offsets[i] + flat_index(bound, concat.parts[i], values);
            copy_element(element_at(result, packed),
                         element_at(inputs[i], indices_of(bound, bound.inputs[i], values)), inputs[i].dtype);
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
            std::vector<std::int64_t> packed = indices_of(bound, packed_operand, values);
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
        if (inputs[i].dtype != inputs.front().dtype)
            throw Error(ErrorKind::usage,
                        fmt::format("input {} is {} but input 0 is {}: all inputs must share one dtype", i,
                                    name_of(inputs[i].dtype), name_of(inputs.front().dtype)));
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
    const DType input_type = inputs.front().dtype;
    const DType result_type = result_dtype(bound.op, bound.reduction, input_type);
    // Integers and bool accumulate in int64, floats in double.
    const bool real = is_floating(input_type);
    switch (bound.op) {
    case Op::rearrange:
    case Op::repeat: return {move_data(bound, inputs.front())};
    case Op::reduce: return {real ? reduce<double>(bound, inputs.front(), result_type)
                     : reduce<std::int64_t>(bound, inputs.front(), result_type)};
    case Op::einsum: return {real ? einsum<double>(bound, inputs, result_type)
                     : einsum<std::int64_t>(bound, inputs, result_type)};
    case Op::pack: return {pack(bound, inputs)};
    case Op::unpack: return unpack(bound, inputs.front());
    case Op::parse_shape: break;
    }
    EINC_ASSERT(false);
}

Tensor make_tensor(DType dtype, const Shape& shape, const std::vector<double>& values) {
    Tensor tensor = Tensor::empty(dtype, shape);
    if (static_cast<std::size_t>(tensor.numel()) != values.size())
        throw Error(ErrorKind::usage,
                    fmt::format("a tensor of shape {} has {} elements, but {} values were given",
                                format_shape(shape), tensor.numel(), values.size()));
    const std::size_t element_size = size_of(dtype);
    for (std::size_t k = 0; k < values.size(); ++k) {
        if (is_integer(dtype) && !(values[k] >= -0x1p63 && values[k] < 0x1p63))
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
        values.push_back(load_real(element_at(view, index), view.dtype));
    });
    return values;
}

}  // namespace einc::reference
