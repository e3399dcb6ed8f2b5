// bind() for rearrange, reduce, repeat and einsum: checks the pattern against the operation, resolves
// groups and `...` into elementary axes, and infers every axis size from the operands' shapes and the
// sizes given.
#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>
#include <tuple>

#include "compiler/bind_common.hpp"
#include "compiler/checked.hpp"
#include "grammar/parse.hpp"
#include "grammar/print.hpp"

namespace einc::detail {
namespace {

using syntax::Span;

bool is_anonymous(const syntax::Atom& atom) {
    const auto* number = as<syntax::Number>(atom);
    return number && number->value != 1;
}

// "'h'", "'h' and 'w'", "'a', 'b' and 'c'"
std::string quoted_list(const std::vector<std::string>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
        out += "'" + names[i] + "'";
    }
    return out;
}

// A name and where it stands, in pattern order.
struct Occurrence {
    std::string name;
    Span span;
};

std::vector<Occurrence> names_in(const syntax::Operand& operand) {
    std::vector<Occurrence> names;
    for (const syntax::Dim& dim : operand.dims)
        for (const syntax::Atom& atom : dim.atoms)
            if (const auto* name = as<syntax::Name>(atom)) names.push_back({name->text, name->span});
    return names;
}

// Where an axis got its size, for messages that say which two facts disagree.
struct SizeSource {
    enum Kind { unknown, given, literal, operand } kind = unknown;
    std::size_t input = 0;  // for `operand`
    Span span;
};

class ExpressionBinder {
public:
    ExpressionBinder(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes)
        : pattern_(pattern), call_(call), shapes_(shapes),
          text_(pattern.text), tensors_{shapes,
                                        call.op == Op::einsum ? TensorNaming::operand : TensorNaming::input,
                                        call.sizes} {}

    Bound run() {
        check_reduction();
        check_operand_count();
        for (std::size_t i = 0; i < pattern_.inputs.size(); ++i) check_operand(pattern_.inputs[i], i);
        if (pattern_.output) check_operand(*pattern_.output, output_side);
        check_sides_agree();
        check_given_sizes();
        check_shapes();
        bind_inputs();
        infer_sizes();
        bind_output();
        check_axes_fit();
        classify_axes();
        check_empty_reductions();
        return std::move(bound_);
    }

private:
    static constexpr std::size_t output_side = static_cast<std::size_t>(-1);

    bool is_einsum() const { return call_.op == Op::einsum; }
    std::string_view op() const { return name_of(call_.op); }

    // "left side" / "right side" for one-input operations, "operand 1" / "output" for einsum.
    std::string side_of(std::size_t input) const {
        if (!is_einsum()) return input == output_side ? "right side" : "left side";
        return input == output_side ? "output" : fmt::format("operand {}", input);
    }
    // "on the left side" / "in operand 1": where something stands, as a message says it.
    std::string on_side(std::size_t input) const {
        if (!is_einsum()) return "on the " + side_of(input);
        return input == output_side ? "in the output" : "in " + side_of(input);
    }
    std::string tensor_of(std::size_t input) const { return tensors_.name(input); }
    std::string possessive(std::size_t input) const { return tensors_.name(input) + "'s"; }

    Error shape_error(std::string message) const { return tensors_.shape_error(std::move(message)); }
    Error pattern_error(std::string message) const { return Error(ErrorKind::pattern, std::move(message)); }

    // ---- structure ---------------------------------------------------------------------------

    void check_reduction() const {
        if (call_.op == Op::reduce && call_.reduction == Reduction::none)
            throw Error(ErrorKind::usage, "reduce needs a reduction")
                .help("one of sum, mean, max, min, prod, any, all");
        if (call_.op != Op::reduce && call_.reduction != Reduction::none)
            throw Error(ErrorKind::usage,
                        fmt::format("{} takes no reduction ('{}')", op(), name_of(call_.reduction)))
                .help("only reduce takes a reduction");
    }

