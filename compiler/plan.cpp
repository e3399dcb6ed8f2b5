#include "compiler/plan.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <iterator>
#include <limits>

#include "compiler/canonicalize.hpp"
#include "compiler/checked.hpp"
#include "compiler/plan_builder.hpp"
#include "compiler/reduction.hpp"
#include "grammar/diagnostic.hpp"
#include "grammar/print.hpp"

namespace einc {

std::optional<std::uint32_t> Plan::view_source(std::size_t output) const {
    for (const PlanStep& step : steps)
        if (const auto* view = std::get_if<View>(&step.step); view && view->output == output)
            return view->source.buffer.index;
    return std::nullopt;
}

const TensorSpec& Plan::spec(Buffer buffer) const {
    switch (buffer.kind) {
    case Buffer::Kind::input: return inputs.at(buffer.index);
    case Buffer::Kind::output: return outputs.at(buffer.index);
    case Buffer::Kind::temporary: return temporaries.at(buffer.index);
    }
    EINC_ASSERT(false);
}

DType Plan::dtype_of(Buffer buffer) const {
    const DType dtype = spec(buffer).dtype;
    if (!buffer.parts) return dtype;
    EINC_ASSERT(is_complex(dtype));
    return real_part_of(dtype);
}

TensorSpec planned(TensorSpec spec) {
    const bool empty = std::find(spec.shape.begin(), spec.shape.end(), 0) != spec.shape.end();
    for (std::size_t d = 0; d < spec.shape.size() && d < spec.strides.size(); ++d)
        spec.strides[d] = planned_stride(spec.shape[d], spec.strides[d], empty);
    return spec;
}

std::int64_t TensorSpec::bytes() const {
    return saturating_mul(checked_product(shape).value_or(INT64_MAX),
                          static_cast<std::int64_t>(size_of(dtype)));
}

Epilogue epilogue_of(const Step& step) {
    return std::visit(
        Overloaded{[](const View&) { return Epilogue{}; }, [](const auto& s) { return s.epilogue; }}, step);
}

std::string_view step_kind(const Step& step) {
    static constexpr std::string_view kinds[] = {"view", "copy", "reduce", "contract", "gemm", "route"};
    static_assert(std::size(kinds) == std::variant_size_v<Step>, "one name per Step alternative");
    return kinds[step.index()];
}

DType compute_dtype(const Plan& plan, const Step& step) {
    const Buffer source =
        std::visit(Overloaded{
                       [](const View& view) { return view.source.buffer; },
                       [](const Copy& copy) { return copy.src.buffer; },
                       [](const Reduce& reduce) { return reduce.src.buffer; },
                       [](const Contract& contract) { return contract.srcs.front().buffer; },
                       [](const Gemm& gemm) { return gemm.a.buffer; },
                       [](const Route& route) { return route.src.buffer; },
                   },
                   step);
    return plan.dtype_of(source);
}

std::size_t PlanChoices::choose(std::size_t count) {
    EINC_ASSERT(count >= 1);
    if (depth_ == taken_.size()) taken_.push_back(Taken{0, count});
    // A walk replays the answers of the one before up to the choice it changes (planning is deterministic).
    EINC_ASSERT(taken_[depth_].count == count);
    return taken_[depth_++].index;
}

bool PlanChoices::next() {
    EINC_ASSERT(depth_ == taken_.size());  // a walk asks again every choice the one before it asked
    depth_ = 0;
    while (!taken_.empty() && ++taken_.back().index == taken_.back().count) taken_.pop_back();
    return !taken_.empty();
}

namespace detail {
namespace {

// Whether every offset a tensor of this shape and these strides reaches fits in 64 bits, counted in bytes
// (an empty tensor reaches none), so that no stride the plan derives from them, and no address an
// executor computes from them, overflows.
bool offsets_fit(const Shape& shape, const Shape& strides, std::size_t element_size) {
    if (checked_product(shape) == 0) return true;
    std::int64_t reach = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (strides[d] == std::numeric_limits<std::int64_t>::min()) return false;
        const auto span = checked_mul(shape[d] - 1, strides[d] < 0 ? -strides[d] : strides[d]);
        const auto sum = span ? checked_add(reach, *span) : std::nullopt;
        if (!sum) return false;
        reach = *sum;
    }
    return checked_mul(reach, static_cast<std::int64_t>(element_size)).has_value();
}

void check_offsets_fit(const TensorSpec& spec, std::string_view what, std::size_t index) {
    if (!offsets_fit(spec.shape, spec.strides, size_of(spec.dtype)))
        throw Error(ErrorKind::usage,
                    fmt::format("{} {} has strides that reach beyond 64 bits of offset: ({}):({})", what,
                                index, fmt::join(spec.shape, ","), fmt::join(spec.strides, ",")));
}

}  // namespace

PlanBuilder::PlanBuilder(const Bound& bound_, std::span<const TensorSpec> inputs_,
                         const PlanOptions& options_)
    : bound(bound_), inputs(inputs_), options(options_) {
    EINC_ASSERT(inputs.size() == bound.inputs.size());
    plan.op = bound.op;
    plan.inputs.assign(inputs.begin(), inputs.end());
    std::vector<DType> dtypes;
    for (const TensorSpec& spec : inputs) dtypes.push_back(spec.dtype);
    if (!dtypes.empty()) input_dtype = promote_types(dtypes);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        EINC_ASSERT(inputs[i].shape == bound.inputs[i].shape());
        EINC_ASSERT(inputs[i].strides.size() == inputs[i].shape.size());
        check_offsets_fit(inputs[i], "input", i);
    }
    output_dtype = bound.op == Op::parse_shape
                       ? input_dtype
                       : result_dtype(bound.op, bound.reduction, input_dtype, !bound.reduced.empty());
    const Epilogue& e = options.epilogue;
    if (!std::isfinite(e.alpha) || !std::isfinite(e.beta))
        throw Error(ErrorKind::usage,
                    fmt::format("alpha ({}) and beta ({}) must be finite", e.alpha, e.beta));
    // (Complex results take alpha and beta on their parts, but for a real part packed into one: its
    // imaginary part would be scaled by alpha too.)
    if (is_complex(output_dtype) && !e.identity() && bound.op == Op::pack &&
        !std::all_of(dtypes.begin(), dtypes.end(), [](DType d) { return is_complex(d); }))
        throw Error(
            ErrorKind::unsupported,
            fmt::format("alpha and beta on a pack of real parts into a {} result are not supported yet",
                        name_of(output_dtype)));
    // Integer results are computed in integers: a fractional factor has no exact meaning there.
    if (!is_floating(output_dtype) && !is_complex(output_dtype) &&
        (e.alpha != std::trunc(e.alpha) || e.beta != std::trunc(e.beta) || std::fabs(e.alpha) >= 0x1p63 ||
         std::fabs(e.beta) >= 0x1p63))
        throw Error(ErrorKind::usage,
                    fmt::format("alpha ({}) and beta ({}) must be whole numbers for a {} result", e.alpha,
                                e.beta, name_of(output_dtype)))
            .help("convert the inputs to a floating dtype first, or scale by whole numbers");
    if (!options.output_strides.empty() && options.output_strides.size() != bound.outputs.size())
        throw Error(ErrorKind::usage,
                    fmt::format("{} given for {}",
                                counted(static_cast<std::int64_t>(options.output_strides.size()), "output"),
                                counted(static_cast<std::int64_t>(bound.outputs.size()), "result")));
    for (std::size_t k = 0; k < bound.outputs.size(); ++k) {
        const Shape shape = bound.outputs[k].shape();
        Shape strides = options.output_strides.empty() ? row_major_strides(shape) : options.output_strides[k];
        if (strides.size() != shape.size())
            throw Error(ErrorKind::shape, fmt::format("output {} has {} strides for a {}-dim result", k,
                                                      strides.size(), shape.size()));
        plan.outputs.push_back(TensorSpec{output_dtype, shape, std::move(strides)});
        check_offsets_fit(plan.outputs.back(), "output", k);
    }
}

