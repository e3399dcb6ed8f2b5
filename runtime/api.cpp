#include "runtime/api.hpp"

#include <fmt/format.h>

#include "compiler/bind.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"

namespace einc {
namespace {

std::vector<Tensor> call(const CallRef& ref, std::span<const Input> inputs, const Options& options) {
    const Program program = default_plan_cache().get(ref, inputs, options);
    return program.run(inputs, options.stream);
}

// A call run into `out`, with any strides: planned for out's layout, found in the cache by it and by the
// options (alpha and beta are part of the plan).
void into(const CallRef& ref, std::span<const Input> inputs, const TensorView& out, const Options& options) {
    Options written = options;
    written.contiguous = true;
    const Program program =
        default_plan_cache().get(ref, inputs, written, std::span<const TensorView>(&out, 1));
    program.run(inputs, std::span<const TensorView>(&out, 1), options.stream);
}

// A list of tensors as einops takes it: stacked along a new first axis. Stacking is packing with `*`
// first: each tensor contributes no dims to it, so it becomes the new axis.
Tensor stack(std::span<const Input> xs, std::string_view op) {
    if (xs.empty()) throw Error(ErrorKind::usage, fmt::format("{} of an empty list of tensors", op));
    std::string elements;
    for (std::size_t d = 0; d < xs[0].view().rank(); ++d) elements += fmt::format(" d{}", d);
    return pack(xs, "*" + elements).tensor;
}

Tensor single(Op op, std::string_view pattern, Reduction reduction, const AxisSizes& sizes,
              std::span<const Input> inputs, const Options& options, bool compact = false) {
    return call(CallRef{op, pattern, reduction, &sizes, compact, nullptr}, inputs, options).front();
}

}  // namespace

Tensor rearrange(const Input& x, std::string_view pattern, const AxisSizes& sizes, const Options& options) {
    return single(Op::rearrange, pattern, Reduction::none, sizes, {&x, 1}, options);
}

Tensor rearrange(std::span<const Input> xs, std::string_view pattern, const AxisSizes& sizes,
                 const Options& options) {
    return rearrange(stack(xs, "rearrange"), pattern, sizes, options);
}

Tensor reduce(std::span<const Input> xs, std::string_view pattern, Reduction reduction,
              const AxisSizes& sizes, const Options& options) {
    return reduce(stack(xs, "reduce"), pattern, reduction, sizes, options);
}

Tensor repeat(std::span<const Input> xs, std::string_view pattern, const AxisSizes& sizes,
              const Options& options) {
    return repeat(stack(xs, "repeat"), pattern, sizes, options);
}

Tensor reduce(const Input& x, std::string_view pattern, Reduction reduction, const AxisSizes& sizes,
              const Options& options) {
    return single(Op::reduce, pattern, reduction, sizes, {&x, 1}, options);
}

Tensor reduce(const Input& x, std::string_view pattern, std::string_view reduction, const AxisSizes& sizes,
              const Options& options) {
    return reduce(x, pattern, reduction_or_error(reduction), sizes, options);
}

Tensor repeat(const Input& x, std::string_view pattern, const AxisSizes& sizes, const Options& options) {
    return single(Op::repeat, pattern, Reduction::none, sizes, {&x, 1}, options);
}

Tensor einsum(std::string_view pattern, std::span<const Input> operands, const Options& options) {
    return single(Op::einsum, pattern, Reduction::none, {}, operands, options);
}

Tensor einsum(Subscripts subscripts, std::span<const Input> operands, const Options& options) {
    return single(Op::einsum, subscripts.text, Reduction::none, {}, operands, options, /*compact=*/true);
}

Packed pack(std::span<const Input> tensors, std::string_view pattern, const Options& options) {
    static const AxisSizes none;
    const Program program = default_plan_cache().get(
        CallRef{Op::pack, pattern, Reduction::none, &none, false, nullptr}, tensors, options);
    return Packed{program.run(tensors, options.stream).front(), packed_shapes(program.bound())};
}

Packed pack(std::initializer_list<Input> tensors, std::string_view pattern, const Options& options) {
    return pack(std::span<const Input>(tensors.begin(), tensors.size()), pattern, options);
}

std::vector<Tensor> unpack(const Input& x, const std::vector<Shape>& packed_shapes, std::string_view pattern,
                           const Options& options) {
    static const AxisSizes none;
    return call(CallRef{Op::unpack, pattern, Reduction::none, &none, false, &packed_shapes}, {&x, 1},
                options);
}

void rearrange_into(const Input& x, std::string_view pattern, const TensorView& out, const AxisSizes& sizes,
                    const Options& options) {
    into(CallRef{Op::rearrange, pattern, Reduction::none, &sizes, false, nullptr}, {&x, 1}, out, options);
}

void reduce_into(const Input& x, std::string_view pattern, Reduction reduction, const TensorView& out,
                 const AxisSizes& sizes, const Options& options) {
    into(CallRef{Op::reduce, pattern, reduction, &sizes, false, nullptr}, {&x, 1}, out, options);
}

void repeat_into(const Input& x, std::string_view pattern, const TensorView& out, const AxisSizes& sizes,
                 const Options& options) {
    into(CallRef{Op::repeat, pattern, Reduction::none, &sizes, false, nullptr}, {&x, 1}, out, options);
}

void einsum_into(std::string_view pattern, std::span<const Input> operands, const TensorView& out,
                 const Options& options) {
    static const AxisSizes none;
    into(CallRef{Op::einsum, pattern, Reduction::none, &none, false, nullptr}, operands, out, options);
}

void pack_into(std::span<const Input> tensors, std::string_view pattern, const TensorView& out,
               const Options& options) {
    static const AxisSizes none;
    into(CallRef{Op::pack, pattern, Reduction::none, &none, false, nullptr}, tensors, out, options);
}

AxisSizes parse_shape(const TensorView& x, std::string_view pattern) {
    const Call c{Op::parse_shape, std::string(pattern), Reduction::none, {}, false, {}};
    const std::vector<Shape> shapes{x.shape};
    return parsed_shape(bind(c, shapes));
}

}  // namespace einc
