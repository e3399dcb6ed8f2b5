// bind() for parse_shape: one operand of names, `_`, numbers and `...`, each dim one axis whose size is
// read off the shape.
#include <fmt/format.h>

#include "compiler/bind_common.hpp"
#include "grammar/print.hpp"

namespace einc::detail {

Bound bind_parse_shape(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes) {
    const std::string_view text = pattern.text;
    if (pattern.output)
        throw Error(ErrorKind::pattern, "parse_shape takes one side, without '->'")
            .at(text, *pattern.arrow)
            .help("name the tensor's dims, e.g. `b _ h w`");
    if (pattern.inputs.size() > 1)
        throw Error(ErrorKind::pattern, "parse_shape takes one tensor, without ','")
            .at(text, pattern.commas.front())
            .help("name the dims of one tensor, e.g. `b _ h w`");
    check_no_sizes(call);
    check_one_tensor(call, shapes.size());
    const syntax::Operand& operand = pattern.inputs.front();
    const Shape& shape = shapes.front();
    const Tensors tensors{shapes, TensorNaming::input, call.sizes};
    tensors.check_not_negative(0, ShapeShown::in_note);
    // What each dim reads: its one atom, with `1`s dropped; none for a unit axis (`1`, `()`). einops
    // reads a group of one axis, `(h)`, like `h`, and refuses a composite one.
    std::vector<const syntax::Atom*> reads;
    for (const syntax::Dim& dim : operand.dims) {
        std::vector<const syntax::Atom*> atoms;
        for (const syntax::Atom& atom : dim.atoms) {
            if (const auto* number = as<syntax::Number>(atom); number && number->value == 1) continue;
            if (const auto* e = as<syntax::Ellipsis>(atom); e && dim.grouped)
                throw grouped_ellipsis(text, *e, dim, "").help("write `...` on its own");
            atoms.push_back(&atom);
        }
        if (atoms.size() > 1)
            throw Error(ErrorKind::pattern,
                        fmt::format("parse_shape can't read the composite axis {}", to_string(dim)))
                .at(text, dim.span)
                .help("name each dim on its own: one dim is one axis");
        reads.push_back(atoms.empty() ? nullptr : atoms.front());
    }
    FirstOccurrences first(text);
    for (const syntax::Atom* atom : reads) {
        if (!atom) continue;
        if (const auto* e = as<syntax::Ellipsis>(*atom)) first.check_ellipsis(*e, "");
        if (const auto* name = as<syntax::Name>(*atom); name && name->text != "_")
            if (std::optional<Error> repeated = first.repeated(*name, ""))
                throw std::move(*repeated).help("use '_' for dims you do not want named");
    }
    check_rank(tensors, 0, operand, text, "",
               fmt::format("write one name for each of the {} dims, `_` to skip one, or '...' for the rest",
                           shape.size()));
    const std::size_t named = dims_besides_ellipsis(operand);

    Bound bound;
    bound.op = Op::parse_shape;
    bound.pattern = pattern;
    BoundOperand input{{}, operand.span};
    std::size_t at = 0;
    for (std::size_t d = 0; d < operand.dims.size(); ++d) {
        const syntax::Dim& dim = operand.dims[d];
        if (!reads[d]) {  // `1`, `()`: a unit axis
            if (shape[at] != 1)
                throw tensors
                    .shape_error(fmt::format("'{}' needs a dim of length 1, but dim {} has length {}",
                                             to_string(dim), at, shape[at]))
                    .at(text, dim.span)
                    .help("a unit axis matches only length 1; name the dim to read its length");
            input.dims.push_back(BoundDim{{}, shape[at], dim.span});
            ++at;
            continue;
        }
        const syntax::Atom& atom = *reads[d];
        const auto add = [&](std::string name, AxisOrigin origin) {
            bound.axes.push_back(Axis{std::move(name), shape[at], origin, dim.span});
            input.dims.push_back(BoundDim{{static_cast<AxisId>(bound.axes.size() - 1)}, shape[at], dim.span});
            ++at;
        };
        if (as<syntax::Ellipsis>(atom)) {
            for (std::size_t k = 0, width = shape.size() - named; k < width; ++k)
                add(ellipsis_axis_name(k), AxisOrigin::ellipsis);
        } else if (const auto* number = as<syntax::Number>(atom)) {
            if (number->value != shape[at])
                throw tensors
                    .shape_error(fmt::format("'{}' needs a dim of length {}, but dim {} has length {}",
                                             number->value, number->value, at, shape[at]))
                    .at(text, number->span)
                    .help("a number matches only a dim of that length; name the dim to read its length");
            bound.axes.push_back(
                Axis{anonymous_axis_name(*number), shape[at], AxisOrigin::anonymous, number->span});
            input.dims.push_back(BoundDim{{static_cast<AxisId>(bound.axes.size() - 1)}, shape[at], dim.span});
            ++at;
        } else {
            const auto& name = std::get<syntax::Name>(atom);
            add(name.text == "_" ? fmt::format("_@{}", name.span.begin) : name.text,
                name.text == "_" ? AxisOrigin::anonymous : AxisOrigin::named);
        }
    }
    bound.inputs.push_back(std::move(input));
    return bound;
}

}  // namespace einc::detail