// The axes of each dim of output k. The concatenated dim of a pack has none (Bound::concat describes
// it); packing a single tensor makes it exactly the flattening of that tensor's part.
std::vector<std::vector<AxisId>> output_dim_axes(const Bound& bound, std::uint32_t k) {
    std::vector<std::vector<AxisId>> dims;
    for (const BoundDim& dim : bound.outputs[k].dims) dims.push_back(dim.axes);
    if (bound.op == Op::pack && bound.concat->parts.size() == 1)
        dims[bound.concat->dim] = bound.concat->parts[0];
    return dims;
}

// The stride of every elementary axis in an operand whose dims have `dim_strides`: a dim (h w) with
// stride s gives w the stride s and h the stride s * size(w); an axis in two dims (a diagonal) gets
// the sum of both. Computed modulo 2^64: the strides of axes of length 2 or more fit (offsets_fit),
// and those of length 1 (or of an empty tensor) are never stepped along, whatever they are.
std::vector<std::int64_t> axis_strides(const Bound& bound, const std::vector<std::vector<AxisId>>& dims,
                                       const Shape& dim_strides) {
    std::vector<std::uint64_t> strides(bound.axes.size(), 0);
    for (std::size_t d = 0; d < dims.size(); ++d) {
        auto stride = static_cast<std::uint64_t>(dim_strides[d]);
        const auto& axes = dims[d];
        for (std::size_t k = axes.size(); k-- > 0;) {
            strides[static_cast<std::size_t>(axes[k])] += stride;
            stride *= static_cast<std::uint64_t>(bound.size(axes[k]));
        }
    }
    return {strides.begin(), strides.end()};  // two's complement: the same values where they fit
}

