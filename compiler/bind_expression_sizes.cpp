// bind() for rearrange, reduce, repeat and einsum: the checks of the tensors' shapes, and the inference of
// every axis size from the inputs' dims.
#include <algorithm>
#include <fmt/format.h>
#include <string_view>
#include <unordered_set>

#include "compiler/bind_expression.hpp"
#include "compiler/checked.hpp"
#include "grammar/print.hpp"

namespace einc::detail {
namespace {

// Each input dim is one equation: the product of its axes' sizes is its length. Solve them until
// nothing changes; then every dim must be consistent and no size unknown.
class SizeInference {
public:
    SizeInference(const ExpressionContext& ctx, ExpressionBinding& binding) : ctx(ctx), binding(binding) {}

    void infer_sizes() {
        for (bool progress = true; progress;) {
            progress = false;
            for (std::size_t i = 0; i < binding.bound.inputs.size(); ++i)
                for (std::size_t d = 0; d < binding.bound.inputs[i].dims.size(); ++d) progress |= solve(i, d);
        }
        for (std::size_t i = 0; i < binding.bound.inputs.size(); ++i)
            for (const BoundDim& dim : binding.bound.inputs[i].dims) {
                std::vector<std::string> unknown;
                std::unordered_set<std::string_view> listed;
                for (const AxisId a : dim.axes)
                    if (!known(a) && listed.insert(binding.bound.axis(a).name).second)
                        unknown.push_back(binding.bound.axis(a).name);
                if (unknown.size() > 1)
                    throw ctx
                        .shape_error(fmt::format("can't infer the sizes of {} from one dim of length {}",
                                                 quoted_list(unknown), dim.extent))
                        .at(ctx.text, dim.span)
                        .help(fmt::format("give the size of all but one of them, e.g. {}=...",
                                          unknown.front()));
                if (unknown.size() == 1)  // the axis appears twice in this one group
                    throw ctx
                        .shape_error(fmt::format(
                            "can't infer the size of '{}': it appears twice in one group", unknown.front()))
                        .at(ctx.text, dim.span)
                        .help(fmt::format("give its size, e.g. {}=...", unknown.front()));
            }
    }

private:
    bool known(AxisId id) const { return binding.bound.axes[static_cast<std::size_t>(id)].size >= 0; }

    // One equation; returns whether it determined a size.
    bool solve(std::size_t input, std::size_t d) {
        const BoundDim& dim = binding.bound.inputs[input].dims[d];
        std::int64_t known_product = 1;
        std::optional<AxisId> unknown;
        int unknown_count = 0;
        for (const AxisId a : dim.axes) {
            if (known(a)) {
                const auto product = checked_mul(known_product, binding.bound.size(a));
                if (!product) throw ctx.shape_error("axis sizes overflow 64 bits").at(ctx.text, dim.span);
                known_product = *product;
            } else {
                unknown = a;
                ++unknown_count;
            }
        }
        if (unknown_count == 0) {
            if (known_product != dim.extent) report_mismatch(input, d, known_product);
            return false;
        }
        if (unknown_count > 1) return false;
        const Axis& axis = binding.bound.axis(*unknown);
        if (known_product == 0)
            throw ctx
                .shape_error(fmt::format(
                    "can't infer the size of '{}': the other axes of its group multiply to 0", axis.name))
                .at(ctx.text, dim.span)
                .help(fmt::format("give its size, e.g. {}=...", axis.name));
        if (dim.extent % known_product != 0)
            throw ctx
                .shape_error(fmt::format("can't divide {} dim {} of length {} into chunks of {}",
                                         ctx.possessive(input), d, dim.extent, known_product))
                .at(ctx.text, dim.span)
                .help(fmt::format("the length of {} must be a multiple of {}",
                                  to_string(pattern_dim(input, d)), known_product));
        binding.bound.axes[static_cast<std::size_t>(*unknown)].size = dim.extent / known_product;
        binding.sources[static_cast<std::size_t>(*unknown)] = {SizeSource::operand, input, axis.span};
        return true;
    }

    // The dim of the pattern that bound dim `bound_dim` of an input stands for (`...` stands for several).
    const syntax::Dim& pattern_dim(std::size_t input, std::size_t bound_dim) const {
        const auto& dims = ctx.pattern.inputs[input].dims;
        const std::size_t ellipsis = ctx.ellipsis_position(input);
        if (bound_dim < ellipsis) return dims[bound_dim];
        const std::size_t width = binding.ellipsis_widths[input];
        if (bound_dim < ellipsis + width) return dims[ellipsis];
        return dims[bound_dim - width + 1];
    }

