// Internal to compiler/: the stages of bind() for rearrange, reduce, repeat and einsum, one concern per
// file. bind_expression.cpp runs them in order and assembles the Bound; bind_expression_pattern.cpp checks
// the pattern against the operation; bind_expression_axes.cpp collects each side's elementary axes (`...`
// expanded); bind_expression_sizes.cpp checks the shapes and infers the axis sizes.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/bind_common.hpp"

namespace einc::detail {

// The output side, where messages and the checks take an input's index.
inline constexpr std::size_t output_side = static_cast<std::size_t>(-1);

// A name and where it stands, in pattern order.
struct Occurrence {
    std::string name;
    syntax::Span span;
};
std::vector<Occurrence> names_in(const syntax::Operand& operand);

// "'h'", "'h' and 'w'", "'a', 'b' and 'c'"
std::string quoted_list(const std::vector<std::string>& names);

// What every stage reads - the pattern, the call, the shapes - and how their messages name sides and
// tensors.
class ExpressionContext {
public:
    ExpressionContext(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes);
    ExpressionContext(const ExpressionContext&) = delete;
    ExpressionContext& operator=(const ExpressionContext&) = delete;

    const syntax::Pattern& pattern;
    const Call& call;
    std::span<const Shape> shapes;
    std::string_view text;
    Tensors tensors;

    bool is_einsum() const { return call.op == Op::einsum; }
    std::string_view op() const { return name_of(call.op); }
    // The output as written, or (einsum without `->`) the one numpy's rule implies.
    const syntax::Operand& output() const { return pattern.output ? *pattern.output : *implicit_output_; }
    // The size given for an axis with the call, or null.
    const AxisSize* given_size(std::string_view name) const;
    // Which dim of input `i`'s pattern is `...` (its dim count if none).
    std::size_t ellipsis_position(std::size_t i) const { return ellipsis_positions_[i]; }

    // "left side" / "right side" for one-input operations, "operand 1" / "output" for einsum.
    std::string side_of(std::size_t input) const;
    // "on the left side" / "in operand 1": where something stands, as a message says it.
    std::string on_side(std::size_t input) const;
    std::string tensor_of(std::size_t input) const { return tensors.name(input); }
    std::string possessive(std::size_t input) const { return tensors.name(input) + "'s"; }

    Error shape_error(std::string message) const { return tensors.shape_error(std::move(message)); }
    Error pattern_error(std::string message) const { return Error(ErrorKind::pattern, std::move(message)); }

private:
    std::optional<syntax::Operand> implicit_output_;  // engaged where the pattern has no output
    // (looked up once: patterns of 10 000 axes)
    std::unordered_map<std::string_view, const AxisSize*> given_sizes_;
    std::vector<std::size_t> ellipsis_positions_;
};

// Where an axis got its size, for messages that say which two facts disagree.
struct SizeSource {
    enum Kind { unknown, given, literal, operand } kind = unknown;
    std::size_t input = 0;  // for `operand`
    syntax::Span span;
};

// The binding as the stages build it: the Bound, and what they need beside it.
struct ExpressionBinding {
    Bound bound;
    std::vector<SizeSource> sources;  // per axis
    std::map<std::string, AxisId> named;
    std::vector<AxisId> ellipsis_axes;                             // the axes `...` stands for
    std::vector<std::size_t> ellipsis_widths;                      // per input: the dims its `...` matches
    std::set<std::pair<std::size_t, std::size_t>> broadcast_dims;  // (input, bound dim) broadcast from 1
};

// bind_expression_pattern.cpp: everything the pattern and the call decide before a shape is read - the
// reduction, the number of operands, each operand on its own, which axes may stand on one side only, and
// the sizes given.
void check_pattern(const ExpressionContext& context);

// bind_expression_axes.cpp: the inputs' elementary axes (`...` expanded, einsum's length-1 dims broadcast)
// with their dims' lengths; then the output's dims over them.
void bind_inputs(const ExpressionContext& context, ExpressionBinding& binding);
void bind_output(const ExpressionContext& context, ExpressionBinding& binding);

// bind_expression_sizes.cpp: each tensor's lengths and rank against its operand; every axis size from the
// inputs' dims, with an error where they disagree; every tensor's axes fitting in 64 bits; no max or min over
// an empty axis.
void check_shapes(const ExpressionContext& context);
void infer_sizes(const ExpressionContext& context, ExpressionBinding& binding);
void check_axes_fit(const ExpressionContext& context, const Bound& bound);
void check_empty_reductions(const ExpressionContext& context, const Bound& bound);

}  // namespace einc::detail