std::vector<std::vector<AxisId>> dim_axes_of(const BoundOperand& operand) {
    std::vector<std::vector<AxisId>> dims;
    for (const BoundDim& dim : operand.dims) dims.push_back(dim.axes);
    return dims;
}

std::vector<AxisId> axes_of(const std::vector<std::vector<AxisId>>& dims) {
    std::vector<AxisId> axes;
    for (const auto& dim : dims)
        for (const AxisId a : dim)
            if (std::find(axes.begin(), axes.end(), a) == axes.end()) axes.push_back(a);
    return axes;
}

Operand PlanBuilder::input(std::size_t i) const {
    const auto dims = dim_axes_of(bound.inputs[i]);
    return Operand{Buffer{Buffer::Kind::input, static_cast<std::uint32_t>(i)}, 0,
                   axis_strides(bound, dims, inputs[i].strides), axes_of(dims), inputs[i].dtype};
}

Operand PlanBuilder::converted(const Operand& operand, DType dtype, const std::string& why) {
    if (operand.dtype == dtype) return operand;
    const Operand converted = temporary(operand.axes, dtype);
    copy(Access{operand.buffer, operand.offset, layout_of(operand.axes, operand)},
         Access{converted.buffer, converted.offset, layout_of(operand.axes, converted)},
         fmt::format("convert {} to {}: {}", name_of(operand.dtype), name_of(dtype), why));
    return converted;
}

Operand PlanBuilder::conjugated(const Operand& operand, const std::string& why) {
    EINC_ASSERT(is_complex(operand.dtype));
    const Operand conjugate = temporary(operand.axes, operand.dtype);
    const Access src = parts_of(Access{operand.buffer, operand.offset, layout_of(operand.axes, operand)}, {});
    const Access dst =
        parts_of(Access{conjugate.buffer, conjugate.offset, layout_of(operand.axes, conjugate)}, {});
    copy(src, dst, fmt::format("conjugate: the real parts, {}", why));
    Access im = src, negated = dst;
    ++im.offset;
    ++negated.offset;
    copy(im, negated, fmt::format("conjugate: the imaginary parts negated, {}", why), Epilogue{-1, 0});
    return conjugate;
}

Operand PlanBuilder::output(std::size_t k) const {
    const auto dims = output_dim_axes(bound, static_cast<std::uint32_t>(k));
    return Operand{Buffer{Buffer::Kind::output, static_cast<std::uint32_t>(k)}, 0,
                   axis_strides(bound, dims, plan.outputs[k].strides), axes_of(dims), output_dtype};
}

