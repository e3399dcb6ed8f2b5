// bind() for rearrange, reduce, repeat and einsum: checks the pattern against the operation, resolves
// groups and `...` into elementary axes, and infers every axis size from the operands' shapes and the
// sizes given. This file runs the stages in order and assembles the Bound; each stage has a file of its
// own (bind_expression.hpp).
#include "compiler/bind_expression.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace einc::detail {
namespace {

// numpy's rule for einsum without `->`: the broadcast dims, then every letter that appears exactly
// once, in alphabetical (ASCII) order.
syntax::Operand implicit_output(const syntax::Pattern& pattern) {
    std::map<std::string, int> count;
    bool any_ellipsis = false;
    for (const syntax::Operand& input : pattern.inputs) {
        for (const Occurrence& o : names_in(input)) ++count[o.name];
        any_ellipsis = any_ellipsis || ellipsis_in(input) != nullptr;
    }
    syntax::Operand output;
    const auto end = static_cast<std::uint32_t>(pattern.text.size());
    output.span = syntax::Span{end, end};
    if (any_ellipsis) output.dims.push_back(syntax::Dim{{syntax::Ellipsis{output.span}}, false, output.span});
    for (const auto& [name, n] : count)
        if (n == 1) output.dims.push_back(syntax::Dim{{syntax::Name{name, output.span}}, false, output.span});
    return output;
}

// What the operation makes of the axes: which it reduces (inputs only) and which it broadcasts (output
// only).
void classify_axes(const ExpressionContext& context, Bound& bound) {
    bound.op = context.call.op;
    bound.reduction = context.call.reduction;
    bound.pattern = context.pattern;
    std::vector<bool> in_input(bound.axes.size()), in_output(bound.axes.size());
    for (const BoundOperand& input : bound.inputs)
        for (const BoundDim& dim : input.dims)
            for (const AxisId a : dim.axes) in_input[static_cast<std::size_t>(a)] = true;
    for (const BoundDim& dim : bound.outputs.front().dims)
        for (const AxisId a : dim.axes) in_output[static_cast<std::size_t>(a)] = true;
    for (std::size_t a = 0; a < bound.axes.size(); ++a) {
        if (in_input[a] && !in_output[a]) bound.reduced.push_back(static_cast<AxisId>(a));
        if (in_output[a] && !in_input[a]) bound.broadcast.push_back(static_cast<AxisId>(a));
    }
}

}  // namespace

std::vector<Occurrence> names_in(const syntax::Operand& operand) {
    std::vector<Occurrence> names;
    for (const syntax::Dim& dim : operand.dims)
        for (const syntax::Atom& atom : dim.atoms)
            if (const auto* name = as<syntax::Name>(atom)) names.push_back({name->text, name->span});
    return names;
}

std::string quoted_list(const std::vector<std::string>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
        out += "'" + names[i] + "'";
    }
    return out;
}

ExpressionContext::ExpressionContext(const syntax::Pattern& pattern, const Call& call,
                                     std::span<const Shape> shapes)
    : pattern(pattern), call(call), shapes(shapes),
      text(pattern.text), tensors{shapes, call.op == Op::einsum ? TensorNaming::operand : TensorNaming::input,
                                  call.sizes} {
    if (!pattern.output) implicit_output_ = implicit_output(pattern);
    for (const AxisSize& s : call.sizes) given_sizes_.emplace(s.name, &s);  // (the first, if given twice)
    for (const syntax::Operand& input : pattern.inputs) {
        const auto& dims = input.dims;
        const auto ellipsis = std::find_if(dims.begin(), dims.end(), [](const syntax::Dim& dim) {
            return !dim.atoms.empty() && as<syntax::Ellipsis>(dim.atoms.front());
        });
        ellipsis_positions_.push_back(static_cast<std::size_t>(ellipsis - dims.begin()));
    }
}

const AxisSize* ExpressionContext::given_size(std::string_view name) const {
    const auto it = given_sizes_.find(name);
    return it == given_sizes_.end() ? nullptr : it->second;
}

std::string ExpressionContext::side_of(std::size_t input) const {
    if (!is_einsum()) return input == output_side ? "right side" : "left side";
    return input == output_side ? "output" : fmt::format("operand {}", input);
}

std::string ExpressionContext::on_side(std::size_t input) const {
    if (!is_einsum()) return "on the " + side_of(input);
    return input == output_side ? "in the output" : "in " + side_of(input);
}

Bound bind_expression(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes) {
    const ExpressionContext context(pattern, call, shapes);
    check_pattern(context);
    check_shapes(context);
    ExpressionBinding binding;
    bind_inputs(context, binding);
    infer_sizes(context, binding);
    bind_output(context, binding);
    check_axes_fit(context, binding.bound);
    classify_axes(context, binding.bound);
    check_empty_reductions(context, binding.bound);
    return std::move(binding.bound);
}

}  // namespace einc::detail
