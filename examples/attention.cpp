// Attention, written the einops way: split the heads out of the hidden axis with rearrange, score every
// query against every key with einsum, pool with reduce, weight the values with einsum, merge the heads
// back with rearrange. Each call's plan and cost is printed as `einc explain` prints it (Program::explain).
//
// (Softmax is not an index expression: einc leaves it to you. The example uses the raw scores.)
#include <einc/einc.hpp>
#include <fmt/format.h>

namespace {

// Binds a call to its inputs, prints its plan and cost on an H100, runs it on the CPU, and returns the
// result.
einc::Tensor step(const char* title, const einc::Expression& expression,
                  std::initializer_list<einc::Tensor> inputs) {
    std::vector<einc::TensorView> views;
    for (const einc::Tensor& t : inputs) views.push_back(t.view());
    const einc::Program program = expression.bind(views);
    const std::vector<einc::Input> args(inputs.begin(), inputs.end());
    einc::Tensor result = program.run(args)[0];
    fmt::print("---- {}\n{}(\"{}\") -> {} {}{}\n", title, einc::name_of(expression.call().op),
               expression.call().pattern, einc::name_of(result.dtype()), einc::format_shape(result.shape()),
               program.plan().view_source(0) ? "  (a view of its input: no data moved)" : "");
    fmt::print("{}\n", program.explain("h100"));
    return result;
}

}  // namespace

int main() {
    const std::int64_t batch = 2, seq = 64, heads = 4, head_dim = 16;
    const einc::Tensor x =
        einc::Tensor::zeros(einc::DType::f32, {batch, seq, heads * head_dim});  // hidden states
    fmt::print("x: hidden states, batch={} seq={} hidden=heads*head_dim={}*{}\n\n", batch, seq, heads,
               head_dim);

    // The patterns are compiled once; binding them to shapes plans them (Program), running them is cheap.
    const auto split = einc::compile(einc::Op::rearrange, "b s (h d) -> b h s d", {{"h", heads}});
    const auto scores_of = einc::compile(einc::Op::einsum, "b h i d, b h j d -> b h i j");
    const auto pool = einc::compile(einc::Op::reduce, "b h i j -> b h i", {}, einc::Reduction::max);
    const auto weigh = einc::compile(einc::Op::einsum, "b h i j, b h j d -> b h i d");
    const auto merge = einc::compile(einc::Op::rearrange, "b h s d -> b s (h d)");
    const auto head_mean =
        einc::compile(einc::Op::reduce, "b s (h d) -> b s d", {{"h", heads}}, einc::Reduction::mean);

    const einc::Tensor q = step("1. split the heads: a view, whatever the sizes", split, {x});
    const einc::Tensor k = step("   the keys, the same way", split, {x});
    const einc::Tensor scores =
        step("2. scores: batched GEMMs over (b h); in the head views (b h) is not "
             "one stride, so a GEMM per b, each batched over h, reads q and k in place",
             scores_of, {q, k});
    step("3. pooling: the largest score of each query (reduce max over the keys)", pool, {scores});
    const einc::Tensor out = step("4. weigh the values (the queries stand in for them): the same GEMMs, "
                                  "the values read in place",
                                  weigh, {scores, q});
    step("5. merge the heads back: (h d) is not adjacent in memory, so this one copies", merge, {out});
    step("6. pooling over heads: the mean of the heads (reduce mean)", head_mean, {x});
    return 0;
}
