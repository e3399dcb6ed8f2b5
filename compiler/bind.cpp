// Pass 1: bind. parse() reads the pattern; bind() hands it to the binder of its operation, one file each:
// bind_expression*.cpp (rearrange, reduce, repeat, einsum), bind_pack.cpp (pack, unpack) and
// bind_parse_shape.cpp; the checks they share are in bind_common.*.
#include "compiler/bind.hpp"

#include <fmt/format.h>
#include <optional>

#include "compiler/bind_common.hpp"
#include "grammar/diagnostic.hpp"
#include "grammar/parse.hpp"
#include "grammar/print.hpp"

namespace einc {
namespace {

// An einsum pattern without spaces that fails as einops notation (`ij,jk->ik`: axes `ij`, `jk`, `ik`) is
// most likely numpy subscripts: where their one-letter reading parses - and binds, given the shapes - the
// error says so, with that reading spelt out and the C++ call that takes subscripts (the CLI says
// `--compact` instead: Error::subscripts).
void offer_subscripts(Error& error, const Call& call, std::optional<std::span<const Shape>> shapes) {
    if (call.op != Op::einsum || call.compact || call.pattern.find_first_of(" \t\n") != std::string::npos)
        return;
    try {
        const syntax::Pattern subscripts = parse_compact(call.pattern);
        if (shapes) {
            Call compact = call;
            compact.compact = true;
            (void)detail::bind_expression(subscripts, compact, *shapes);
        }
        std::string reading = to_string(subscripts);
        reading.erase(reading.find_last_not_of(' ') + 1);  // (`i j -> `: an empty output)
        error.subscripts(call.pattern, reading)
            .help(
                fmt::format("as numpy subscripts (one letter an axis) this is `{}`: write it so, or ask for "
                            "subscripts: einc::einsum(einc::Subscripts{{\"{}\"}}, ...)",
                            reading, call.pattern));
    } catch (const Error&) {  // not subscripts either: the error as it was
    }
}

}  // namespace

syntax::Pattern parse(const Call& call) {
    if (call.compact && call.op != Op::einsum)
        throw Error(ErrorKind::usage,
                    fmt::format("compact subscripts are for einsum, not {}", name_of(call.op)))
            .help(fmt::format("drop --compact: {} reads einops notation, e.g. `b c h w -> b h w c`",
                              name_of(call.op)));
    if (call.op == Op::pack || call.op == Op::unpack) return parse_pack(call.pattern);
    if (call.compact) return parse_compact(call.pattern);
    try {
        return parse_einops(call.pattern);
    } catch (Error& e) {
        offer_subscripts(e, call, std::nullopt);
        throw;
    }
}

Bound bind(const syntax::Pattern& pattern, const Call& call, std::span<const Shape> shapes) {
    switch (call.op) {
    case Op::pack:
    case Op::unpack: return detail::bind_pack(pattern, call, shapes);
    case Op::parse_shape: return detail::bind_parse_shape(pattern, call, shapes);
    default:  // rearrange, reduce, repeat, einsum
        try {
            return detail::bind_expression(pattern, call, shapes);
        } catch (Error& e) {
            offer_subscripts(e, call, shapes);
            throw;
        }
    }
}

}  // namespace einc
