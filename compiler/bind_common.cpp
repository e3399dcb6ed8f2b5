#include "compiler/bind_common.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "compiler/checked.hpp"

namespace einc::detail {
namespace {

std::string format_sizes(std::span<const AxisSize> sizes) {
    std::vector<std::string> parts;
    for (const AxisSize& s : sizes) parts.push_back(fmt::format("{}={}", s.name, s.size));
    return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string anonymous_axis_name(const syntax::Number& number) {
    return fmt::format("{}@{}", number.value, number.span.begin);
}

std::string ellipsis_axis_name(std::size_t k) {
    return fmt::format("...{}", k);
}

const syntax::Ellipsis* ellipsis_in(const syntax::Operand& operand) {
    for (const syntax::Dim& dim : operand.dims)
        for (const syntax::Atom& atom : dim.atoms)
            if (const auto* e = as<syntax::Ellipsis>(atom)) return e;
    return nullptr;
}

std::size_t dims_besides_ellipsis(const syntax::Operand& operand) {
    return operand.dims.size() - (ellipsis_in(operand) ? 1 : 0);
}

std::string Tensors::name(std::size_t i) const {
    if (naming == TensorNaming::input) return "the input";
    return fmt::format("{} {}", naming == TensorNaming::operand ? "operand" : "tensor", i);
}

Error Tensors::shape_error(std::string message, ErrorKind kind) const {
    Error error(kind, std::move(message));
    for (std::size_t i = 0; i < shapes.size(); ++i)
        error.note(fmt::format("{} has shape {}", naming == TensorNaming::input ? "input" : name(i),
                               format_shape(shapes[i])));
    if (!sizes.empty()) error.note("axis sizes given: " + format_sizes(sizes));
    return error;
}

std::string too_many_elements(std::string_view what, std::span<const std::int64_t> lengths) {
    if (checked_product(lengths) == 0)
        return fmt::format(
            "{} is empty, but its other lengths multiply past 64 bits (numpy refuses such a shape too)",
            what);
    return fmt::format("{} has more elements than fit in 64 bits", what);
}

void Tensors::check_not_negative(std::size_t i, ShapeShown shown) const {
    const Shape& shape = shapes[i];
    if (std::none_of(shape.begin(), shape.end(), [](std::int64_t extent) { return extent < 0; })) return;
    std::string message = name(i) + " has a negative length in its shape";
    if (shown == ShapeShown::in_note) throw shape_error(std::move(message), ErrorKind::usage);
    throw Error(ErrorKind::usage, fmt::format("{} {}", message, format_shape(shape)));
}

void Tensors::check_lengths(std::size_t i) const {
    check_not_negative(i, ShapeShown::in_message);
    if (!lengths_fit(shapes[i])) throw shape_error(too_many_elements(name(i), shapes[i]));
}

void check_rank(const Tensors& tensors, std::size_t i, const syntax::Operand& operand, std::string_view text,
                std::string_view whose, std::string help_without_ellipsis) {
    const bool ellipsis = ellipsis_in(operand) != nullptr;
    const std::size_t named = dims_besides_ellipsis(operand);
    const std::size_t rank = tensors.shapes[i].size();
    if (ellipsis ? rank >= named : rank == named) return;
    const std::string_view at_least = ellipsis ? "at least " : "";
    throw tensors.shape_error(fmt::format("expected {}{} dims{}, got {}", at_least, named, whose, rank))
        .at(text, operand.span)
        .help(ellipsis ? fmt::format("'...' can match no dims, but the pattern's {} other dims need one each",
                                     named)
                       : std::move(help_without_ellipsis));
}

void FirstOccurrences::check_ellipsis(const syntax::Ellipsis& ellipsis, std::string_view where) {
    if (ellipsis_)
        throw Error(ErrorKind::pattern, fmt::format("'...' appears twice{}", where))
            .at(text_, ellipsis.span)
            .also(ellipsis_->span)
            .help("one '...' stands for all the dims not named");
    ellipsis_ = &ellipsis;
}

std::optional<Error> FirstOccurrences::repeated(const syntax::Name& name, std::string_view where) {
    const auto [first, inserted] = names_.emplace(name.text, name.span);
    if (inserted) return std::nullopt;
    return Error(ErrorKind::pattern, fmt::format("axis '{}' appears twice{}", name.text, where))
        .at(text_, first->second)
        .also(name.span);
}

Error grouped_ellipsis(std::string_view text, const syntax::Ellipsis& ellipsis, const syntax::Dim& group,
                       std::string_view where) {
    return Error(ErrorKind::pattern, fmt::format("'...' inside a group{}", where))
        .at(text, ellipsis.span)
        .also(group.span);
}

void check_no_sizes(const Call& call, std::string help) {
    if (!call.sizes.empty())
        throw Error(ErrorKind::usage, fmt::format("{} takes no axis sizes", name_of(call.op)))
            .help(std::move(help));
}

void check_one_tensor(const Call& call, std::size_t count) {
    if (count != 1)
        throw Error(ErrorKind::usage, fmt::format("{} takes one tensor, got {}", name_of(call.op), count));
}

}  // namespace einc::detail
