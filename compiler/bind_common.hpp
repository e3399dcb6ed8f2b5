// Internal to compiler/: what the binders of bind() share - the entry point of each (bind_expression.cpp,
// bind_pack.cpp, bind_parse_shape.cpp) and the checks more than one of them makes, so that one rule
// gives one message wherever it applies.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "compiler/bound.hpp"
#include "compiler/call.hpp"
#include "grammar/diagnostic.hpp"
#include "grammar/syntax.hpp"

namespace einc::detail {

// bind() for rearrange, reduce, repeat and einsum.
Bound bind_expression(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes);
// bind() for pack and unpack.
Bound bind_pack(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes);
// bind() for parse_shape.
Bound bind_parse_shape(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes);

// The atom if it is a T, else null.
template <typename T>
const T* as(const syntax::Atom& atom) {
    return std::get_if<T>(&atom);
}

// The whole pattern, for a caret under all of it.
inline syntax::Span whole_pattern(std::string_view text) {
    return syntax::Span{0, static_cast<std::uint32_t>(text.size())};
}

// The name of the axis an anonymous length stands for (`2` at byte 5: "2@5"), one per occurrence.
std::string anonymous_axis_name(const syntax::Number& number);
// The name of the k-th axis `...` stands for: "...0", "...1".
std::string ellipsis_axis_name(std::size_t k);

// The message refusing a tensor whose lengths don't fit (lengths_fit): "<what> has more elements than fit
// in 64 bits", or, where a 0 makes it empty, that its other lengths multiply past 64 bits.
std::string too_many_elements(std::string_view what, std::span<const std::int64_t> lengths);

// The first `...` of an operand, or null.
const syntax::Ellipsis* ellipsis_in(const syntax::Operand& operand);
// The dims of an operand besides its `...`: each matches one dim of the tensor.
std::size_t dims_besides_ellipsis(const syntax::Operand& operand);

// How messages name the tensors of a call: "the input" (one-input operations), "operand 1" (einsum),
// "tensor 1" (pack, unpack).
enum class TensorNaming { input, operand, tensor };

// Where a message about one tensor's negative length shows its shape: after the message, or (parse_shape)
// in a note, as its errors about lengths all do.
enum class ShapeShown { in_message, in_note };

// The tensors a call binds, as its error messages name them and show their shapes.
struct Tensors {
    std::span<const Shape> shapes;
    TensorNaming naming;
    std::span<const AxisSize> sizes;  // given with the call: shown with every error about lengths

    // Tensor i as a message names it: "the input", "operand 1", "tensor 1".
    std::string name(std::size_t i) const;
    // An error about lengths, with a note for every shape ("input has shape 2x3") and the sizes given.
    Error shape_error(std::string message, ErrorKind kind = ErrorKind::shape) const;
    // Refuses a negative length in tensor i's shape (a usage error).
    void check_not_negative(std::size_t i, ShapeShown shown) const;
    // Refuses a negative length in tensor i's shape, or lengths that don't fit (lengths_fit).
    void check_lengths(std::size_t i) const;
};

// Refuses a rank the operand can't match - one dim each, any number for its `...`: "expected [at least]
// N dims<whose>, got R" under the operand; `help_without_ellipsis` says how to match it where it has none.
void check_rank(const Tensors& tensors, std::size_t i, const syntax::Operand& operand, std::string_view text,
                std::string_view whose, std::string help_without_ellipsis);

// The first `...` and the first occurrence of each name in one operand, met in pattern order, to refuse
// a second one.
class FirstOccurrences {
public:
    explicit FirstOccurrences(std::string_view text) : text_(text) {}

    // Refuses a second `...`: "'...' appears twice<where>", with carets at it and at the first.
    void check_ellipsis(const syntax::Ellipsis& ellipsis, std::string_view where);
    // Remembers a name's first occurrence; for a later one, the error "axis 'h' appears twice<where>" with
    // carets at both, for the caller to throw (einsum's inputs may repeat a name: a diagonal).
    std::optional<Error> repeated(const syntax::Name& name, std::string_view where);

private:
    std::string_view text_;
    const syntax::Ellipsis* ellipsis_ = nullptr;
    std::map<std::string, syntax::Span> names_;
};

// The error for a `...` inside a group: "'...' inside a group<where>", with carets at it and at the group.
Error grouped_ellipsis(std::string_view text, const syntax::Ellipsis& ellipsis, const syntax::Dim& group,
                       std::string_view where);

// Refuses axis sizes given to an operation that reads them all from its tensors: "<op> takes no axis sizes".
void check_no_sizes(const Call& call, std::string help = {});
// Refuses a number of tensors other than one: "<op> takes one tensor, got N".
void check_one_tensor(const Call& call, std::size_t count);

}  // namespace einc::detail
