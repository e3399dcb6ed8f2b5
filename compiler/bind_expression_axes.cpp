// bind() for rearrange, reduce, repeat and einsum: collects each side's elementary axes - each name once,
// with the size given for it; one axis per anonymous length; the axes `...` stands for - and binds the
// dims of the inputs and the output over them.
#include <algorithm>
#include <fmt/format.h>
#include <tuple>

#include "compiler/bind_expression.hpp"
#include "compiler/checked.hpp"
#include "grammar/print.hpp"

namespace einc::detail {
namespace {

// Axis ids follow first appearance: the axes of `...`, then the inputs' dims in order, then the output's
// new axes (repeat).
class AxisCollector {
public:
    AxisCollector(const ExpressionContext& ctx, ExpressionBinding& binding) : ctx(ctx), binding(binding) {}

    void bind_inputs() {
        bind_ellipsis_axes();
        if (ctx.is_einsum()) bind_broadcast_names();
        for (std::size_t i = 0; i < ctx.pattern.inputs.size(); ++i) {
            const syntax::Operand& operand = ctx.pattern.inputs[i];
            BoundOperand bound{{}, operand.span};
            std::size_t at = 0;  // position in the shape
            for (const syntax::Dim& dim : operand.dims) {
                const bool is_ellipsis = !dim.grouped && as<syntax::Ellipsis>(dim.atoms.front());
                if (is_ellipsis) {
                    const std::size_t width = binding.ellipsis_widths[i];
                    for (std::size_t k = 0; k < width; ++k, ++at) {
                        const AxisId axis = binding.ellipsis_axes[binding.ellipsis_axes.size() - width + k];
                        const std::int64_t extent = ctx.shapes[i][at];
                        // A length-1 dim broadcast against a longer one has no axis: it does not vary.
                        bound.dims.push_back(extent == binding.bound.size(axis)
                                                 ? BoundDim{{axis}, extent, dim.span}
                                                 : BoundDim{{}, extent, dim.span});
                    }
                    continue;
                }
                BoundDim bound_dim{axes_of(dim), ctx.shapes[i][at++], dim.span};
                if (binding.broadcast_dims.contains({i, bound.dims.size()})) bound_dim.axes.clear();
                bound.dims.push_back(std::move(bound_dim));
            }
            binding.bound.inputs.push_back(std::move(bound));
        }
    }

    void bind_output() {
        const syntax::Operand& operand = ctx.output();
        BoundOperand bound{{}, operand.span};
        for (const syntax::Dim& dim : operand.dims) {
            if (!dim.grouped && as<syntax::Ellipsis>(dim.atoms.front())) {
                for (const AxisId e : binding.ellipsis_axes)
                    bound.dims.push_back(BoundDim{{e}, binding.bound.size(e), dim.span});
                continue;
            }
            BoundDim bound_dim{axes_of(dim), 1, dim.span};
            std::vector<std::int64_t> sizes;
            for (const AxisId a : bound_dim.axes) sizes.push_back(binding.bound.size(a));
            const auto extent = checked_product(sizes);
            if (!extent)
                throw ctx
                    .shape_error(fmt::format("the output dim '{}' has more elements than fit in 64 bits",
                                             to_string(dim)))
                    .at(ctx.text, dim.span);
            bound_dim.extent = *extent;
            bound.dims.push_back(std::move(bound_dim));
        }
        binding.bound.outputs.push_back(std::move(bound));
    }

private:
    AxisId add_axis(std::string name, std::optional<std::int64_t> size, AxisOrigin origin, syntax::Span span,
                    SizeSource source) {
        binding.bound.axes.push_back(Axis{std::move(name), size.value_or(-1), origin, span});
        binding.sources.push_back(source);
        return static_cast<AxisId>(binding.bound.axes.size() - 1);
    }

    AxisId named_axis(const syntax::Name& name) {
        if (const auto it = binding.named.find(name.text); it != binding.named.end()) return it->second;
        const AxisSize* given = ctx.given_size(name.text);
        const AxisId id =
            add_axis(name.text, given ? std::optional(given->size) : std::nullopt, AxisOrigin::named,
                     name.span, given ? SizeSource{SizeSource::given, 0, {}} : SizeSource{});
        binding.named.emplace(name.text, id);
        return id;
    }

    // The elementary axes of one dim (not an ellipsis dim): names, anonymous lengths; `1` adds none.
    std::vector<AxisId> axes_of(const syntax::Dim& dim) {
        std::vector<AxisId> axes;
        for (const syntax::Atom& atom : dim.atoms) {
            if (const auto* name = as<syntax::Name>(atom)) axes.push_back(named_axis(*name));
            if (const auto* number = as<syntax::Number>(atom); number && number->value != 1)
                axes.push_back(add_axis(anonymous_axis_name(*number), number->value, AxisOrigin::anonymous,
                                        number->span, {SizeSource::literal, 0, number->span}));
            if (as<syntax::Ellipsis>(atom))
                for (const AxisId e : binding.ellipsis_axes) axes.push_back(e);
        }
        return axes;
    }

