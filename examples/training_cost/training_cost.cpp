// What one training step of a transformer layer costs, counted by einc: the layer's index expressions
// (projections, head split and merge, attention scores and weighted values, layer-norm means), each bound
// with its backward (einc::gradient), each forward and backward plan costed on an H100 - and the sum set
// beside the 6 x N x P rule of thumb. Binding only plans: no tensor is allocated (the views have no data),
// so a layer of this size is accounted in milliseconds on a CPU.
#include <einc/einc.hpp>
#include <fmt/format.h>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using einc::DType;
using einc::Shape;
using einc::TensorView;

const DType dtype = DType::bf16;  // what a layer trains in (GEMMs accumulate in f32)

// A tensor of this shape, row-major, with no data: enough to plan.
TensorView tensor(Shape shape) {
    Shape strides = einc::row_major_strides(shape);
    return TensorView{nullptr, dtype, std::move(shape), std::move(strides)};
}

// One part of a layout along its first dim, as q, k and v are of the split heads: the other dims as they
// are. (The parts differ only in where they start, which planning does not need.)
TensorView part_of(const einc::TensorSpec& whole) {
    return TensorView{nullptr, whole.dtype, Shape(whole.shape.begin() + 1, whole.shape.end()),
                      Shape(whole.strides.begin() + 1, whole.strides.end())};
}

// A plan's roofline time on `device`: its steps' bounds, in sequence (as `einc explain` adds them), and the
// time of its compute-bound steps (the rest is spent under the memory roof).
struct Time {
    double seconds = 0, compute_seconds = 0;
    void add(const einc::Plan& plan, const einc::DeviceModel& device) {
        for (const einc::PlanStep& step : plan.steps) {
            const einc::Roofline bound =
                einc::roofline(step.cost, device, einc::compute_dtype(plan, step.step));
            seconds += bound.seconds;
            if (bound.compute_bound) compute_seconds += bound.seconds;
        }
    }
    void add(const Time& other) { seconds += other.seconds, compute_seconds += other.compute_seconds; }
    // "52.1 us compute": the time, and the roof that most of it is spent under.
    std::string text() const {
        if (seconds == 0) return "0 (free)";
        return fmt::format("{} {}", einc::format_seconds(seconds),
                           compute_seconds * 2 > seconds ? "compute" : "memory");
    }
};

// One call of the layer, bound with its backward.
struct LayerCall {
    const char* name;
    einc::Call call;
    einc::Gradient gradient;
    bool attention_matmul = false;  // a product of two activations: no weight, outside 6NP
};

einc::Call make_call(einc::Op op, const char* pattern, einc::Reduction reduction = einc::Reduction::none,
                     einc::AxisSizes sizes = {}) {
    einc::Call call;
    call.op = op, call.pattern = pattern, call.reduction = reduction, call.sizes = std::move(sizes);
    return call;
}

std::string call_text(const einc::Call& call) {
    std::string text = fmt::format("{} \"{}\"", einc::name_of(call.op), call.pattern);
    if (call.reduction != einc::Reduction::none) text += fmt::format(" {}", einc::name_of(call.reduction));
    for (const einc::AxisSize& size : call.sizes) text += fmt::format(" {}={}", size.name, size.size);
    return text;
}

