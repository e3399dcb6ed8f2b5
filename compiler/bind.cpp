// Pass 1: bind. parse() reads the pattern; bind() hands it to the binder of its operation, one file each:
// bind_expression*.cpp (rearrange, reduce, repeat, einsum), bind_pack.cpp (pack, unpack) and
// bind_parse_shape.cpp; the checks they share are in bind_common.*.
#include "compiler/bind.hpp"

#include <fmt/format.h>

#include "compiler/bind_common.hpp"
#include "grammar/diagnostic.hpp"
#include "grammar/parse.hpp"

namespace einc {

syntax::Pattern parse(const Call& call) {
    if (call.compact && call.op != Op::einsum)
        throw Error(ErrorKind::usage,
                    fmt::format("compact subscripts are for einsum, not {}", name_of(call.op)))
            .help(fmt::format("drop --compact: {} reads einops notation, e.g. `b c h w -> b h w c`",
                              name_of(call.op)));
    if (call.op == Op::pack || call.op == Op::unpack) return parse_pack(call.pattern);
    if (call.compact) return parse_compact(call.pattern);
    return parse_einops(call.pattern);
}

Bound bind(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes) {
    switch (call.op) {
    case Op::pack:
    case Op::unpack: return detail::bind_pack(pattern, call, shapes);
    case Op::parse_shape: return detail::bind_parse_shape(pattern, call, shapes);
    default: return detail::bind_expression(pattern, call, shapes);  // rearrange, reduce, repeat, einsum
    }
}

}  // namespace einc