    // The axes `...` stands for: as many as the widest input gives it; narrower inputs' dims align to
    // the right and broadcast where their length is 1 (numpy's rule, which einsum follows).
    void bind_ellipsis_axes() {
        std::size_t width = 0;
        std::vector<std::size_t> widths(ctx.pattern.inputs.size(), 0);
        const syntax::Ellipsis* first = nullptr;
        for (std::size_t i = 0; i < ctx.pattern.inputs.size(); ++i) {
            if (const syntax::Ellipsis* e = ellipsis_in(ctx.pattern.inputs[i])) {
                widths[i] = ctx.shapes[i].size() - dims_besides_ellipsis(ctx.pattern.inputs[i]);
                width = std::max(width, widths[i]);
                if (!first) first = e;
            }
        }
        for (std::size_t k = 0; k < width; ++k) {
            std::optional<std::int64_t> size;
            std::size_t size_from = 0;
            for (std::size_t i = 0; i < ctx.pattern.inputs.size(); ++i) {
                if (k + widths[i] < width) continue;  // this input's `...` is narrower
                const std::int64_t extent = ctx.shapes[i][ctx.ellipsis_position(i) + (k + widths[i] - width)];
                if (extent == 1) continue;
                if (size && *size != extent)
                    throw ctx
                        .shape_error(
                            fmt::format("'...' dims do not broadcast: {} has length {} where {} has {}",
                                        ctx.tensor_of(size_from), *size, ctx.tensor_of(i), extent))
                        .at(ctx.text, ellipsis_in(ctx.pattern.inputs[i])->span)
                        .also(ellipsis_in(ctx.pattern.inputs[size_from])->span)
                        .help("'...' dims line up from the right and must be equal or 1");
                size = extent;
                size_from = i;
            }
            binding.ellipsis_axes.push_back(add_axis(ellipsis_axis_name(k), size.value_or(1),
                                                     AxisOrigin::ellipsis, first->span,
                                                     {SizeSource::operand, size_from, first->span}));
        }
        binding.ellipsis_widths = std::move(widths);
        // numpy's einsum keeps the dims '...' matches; it refuses to drop them (reduce may).
        if (ctx.is_einsum() && width > 0 && !ellipsis_in(ctx.output()))
            throw ctx
                .shape_error(fmt::format("'...' stands for {} {} here, but the output has no '...'", width,
                                         width == 1 ? "dim" : "dims"))
                .at(ctx.text, first->span)
                .help("add '...' to the output; einsum does not sum over '...' dims (name them to sum them)");
    }

    // einsum broadcasts a lone axis of length 1 against the same axis elsewhere, as numpy and torch
    // do: `i j, i j` over 1x3 and 2x3 binds i=2, and the first operand does not vary along i.
    void bind_broadcast_names() {
        struct Seen {
            std::int64_t extent;
            std::size_t input;
            syntax::Span span;
        };
        std::map<std::string, Seen> lengths;
        std::vector<std::tuple<std::string, std::size_t, std::size_t, std::int64_t>> lone;
        for (std::size_t i = 0; i < ctx.pattern.inputs.size(); ++i) {
            std::map<std::string, Seen> own;  // a diagonal: numpy broadcasts across operands, not within one
            std::size_t at = 0;
            for (std::size_t d = 0; d < ctx.pattern.inputs[i].dims.size(); ++d) {
                const syntax::Dim& dim = ctx.pattern.inputs[i].dims[d];
                if (!dim.grouped && as<syntax::Ellipsis>(dim.atoms.front())) {
                    at += binding.ellipsis_widths[i];
                    continue;
                }
                const std::int64_t extent = ctx.shapes[i][at++];
                const auto* name =
                    dim.grouped || dim.atoms.size() != 1 ? nullptr : as<syntax::Name>(dim.atoms.front());
                if (!name) continue;
                if (const auto [it, inserted] = own.emplace(name->text, Seen{extent, i, name->span});
                    !inserted && it->second.extent != extent)
                    throw ctx
                        .shape_error(fmt::format("axis '{}' appears twice in {} with lengths {} and {}",
                                                 name->text, ctx.tensor_of(i), it->second.extent, extent))
                        .at(ctx.text, name->span)
                        .also(it->second.span)
                        .help("a repeated axis takes the diagonal, which needs dims of one length");
                lone.emplace_back(name->text, i, bound_position(i, d), extent);
                if (extent == 1) continue;
                const auto [it, inserted] = lengths.emplace(name->text, Seen{extent, i, name->span});
                if (!inserted && it->second.extent != extent)
                    throw ctx
                        .shape_error(fmt::format("axis '{}' has length {} in {} but {} in {}", name->text,
                                                 it->second.extent, ctx.tensor_of(it->second.input), extent,
                                                 ctx.tensor_of(i)))
                        .at(ctx.text, it->second.span)
                        .also(name->span)
                        .help("an axis has one length in every operand (or 1, to broadcast)");
            }
        }
        for (const auto& [name, input, position, extent] : lone) {
            const auto it = lengths.find(name);
            if (extent == 1 && it != lengths.end()) binding.broadcast_dims.insert({input, position});
        }
    }

    // Index of syntax dim `d` of input `i` among its bound dims (the ellipsis expands to several).
    std::size_t bound_position(std::size_t input, std::size_t d) const {
        const std::size_t ellipsis = ctx.ellipsis_position(input);
        return d > ellipsis ? d - 1 + binding.ellipsis_widths[input] : d;
    }

    const ExpressionContext& ctx;
    ExpressionBinding& binding;
};

}  // namespace

void bind_inputs(const ExpressionContext& ctx, ExpressionBinding& binding) {
    AxisCollector(ctx, binding).bind_inputs();
}

void bind_output(const ExpressionContext& ctx, ExpressionBinding& binding) {
    AxisCollector(ctx, binding).bind_output();
}

}  // namespace einc::detail
