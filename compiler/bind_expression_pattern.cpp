// bind() for rearrange, reduce, repeat and einsum, first stage: what the pattern and the call decide before
// any shape is read.
#include <algorithm>
#include <fmt/format.h>
#include <string_view>
#include <unordered_set>

#include "compiler/bind_expression.hpp"
#include "grammar/parse.hpp"

namespace einc::detail {
namespace {

bool is_anonymous(const syntax::Atom& atom) {
    const auto* number = as<syntax::Number>(atom);
    return number && number->value != 1;
}

void check_reduction(const ExpressionContext& ctx) {
    if (ctx.call.op == Op::reduce && ctx.call.reduction == Reduction::none)
        throw Error(ErrorKind::usage, "reduce needs a reduction")
            .help("one of sum, mean, max, min, prod, any, all");
    if (ctx.call.op != Op::reduce && ctx.call.reduction != Reduction::none)
        throw Error(ErrorKind::usage,
                    fmt::format("{} takes no reduction ('{}')", ctx.op(), name_of(ctx.call.reduction)))
            .help("only reduce takes a reduction");
}

void check_operand_count(const ExpressionContext& ctx) {
    if (!ctx.pattern.output && !(ctx.is_einsum() && ctx.pattern.notation == syntax::Notation::compact)) {
        const auto end = static_cast<std::uint32_t>(ctx.text.size());
        throw ctx.pattern_error(fmt::format("{} pattern has no '->'", ctx.op()))
            .at(ctx.text, syntax::Span{end, end})
            .help(ctx.is_einsum() ? "write the output after '->', e.g. `b i d, b j d -> b i j`"
                                  : "write `input -> output`, e.g. `b c h w -> b h w c`");
    }
    if (!ctx.is_einsum() && ctx.pattern.inputs.size() > 1)
        throw ctx
            .pattern_error(fmt::format("{} takes one input, but the pattern lists {}", ctx.op(),
                                       ctx.pattern.inputs.size()))
            .at(ctx.text, ctx.pattern.commas.front())
            .help("',' separates the operands of einsum");
    if (ctx.shapes.size() != ctx.pattern.inputs.size())
        throw Error(ErrorKind::usage,
                    fmt::format("the pattern has {} {}, but {} {} given", ctx.pattern.inputs.size(),
                                ctx.pattern.inputs.size() == 1 ? "input" : "operands", ctx.shapes.size(),
                                ctx.shapes.size() == 1 ? "tensor was" : "tensors were"))
            .at(ctx.text, whole_pattern(ctx.text))
            .help(ctx.is_einsum() ? "give one shape for each operand, in the order of the pattern"
                                  : fmt::format("{} takes one tensor", ctx.op()));
}

// One operand on its own: at most one `...`, not grouped on the input side, no duplicate names
// (einsum inputs may repeat a name: a diagonal), `_` only in einsum.
void check_operand(const ExpressionContext& ctx, const syntax::Operand& operand, std::size_t input) {
    const bool output = input == output_side;
    const std::string side = fmt::format(" {}", ctx.on_side(input));
    const std::string side_of_op = ctx.is_einsum() ? side : fmt::format("{} of {}", side, ctx.op());
    FirstOccurrences first(ctx.text);
    for (const syntax::Dim& dim : operand.dims) {
        for (const syntax::Atom& atom : dim.atoms) {
            if (const auto* ellipsis = as<syntax::Ellipsis>(atom)) {
                first.check_ellipsis(*ellipsis, side);
                if (dim.grouped && !output)
                    throw grouped_ellipsis(ctx.text, *ellipsis, dim, side)
                        .help("'...' can be grouped on the output side only, e.g. `b ... -> b (...)`");
            }
            const auto* name = as<syntax::Name>(atom);
            if (!name) continue;
            if (name->text == "_" && !ctx.is_einsum())
                throw ctx.pattern_error(fmt::format("'_' is not an axis name in {}", ctx.op()))
                    .at(ctx.text, name->span)
                    .help("name the axis, e.g. `x`; einops accepts a lone '_' only in einsum and "
                          "parse_shape");
            std::optional<Error> repeated = first.repeated(*name, side_of_op);
            if (repeated && (output || !ctx.is_einsum()))
                throw std::move(*repeated).help(
                    ctx.is_einsum() ? "an output axis appears once"
                                    : "an axis appears once per side; einsum takes diagonals (`i i -> i`)");
        }
    }
}

// Anonymous axes (`2` in `(h 2)`) are new axes: repeat may create them on its output, reduce may
// remove them from its input, nothing else may have them.
void check_anonymous_axes(const ExpressionContext& ctx) {
    const auto first_anonymous = [](const syntax::Operand& operand) -> const syntax::Number* {
        for (const syntax::Dim& dim : operand.dims)
            for (const syntax::Atom& atom : dim.atoms)
                if (is_anonymous(atom)) return as<syntax::Number>(atom);
        return nullptr;
    };
    const syntax::Number* left = nullptr;
    for (const syntax::Operand& input : ctx.pattern.inputs)
        if (!left) left = first_anonymous(input);
    const syntax::Number* right = first_anonymous(ctx.output());
    const auto fail = [&](const syntax::Number* number, std::string where, std::string help) {
        throw ctx.pattern_error(fmt::format("anonymous axis of length {} {}", number->value, where))
            .at(ctx.text, number->span)
            .help(std::move(help));
    };
    switch (ctx.call.op) {
    case Op::rearrange:
        if (left || right)
            fail(left ? left : right, "in rearrange",
                 "rearrange only moves axes: name the axis and give its size, or use repeat / reduce");
        break;
    case Op::repeat:
        if (left)
            fail(left, "on the left side of repeat",
                 "on the left, name the input's axes; anonymous axes like `2` are new axes for the right "
                 "side");
        break;
    case Op::reduce:
        if (right)
            fail(right, "on the right side of reduce",
                 "reduce removes axes; an anonymous axis on the right would be a new one");
        break;
    case Op::einsum:
        if (left || right)
            fail(left ? left : right, "in einsum", "einsum matches axes by name: name this axis");
        break;
    default: EINC_ASSERT(false);
    }
}

// Which axes may appear on one side only depends on the operation.
void check_sides_agree(const ExpressionContext& ctx) {
    const syntax::Operand& right = ctx.output();
    std::vector<Occurrence> left_names;
    const syntax::Ellipsis* left_ellipsis = nullptr;
    for (const syntax::Operand& input : ctx.pattern.inputs) {
        for (Occurrence& o : names_in(input)) left_names.push_back(std::move(o));
        if (!left_ellipsis) left_ellipsis = ellipsis_in(input);
    }
    const std::vector<Occurrence> right_names = names_in(right);
    const syntax::Ellipsis* right_ellipsis = ellipsis_in(right);

    check_anonymous_axes(ctx);

    if (right_ellipsis && !left_ellipsis && !ctx.is_einsum())  // einsum: numpy reads it as no dims
        throw ctx
            .pattern_error(
                fmt::format("'...' on the {} but not on the {}", ctx.side_of(output_side), ctx.side_of(0)))
            .at(ctx.text, right_ellipsis->span)
            .help("'...' on the output stands for the dims '...' matched on the input");
    if (left_ellipsis && !right_ellipsis && (ctx.call.op == Op::rearrange || ctx.call.op == Op::repeat))
        throw ctx
            .pattern_error(fmt::format("'...' on the left side but not on the right side of {}", ctx.op()))
            .at(ctx.text, left_ellipsis->span)
            .help(fmt::format("{} keeps every input axis: add '...' on the right side", ctx.op()));

    // (sets: patterns of 10 000 axes)
    const auto missing_from = [](const std::vector<Occurrence>& names, const std::vector<Occurrence>& other) {
        std::unordered_set<std::string_view> present, listed;
        for (const Occurrence& x : other) present.insert(x.name);
        std::vector<Occurrence> missing;
        for (const Occurrence& o : names)
            if (!present.contains(o.name) && listed.insert(o.name).second) missing.push_back(o);
        return missing;
    };
    const auto listed = [](const std::vector<Occurrence>& side) {
        std::vector<std::string> names;
        for (const Occurrence& o : side) names.push_back(o.name);
        return quoted_list(names);
    };
    const auto one_sided = [&](const std::vector<Occurrence>& missing, std::string message,
                               std::string help) {
        Error error =
            ctx.pattern_error(fmt::format(fmt::runtime(message), missing.size() == 1 ? "axis" : "axes",
                                          listed(missing), missing.size() == 1 ? "appears" : "appear"));
        error.at(ctx.text, missing.front().span);
        for (std::size_t i = 1; i < missing.size(); ++i) error.also(missing[i].span);
        throw std::move(error).help(std::move(help));
    };

    const std::vector<Occurrence> left_only = missing_from(left_names, right_names);
    const std::vector<Occurrence> right_only = missing_from(right_names, left_names);
    switch (ctx.call.op) {
    case Op::rearrange:
        if (!left_only.empty() &&
            !right_only.empty()) {  // most often a typo: name both sides, as einops does
            Error error = ctx.pattern_error(fmt::format("{} only on the left side, {} only on the right side",
                                                        listed(left_only), listed(right_only)));
            error.at(ctx.text, left_only.front().span);
            for (std::size_t i = 1; i < left_only.size(); ++i) error.also(left_only[i].span);
            for (const Occurrence& o : right_only) error.also(o.span);
            throw std::move(error).help(
                "rearrange keeps every axis, by name on both sides: reduce removes axes, "
                "repeat adds them");
        }
        if (!left_only.empty())
            one_sided(left_only, "{} {} {} on the left side only",
                      "rearrange keeps every axis: reduce removes axes, repeat adds them");
        if (!right_only.empty())
            one_sided(right_only, "{} {} {} on the right side only",
                      "rearrange keeps every axis: repeat adds new axes");
        break;
    case Op::repeat:
        if (!left_only.empty())
            one_sided(left_only, "{} {} {} on the left side of repeat but not on the right",
                      "repeat keeps every input axis: reduce removes axes");
        for (const Occurrence& o : right_only)
            if (!ctx.given_size(o.name))
                throw ctx.pattern_error(fmt::format("new axis '{}' in repeat has no size", o.name))
                    .at(ctx.text, o.span)
                    .help(fmt::format("give its size, e.g. {}=3", o.name));
        break;
    case Op::reduce:
        if (!right_only.empty())
            one_sided(right_only, "{} {} {} on the right side of reduce but not on the left",
                      "reduce can only remove axes: repeat adds them");
        break;
    case Op::einsum:
        if (!right_only.empty())
            one_sided(right_only, "output {} {} {} in no operand",
                      "every output axis must come from an input");
        break;
    default: EINC_ASSERT(false);
    }
}

void check_given_sizes(const ExpressionContext& ctx) {
    std::vector<std::string> pattern_names;
    for (const syntax::Operand& input : ctx.pattern.inputs)
        for (const Occurrence& o : names_in(input)) pattern_names.push_back(o.name);
    for (const Occurrence& o : names_in(ctx.output())) pattern_names.push_back(o.name);
    const std::unordered_set<std::string_view> in_pattern(pattern_names.begin(), pattern_names.end());
    for (std::size_t i = 0; i < ctx.call.sizes.size(); ++i) {
        const AxisSize& given = ctx.call.sizes[i];
        if (!is_axis_name(given.name, ctx.is_einsum()))
            throw Error(ErrorKind::usage, fmt::format("'{}' is not a valid axis name", given.name))
                .help("axis names are identifiers that neither start nor end with '_'");
        if (const AxisSize* first = ctx.given_size(given.name); first != &given)
            throw Error(ErrorKind::usage, fmt::format("axis '{}' is given a size twice ({} and {})",
                                                      given.name, first->size, given.size))
                .help("give each axis one size");
        if (!in_pattern.contains(given.name)) {
            std::vector<std::string> unique;
            for (const std::string& n : pattern_names)
                if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(n);
            throw Error(ErrorKind::usage,
                        fmt::format("axis '{}' is given a size but is not in the pattern", given.name))
                .at(ctx.text, whole_pattern(ctx.text))
                .help(unique.empty() ? std::string("the pattern names no axes")
                                     : "the pattern's axes are " + quoted_list(unique));
        }
        if (given.size < 0)
            throw ctx
                .shape_error(fmt::format("axis '{}' is given a negative size, {}", given.name, given.size))
                .help("sizes are lengths: 0 or more");
    }
}

}  // namespace

void check_pattern(const ExpressionContext& ctx) {
    check_reduction(ctx);
    check_operand_count(ctx);
    for (std::size_t i = 0; i < ctx.pattern.inputs.size(); ++i) check_operand(ctx, ctx.pattern.inputs[i], i);
    if (ctx.pattern.output) check_operand(ctx, *ctx.pattern.output, output_side);
    check_sides_agree(ctx);
    check_given_sizes(ctx);
}

}  // namespace einc::detail
