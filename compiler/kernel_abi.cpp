#include "compiler/kernel_abi.hpp"

#include <fmt/format.h>
#include <iterator>

namespace einc {

std::string_view name_of(KernelKind kind) {
    static constexpr std::string_view names[] = {"elementwise", "vector_copy",     "transpose",
                                                 "reduce_rows", "reduce_columns",  "finalize",
                                                 "route",       "reduce_one_pass", "reduce_short_rows"};
    static_assert(std::size(names) == static_cast<std::size_t>(KernelKind::reduce_short_rows) + 1,
                  "one name per KernelKind, in order");
    return names[static_cast<std::size_t>(kind)];
}

namespace {

// A double as part of a C identifier: its shortest round-trip text, with '.' as 'p', '-' as 'm', and
// '+' dropped (unique: that text is).
std::string identifier_of(double value) {
    std::string out;
    for (const char c : fmt::format("{}", value)) {
        if (c == '.')
            out += 'p';
        else if (c == '-')
            out += 'm';
        else if (c != '+')
            out += c;
    }
    return out;
}

}  // namespace

std::string KernelSignature::name() const {
    std::string sources_part;
    for (const DType s : sources) sources_part += fmt::format("{}_", name_of(s));
    return fmt::format("einc_{}_{}_{}to_{}_acc_{}_k{}_r{}{}_i{}", name_of(kind),
                       op == Reduction::none ? "copy" : name_of(op), sources_part, name_of(destination),
                       name_of(accumulator), kept_rank, reduced_rank, partials ? "_partials" : "",
                       wide_index ? 64 : 32) +
           (epilogue.identity() ? ""
                                : fmt::format("_alpha{}_beta{}", identifier_of(epilogue.alpha),
                                              identifier_of(epilogue.beta)));
}

}  // namespace einc
