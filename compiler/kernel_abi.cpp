#include "compiler/kernel_abi.hpp"

#include <fmt/format.h>
#include <iterator>
#include <limits>
#include <ostream>

#include "grammar/diagnostic.hpp"

namespace einc {

std::string_view name_of(KernelKind kind) {
    static constexpr std::string_view names[] = {
        "elementwise", "permute",         "vector_copy",       "short_side",
        "tiles",       "reduce_rows",     "reduce_columns",    "finalize",
        "route",       "reduce_one_pass", "reduce_short_rows", "reduce_packed_rows"};
    static_assert(std::size(names) == static_cast<std::size_t>(KernelKind::reduce_packed_rows) + 1,
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

std::ostream& operator<<(std::ostream& out, const KernelSignature& signature) {
    return out << signature.name();
}

std::string KernelSignature::name() const {
    std::string sources_part;
    for (const DType s : sources) sources_part += fmt::format("{}_", name_of(s));
    return fmt::format("einc_{}_{}_{}to_{}_acc_{}_k{}_r{}{}_i{}", name_of(kind),
                       op == Reduction::none ? "copy" : name_of(op), sources_part, name_of(destination),
                       name_of(accumulator), kept_rank, reduced_rank, partials ? "_partials" : "",
                       wide_index ? 64 : 32) +
           (epilogue.identity() ? ""
                                : fmt::format("_alpha{}_beta{}", identifier_of(epilogue.alpha),
                                              identifier_of(epilogue.beta))) +
           (kind == KernelKind::tiles ? fmt::format("_w{}_a{}b{}", vector, runs[0], runs[1]) : "") +
           (kind == KernelKind::short_side
                ? fmt::format("_s{}{}_c{}", short_extent, short_source ? "src" : "dst", vector)
                : "") +
           ((kind == KernelKind::reduce_rows || kind == KernelKind::reduce_columns) && vector > 0
                ? fmt::format("_v{}", vector)
                : "") +
           (kind == KernelKind::reduce_packed_rows ? fmt::format("_p{}", vector) : "");
}

DivisionMagic division_magic(std::int64_t divisor) {
    EINC_ASSERT(divisor >= 1 && divisor <= std::numeric_limits<std::int32_t>::max());
    std::uint32_t shift = 0;
    while ((std::int64_t{1} << shift) < divisor) ++shift;
    const std::uint64_t magic = (std::uint64_t{1} << 32) *
                                    ((std::uint64_t{1} << shift) - static_cast<std::uint64_t>(divisor)) /
                                    static_cast<std::uint64_t>(divisor) +
                                1;
    EINC_ASSERT(magic <= std::numeric_limits<std::uint32_t>::max());
    return {static_cast<std::uint32_t>(magic), shift};
}

int kernel_alignment(const KernelSignature& s, KernelArgument argument) {
    const int size = static_cast<int>(size_of(s.destination));
    const bool destination = argument == KernelArgument::destination;
    switch (s.kind) {
    case KernelKind::vector_copy: return kernel_vector_bytes;
    case KernelKind::short_side:  // 16-byte vectors on the contiguous side, C elements a short row on the
                                  // other
        return destination != s.short_source ? kernel_vector_bytes : s.vector * size;
    case KernelKind::tiles: return s.vector * size;
    case KernelKind::reduce_columns:  // a 16-byte vector of V outputs' terms
        return s.vector > 0 && argument == KernelArgument::source0 ? kernel_vector_bytes : 1;
    case KernelKind::elementwise:
    case KernelKind::permute:
    case KernelKind::reduce_rows:  // peels the elements before a row's first 16-byte boundary
    case KernelKind::finalize:
    case KernelKind::route:
    case KernelKind::reduce_one_pass:     // peels the partial vectors at either end of its run
    case KernelKind::reduce_short_rows:   // loads element by element where a row is not 16-byte aligned
    case KernelKind::reduce_packed_rows:  // a row a thread where the source is not 16-byte aligned
        return 1;
    }
    EINC_ASSERT(false);
}

}  // namespace einc
