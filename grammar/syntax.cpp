#include "grammar/syntax.hpp"

#include <fmt/format.h>
#include <iterator>

#include "grammar/print.hpp"

namespace einc::syntax {

Span span_of(const Atom& atom) {
    return std::visit([](const auto& a) { return a.span; }, atom);
}

}  // namespace einc::syntax

namespace einc {

std::string to_string(const syntax::Atom& atom) {
    struct {
        std::string operator()(const syntax::Name& n) const { return n.text; }
        std::string operator()(const syntax::Number& n) const { return std::to_string(n.value); }
        std::string operator()(const syntax::Ellipsis&) const { return "..."; }
        std::string operator()(const syntax::Star&) const { return "*"; }
    } visitor;
    return std::visit(visitor, atom);
}

namespace {

template <typename Range>
std::string join(const Range& items, std::string_view separator) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += separator;
        out += to_string(item);
    }
    return out;
}

}  // namespace

std::string to_string(const syntax::Dim& dim) {
    const std::string atoms = join(dim.atoms, " ");
    return dim.grouped ? fmt::format("({})", atoms) : atoms;
}

std::string to_string(const syntax::Operand& operand) {
    return join(operand.dims, " ");
}

std::string to_string(const syntax::Pattern& pattern) {
    std::string out = join(pattern.inputs, ", ");
    if (pattern.output) out += fmt::format(" -> {}", to_string(*pattern.output));
    return out;
}

std::string print_syntax(const syntax::Pattern& pattern) {
    static constexpr const char* notation[] = {"einops notation", "compact subscripts", "pack pattern"};
    static_assert(std::size(notation) == static_cast<std::size_t>(syntax::Notation::pack) + 1,
                  "one name per Notation, in order");
    std::string out = fmt::format("syntax ({})\n", notation[static_cast<int>(pattern.notation)]);
    const auto line = [&](std::string label, const syntax::Operand& operand) {
        std::string dims;
        for (const syntax::Dim& dim : operand.dims) dims += fmt::format("  {}", to_string(dim));
        out += fmt::format("  {:<6}{}\n", label, operand.dims.empty() ? "  (scalar)" : dims);
    };
    for (std::size_t i = 0; i < pattern.inputs.size(); ++i)
        line(pattern.inputs.size() == 1 ? "in" : fmt::format("in {}", i), pattern.inputs[i]);
    if (pattern.output) line("out", *pattern.output);
    return out;
}

}  // namespace einc
