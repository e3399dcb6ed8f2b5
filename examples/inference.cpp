// einc inside an inference engine: one decode step of an attention block, every call bound once to the
// engine's own buffers (a QKV buffer, a KV cache, the residual stream) and run with the engine's own
// scratch. The loop then allocates nothing - this program counts every operator new to show it - and
// the residual add is the output projection's accumulate (beta = 1), not a separate pass.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <einc/einc.hpp>
#include <fmt/format.h>
#include <new>
#include <vector>

namespace {

// Every heap allocation of this process, counted while `watching`.
std::atomic<bool> watching{false};
std::atomic<long> allocations{0};

}  // namespace

void* operator new(std::size_t bytes) {
    if (watching.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
    throw std::bad_alloc();
}
void* operator new(std::size_t bytes, std::align_val_t alignment) {
    if (watching.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
    const auto align = static_cast<std::size_t>(alignment);
    if (void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}

namespace {

using einc::DType;
using einc::TensorView;

// A bound call with the buffers it reads and writes: what an engine keeps per call site.
struct Step {
    const char* name;
    einc::Program program;
    std::vector<einc::Input> inputs;
    std::vector<TensorView> outputs;
};

Step bind(const char* name, einc::Op op, const char* pattern, std::vector<TensorView> inputs,
          std::vector<TensorView> outputs, const einc::Options& options = {}) {
    einc::Program program = einc::compile(op, pattern).bind(inputs, outputs, options);
    return Step{name, std::move(program), std::vector<einc::Input>(inputs.begin(), inputs.end()),
                std::move(outputs)};
}

void fill(const einc::Tensor& t, float scale) {
    float* p = t.data_as<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = scale * static_cast<float>((i * 7919) % 17 - 8);
}

}  // namespace

int main() {
    const std::int64_t b = 4, d = 256, h = 4, k = 64,
                       T = 128;  // batch, model width, heads, head size, context
    const std::int64_t t = 37;   // the slot of the new token in the cache
    const auto f32 = DType::f32;

    // The engine's memory: weights, the residual stream, a QKV buffer, a KV cache, scores, attended values.
    const einc::Tensor w_qkv = einc::Tensor::empty(f32, {d, 3, h, k}),
                       w_out = einc::Tensor::empty(f32, {h, k, d});
    const einc::Tensor x = einc::Tensor::empty(f32, {b, d}), qkv = einc::Tensor::empty(f32, {b, 3, h, k});
    const einc::Tensor keys = einc::Tensor::empty(f32, {b, T, h, k}),
                       values = einc::Tensor::empty(f32, {b, T, h, k});
    const einc::Tensor scores = einc::Tensor::empty(f32, {b, h, T}),
                       attended = einc::Tensor::empty(f32, {b, h, k});
    fill(w_qkv, 1.0f / 64), fill(w_out, 1.0f / 64), fill(x, 1.0f), fill(keys, 0.5f), fill(values, 0.25f);

    // Views into those buffers: q, k, v of the new token; its slot in the cache.
    auto* qkv_data = qkv.data_as<float>();
    const TensorView q{qkv_data, f32, {b, h, k}, {3 * h * k, k, 1}};
    const TensorView k_new{qkv_data + h * k, f32, {b, h, k}, {3 * h * k, k, 1}};
    const TensorView v_new{qkv_data + 2 * h * k, f32, {b, h, k}, {3 * h * k, k, 1}};
    const TensorView k_slot{keys.data_as<float>() + t * h * k, f32, {b, h, k}, {T * h * k, k, 1}};
    const TensorView v_slot{values.data_as<float>() + t * h * k, f32, {b, h, k}, {T * h * k, k, 1}};

    einc::Options residual;
    residual.beta = 1;  // x += attended @ w_out
    std::vector<Step> steps;
    steps.push_back(
        bind("qkv projection", einc::Op::einsum, "b d, d three h k -> b three h k", {x, w_qkv}, {qkv}));
    steps.push_back(bind("k into cache slot", einc::Op::rearrange, "b h k -> b h k", {k_new}, {k_slot}));
    steps.push_back(bind("v into cache slot", einc::Op::rearrange, "b h k -> b h k", {v_new}, {v_slot}));
    steps.push_back(bind("scores", einc::Op::einsum, "b h k, b t h k -> b h t", {q, keys}, {scores}));
    steps.push_back(
        bind("attend", einc::Op::einsum, "b h t, b t h k -> b h k", {scores, values}, {attended}));
    steps.push_back(bind("out projection + residual", einc::Op::einsum, "b h k, h k d -> b d",
                         {attended, w_out}, {x}, residual));

    // One workspace, the largest any step needs: the steps run one after another.
    std::size_t workspace_bytes = 0;
    fmt::print("{:<27} {:<38} {}\n", "step", "schedule", "workspace");
    for (const Step& step : steps) {
        std::string kinds;
        for (const einc::ScheduledStep& scheduled : step.program.schedule().steps)
            kinds += fmt::format("{}{}", kinds.empty() ? "" : " + ", einc::name_of(scheduled.strategy));
        fmt::print("{:<27} {:<38} {}\n", step.name, kinds,
                   einc::format_bytes(static_cast<double>(step.program.workspace_bytes())));
        workspace_bytes = std::max(workspace_bytes, step.program.workspace_bytes());
    }
    void* arena = std::aligned_alloc(64, (workspace_bytes + 63) / 64 * 64 +
                                             64);  // the engine's memory, 64-byte aligned
    const einc::Workspace workspace{arena, workspace_bytes};

    const auto decode = [&] {
        for (const Step& step : steps) step.program.run(step.inputs, step.outputs, workspace);
    };
    decode();  // the first run starts the thread pool
    const int runs = 1000;
    watching = true;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; ++i) decode();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    watching = false;
    fmt::print("\n{} decode steps ({} calls each) on the CPU\n", runs, steps.size());
    fmt::print("allocations during {} runs: {}\n", runs, allocations.load());
    fmt::print("time per decode step: {:.1f} us\n", seconds / runs * 1e6);
    std::free(arena);
    return allocations.load() == 0 ? 0 : 1;
}
