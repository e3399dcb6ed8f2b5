#include "compiler/call.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <iterator>

#include "compiler/reduction.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

constexpr std::array op_names{"rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "parse_shape"};
static_assert(op_names.size() == static_cast<std::size_t>(Op::parse_shape) + 1, "one name per Op, in order");

}  // namespace

std::string_view name_of(Op op) {
    return op_names.at(static_cast<std::size_t>(op));
}
std::string_view name_of(Reduction reduction) {
    return reduction == Reduction::none ? "none" : info_of(reduction).name;
}

std::optional<Op> op_named(std::string_view name) {
    for (std::size_t i = 0; i < op_names.size(); ++i)
        if (name == op_names[i]) return static_cast<Op>(i);
    return std::nullopt;
}

std::optional<Reduction> reduction_named(std::string_view name) {
    for (const ReductionInfo& info : reduction_table)
        if (name == info.name) return info.op;
    return std::nullopt;
}

std::vector<std::string_view> all_reduction_names() {
    std::vector<std::string_view> names;
    for (const ReductionInfo& info : reduction_table) names.push_back(info.name);
    return names;
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

}  // namespace

std::optional<std::string_view> closest_reduction(std::string_view name) {
    std::optional<std::string_view> best;
    std::size_t best_distance = 3;  // more than two edits away is a different word
    for (const std::string_view candidate : all_reduction_names()) {
        const std::size_t distance = edit_distance(name, candidate);
        if (distance < best_distance) best = candidate, best_distance = distance;
    }
    if (!best && (name == "avg" || name == "average")) best = "mean";
    if (!best && (name == "maximum" || name == "amax")) best = "max";
    if (!best && (name == "minimum" || name == "amin")) best = "min";
    return best;
}

Reduction reduction_or_error(std::string_view name) {
    if (const auto reduction = reduction_named(name)) return *reduction;
    const auto suggestion = closest_reduction(name);
    throw Error(ErrorKind::usage, fmt::format("unknown reduction '{}'", name))
        .help(suggestion
                  ? fmt::format("did you mean '{}'? (sum, mean, max, min, prod, any, all)", *suggestion)
                  : std::string("one of sum, mean, max, min, prod, any, all"));
}

std::string format_shape(const Shape& shape) {
    if (shape.empty()) return "scalar";
    return fmt::format("{}", fmt::join(shape, "x"));
}

std::string format_call(const Call& call) {
    std::string text = fmt::format("{} \"{}\"", name_of(call.op), call.pattern);
    if (call.reduction != Reduction::none) text += fmt::format(" {}", name_of(call.reduction));
    for (const AxisSize& size : call.sizes) text += fmt::format(" -a {}={}", size.name, size.size);
    for (const Shape& shape : call.packed_shapes) text += fmt::format(" --packed {}", format_shape(shape));
    if (call.compact) text += " --compact";
    return text;
}

}  // namespace einc
