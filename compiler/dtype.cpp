#include "compiler/dtype.hpp"

#include <fmt/format.h>
#include <iterator>

#include "compiler/reduction.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {
namespace {

struct DTypeInfo {
    std::string_view name;
    std::size_t size;
    std::string_view numpy_name;  // also accepted when reading names
};

constexpr DTypeInfo info[] = {
    {"f64", 8, "float64"},
    {"f32", 4, "float32"},
    {"f16", 2, "float16"},
    {"bf16", 2, "bfloat16"},
    {"f8e4m3", 1, "float8_e4m3fn"},
    {"f8e5m2", 1, "float8_e5m2"},
    {"i8", 1, "int8"},
    {"i32", 4, "int32"},
    {"i64", 8, "int64"},
    {"bool", 1, "bool_"},
};
static_assert(std::size(info) == static_cast<std::size_t>(DType::boolean) + 1,
              "one entry per DType, in order");
static_assert(std::size(all_dtypes) == std::size(info), "all_dtypes lists every DType");

const DTypeInfo& info_of(DType dtype) {
    return info[static_cast<std::size_t>(dtype)];
}

}  // namespace

std::size_t size_of(DType dtype) {
    return info_of(dtype).size;
}
std::string_view name_of(DType dtype) {
    return info_of(dtype).name;
}

std::optional<DType> dtype_named(std::string_view name) {
    for (const DType dtype : all_dtypes)
        if (name == info_of(dtype).name || name == info_of(dtype).numpy_name) return dtype;
    if (name == "float") return DType::f32;
    if (name == "double") return DType::f64;
    if (name == "half") return DType::f16;
    return std::nullopt;
}

DType result_dtype(Op op, Reduction reduction, DType input, bool reduces_an_axis) {
    const bool fp8 = input == DType::f8e4m3 || input == DType::f8e5m2;
    if (op == Op::einsum) {
        if (input == DType::boolean || fp8)
            throw Error(ErrorKind::unsupported,
                        fmt::format("einsum on {} operands is not supported", name_of(input)))
                .help("einsum takes f64, f32, f16, bf16, i8, i32 or i64 operands");
        return input;
    }
    if (op != Op::reduce || !reduces_an_axis) return input;
    if (fp8)
        throw Error(ErrorKind::unsupported, fmt::format("reduce on {} is not supported", name_of(input)))
            .help("fp8 tensors are supported for data movement: rearrange, repeat, pack, unpack");
    if (info_of(reduction).result == ResultRule::floating && !is_floating(input))
        throw Error(ErrorKind::unsupported,
                    fmt::format("{} of {} values is not defined", name_of(reduction), name_of(input)))
            .help(fmt::format("as in einops, {} needs a floating-point tensor: convert it first, or use sum",
                              name_of(reduction)));
    return reduced_dtype(reduction, input);
}

}  // namespace einc