    void check_operand_count() const {
        if (!pattern_.output && !(is_einsum() && pattern_.notation == syntax::Notation::compact)) {
            const auto end = static_cast<std::uint32_t>(text_.size());
            throw pattern_error(fmt::format("{} pattern has no '->'", op()))
                .at(text_, Span{end, end})
                .help(is_einsum() ? "write the output after '->', e.g. `b i d, b j d -> b i j`"
                                  : "write `input -> output`, e.g. `b c h w -> b h w c`");
        }
        if (!is_einsum() && pattern_.inputs.size() > 1)
            throw pattern_error(
                fmt::format("{} takes one input, but the pattern lists {}", op(), pattern_.inputs.size()))
                .at(text_, pattern_.commas.front())
                .help("',' separates the operands of einsum");
        if (shapes_.size() != pattern_.inputs.size())
            throw Error(ErrorKind::usage,
                        fmt::format("the pattern has {} {}, but {} {} given", pattern_.inputs.size(),
                                    pattern_.inputs.size() == 1 ? "input" : "operands", shapes_.size(),
                                    shapes_.size() == 1 ? "tensor was" : "tensors were"))
                .at(text_, whole_pattern(text_))
                .help(is_einsum() ? "give one shape for each operand, in the order of the pattern"
                                  : fmt::format("{} takes one tensor", op()));
    }

    // One operand on its own: at most one `...`, not grouped on the input side, no duplicate names
    // (einsum inputs may repeat a name: a diagonal), `_` only in einsum.
    void check_operand(const syntax::Operand& operand, std::size_t input) const {
        const bool output = input == output_side;
        const std::string side = fmt::format(" {}", on_side(input));
        const std::string side_of_op = is_einsum() ? side : fmt::format("{} of {}", side, op());
        FirstOccurrences first(text_);
        for (const syntax::Dim& dim : operand.dims) {
            for (const syntax::Atom& atom : dim.atoms) {
                if (const auto* ellipsis = as<syntax::Ellipsis>(atom)) {
                    first.check_ellipsis(*ellipsis, side);
                    if (dim.grouped && !output)
                        throw grouped_ellipsis(text_, *ellipsis, dim, side)
                            .help("'...' can be grouped on the output side only, e.g. `b ... -> b (...)`");
                }
                const auto* name = as<syntax::Name>(atom);
                if (!name) continue;
                if (name->text == "_" && !is_einsum())
                    throw pattern_error(fmt::format("'_' is not an axis name in {}", op()))
                        .at(text_, name->span)
                        .help("name the axis, e.g. `x`; einops accepts a lone '_' only in einsum and "
                              "parse_shape");
                std::optional<Error> repeated = first.repeated(*name, side_of_op);
                if (repeated && (output || !is_einsum()))
                    throw std::move(*repeated).help(
                        is_einsum() ? "an output axis appears once"
                                    : "an axis appears once per side; einsum takes diagonals (`i i -> i`)");
            }
        }
    }