Operand PlanBuilder::temporary(const std::vector<AxisId>& axes, DType dtype) {
    Shape shape;
    for (const AxisId a : axes) shape.push_back(bound.size(a));
    const Shape strides = row_major_strides(shape);
    Operand operand{Buffer{Buffer::Kind::temporary, static_cast<std::uint32_t>(plan.temporaries.size())}, 0,
                    std::vector<std::int64_t>(bound.axes.size(), 0), axes, dtype};
    for (std::size_t k = 0; k < axes.size(); ++k)
        operand.strides[static_cast<std::size_t>(axes[k])] = strides[k];
    plan.temporaries.push_back(TensorSpec{dtype, shape, strides});
    return operand;
}

Layout PlanBuilder::layout_of(std::span<const AxisId> axes, const Operand& operand) const {
    Layout layout;
    for (const AxisId a : axes)
        layout.modes.push_back(Mode{bound.size(a), operand.strides[static_cast<std::size_t>(a)]});
    return layout;
}

std::int64_t PlanBuilder::size_of_axes(std::span<const AxisId> axes) const {
    std::vector<std::int64_t> sizes;
    for (const AxisId a : axes) sizes.push_back(bound.size(a));
    const std::optional<std::int64_t> n = checked_product(sizes);
    EINC_ASSERT(n.has_value());  // the binder refused sizes whose products overflow
    return *n;
}

std::string PlanBuilder::axis_names(std::span<const AxisId> axes) const {
    std::vector<std::string> names;
    for (const AxisId a : axes) names.push_back(bound.axis(a).name);
    return fmt::format("{}", fmt::join(names, " "));
}

const TensorSpec& PlanBuilder::spec(Buffer buffer) const {
    return plan.spec(buffer);
}

void PlanBuilder::add(Step step, std::string why) {
    // The one place the caller's epilogue is attached: to every step that writes an output (each output
    // element is written by exactly one step), never to one writing a temporary.
    std::visit(Overloaded{[](View&) {},
                          [&](Gemm& gemm) {
                              if (gemm.c.buffer.kind == Buffer::Kind::output)
                                  gemm.epilogue = options.epilogue;
                          },
                          [&](auto& s) {
                              if (s.dst.buffer.kind == Buffer::Kind::output) s.epilogue = options.epilogue;
                          }},
               step);
    const Cost cost = step_cost(plan, step);
    plan.total += cost;
    plan.steps.push_back(PlanStep{std::move(step), cost, std::move(why)});
}

void PlanBuilder::copy(Access src, Access dst, std::string why, Epilogue epilogue) {
    std::array<Layout, 2> layouts{dst.layout, src.layout};
    canonicalize(layouts);
    dst.layout = std::move(layouts[0]);
    src.layout = std::move(layouts[1]);
    add(Copy{std::move(src), std::move(dst), epilogue}, std::move(why));
}

void PlanBuilder::reduce(Reduction op, Access src, Access dst, std::string why) {
    std::array<Layout, 2> layouts{dst.layout, src.layout};
    canonicalize(layouts);
    dst.layout = std::move(layouts[0]);
    src.layout = std::move(layouts[1]);
    add(Reduce{op, std::move(src), std::move(dst), {}}, std::move(why));
}

void PlanBuilder::contract(std::vector<Access> srcs, Access dst, std::string why) {
    std::vector<Layout> layouts{dst.layout};
    for (const Access& src : srcs) layouts.push_back(src.layout);
    canonicalize(layouts);
    dst.layout = std::move(layouts[0]);
    for (std::size_t k = 0; k < srcs.size(); ++k) srcs[k].layout = std::move(layouts[k + 1]);
    add(Contract{std::move(srcs), std::move(dst), {}}, std::move(why));
}

// ---- data movement --------------------------------------------------------------------------------

