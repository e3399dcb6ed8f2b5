// The one-line calls, in einops' style. Each parses, binds and plans its pattern once per distinct
// (pattern, sizes, input layouts) - later calls find the plan in a cache - and runs it.
//
//   Tensor y = einc::rearrange(x, "b (h w) c -> b h w c", {{"h", 4}});
//   Tensor p = einc::reduce(x, "b c (h 2) (w 2) -> b c h w", einc::mean);
//   Tensor r = einc::repeat(x, "h w -> h w c", {{"c", 3}});
//   Tensor s = einc::einsum("b i d, b j d -> b i j", q, k);
//
// Views: a result the plan makes a View (a permutation, a split or merge of contiguous axes, a repeat
// along a new axis, an unpack) is returned as a view of the input's memory, as numpy would. If the
// input was an owning einc::Tensor the view keeps it alive; if it was a TensorView over your memory,
// keep that memory alive while you use the result. Options::contiguous forces a fresh copy.
#pragma once

#include <array>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "plan_cache.hpp"
#include "program.hpp"

namespace einc {

// Reductions by name, for einc::reduce(x, pattern, einc::mean).
inline constexpr Reduction sum = Reduction::sum;
inline constexpr Reduction mean = Reduction::mean;
inline constexpr Reduction max = Reduction::max;
inline constexpr Reduction min = Reduction::min;
inline constexpr Reduction prod = Reduction::prod;
inline constexpr Reduction any = Reduction::any;
inline constexpr Reduction all = Reduction::all;

Tensor rearrange(const Input& x, std::string_view pattern, const AxisSizes& sizes = {},
                 const Options& options = {});
// einops also takes a list of tensors (for rearrange, reduce and repeat), stacked along a new first axis.
Tensor rearrange(std::span<const Input> xs, std::string_view pattern, const AxisSizes& sizes = {},
                 const Options& options = {});
Tensor reduce(const Input& x, std::string_view pattern, Reduction reduction, const AxisSizes& sizes = {},
              const Options& options = {});
Tensor reduce(std::span<const Input> xs, std::string_view pattern, Reduction reduction,
              const AxisSizes& sizes = {}, const Options& options = {});
Tensor reduce(const Input& x, std::string_view pattern, std::string_view reduction,
              const AxisSizes& sizes = {}, const Options& options = {});
Tensor repeat(const Input& x, std::string_view pattern, const AxisSizes& sizes = {},
              const Options& options = {});
Tensor repeat(std::span<const Input> xs, std::string_view pattern, const AxisSizes& sizes = {},
              const Options& options = {});

// einsum(pattern, q, k); with options, einsum(pattern, {q, k}, options); or a span (a std::vector<Input>).
Tensor einsum(std::string_view pattern, std::span<const Input> operands, const Options& options = {});
inline Tensor einsum(std::string_view pattern, std::initializer_list<Input> operands,
                     const Options& options = {}) {
    return einsum(pattern, std::span<const Input>(operands.begin(), operands.size()), options);
}
template <typename... Operands>
requires(sizeof...(Operands) > 0 && (std::is_convertible_v<const Operands&, Input> && ...)) Tensor
    einsum(std::string_view pattern, const Operands&... operands) {
    const std::array<Input, sizeof...(Operands)> inputs{Input(operands)...};
    return einsum(pattern, std::span<const Input>(inputs), Options{});
}

// numpy/torch subscripts, asked for explicitly: einc::einsum(einc::Subscripts{"bid,bjd->bij"}, q, k).
struct Subscripts {
    std::string_view text;
};
Tensor einsum(Subscripts subscripts, std::span<const Input> operands, const Options& options = {});
inline Tensor einsum(Subscripts subscripts, std::initializer_list<Input> operands,
                     const Options& options = {}) {
    return einsum(subscripts, std::span<const Input>(operands.begin(), operands.size()), options);
}
template <typename... Operands>
requires(sizeof...(Operands) > 0 && (std::is_convertible_v<const Operands&, Input> && ...)) Tensor
    einsum(Subscripts subscripts, const Operands&... operands) {
    const std::array<Input, sizeof...(Operands)> inputs{Input(operands)...};
    return einsum(subscripts, std::span<const Input>(inputs), Options{});
}

struct Packed {
    Tensor tensor;
    std::vector<Shape> packed_shapes;  // what unpack needs to split it again
};
Packed pack(std::span<const Input> tensors, std::string_view pattern, const Options& options = {});
Packed pack(std::initializer_list<Input> tensors, std::string_view pattern, const Options& options = {});
std::vector<Tensor> unpack(const Input& x, const std::vector<Shape>& packed_shapes, std::string_view pattern,
                           const Options& options = {});

// The same calls writing into a tensor of yours - `out` of the result's dtype and shape, any strides (a
// slice, a column block, a KV-cache slot; the plan is made and cached for them) - as
// out = alpha * result + beta * out with Options::alpha and beta (defaults: out = result), e.g. a
// residual add: einc::einsum_into("b i d, d e -> b i e", {x, w}, y.view(), {.beta = 1}). The result is always
// written (never a view); beta == 0 never reads `out`. The plan (with alpha and beta) is cached as above.
void rearrange_into(const Input& x, std::string_view pattern, const TensorView& out,
                    const AxisSizes& sizes = {}, const Options& options = {});
void reduce_into(const Input& x, std::string_view pattern, Reduction reduction, const TensorView& out,
                 const AxisSizes& sizes = {}, const Options& options = {});
void repeat_into(const Input& x, std::string_view pattern, const TensorView& out, const AxisSizes& sizes = {},
                 const Options& options = {});
void einsum_into(std::string_view pattern, std::span<const Input> operands, const TensorView& out,
                 const Options& options = {});
inline void einsum_into(std::string_view pattern, std::initializer_list<Input> operands,
                        const TensorView& out, const Options& options = {}) {
    einsum_into(pattern, std::span<const Input>(operands.begin(), operands.size()), out, options);
}
void pack_into(std::span<const Input> tensors, std::string_view pattern, const TensorView& out,
               const Options& options = {});

// The sizes of the named axes, in pattern order (`_` skips a dim): pass them on as axis sizes.
AxisSizes parse_shape(const TensorView& x, std::string_view pattern);

}  // namespace einc