    [[noreturn]] void report_mismatch(std::size_t input, std::size_t d, std::int64_t expected) const {
        const BoundDim& dim = binding.bound.inputs[input].dims[d];
        const syntax::Dim& written = pattern_dim(input, d);
        if (dim.axes.empty())
            throw ctx
                .shape_error(fmt::format("'{}' needs a dim of length 1, but {} dim {} has length {}",
                                         to_string(written), ctx.possessive(input), d, dim.extent))
                .at(ctx.text, dim.span)
                .help("a unit axis matches only length 1");
        if (dim.axes.size() == 1 && !written.grouped) {
            const Axis& axis = binding.bound.axis(dim.axes.front());
            const SizeSource& source = binding.sources[static_cast<std::size_t>(dim.axes.front())];
            if (source.kind == SizeSource::given)
                throw ctx
                    .shape_error(fmt::format("axis '{}' is given size {}, but {} dim {} has length {}",
                                             axis.name, expected, ctx.possessive(input), d, dim.extent))
                    .at(ctx.text, written.span)
                    .help(fmt::format("the shape says {}={}: give that size, or leave it out", axis.name,
                                      dim.extent));
            if (source.kind == SizeSource::literal)
                throw ctx
                    .shape_error(fmt::format("'{}' needs a dim of length {}, but {} dim {} has length {}",
                                             to_string(written), expected, ctx.possessive(input), d,
                                             dim.extent))
                    .at(ctx.text, written.span)
                    .help("an anonymous axis matches only a dim of its length");
            throw ctx
                .shape_error(fmt::format("axis '{}' has length {} in {} but {} in {}", axis.name, expected,
                                         ctx.tensor_of(source.input), dim.extent, ctx.tensor_of(input)))
                .at(ctx.text, source.span)
                .also(written.span)
                .help("an axis has one length in every operand");
        }
        std::vector<std::string> factors;
        for (const AxisId a : dim.axes)
            factors.push_back(fmt::format("{}={}", binding.bound.axis(a).name, binding.bound.size(a)));
        throw ctx
            .shape_error(fmt::format("'{}' has length {} ({}), but {} dim {} has length {}",
                                     to_string(written), expected, fmt::join(factors, " * "),
                                     ctx.possessive(input), d, dim.extent))
            .at(ctx.text, written.span)
            .help("the sizes in a group multiply to the dim's length: give one size fewer and einc infers "
                  "the last");
    }

    const ExpressionContext& ctx;
    ExpressionBinding& binding;
};

}  // namespace

// Each tensor in turn: its lengths, then its rank against its operand.
void check_shapes(const ExpressionContext& ctx) {
    for (std::size_t i = 0; i < ctx.shapes.size(); ++i) {
        ctx.tensors.check_lengths(i);
        const std::string whose = fmt::format(" for {}{}", ctx.is_einsum() ? "" : "the ", ctx.side_of(i));
        check_rank(
            ctx.tensors, i, ctx.pattern.inputs[i], ctx.text, whose,
            fmt::format("write one dim for each of the {} dims of {}, or use '...' for the dims not named",
                        ctx.shapes[i].size(), ctx.tensor_of(i)));
    }
}

void infer_sizes(const ExpressionContext& ctx, ExpressionBinding& binding) {
    SizeInference(ctx, binding).infer_sizes();
}

// Every tensor's axes fit (lengths_fit), not only its dims: a group `(b c)` of length 0 can hide
// b = 2^63-1 beside a dim a = 4, and the planner multiplies the lengths of axes.
void check_axes_fit(const ExpressionContext& ctx, const Bound& bound) {
    const auto check = [&](const BoundOperand& operand, const std::string& what) {
        std::vector<std::int64_t> sizes;
        for (const BoundDim& dim : operand.dims)
            for (const AxisId a : dim.axes) sizes.push_back(bound.size(a));
        if (!lengths_fit(sizes))
            throw ctx.shape_error(too_many_elements(what, sizes)).at(ctx.text, operand.span);
    };
    for (std::size_t i = 0; i < bound.inputs.size(); ++i) check(bound.inputs[i], ctx.tensor_of(i));
    check(bound.outputs[0], "the output");
}

// max and min have no identity: reducing an axis of length 0 has no value (numpy refuses it, and
// einops with it, even where the output is empty).
void check_empty_reductions(const ExpressionContext& ctx, const Bound& bound) {
    if (ctx.call.reduction != Reduction::max && ctx.call.reduction != Reduction::min) return;
    for (const AxisId a : bound.reduced) {
        const Axis& axis = bound.axis(a);
        if (axis.size != 0) continue;
        throw ctx
            .shape_error(fmt::format("{} of an empty set: the reduced axis '{}' has length 0",
                                     name_of(ctx.call.reduction), axis.name))
            .at(ctx.text, axis.span)
            .help("max and min have no identity, so an empty set has no value; sum, prod, any and all "
                  "have one");
    }
}

}  // namespace einc::detail