    // Which axes may appear on one side only depends on the operation.
    void check_sides_agree() const {
        const syntax::Operand& right = output_operand();
        std::vector<Occurrence> left_names;
        const syntax::Ellipsis* left_ellipsis = nullptr;
        for (const syntax::Operand& input : pattern_.inputs) {
            for (Occurrence& o : names_in(input)) left_names.push_back(std::move(o));
            if (!left_ellipsis) left_ellipsis = ellipsis_in(input);
        }
        const std::vector<Occurrence> right_names = names_in(right);
        const syntax::Ellipsis* right_ellipsis = ellipsis_in(right);

        check_anonymous_axes();

        if (right_ellipsis && !left_ellipsis && !is_einsum())  // einsum: numpy reads it as no dims
            throw pattern_error(
                fmt::format("'...' on the {} but not on the {}", side_of(output_side), side_of(0)))
                .at(text_, right_ellipsis->span)
                .help("'...' on the output stands for the dims '...' matched on the input");
        if (left_ellipsis && !right_ellipsis && (call_.op == Op::rearrange || call_.op == Op::repeat))
            throw pattern_error(fmt::format("'...' on the left side but not on the right side of {}", op()))
                .at(text_, left_ellipsis->span)
                .help(fmt::format("{} keeps every input axis: add '...' on the right side", op()));

        const auto missing_from = [](const std::vector<Occurrence>& names,
                                     const std::vector<Occurrence>& other) {
            std::vector<Occurrence> missing;
            for (const Occurrence& o : names)
                if (std::none_of(other.begin(), other.end(),
                                 [&](const Occurrence& x) { return x.name == o.name; }) &&
                    std::none_of(missing.begin(), missing.end(),
                                 [&](const Occurrence& x) { return x.name == o.name; }))
                    missing.push_back(o);
            return missing;
        };
        const auto one_sided = [&](const std::vector<Occurrence>& missing, std::string message,
                                   std::string help) {
            std::vector<std::string> names;
            for (const Occurrence& o : missing) names.push_back(o.name);
            Error error =
                pattern_error(fmt::format(fmt::runtime(message), missing.size() == 1 ? "axis" : "axes",
                                          quoted_list(names), missing.size() == 1 ? "appears" : "appear"));
            error.at(text_, missing.front().span);
            for (std::size_t i = 1; i < missing.size(); ++i) error.also(missing[i].span);
            throw std::move(error).help(std::move(help));
        };

        const std::vector<Occurrence> left_only = missing_from(left_names, right_names);
        const std::vector<Occurrence> right_only = missing_from(right_names, left_names);
        switch (call_.op) {
        case Op::rearrange:
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
                if (!given_size(o.name))
                    throw pattern_error(fmt::format("new axis '{}' in repeat has no size", o.name))
                        .at(text_, o.span)
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

    // Anonymous axes (`2` in `(h 2)`) are new axes: repeat may create them on its output, reduce may
    // remove them from its input, nothing else may have them.
    void check_anonymous_axes() const {
        const auto first_anonymous = [](const syntax::Operand& operand) -> const syntax::Number* {
            for (const syntax::Dim& dim : operand.dims)
                for (const syntax::Atom& atom : dim.atoms)
                    if (is_anonymous(atom)) return as<syntax::Number>(atom);
            return nullptr;
        };
        const syntax::Number* left = nullptr;
        for (const syntax::Operand& input : pattern_.inputs)
            if (!left) left = first_anonymous(input);
        const syntax::Number* right = first_anonymous(output_operand());
        const auto fail = [&](const syntax::Number* number, std::string where, std::string help) {
            throw pattern_error(fmt::format("anonymous axis of length {} {}", number->value, where))
                .at(text_, number->span)
                .help(std::move(help));
        };
        switch (call_.op) {
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

    const AxisSize* given_size(std::string_view name) const {
        for (const AxisSize& s : call_.sizes)
            if (s.name == name) return &s;
        return nullptr;
    }

    void check_given_sizes() const {
        std::vector<std::string> pattern_names;
        for (const syntax::Operand& input : pattern_.inputs)
            for (const Occurrence& o : names_in(input)) pattern_names.push_back(o.name);
        for (const Occurrence& o : names_in(output_operand())) pattern_names.push_back(o.name);
        for (std::size_t i = 0; i < call_.sizes.size(); ++i) {
            const AxisSize& given = call_.sizes[i];
            if (!is_axis_name(given.name, is_einsum()))
                throw Error(ErrorKind::usage, fmt::format("'{}' is not a valid axis name", given.name))
                    .help("axis names are identifiers that neither start nor end with '_'");
            for (std::size_t j = 0; j < i; ++j)
                if (call_.sizes[j].name == given.name)
                    throw Error(ErrorKind::usage, fmt::format("axis '{}' is given a size twice ({} and {})",
                                                              given.name, call_.sizes[j].size, given.size))
                        .help("give each axis one size");
            if (std::find(pattern_names.begin(), pattern_names.end(), given.name) == pattern_names.end()) {
                std::vector<std::string> unique;
                for (const std::string& n : pattern_names)
                    if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(n);
                throw Error(ErrorKind::usage,
                            fmt::format("axis '{}' is given a size but is not in the pattern", given.name))
                    .at(text_, whole_pattern(text_))
                    .help(unique.empty() ? std::string("the pattern names no axes")
                                         : "the pattern's axes are " + quoted_list(unique));
            }
            if (given.size < 0)
                throw shape_error(
                    fmt::format("axis '{}' is given a negative size, {}", given.name, given.size))
                    .help("sizes are lengths: 0 or more");
        }
    }

    // Each tensor in turn: its lengths, then its rank against its operand.
    void check_shapes() const {
        for (std::size_t i = 0; i < shapes_.size(); ++i) {
            tensors_.check_lengths(i);
            const std::string whose = fmt::format(" for {}{}", is_einsum() ? "" : "the ", side_of(i));
            check_rank(tensors_, i, pattern_.inputs[i], text_, whose,
                       fmt::format(
                           "write one dim for each of the {} dims of {}, or use '...' for the dims not named",
                           shapes_[i].size(), tensor_of(i)));
        }
    }

    // ---- binding -------------------------------------------------------------------------------

    const syntax::Operand& output_operand() const {
        return pattern_.output ? *pattern_.output : implicit_output();
    }

    // numpy's rule for einsum without `->`: the broadcast dims, then every letter that appears exactly
    // once, in alphabetical (ASCII) order.
    const syntax::Operand& implicit_output() const {
        if (implicit_output_) return *implicit_output_;
        std::map<std::string, int> count;
        bool any_ellipsis = false;
        for (const syntax::Operand& input : pattern_.inputs) {
            for (const Occurrence& o : names_in(input)) ++count[o.name];
            any_ellipsis = any_ellipsis || ellipsis_in(input) != nullptr;
        }
        syntax::Operand output;
        const auto end = static_cast<std::uint32_t>(text_.size());
        output.span = Span{end, end};
        if (any_ellipsis)
            output.dims.push_back(syntax::Dim{{syntax::Ellipsis{output.span}}, false, output.span});
        for (const auto& [name, n] : count)
            if (n == 1)
                output.dims.push_back(syntax::Dim{{syntax::Name{name, output.span}}, false, output.span});
        implicit_output_ = std::move(output);
        return *implicit_output_;
    }

    AxisId add_axis(std::string name, std::optional<std::int64_t> size, AxisOrigin origin, Span span,
                    SizeSource source) {
        bound_.axes.push_back(Axis{std::move(name), size.value_or(-1), origin, span});
        sources_.push_back(source);
        return static_cast<AxisId>(bound_.axes.size() - 1);
    }
    bool known(AxisId id) const { return bound_.axes[static_cast<std::size_t>(id)].size >= 0; }

    AxisId named_axis(const syntax::Name& name) {
        if (const auto it = named_.find(name.text); it != named_.end()) return it->second;
        const AxisSize* given = given_size(name.text);
        const AxisId id =
            add_axis(name.text, given ? std::optional(given->size) : std::nullopt, AxisOrigin::named,
                     name.span, given ? SizeSource{SizeSource::given, 0, {}} : SizeSource{});
        named_.emplace(name.text, id);
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
                for (const AxisId e : ellipsis_axes_) axes.push_back(e);
        }
        return axes;
    }

    // The axes `...` stands for: as many as the widest input gives it; narrower inputs' dims align to
    // the right and broadcast where their length is 1 (numpy's rule, which einsum follows).
    void bind_ellipsis_axes() {
        std::size_t width = 0;
        std::vector<std::size_t> widths(pattern_.inputs.size(), 0);
        const syntax::Ellipsis* first = nullptr;
        for (std::size_t i = 0; i < pattern_.inputs.size(); ++i) {
            if (const syntax::Ellipsis* e = ellipsis_in(pattern_.inputs[i])) {
                widths[i] = shapes_[i].size() - dims_besides_ellipsis(pattern_.inputs[i]);
                width = std::max(width, widths[i]);
                if (!first) first = e;
            }
        }
        for (std::size_t k = 0; k < width; ++k) {
            std::optional<std::int64_t> size;
            std::size_t size_from = 0;
            for (std::size_t i = 0; i < pattern_.inputs.size(); ++i) {
                if (k + widths[i] < width) continue;  // this input's `...` is narrower
                const std::int64_t extent = shapes_[i][ellipsis_position(i) + (k + widths[i] - width)];
                if (extent == 1) continue;
                if (size && *size != extent)
                    throw shape_error(
                        fmt::format("'...' dims do not broadcast: {} has length {} where {} has {}",
                                    tensor_of(size_from), *size, tensor_of(i), extent))
                        .at(text_, ellipsis_in(pattern_.inputs[i])->span)
                        .also(ellipsis_in(pattern_.inputs[size_from])->span)
                        .help("'...' dims line up from the right and must be equal or 1");
                size = extent;
                size_from = i;
            }
            ellipsis_axes_.push_back(add_axis(ellipsis_axis_name(k), size.value_or(1), AxisOrigin::ellipsis,
                                              first->span, {SizeSource::operand, size_from, first->span}));
        }
        ellipsis_widths_ = std::move(widths);
        // numpy's einsum keeps the dims '...' matches; it refuses to drop them (reduce may).
        if (is_einsum() && width > 0 && !ellipsis_in(output_operand()))
            throw shape_error(fmt::format("'...' stands for {} {} here, but the output has no '...'", width,
                                          width == 1 ? "dim" : "dims"))
                .at(text_, first->span)
                .help("add '...' to the output; einsum does not sum over '...' dims (name them to sum them)");
    }

    std::size_t ellipsis_position(std::size_t input) const {
        const auto& dims = pattern_.inputs[input].dims;
        for (std::size_t d = 0; d < dims.size(); ++d)
            if (!dims[d].atoms.empty() && as<syntax::Ellipsis>(dims[d].atoms.front())) return d;
        return dims.size();
    }

    void bind_inputs() {
        bind_ellipsis_axes();
        if (is_einsum()) bind_broadcast_names();
        for (std::size_t i = 0; i < pattern_.inputs.size(); ++i) {
            const syntax::Operand& operand = pattern_.inputs[i];
            BoundOperand bound{{}, operand.span};
            std::size_t at = 0;  // position in the shape
            for (const syntax::Dim& dim : operand.dims) {
                const bool is_ellipsis = !dim.grouped && as<syntax::Ellipsis>(dim.atoms.front());
                if (is_ellipsis) {
                    const std::size_t width = ellipsis_widths_[i];
                    for (std::size_t k = 0; k < width; ++k, ++at) {
                        const AxisId axis = ellipsis_axes_[ellipsis_axes_.size() - width + k];
                        const std::int64_t extent = shapes_[i][at];
                        // A length-1 dim broadcast against a longer one has no axis: it does not vary.
                        bound.dims.push_back(extent == bound_.size(axis) ? BoundDim{{axis}, extent, dim.span}
                                                                         : BoundDim{{}, extent, dim.span});
                    }
                    continue;
                }
                BoundDim bound_dim{axes_of(dim), shapes_[i][at++], dim.span};
                if (broadcast_dims_.contains({i, bound.dims.size()})) bound_dim.axes.clear();
                bound.dims.push_back(std::move(bound_dim));
            }
            bound_.inputs.push_back(std::move(bound));
        }
    }

    // einsum broadcasts a lone axis of length 1 against the same axis elsewhere, as numpy and torch
    // do: `i j, i j` over 1x3 and 2x3 binds i=2, and the first operand does not vary along i.
    void bind_broadcast_names() {
        struct Seen {
            std::int64_t extent;
            std::size_t input;
            Span span;
        };
        std::map<std::string, Seen> lengths;
        std::vector<std::tuple<std::string, std::size_t, std::size_t, std::int64_t>> lone;
        for (std::size_t i = 0; i < pattern_.inputs.size(); ++i) {
            std::map<std::string, Seen> own;  // a diagonal: numpy broadcasts across operands, not within one
            std::size_t at = 0;
            for (std::size_t d = 0; d < pattern_.inputs[i].dims.size(); ++d) {
                const syntax::Dim& dim = pattern_.inputs[i].dims[d];
                if (!dim.grouped && as<syntax::Ellipsis>(dim.atoms.front())) {
                    at += ellipsis_widths_[i];
                    continue;
                }
                const std::int64_t extent = shapes_[i][at++];
                const auto* name =
                    dim.grouped || dim.atoms.size() != 1 ? nullptr : as<syntax::Name>(dim.atoms.front());
                if (!name) continue;
                if (const auto [it, inserted] = own.emplace(name->text, Seen{extent, i, name->span});
                    !inserted && it->second.extent != extent)
                    throw shape_error(fmt::format("axis '{}' appears twice in {} with lengths {} and {}",
                                                  name->text, tensor_of(i), it->second.extent, extent))
                        .at(text_, name->span)
                        .also(it->second.span)
                        .help("a repeated axis takes the diagonal, which needs dims of one length");
                lone.emplace_back(name->text, i, bound_position(i, d), extent);
                if (extent == 1) continue;
                const auto [it, inserted] = lengths.emplace(name->text, Seen{extent, i, name->span});
                if (!inserted && it->second.extent != extent)
                    throw shape_error(fmt::format("axis '{}' has length {} in {} but {} in {}", name->text,
                                                  it->second.extent, tensor_of(it->second.input), extent,
                                                  tensor_of(i)))
                        .at(text_, it->second.span)
                        .also(name->span)
                        .help("an axis has one length in every operand (or 1, to broadcast)");
            }
        }
        for (const auto& [name, input, position, extent] : lone) {
            const auto it = lengths.find(name);
            if (extent == 1 && it != lengths.end()) broadcast_dims_.insert({input, position});
        }
    }

    // Index of syntax dim `d` of input `i` among its bound dims (the ellipsis expands to several).
    std::size_t bound_position(std::size_t input, std::size_t d) const {
        const std::size_t ellipsis = ellipsis_position(input);
        return d > ellipsis ? d - 1 + ellipsis_widths_[input] : d;
    }

    // Each input dim is one equation: the product of its axes' sizes is its length. Solve them until
    // nothing changes; then every dim must be consistent and no size unknown.
    void infer_sizes() {
        for (bool progress = true; progress;) {
            progress = false;
            for (std::size_t i = 0; i < bound_.inputs.size(); ++i)
                for (std::size_t d = 0; d < bound_.inputs[i].dims.size(); ++d) progress |= solve(i, d);
        }
        for (std::size_t i = 0; i < bound_.inputs.size(); ++i)
            for (const BoundDim& dim : bound_.inputs[i].dims) {
                std::vector<std::string> unknown;
                for (const AxisId a : dim.axes)
                    if (!known(a) &&
                        std::find(unknown.begin(), unknown.end(), bound_.axis(a).name) == unknown.end())
                        unknown.push_back(bound_.axis(a).name);
                if (unknown.size() > 1)
                    throw shape_error(fmt::format("can't infer the sizes of {} from one dim of length {}",
                                                  quoted_list(unknown), dim.extent))
                        .at(text_, dim.span)
                        .help(fmt::format("give the size of all but one of them, e.g. {}=...",
                                          unknown.front()));
                if (unknown.size() == 1)  // the axis appears twice in this one group
                    throw shape_error(
                        fmt::format("can't infer the size of '{}': it appears twice in one group",
                                    unknown.front()))
                        .at(text_, dim.span)
                        .help(fmt::format("give its size, e.g. {}=...", unknown.front()));
            }
    }

    // One equation; returns whether it determined a size.
    bool solve(std::size_t input, std::size_t d) {
        const BoundDim& dim = bound_.inputs[input].dims[d];
        std::int64_t known_product = 1;
        std::optional<AxisId> unknown;
        int unknown_count = 0;
        for (const AxisId a : dim.axes) {
            if (known(a)) {
                const auto product = checked_mul(known_product, bound_.size(a));
                if (!product) throw shape_error("axis sizes overflow 64 bits").at(text_, dim.span);
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
        const Axis& axis = bound_.axis(*unknown);
        if (known_product == 0)
            throw shape_error(
                fmt::format("can't infer the size of '{}': the other axes of its group multiply to 0",
                            axis.name))
                .at(text_, dim.span)
                .help(fmt::format("give its size, e.g. {}=...", axis.name));
        if (dim.extent % known_product != 0)
            throw shape_error(fmt::format("can't divide {} dim {} of length {} into chunks of {}",
                                          possessive(input), d, dim.extent, known_product))
                .at(text_, dim.span)
                .help(fmt::format("the length of {} must be a multiple of {}",
                                  to_string(pattern_dim(input, d)), known_product));
        bound_.axes[static_cast<std::size_t>(*unknown)].size = dim.extent / known_product;
        sources_[static_cast<std::size_t>(*unknown)] = {SizeSource::operand, input, axis.span};
        return true;
    }

    const syntax::Dim& pattern_dim(std::size_t input, std::size_t bound_dim) const {
        const auto& dims = pattern_.inputs[input].dims;
        const std::size_t ellipsis = ellipsis_position(input);
        if (bound_dim < ellipsis) return dims[bound_dim];
        const std::size_t width = ellipsis_widths_[input];
        if (bound_dim < ellipsis + width) return dims[ellipsis];
        return dims[bound_dim - width + 1];
    }

    [[noreturn]] void report_mismatch(std::size_t input, std::size_t d, std::int64_t expected) const {
        const BoundDim& dim = bound_.inputs[input].dims[d];
        const syntax::Dim& written = pattern_dim(input, d);
        if (dim.axes.empty())
            throw shape_error(fmt::format("'{}' needs a dim of length 1, but {} dim {} has length {}",
                                          to_string(written), possessive(input), d, dim.extent))
                .at(text_, dim.span)
                .help("a unit axis matches only length 1");
        if (dim.axes.size() == 1 && !written.grouped) {
            const Axis& axis = bound_.axis(dim.axes.front());
            const SizeSource& source = sources_[static_cast<std::size_t>(dim.axes.front())];
            if (source.kind == SizeSource::given)
                throw shape_error(fmt::format("axis '{}' is given size {}, but {} dim {} has length {}",
                                              axis.name, expected, possessive(input), d, dim.extent))
                    .at(text_, written.span)
                    .help(fmt::format("the shape says {}={}: give that size, or leave it out", axis.name,
                                      dim.extent));
            if (source.kind == SizeSource::literal)
                throw shape_error(fmt::format("'{}' needs a dim of length {}, but {} dim {} has length {}",
                                              to_string(written), expected, possessive(input), d, dim.extent))
                    .at(text_, written.span)
                    .help("an anonymous axis matches only a dim of its length");
            throw shape_error(fmt::format("axis '{}' has length {} in {} but {} in {}", axis.name, expected,
                                          tensor_of(source.input), dim.extent, tensor_of(input)))
                .at(text_, source.span)
                .also(written.span)
                .help("an axis has one length in every operand");
        }
        std::vector<std::string> factors;
        for (const AxisId a : dim.axes)
            factors.push_back(fmt::format("{}={}", bound_.axis(a).name, bound_.size(a)));
        throw shape_error(fmt::format("'{}' has length {} ({}), but {} dim {} has length {}",
                                      to_string(written), expected, fmt::join(factors, " * "),
                                      possessive(input), d, dim.extent))
            .at(text_, written.span)
            .help("the sizes in a group multiply to the dim's length: give one size fewer and einc infers "
                  "the last");
    }

    void bind_output() {
        const syntax::Operand& operand = output_operand();
        BoundOperand bound{{}, operand.span};
        for (const syntax::Dim& dim : operand.dims) {
            if (!dim.grouped && as<syntax::Ellipsis>(dim.atoms.front())) {
                for (const AxisId e : ellipsis_axes_)
                    bound.dims.push_back(BoundDim{{e}, bound_.size(e), dim.span});
                continue;
            }
            BoundDim bound_dim{axes_of(dim), 1, dim.span};
            std::vector<std::int64_t> sizes;
            for (const AxisId a : bound_dim.axes) sizes.push_back(bound_.size(a));
            const auto extent = checked_product(sizes);
            if (!extent)
                throw shape_error(
                    fmt::format("the output dim '{}' has more elements than fit in 64 bits", to_string(dim)))
                    .at(text_, dim.span);
            bound_dim.extent = *extent;
            bound.dims.push_back(std::move(bound_dim));
        }
        bound_.outputs.push_back(std::move(bound));
    }

    // Every tensor's axes fit (lengths_fit), not only its dims: a group `(b c)` of length 0 can hide
    // b = 2^63-1 beside a dim a = 4, and the planner multiplies the lengths of axes.
    void check_axes_fit() const {
        const auto check = [&](const BoundOperand& operand, const std::string& what) {
            std::vector<std::int64_t> sizes;
            for (const BoundDim& dim : operand.dims)
                for (const AxisId a : dim.axes) sizes.push_back(bound_.size(a));
            if (!lengths_fit(sizes))
                throw shape_error(too_many_elements(what, sizes)).at(text_, operand.span);
        };
        for (std::size_t i = 0; i < bound_.inputs.size(); ++i) check(bound_.inputs[i], tensor_of(i));
        check(bound_.outputs[0], "the output");
    }

    void classify_axes() {
        bound_.op = call_.op;
        bound_.reduction = call_.reduction;
        bound_.pattern = pattern_;
        std::vector<bool> in_input(bound_.axes.size()), in_output(bound_.axes.size());
        for (const BoundOperand& input : bound_.inputs)
            for (const BoundDim& dim : input.dims)
                for (const AxisId a : dim.axes) in_input[static_cast<std::size_t>(a)] = true;
        for (const BoundDim& dim : bound_.outputs.front().dims)
            for (const AxisId a : dim.axes) in_output[static_cast<std::size_t>(a)] = true;
        for (std::size_t a = 0; a < bound_.axes.size(); ++a) {
            if (in_input[a] && !in_output[a]) bound_.reduced.push_back(static_cast<AxisId>(a));
            if (in_output[a] && !in_input[a]) bound_.broadcast.push_back(static_cast<AxisId>(a));
        }
    }

    // max and min have no identity: reducing an axis of length 0 has no value (numpy refuses it, and
    // einops with it, even where the output is empty).
    void check_empty_reductions() const {
        if (call_.reduction != Reduction::max && call_.reduction != Reduction::min) return;
        for (const AxisId a : bound_.reduced) {
            const Axis& axis = bound_.axis(a);
            if (axis.size != 0) continue;
            throw shape_error(fmt::format("{} of an empty set: the reduced axis '{}' has length 0",
                                          name_of(call_.reduction), axis.name))
                .at(text_, axis.span)
                .help("max and min have no identity, so an empty set has no value; sum, prod, any and all "
                      "have one");
        }
    }

    const syntax::Pattern& pattern_;
    const Call& call_;
    std::span<const Shape> shapes_;
    std::string_view text_;
    Tensors tensors_;
    mutable std::optional<syntax::Operand> implicit_output_;
    Bound bound_;
    std::vector<SizeSource> sources_;
    std::map<std::string, AxisId> named_;
    std::vector<AxisId> ellipsis_axes_;
    std::vector<std::size_t> ellipsis_widths_;
    std::set<std::pair<std::size_t, std::size_t>> broadcast_dims_;  // (input, bound dim) broadcast from 1
};

}  // namespace

Bound bind_expression(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes) {
    return ExpressionBinder(pattern, call, shapes).run();
}

}  // namespace einc::detail
