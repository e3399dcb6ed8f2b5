// The linear model y = x @ w as an einsum: its 2*B*D*K FLOPs, its bytes and intensity, the one GEMM einc
// plans for it, and its MFU (model FLOPs utilisation: achieved FLOP/s / the device's peak) when timed on
// the CPU. `einc bench` does the same timing from the command line, on the GPU too where there is one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <einc/einc.hpp>
#include <fmt/format.h>
#include <random>

#include "runtime/backend.hpp"

int main() {
    const std::int64_t B = 256, D = 512, K = 256;  // small, so the example runs in the test suite
    einc::Tensor x = einc::Tensor::empty(einc::DType::f32, {B, D}),
                 w = einc::Tensor::empty(einc::DType::f32, {D, K});
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1, 1);
    for (std::int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = uniform(rng);
    for (std::int64_t i = 0; i < w.numel(); ++i) w.data_as<float>()[i] = uniform(rng);

    fmt::print("y = x @ w  as  einc::einsum(\"b d, d k -> b k\", x, w)   B={} D={} K={}, f32\n\n", B, D, K);
    const einc::Program program =
        einc::compile(einc::Op::einsum, "b d, d k -> b k").bind({x.view(), w.view()});
    const einc::Cost& cost = program.plan().total;

    fmt::print("== what it costs (docs/cost-model.md) ==\n");
    fmt::print("FLOPs      2*B*D*K = {} = {}  (the plan says {})\n", 2 * B * D * K,
               einc::format_flops(2.0 * B * D * K), einc::format_flops(cost.flops));
    fmt::print("bytes      4*(B*D + D*K + B*K) = {} = {}  (read x and w, write y)\n",
               4 * (B * D + D * K + B * K), einc::format_bytes(cost.bytes()));
    fmt::print("intensity  FLOPs / bytes = {:.3g} FLOP/B\n", cost.intensity());
    const einc::PlanStep& first = program.plan().steps[0];
    fmt::print("plan       {} step, {}: {}\n", program.plan().steps.size(),
               std::holds_alternative<einc::Gemm>(first.step) ? "one GEMM, no copy" : "not a GEMM",
               first.why);
    for (const char* device : {"h100", "cpu"}) {
        const einc::DeviceModel& model = *einc::device_model_named(device);
        fmt::print("on {:<4}    {}\n", device, einc::describe_bound(cost, model, einc::DType::f32));
    }
    fmt::print(
        "the same model at LLM scale (B=16384, D=32768, K=8192, bf16) is 2*B*D*K = {}: `einc explain einsum "
        "\"b d, d k -> b k\" 16384x32768 32768x8192 --dtype bf16`\n\n",
        einc::format_flops(2.0 * 16384 * 32768 * 8192));

    fmt::print("== is it right? ==\n");
    const einc::Tensor y = program.run({x, w})[0];
    double worst = 0;
    for (const auto& [b, k] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {17, 200}, {B - 1, K - 1}}) {
        double expected = 0;
        for (std::int64_t d = 0; d < D; ++d)
            expected += double(x.data_as<float>()[b * D + d]) * w.data_as<float>()[d * K + k];
        worst = std::max(worst, std::abs(expected - y.data_as<float>()[b * K + k]));
    }
    fmt::print("y[b, k] = sum over d of x[b, d] * w[d, k]: {} (checked 3 entries against a plain loop)\n\n",
               worst < 1e-3 ? "yes" : fmt::format("NO, off by {}", worst));

    fmt::print("== MFU on the CPU: achieved FLOP/s / peak FLOP/s ==\n");
    einc::Tensor out = einc::Tensor::empty(einc::DType::f32, {B, K});
    const std::vector<einc::Input> inputs{x, w};
    const std::vector<einc::TensorView> outputs{out.view()};
    program.run(inputs, outputs);  // warm-up: caches, the thread pool
    std::vector<double> seconds;
    for (int i = 0; i < 9; ++i) {
        const auto start = std::chrono::steady_clock::now();
        program.run(inputs, outputs);
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(seconds.begin(), seconds.begin() + 4, seconds.end());
    const double median = seconds[4];
    const einc::DeviceModel& cpu = *einc::device_model_named("cpu");
    const double achieved = cost.flops / median;
    fmt::print("peak (the cpu entry of the device table, measured): {}/s for f32\n",
               einc::format_flops(cpu.peak_f32));
    fmt::print("median of 9 runs: {}, so {}/s\n", einc::format_seconds(median), einc::format_flops(achieved));
    fmt::print("MFU = {}/s / {}/s = {:.1f}%\n", einc::format_flops(achieved),
               einc::format_flops(cpu.peak_f32), 100 * achieved / cpu.peak_f32);
    if (einc::gpu_backend() == nullptr)
        fmt::print("GPU: skipped (this build has no GPU backend)\n");
    else
        fmt::print(
            "GPU: time it with `einc bench einsum \"b d, d k -> b k\" 256x512 512x256 --backend cuda`\n");
    return 0;
}