void move_to_output(PlanBuilder& b, const Operand& source, std::uint32_t k, const std::string& what) {
    const BoundOperand& out = b.bound.outputs[k];
    const std::vector<std::vector<AxisId>> dim_axes = output_dim_axes(b.bound, k);
    std::vector<AxisId> axes;  // output axes in order
    for (const auto& dim : dim_axes) axes.insert(axes.end(), dim.begin(), dim.end());

    // Which output dim, if any, is not a single mode of the source's memory.
    std::optional<std::size_t> blocking_dim;
    Layout view;
    for (std::size_t d = 0; d < out.dims.size(); ++d) {
        const std::optional<Mode> mode = merge(b.layout_of(dim_axes[d], source).modes);
        if (!mode) {
            if (!blocking_dim) blocking_dim = d;
            continue;
        }
        view.modes.push_back(Mode{out.dims[d].extent, out.dims[d].extent == 1 ? 0 : mode->stride});
    }
    const bool can_view = !blocking_dim && source.buffer.kind == Buffer::Kind::input &&
                          source.dtype == b.output_dtype && b.options.output_strides.empty() &&
                          b.options.epilogue.identity();
    const auto describe_blocking = [&] {
        const std::vector<AxisId>& dim = dim_axes[*blocking_dim];
        std::vector<std::string> strides;
        for (const AxisId a : dim)
            strides.push_back(
                fmt::format("{}:{}", b.bound.axis(a).name, source.strides[static_cast<std::size_t>(a)]));
        return fmt::format(
            "output dim {} ({}) needs axes {} adjacent in memory in that order, but their strides are {}",
            *blocking_dim, b.axis_names(dim), b.axis_names(dim), fmt::join(strides, ", "));
    };
    if (b.options.require_view && !(can_view && !b.options.contiguous)) {
        Error error(ErrorKind::pattern, fmt::format("{} can't be a view of its input", name_of(b.bound.op)));
        if (blocking_dim) {
            error.at(b.bound.pattern.text, out.dims[*blocking_dim].span).help(describe_blocking());
        } else if (source.buffer.kind != Buffer::Kind::input) {
            error.help("the result is computed, not moved");
        } else if (source.dtype != b.output_dtype) {
            error.help(fmt::format("the result's dtype ({}) differs from the input's ({})",
                                   name_of(b.output_dtype), name_of(source.dtype)));
        } else if (!b.options.epilogue.identity()) {
            error.help("alpha and beta scale the result into its output: it is written");
        } else {
            error.help("an output was given: the result is written into it");
        }
        throw error;
    }
    if (can_view && !b.options.contiguous) {
        b.plan.outputs[k].strides = view.strides();
        b.add(View{k, Access{source.buffer, source.offset, view}},
              fmt::format("{}: every output dim is a stride of the input; no data moves", what));
        return;
    }
    std::string why = what;
    if (blocking_dim)
        why += ": " + describe_blocking();
    else if (!b.bound.broadcast.empty())
        why += fmt::format(": materialise the repetition along {}", b.axis_names(b.bound.broadcast));
    else if (source.buffer.kind == Buffer::Kind::input && source.dtype == b.output_dtype &&
             b.options.output_strides.empty())
        why += b.options.epilogue.identity() ? ": a fresh result was asked for (contiguous)"
                                             : ": scaled into its output (alpha, beta)";
    const Operand dst = b.output(k);
    b.copy(Access{source.buffer, source.offset, b.layout_of(axes, source)},
           Access{dst.buffer, dst.offset, b.layout_of(axes, dst)}, std::move(why));
}

