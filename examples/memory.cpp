// Memory accounting: what a tensor occupies (elements x element size), which einc calls cost no memory at
// all (views share their input's bytes), which ones copy, and what Options::contiguous changes.
#include <cstdio>
#include <einc/einc.hpp>
#include <fmt/format.h>

namespace {

// What a call returned: a view of x (0 new bytes) or fresh memory of its own.
void report(const char* what, const einc::Tensor& result, const einc::Program& program) {
    const bool view = program.plan().view_source(0).has_value();  // the plan made the result a View step
    fmt::print("{:<52} {:<12} {}\n", what, einc::format_shape(result.shape()),
               view ? "a view: 0 new bytes, shares x's memory"
                    : fmt::format("new memory: {} ({} x {} B)",
                                  einc::format_bytes(static_cast<double>(result.nbytes())), result.numel(),
                                  einc::size_of(result.dtype())));
    const einc::Cost& cost = program.plan().total;
    fmt::print("{:<52} {:<12} plan moves {} (read {} + write {})\n", "", "", einc::format_bytes(cost.bytes()),
               einc::format_bytes(cost.bytes_read), einc::format_bytes(cost.bytes_written));
}

}  // namespace

int main() {
    fmt::print("== 1. bytes = elements x element size ==\n");
    fmt::print("a 1024 x 1024 tensor ({} elements) of each dtype:\n", 1024 * 1024);
    for (const einc::DType dtype : einc::all_dtypes) {
        const einc::Tensor t = einc::Tensor::zeros(dtype, {1024, 1024});
        fmt::print("  {:<7} {} B per element  {:>9}\n", einc::name_of(dtype), einc::size_of(dtype),
                   einc::format_bytes(static_cast<double>(t.nbytes())));
    }

    fmt::print("\n== 2. views cost 0 bytes; copies cost their size ==\n");
    const einc::Tensor x = einc::Tensor::zeros(einc::DType::f32, {8, 3, 64, 64});
    fmt::print("x: f32 {} = {} elements x 4 B = {}\n", einc::format_shape(x.shape()), x.numel(),
               einc::format_bytes(static_cast<double>(x.nbytes())));
    const auto show = [&](const char* what, einc::Op op, const char* pattern, const einc::AxisSizes& sizes,
                          einc::Reduction reduction, const einc::Options& options) {
        const einc::Program program = einc::compile(op, pattern, sizes, reduction).bind({x.view()}, options);
        report(what, program.run({x})[0], program);
    };
    show("rearrange  b c h w -> b h w c      (permute)", einc::Op::rearrange, "b c h w -> b h w c", {},
         einc::Reduction::none, {});
    show("rearrange  b c h w -> b (c h w)    (flatten)", einc::Op::rearrange, "b c h w -> b (c h w)", {},
         einc::Reduction::none, {});
    show("rearrange  b c h w -> b c (h w)    (merge)", einc::Op::rearrange, "b c h w -> b c (h w)", {},
         einc::Reduction::none, {});
    show("repeat     b c h w -> b c h w r    (stride 0)", einc::Op::repeat, "b c h w -> b c h w r",
         {{"r", 4}}, einc::Reduction::none, {});
    show("rearrange  b c h w -> b (h w c)    (copy)", einc::Op::rearrange, "b c h w -> b (h w c)", {},
         einc::Reduction::none, {});
    show("reduce     b c h w -> b c  mean", einc::Op::reduce, "b c h w -> b c", {}, einc::Reduction::mean,
         {});

    fmt::print("\n== 3. Options::contiguous: always fresh, row-major memory ==\n");
    show("rearrange  b c h w -> b h w c      contiguous", einc::Op::rearrange, "b c h w -> b h w c", {},
         einc::Reduction::none, einc::Options{.contiguous = true});
    const einc::Tensor view = einc::rearrange(x, "b c h w -> b h w c");
    fmt::print(
        "the view's strides {} are x's, permuted; the contiguous copy's are row-major {}\n",
        fmt::format("({})", fmt::join(view.view().strides, ",")),
        fmt::format(
            "({})",
            fmt::join(einc::rearrange(x, "b c h w -> b h w c", {}, {.contiguous = true}).view().strides,
                      ",")));

    fmt::print("\n== 4. a view keeps its input alive ==\n");
    einc::Tensor kept;
    {
        const einc::Tensor scratch = einc::Tensor::zeros(einc::DType::f32, {4, 4});
        kept = einc::rearrange(scratch, "a b -> b a");
    }
    fmt::print("the input went out of scope; its view still holds {} of it: {} elements readable\n",
               einc::format_bytes(static_cast<double>(kept.nbytes())), kept.numel());
    return 0;
}
