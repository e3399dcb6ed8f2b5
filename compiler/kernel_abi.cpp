#include "compiler/kernel_abi.hpp"

#include <fmt/format.h>

namespace einc {

std::string_view name_of(KernelKind kind) {
    static constexpr std::string_view names[] = {"elementwise", "vector_copy", "transpose", "reduce_rows", "reduce_columns", "finalize"};
    return names[static_cast<std::size_t>(kind)];
}

std::string KernelSignature::name() const {
    std::string sources_part;
    for (const DType s : sources) sources_part += fmt::format("{}_", name_of(s));
    return fmt::format("einc_{}_{}_{}to_{}_acc_{}_k{}_r{}{}_i{}", name_of(kind), op == Reduction::none ? "copy" : name_of(op), sources_part,
                       name_of(destination), name_of(accumulator), kept_rank, reduced_rank, partials ? "_partials" : "",
                       wide_index ? 64 : 32);
}

}  // namespace einc