namespace {

void plan_reduce(PlanBuilder& b) {
    Operand in = b.input(0);
    if (b.size_of_axes(b.bound.reduced) == 1 && b.output_dtype == b.input_dtype) {  // moves data at most
        move_to_output(b, in, 0,
                       b.bound.reduced.empty() ? std::string("reduce over no axis (as einops, a rearrange)")
                                               : fmt::format("{} over length 1", name_of(b.bound.reduction)));
        return;
    }
    const Operand out = b.output(0);
    std::vector<AxisId> axes;
    for (const BoundDim& dim : b.bound.outputs[0].dims)
        axes.insert(axes.end(), dim.axes.begin(), dim.axes.end());
    axes.insert(axes.end(), b.bound.reduced.begin(), b.bound.reduced.end());
    Layout dst = b.layout_of(axes, out);  // reduced axes are absent from the output: stride 0
    if (b.options.require_view)
        throw Error(ErrorKind::pattern, "reduce can't be a view of its input").help("it computes new values");
    // mean of integers or bool: numpy sums them as f64 and divides. Integers no kernel is built for are
    // computed in a wider one (arithmetic_dtype), the result converted back where it is not already the
    // output's dtype (max of u8 gives u8; sum of u8 gives u64, computed in i64: the same bits).
    const Reduction op = b.bound.reduction;
    if (op == Reduction::prod && is_complex(in.dtype)) return plan_complex_product(b, in, out);
    if (info_of(op).result == ResultRule::floating)
        in = b.converted(in, b.output_dtype,
                         fmt::format("numpy's {} of {} values", name_of(op), name_of(in.dtype)));
    else
        in = b.converted(
            in, arithmetic_dtype(in.dtype),
            fmt::format("einc computes {} in {}", name_of(in.dtype), name_of(arithmetic_dtype(in.dtype))));
    const DType computed = reduced_dtype(op, in.dtype);
    const Operand result = computed == b.output_dtype ? out : b.temporary(out.axes, computed);
    if (result.buffer.kind != Buffer::Kind::output) dst = b.layout_of(axes, result);
    b.reduce(op, Access{in.buffer, 0, b.layout_of(axes, in)}, Access{result.buffer, 0, std::move(dst)},
             fmt::format("{} over {}", name_of(op), b.axis_names(b.bound.reduced)));
    if (result.buffer.kind != Buffer::Kind::output)
        move_to_output(b, result, 0, fmt::format("{} to {}", name_of(computed), name_of(b.output_dtype)));
}

// The strides of a part's axes within the concatenated dim of stride `stride`: row-major, as a group
// `(h w)` lays out h and w.
void lay_out_part(const Bound& bound, const std::vector<AxisId>& part, std::int64_t stride,
                  Operand& operand) {
    std::vector<std::int64_t> extents;
    for (const AxisId a : part) extents.push_back(bound.size(a));
    const std::vector<Mode> modes = split(Mode{0, stride}, extents);
    for (std::size_t k = 0; k < part.size(); ++k)
        operand.strides[static_cast<std::size_t>(part[k])] = modes[k].stride;
}

// pack: every input is copied into its slice of the concatenated dim.
void plan_pack(PlanBuilder& b) {
    const Concat& concat = *b.bound.concat;
    if (b.bound.inputs.size() == 1) {
        move_to_output(b, b.input(0), 0, "pack of one tensor");
        return;
    }
    if (b.options.require_view)
        throw Error(ErrorKind::pattern, "pack of several tensors can't be a view")
            .help("it concatenates them into new memory");
    const std::int64_t concat_stride = b.plan.outputs[0].strides[concat.dim];
    for (std::size_t i = 0; i < b.bound.inputs.size(); ++i) {
        const Operand in = b.input(i);
        Operand dst = b.output(0);  // the concat dim has no axes: give the part's axes their strides in it
        const std::vector<AxisId>& part = concat.parts[i];
        lay_out_part(b.bound, part, concat_stride, dst);
        dst.offset = concat.offsets[i] * concat_stride;
        std::vector<AxisId> axes;
        for (const BoundDim& dim : b.bound.inputs[i].dims)
            axes.insert(axes.end(), dim.axes.begin(), dim.axes.end());
        if (b.size_of_axes(axes) == 0) continue;
        b.copy(Access{in.buffer, 0, b.layout_of(axes, in)},
               Access{dst.buffer, dst.offset, b.layout_of(axes, dst)},
               fmt::format("tensor {} into [{}, {}) of dim {}", i, concat.offsets[i],
                           concat.offsets[i] + b.size_of_axes(part), concat.dim));
    }
}

// unpack: every part is a slice of the input: always a view, unless a fresh result is asked for.
void plan_unpack(PlanBuilder& b) {
    const Concat& concat = *b.bound.concat;
    const Operand packed = b.input(0);
    const std::int64_t concat_stride = b.inputs[0].strides[concat.dim];
    for (std::size_t p = 0; p < b.bound.outputs.size(); ++p) {
        Operand source = packed;
        const std::vector<AxisId>& part = concat.parts[p];
        lay_out_part(b.bound, part, concat_stride, source);
        source.offset = concat.offsets[p] * concat_stride;
        move_to_output(b, source, static_cast<std::uint32_t>(p),
                       fmt::format("part {}: [{}, {}) of dim {}", p, concat.offsets[p],
                                   concat.offsets[p] + b.size_of_axes(part), concat.dim));
    }
}

}  // namespace
}  // namespace detail