std::string shapes_text(std::span<const einc::TensorSpec> specs) {
    std::string text;
    for (const einc::TensorSpec& spec : specs) {
        if (!text.empty()) text += ", ";
        text += einc::format_shape(spec.shape);
        if (spec.strides != einc::row_major_strides(spec.shape)) text += " (strided)";
    }
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    const std::int64_t B = 8, T = 1024, D = 1024, H = 16, E = D / H,
                       F = 4 * D;  // batch, sequence, model, heads, head, MLP
    const einc::DeviceModel& h100 = *einc::device_model_named("h100");
    fmt::print("one transformer layer, one training step: batch B={} sequence T={} d_model D={} heads H={} "
               "(head E={})\n",
               B, T, D, H, E);
    fmt::print("MLP F={}, {} throughout; every call's forward and backward plans, costed on an {}\n\n", F,
               einc::name_of(dtype), h100.name);

    const TensorView x = tensor({B, T, D});  // the residual stream, and each layer norm's output
    const TensorView w_qkv = tensor({D, 3 * D}), w_out = tensor({D, D}), w_up = tensor({D, F}),
                     w_down = tensor({F, D});
    const std::vector<TensorView> weights{w_qkv, w_out, w_up, w_down};

    using einc::Op;
    std::vector<LayerCall> layer;
    // Binds a call and its backward to inputs like these (and row-major output gradients, as in training).
    const auto add = [&layer](const char* name, einc::Call call, std::vector<TensorView> inputs,
                              bool attention_matmul = false) {
        einc::Gradient gradient = einc::gradient(call, inputs);
        layer.push_back(LayerCall{name, std::move(call), std::move(gradient), attention_matmul});
    };
    const auto einsum = [](const char* pattern) { return make_call(Op::einsum, pattern); };
    const einc::Call mean = make_call(Op::reduce, "b t d -> b t", einc::Reduction::mean);
    add("ln1 mean", mean, {x});
    add("qkv projection", einsum("b t d, d k -> b t k"), {x, w_qkv});
    add("split heads",
        make_call(Op::rearrange, "b t (three h e) -> three b h t e", einc::Reduction::none,
                  {{"three", 3}, {"h", H}}),
        {tensor({B, T, 3 * D})});
    // q, k and v are parts of the split's result: strided views of the qkv projection's output.
    const einc::TensorSpec qkv = layer.back().gradient.forward().plan().outputs[0];
    const TensorView q = part_of(qkv), k = part_of(qkv), v = part_of(qkv);
    add("scores", einsum("b h i e, b h j e -> b h i j"), {q, k}, true);
    // (softmax over j turns the scores into the weights: not an index expression; see below)
    add("attend", einsum("b h i j, b h j e -> b h i e"), {tensor({B, H, T, T}), v}, true);
    add("merge heads", make_call(Op::rearrange, "b h t e -> b t (h e)"), {tensor({B, H, T, E})});
    add("out projection", einsum("b t c, c d -> b t d"), {tensor({B, T, D}), w_out});
    add("ln2 mean", mean, {x});
    add("mlp up", einsum("b t d, d f -> b t f"), {x, w_up});
    add("mlp down", einsum("b t f, f d -> b t d"), {tensor({B, T, F}), w_down});

    // `example_training_cost scores`: that call's forward and backward plans in full (einc explain
    // --backward).
    if (argc > 1) {
        for (const LayerCall& c : layer) {
            if (std::string_view(c.name) != argv[1]) continue;
            fmt::print("{} {}\n\n{}", c.name, call_text(c.call), c.gradient.explain("h100"));
            return 0;
        }
        fmt::print(stderr, "no call named '{}'; the calls:", argv[1]);
        for (const LayerCall& c : layer) fmt::print(stderr, " '{}'", c.name);
        fmt::print(stderr, "\n");
        return 2;
    }

    fmt::print("the layer's calls (inputs; their backward calls, as einc::gradient binds them)\n");
    for (const LayerCall& c : layer) {
        const einc::Program& forward = c.gradient.forward();
        fmt::print("  {:<15} {}  on {}\n", c.name, call_text(c.call), shapes_text(forward.plan().inputs));
        for (const einc::Gradient::Step& step : c.gradient.steps())
            fmt::print("  {:<15}   backward: {}\n", "", step.call.why);
    }

    // The table: each call's forward and backward plans, counted by einc.
    const auto row = [](std::string_view name, const auto& a, const auto& b, const auto& c, const auto& d,
                        const auto& e, const auto& f) {
        fmt::print("{:<15} {:>11} {:>11} {:>9} {:>9} {:>17} {:>17}\n", name, a, b, c, d, e, f);
    };
    fmt::print("\n");
    row("", "forward", "backward", "forward", "backward", "forward bound", "backward bound");
    row("call", "FLOPs", "FLOPs", "bytes", "bytes", "on H100", "on H100");
    einc::Cost forward_total, backward_total, attention;
    Time forward_time, backward_time;
    double matmul_forward = 0, matmul_backward = 0;
    for (const LayerCall& c : layer) {
        const einc::Cost f = c.gradient.forward_cost(), g = c.gradient.backward_cost();
        Time tf, tg;
        tf.add(c.gradient.forward().plan(), h100);
        for (const einc::Gradient::Step& step : c.gradient.steps()) tg.add(step.program.plan(), h100);
        row(c.name, einc::format_flops(f.flops), einc::format_flops(g.flops), einc::format_bytes(f.bytes()),
            einc::format_bytes(g.bytes()), tf.text(), tg.text());
        forward_total += f, backward_total += g;
        forward_time.add(tf), backward_time.add(tg);
        if (c.call.op == Op::einsum) matmul_forward += f.flops, matmul_backward += g.flops;
        if (c.attention_matmul) attention += f, attention += g;
    }
    row("sum", einc::format_flops(forward_total.flops), einc::format_flops(backward_total.flops),
        einc::format_bytes(forward_total.bytes()), einc::format_bytes(backward_total.bytes()),
        einc::format_seconds(forward_time.seconds), einc::format_seconds(backward_time.seconds));
    row("  compute-bound", "", "", "", "", einc::format_seconds(forward_time.compute_seconds),
        einc::format_seconds(backward_time.compute_seconds));
    row("  memory-bound", "", "", "", "",
        einc::format_seconds(forward_time.seconds - forward_time.compute_seconds),
        einc::format_seconds(backward_time.seconds - backward_time.compute_seconds));

    const double step_flops = forward_total.flops + backward_total.flops;
    fmt::print("\ntraining step: {}, {} moved, >= {} on an H100 (roofline, calls in sequence)\n",
               einc::format_flops(step_flops),
               einc::format_bytes(forward_total.bytes() + backward_total.bytes()),
               einc::format_seconds(forward_time.seconds + backward_time.seconds));
    fmt::print(
        "backward / forward FLOPs of the einsums: {:.3g} - the gradients of a product are 2 products of its\n"
        "FLOPs (dX = dY W^T, dW = X^T dY); the backward of a reduce or rearrange moves bytes: a repeat, a\n"
        "copy (split heads, whose gradient comes back row-major) or a view (merge heads)\n",
        matmul_backward / matmul_forward);

    // The rule of thumb: 6 FLOPs per weight per token (a multiply-add forward; two backward, for the input's
    // gradient and the weight's).
    double P = 0;
    for (const TensorView& w : weights) P += static_cast<double>(w.numel());
    const double N = static_cast<double>(B * T), rule = 6 * N * P;
    fmt::print("\nthe 6 x N x P rule\n");
    fmt::print(
        "  N = B*T = {:.0f} tokens; P = 3D^2 + D^2 + 2DF = {:.0f} weights (no biases, no norm gains)\n", N,
        P);
    fmt::print("  6 x N x P       {:>10}  {:>12.0f} FLOP  (2NP forward + 4NP backward)\n",
               einc::format_flops(rule), rule);
    fmt::print("  einc's count    {:>10}  {:>12.0f} FLOP  = {:.4f} x 6NP\n", einc::format_flops(step_flops),
               step_flops, step_flops / rule);
    fmt::print(
        "  difference      {:>10}  = attention's own matmuls (scores, attend; forward + backward) {}\n",
        einc::format_flops(step_flops - rule), einc::format_flops(attention.flops));
    fmt::print("  {:<15} {:>10}    + the layer norms' means {}\n", "", "",
               einc::format_flops(step_flops - rule - attention.flops));
    fmt::print("6NP counts the products with a weight. The attention's two matmuls multiply activations by "
               "activations,\n"
               "so it leaves them out: 2 matmuls x 3 (forward, 2 backward) x 2BHT^2E = 12 x B x T^2 x D "
               "FLOPs = 6NP x T/6D,\n"
               "{:.1f}% of this layer at T = {}; the share grows with the sequence.\n",
               100 * attention.flops / step_flops, T);

    // Softmax (and the rest of the elementwise work) is not an einops call: einc does not plan it. By hand:
    const double scores = static_cast<double>(B * H * T * T),
                 bytes = static_cast<double>(einc::size_of(dtype));
    const double softmax_forward = 2 * scores * bytes;  // reads the scores, writes the weights
    const double softmax_backward =
        3 * scores * bytes;  // reads the weights and their gradient, writes the scores'
    fmt::print(
        "\nnot in these sums - not einops calls, einc plans none of them: softmax over j, the layer norms'\n"
        "variance and scaling, GELU, residual adds. Counted by hand, softmax alone is memory-bound on the\n"
        "{}x{}x{}x{} scores: forward reads them and writes the weights ({}), backward reads the weights and\n"
        "their gradient and writes the scores' gradient ({}): >= {} on an H100 (a few FLOPs per element,\n"
        "not counted). Fused attention kernels exist to avoid exactly these bytes.\n",
        B, H, T, T, einc::format_bytes(softmax_forward), einc::format_bytes(softmax_backward),
        einc::format_seconds((softmax_forward + softmax_backward) / h100.bandwidth));
    return 0;
}