Plan plan_route(const Bound& forward, const TensorSpec& x, const TensorSpec& grad,
                const PlanOptions& options) {
    EINC_ASSERT(forward.op == Op::reduce && forward.inputs.size() == 1 && forward.outputs.size() == 1);
    EINC_ASSERT(x.shape == forward.inputs[0].shape() && grad.shape == forward.outputs[0].shape());
    // The gradient has x's shape: plan a call whose output is x's operand again, with grad a second input.
    Bound gradient = forward;
    gradient.outputs = forward.inputs;
    const std::array<TensorSpec, 1> inputs{x};
    detail::PlanBuilder b(gradient, inputs, options);
    b.plan.inputs.push_back(grad);
    if (x.dtype != grad.dtype)
        throw Error(ErrorKind::usage,
                    fmt::format("the gradient of reduce {} is {}, its input {}", name_of(forward.reduction),
                                name_of(grad.dtype), name_of(x.dtype)));
    const std::vector<std::int64_t> grad_strides =
        detail::axis_strides(forward, detail::dim_axes_of(forward.outputs[0]), grad.strides);
    std::vector<AxisId> kept;
    for (const BoundDim& dim : forward.outputs[0].dims)
        kept.insert(kept.end(), dim.axes.begin(), dim.axes.end());
    const detail::Operand in = b.input(0), out = b.output(0);
    const Buffer grad_buffer{Buffer::Kind::input, 1};
    if (b.size_of_axes(kept) == 0 || b.size_of_axes(forward.reduced) == 0)
        return std::move(b.plan);  // no element to write
    // Kept and reduced modes are canonicalized apart: the boundary between them is the step's meaning.
    const auto nest = [&](const std::vector<AxisId>& axes) {
        std::array<Layout, 3> layouts{b.layout_of(axes, out), b.layout_of(axes, in), Layout{}};
        for (const AxisId a : axes)
            layouts[2].modes.push_back(Mode{forward.size(a), grad_strides[static_cast<std::size_t>(a)]});
        canonicalize(layouts);
        return layouts;
    };
    const auto outer = nest(kept), inner = nest(forward.reduced);
    Route route{forward.reduction,
                Access{in.buffer, 0, outer[1]},
                Access{grad_buffer, 0, outer[2]},
                Access{out.buffer, 0, outer[0]},
                static_cast<std::uint32_t>(outer[0].modes.size()),
                {}};
    for (const Mode& m : inner[0].modes) route.dst.layout.modes.push_back(m);
    for (const Mode& m : inner[1].modes) route.src.layout.modes.push_back(m);
    for (const Mode& m : inner[2].modes) route.grad.layout.modes.push_back(Mode{m.extent, 0});
    b.add(std::move(route), fmt::format("the gradient of {} over {}: {}", name_of(forward.reduction),
                                        b.axis_names(forward.reduced),
                                        forward.reduction == Reduction::prod
                                            ? "the product of the other elements of each group"
                                            : "to the elements that attain it, ties sharing evenly"));
    return std::move(b.plan);
}

Plan plan(const Bound& bound, std::span<const TensorSpec> inputs, const PlanOptions& options) {
    detail::PlanBuilder builder(bound, inputs, options);
    switch (bound.op) {
    case Op::rearrange:
    case Op::repeat:
        detail::move_to_output(builder, builder.input(0), 0, fmt::format("{}", name_of(bound.op)));
        break;
    case Op::reduce: detail::plan_reduce(builder); break;
    case Op::einsum: detail::plan_einsum(builder); break;
    case Op::pack: detail::plan_pack(builder); break;
    case Op::unpack: detail::plan_unpack(builder); break;
    case Op::parse_shape: break;
    }
    detail::compute_complex_on_parts(builder.plan);
    return std::move(builder.plan);
}

}  // namespace einc
