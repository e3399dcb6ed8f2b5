// GPU benchmarks: every einc timing beside baselines measured in the same run, reported as ratios.
//   permutations  vs a device-to-device cudaMemcpy of the same bytes (the copy roof), and torch's
//                 permute(...).contiguous()
//   reductions    vs the HBM peak of the device model, and torch.sum / torch.amax
//   einsum        vs cublasGemmStridedBatchedEx called directly for the same GEMM, torch.einsum,
//   einops.einsum dispatch      host time of a cached one-line call vs einops.rearrange on a small torch
//   tensor
// Times are medians of CUDA-event timings on one stream; torch's come from bench/torch_baseline.py, run
// once as a child process (left out when PyTorch is missing).
//
//   gpu_bench [--quick] [--json FILE] [--markdown FILE]
#include <algorithm>
#include <bit>
#include <chrono>
#include <complex>
#include <cstdio>
#include <ctime>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "compiler/codegen.hpp"
#include "compiler/cost.hpp"
#include "cuda/cuda.hpp"
#include "cuda/driver.hpp"
#include "cuda/kernel_cache.hpp"
#include "einc/einc.hpp"

using einc::bench::json_escaped;

namespace {

void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess)
        throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}
void check(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(fmt::format("{}: {}", what, cublasGetStatusString(status)));
}

// Median seconds per call of `work`, queued `calls` times between two events on `stream`, over `repeats`
// batches.
double time_gpu(const std::function<void()>& work, cudaStream_t stream, int repeats, int calls = 5) {
    cudaEvent_t start = nullptr, stop = nullptr;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    for (int i = 0; i < 2; ++i) work();  // warm-up: kernels loaded, memory pools grown
    std::vector<double> seconds;
    for (int r = 0; r < repeats; ++r) {
        check(cudaEventRecord(start, stream), "cudaEventRecord");
        for (int i = 0; i < calls; ++i) work();
        check(cudaEventRecord(stop, stream), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        seconds.push_back(ms * 1e-3 / calls);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::nth_element(seconds.begin(), seconds.begin() + repeats / 2, seconds.end());
    return seconds[static_cast<std::size_t>(repeats / 2)];
}

// The median of 5 rounds' seconds per call, after a first round that warms caches.
double median_round(const std::function<double()>& round) {
    std::vector<double> seconds;
    for (int r = 0; r < 6; ++r) seconds.push_back(round());
    seconds.erase(seconds.begin());
    std::nth_element(seconds.begin(), seconds.begin() + 2, seconds.end());
    return seconds[2];
}

// Host seconds per call of `work` (no synchronisation inside), median of 5 batches.
double time_host(const std::function<void()>& work, int calls) {
    return median_round([&] {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) work();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
    });
}

// Host seconds per call of `work`, in batches of 200 calls with the device idle before each (untimed): the
// launch queue never fills, so no call waits for the GPU. The median of 5 rounds of 20 batches.
double time_host_unqueued(const std::function<void()>& work) {
    constexpr int batch = 200, batches = 20;
    return median_round([&] {
        double total = 0;
        for (int b = 0; b < batches; ++b) {
            check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
            const auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < batch; ++i) work();
            total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
        return total / (batch * batches);
    });
}

// A device tensor of random values in [-1, 1) (f32), or their upper halves (bf16: any data will do).
// A linear congruential generator: gigabytes of operands are filled in seconds.
einc::Tensor random_on_gpu(einc::DType dtype, const einc::Shape& shape, std::uint64_t seed) {
    einc::Tensor host = einc::Tensor::empty(dtype, shape);
    for (std::int64_t i = 0; i < host.numel(); ++i) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        const float value = static_cast<float>(seed >> 40) * 0x1p-23f - 1.0f;
        if (dtype == einc::DType::f32)
            host.data_as<float>()[i] = value;
        else if (dtype == einc::DType::c64)  // (re, im): the value and its negation
            host.data_as<std::complex<float>>()[i] = {value, -value};
        else
            host.data_as<std::uint16_t>()[i] =
                static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(value) >> 16);
    }
    return einc::cuda::to_device(host);
}

// Calls per timed batch: enough that a batch of small ones is not all launch latency.
int calls_for(double bytes) {
    return static_cast<int>(std::clamp(2e9 / std::max(bytes, 1.0), 5.0, 200.0));
}

struct Row {
    Row(std::string group_, std::string key_, std::string name_, std::string baseline_)
        : group(std::move(group_)), key(std::move(key_)), name(std::move(name_)),
          baseline(std::move(baseline_)) {}
    std::string group, key, name, baseline;
    double einc_seconds = 0, baseline_seconds = 0, torch_seconds = 0, einops_seconds = 0;
    double bytes = 0, flops = 0;  // the work, for GB/s or TFLOP/s
    std::string target;
};

// The device model of the GPU einc runs on (for the HBM peak): an H100's where the table has none.
const einc::DeviceModel& model_of(const std::string& name) {
    const einc::DeviceModel* model = einc::device_model_of_gpu(name);
    return model ? *model : *einc::device_model_named("h100");
}

}  // namespace

int main(int argc, char** argv) {
    const std::optional<einc::bench::Arguments> arguments =
        einc::bench::parse_arguments(argc, argv, "gpu_bench");
    if (!arguments) return 2;
    const bool quick = arguments->quick;
    const std::string& json_path = arguments->json_path;
    const std::string& markdown_path = arguments->markdown_path;
    if (!einc::cuda::available()) {
        fmt::print(stderr, "gpu_bench: no CUDA GPU on this machine: nothing to measure\n");
        return 1;
    }
    try {
        const int repeats = quick ? 5 : 15;
        const std::int64_t scale = quick ? 4 : 1;
        const std::string device = einc::cuda::describe_device();
        const einc::DeviceModel& model = model_of(device);
        const std::map<std::string, double> torch = einc::bench::python_timings("torch_baseline.py", quick);
        const auto torch_time = [&](const std::string& key) {
            const auto it = torch.find(key);
            return it == torch.end() ? 0.0 : it->second;
        };
        cudaStream_t stream = nullptr;
        check(cudaStreamCreate(&stream), "cudaStreamCreate");
        std::vector<Row> rows;

        // ---- permutations vs a device-to-device copy of the same bytes -----------------------------------
        struct Permutation {
            std::string key, pattern;
            einc::DType dtype;
            einc::Shape shape;
            einc::AxisSizes sizes;
            std::string target;
        };
        const std::string inner = ">= 0.90 of copy", tiny = ">= 0.70 of copy (tiny inner)";
        std::vector<Permutation> permutations{
            {"transpose_4096", "a b -> b a", einc::DType::f32, {4096, 4096}, {}, inner},
            {"transpose_8192", "a b -> b a", einc::DType::f32, {8192 / scale, 8192}, {}, inner},
            {"heads_split",
             "b s (h d) -> b h s d",
             einc::DType::bf16,
             {8 / scale, 2048, 2048},
             {{"h", 16}},
             inner},
            {"heads_merge", "b h s d -> b s (h d)", einc::DType::bf16, {8 / scale, 16, 2048, 128}, {}, inner},
            {"qkv_split",
             "b s (k h d) -> k b h s d",
             einc::DType::bf16,
             {8 / scale, 2048, 3 * 2048},
             {{"k", 3}, {"h", 16}},
             inner},
            {"nchw_to_nhwc", "b c h w -> b h w c", einc::DType::f32, {64 / scale, 3, 224, 224}, {}, tiny},
            {"transpose_7840000x4", "a b -> b a", einc::DType::f32, {7840000 / scale, 4}, {}, tiny},
        };
        // 6-D permutations of 16x32x16x32x16x16 f32 (256 MiB), drawn at random once (torch_baseline.py has
        // the same)
        const char* six_d[] = {"a b c d e f -> f d b e c a", "a b c d e f -> c f a e b d",
                               "a b c d e f -> b e f a d c"};
        for (int i = 0; i < 3; ++i)
            permutations.push_back({fmt::format("perm6d_{}", i),
                                    six_d[i],
                                    einc::DType::f32,
                                    {16 / scale, 32, 16, 32, 16, 16},
                                    {},
                                    inner});
        // The classes of h200-2026-11-26.md that the rows above leave out, ~256 MiB each: a short outer
        // side of 8 (f32, bf16), a short inner side of 8 (bf16), channels-last and -first with 16
        // channels, 3-D and 5-D permutations, a bf16 transpose with both sides long.
        const std::vector<Permutation> classes{
            {"transpose_8xN_f32", "a b -> b a", einc::DType::f32, {8, 8388608 / scale}, {}, tiny},
            {"transpose_8xN_bf16", "a b -> b a", einc::DType::bf16, {8, 16777216 / scale}, {}, tiny},
            {"transpose_Nx8_bf16", "a b -> b a", einc::DType::bf16, {16777216 / scale, 8}, {}, tiny},
            {"channels_last_16",
             "b c h w -> b h w c",
             einc::DType::f32,
             {16 / scale, 16, 512, 512},
             {},
             tiny},
            {"channels_first_16",
             "b h w c -> b c h w",
             einc::DType::f32,
             {16 / scale, 512, 512, 16},
             {},
             tiny},
            {"permute3d", "a b c -> c b a", einc::DType::f32, {256 / scale, 512, 512}, {}, inner},
            {"permute5d",
             "a b c d e -> e c a d b",
             einc::DType::f32,
             {32 / scale, 32, 32, 32, 64},
             {},
             inner},
            {"transpose_bf16", "a b -> b a", einc::DType::bf16, {8192 / scale, 16384}, {}, inner},
        };
        permutations.insert(permutations.end(), classes.begin(), classes.end());
        for (const Permutation& p : permutations) {
            const einc::Tensor x = random_on_gpu(p.dtype, p.shape, 1);
            const einc::Program program = einc::compile(einc::Op::rearrange, p.pattern, p.sizes)
                                              .bind({x.view()}, einc::Options{.contiguous = true});
            const einc::Tensor out =
                einc::Tensor::empty(p.dtype, program.plan().outputs[0].shape, einc::Device::cuda);
            const einc::Tensor copy = einc::Tensor::empty(p.dtype, p.shape, einc::Device::cuda);
            const std::vector<einc::Input> inputs{x};
            const std::vector<einc::TensorView> outputs{out.view()};
            Row row{"permutation", p.key,
                    fmt::format("{} {} {}", p.pattern, einc::name_of(p.dtype), einc::format_shape(p.shape)),
                    "cudaMemcpy D2D"};
            row.bytes = 2.0 * static_cast<double>(x.nbytes());
            const int calls = calls_for(row.bytes);
            row.einc_seconds =
                time_gpu([&] { program.run(inputs, outputs, stream); }, stream, repeats, calls);
            row.baseline_seconds = time_gpu(
                [&] {
                    check(
                        cudaMemcpyAsync(copy.data(), x.data(), x.nbytes(), cudaMemcpyDeviceToDevice, stream),
                        "cudaMemcpyAsync");
                },
                stream, repeats, calls);
            row.torch_seconds = torch_time(p.key);
            row.target = p.target;
            rows.push_back(row);
        }

        // ---- reductions vs the HBM peak ------------------------------------------------------------------
        struct Reduction {
            std::string key, pattern;
            einc::DType dtype;
            einc::Shape shape;
            einc::Reduction op;
            std::string target;
        };
        const std::string outer = ">= 0.80 of HBM peak", full = ">= 0.90 of HBM peak";
        const std::vector<Reduction> reductions{
            {"sum_inner_32768x32",
             "a b -> a",
             einc::DType::f32,
             {32768, 32},
             einc::Reduction::sum,
             ">= 0.90 of HBM peak"},
            {"sum_outer_32768x32",
             "a b -> b",
             einc::DType::f32,
             {32768, 32},
             einc::Reduction::sum,
             ">= 0.80 of HBM peak"},
            {"sum_all_32768x32",
             "a b ->",
             einc::DType::f32,
             {32768, 32},
             einc::Reduction::sum,
             ">= 0.90 of HBM peak"},
            {"sum_inner_7840000x4",
             "a b -> a",
             einc::DType::f32,
             {7840000 / scale, 4},
             einc::Reduction::sum,
             ">= 0.90 of HBM peak"},
            {"sum_outer_7840000x4",
             "a b -> b",
             einc::DType::f32,
             {7840000 / scale, 4},
             einc::Reduction::sum,
             ">= 0.80 of HBM peak"},
            {"sum_all_7840000x4",
             "a b ->",
             einc::DType::f32,
             {7840000 / scale, 4},
             einc::Reduction::sum,
             ">= 0.90 of HBM peak"},
            {"amax_scores",
             "b h i j -> b h i",
             einc::DType::bf16,
             {8 / scale, 16, 2048, 2048},
             einc::Reduction::max,
             ">= 0.90 of HBM peak"},
            {"sum_scores_outer",
             "b h i j -> b h j",
             einc::DType::bf16,
             {8 / scale, 16, 2048, 2048},
             einc::Reduction::sum,
             ">= 0.80 of HBM peak"},
            {"mean_tokens",
             "b s e -> b e",
             einc::DType::bf16,
             {8 / scale, 2048, 2048},
             einc::Reduction::mean,
             ">= 0.80 of HBM peak"},
            // The classes the rows above leave out, ~256 MiB each: outer axes with 2, 8 and 32 outputs kept
            // (f32, bf16, sum and max), full reductions, a middle axis, inner rows of 2 and of 65536 terms.
            {"sum_outer_8", "a b -> b", einc::DType::f32, {8388608 / scale, 8}, einc::Reduction::sum, outer},
            {"max_outer_2_bf16",
             "a b -> b",
             einc::DType::bf16,
             {67108864 / scale, 2},
             einc::Reduction::max,
             outer},
            {"sum_outer_32_bf16",
             "a b -> b",
             einc::DType::bf16,
             {4194304 / scale, 32},
             einc::Reduction::sum,
             outer},
            {"sum_all", "a ->", einc::DType::f32, {67108864 / scale}, einc::Reduction::sum, full},
            {"max_all_bf16", "a ->", einc::DType::bf16, {134217728 / scale}, einc::Reduction::max, full},
            {"sum_middle",
             "a b c -> a c",
             einc::DType::f32,
             {64 / scale, 1024, 1024},
             einc::Reduction::sum,
             outer},
            {"sum_inner_2_bf16",
             "a b -> a",
             einc::DType::bf16,
             {67108864 / scale, 2},
             einc::Reduction::sum,
             full},
            {"sum_inner_65536",
             "a b -> a",
             einc::DType::f32,
             {1024 / scale, 65536},
             einc::Reduction::sum,
             full},
        };
        for (const Reduction& r : reductions) {
            const einc::Tensor x = random_on_gpu(r.dtype, r.shape, 2);
            const einc::Program program =
                einc::Expression(einc::Call{einc::Op::reduce, r.pattern, r.op, {}, false, {}})
                    .bind({x.view()});
            const einc::Tensor out = einc::Tensor::empty(program.plan().outputs[0].dtype,
                                                         program.plan().outputs[0].shape, einc::Device::cuda);
            const std::vector<einc::Input> inputs{x};
            const std::vector<einc::TensorView> outputs{out.view()};
            Row row{"reduction", r.key,
                    fmt::format("{} {} {} {}", einc::name_of(r.op), r.pattern, einc::name_of(r.dtype),
                                einc::format_shape(r.shape)),
                    fmt::format("HBM peak {:.2f} TB/s", model.bandwidth / 1e12)};
            row.bytes = static_cast<double>(x.nbytes());
            row.einc_seconds = time_gpu([&] { program.run(inputs, outputs, stream); }, stream, repeats,
                                        calls_for(row.bytes));
            row.baseline_seconds = row.bytes / model.bandwidth;  // the time at peak
            row.torch_seconds = torch_time(r.key);
            row.target = r.target;
            rows.push_back(row);
        }

        // ---- einsum vs cuBLAS called directly
        // --------------------------------------------------------------
        cublasHandle_t cublas = nullptr;
        check(cublasCreate(&cublas), "cublasCreate");
        check(cublasSetStream(cublas, stream), "cublasSetStream");
        struct Contraction {
            std::string key, pattern;
            einc::DType dtype;
            einc::Shape a, b;
            std::int64_t batch, m, n, k;  // row-major C (m x n) = A (m x k) . B, batched
            bool b_transposed;            // B stored (n x k) rather than (k x n)
        };
        const std::int64_t b = 8 / scale;
        const std::vector<Contraction> contractions{
            {"attention_scores",
             "b h i d, b h j d -> b h i j",
             einc::DType::bf16,
             {b, 16, 2048, 128},
             {b, 16, 2048, 128},
             b * 16,
             2048,
             2048,
             128,
             true},
            {"attention_values",
             "b h i j, b h j d -> b h i d",
             einc::DType::bf16,
             {b, 16, 2048, 2048},
             {b, 16, 2048, 128},
             b * 16,
             2048,
             128,
             2048,
             false},
            {"projection",
             "b s e, e f -> b s f",
             einc::DType::bf16,
             {b, 2048, 2048},
             {2048, 2048},
             1,
             b * 2048,
             2048,
             2048,
             false},
            {"mlp_up",
             "b s e, f e -> b s f",
             einc::DType::bf16,
             {b, 2048, 2048},
             {8192, 2048},
             1,
             b * 2048,
             8192,
             2048,
             true},
            {"matmul_f32",
             "i k, k j -> i j",
             einc::DType::f32,
             {4096, 4096},
             {4096, 4096},
             1,
             4096,
             4096,
             4096,
             false},
            // complex64: einc's real form of B and one real GEMM of m x 2k x 2n, against cuBLAS's own
            {"matmul_c64",
             "i k, k j -> i j",
             einc::DType::c64,
             {4096, 4096},
             {4096, 4096},
             1,
             4096,
             4096,
             4096,
             false},
        };
        for (const Contraction& c : contractions) {
            const einc::Tensor x = random_on_gpu(c.dtype, c.a, 3), y = random_on_gpu(c.dtype, c.b, 4);
            const einc::Program program =
                einc::compile(einc::Op::einsum, c.pattern).bind({x.view(), y.view()});
            const einc::Tensor out =
                einc::Tensor::empty(c.dtype, program.plan().outputs[0].shape, einc::Device::cuda);
            const einc::Tensor direct =
                einc::Tensor::empty(c.dtype, program.plan().outputs[0].shape, einc::Device::cuda);
            const std::vector<einc::Input> inputs{x, y};
            const std::vector<einc::TensorView> outputs{out.view()};
            Row row{"einsum", c.key,
                    fmt::format("{} {} {} {}", c.pattern, einc::name_of(c.dtype), einc::format_shape(c.a),
                                einc::format_shape(c.b)),
                    "cublasGemmStridedBatchedEx"};
            const bool complex = c.dtype == einc::DType::c64;  // (a multiply-add: 8 real FLOPs)
            row.flops = (complex ? 8.0 : 2.0) * static_cast<double>(c.batch * c.m * c.n * c.k);
            row.einc_seconds = time_gpu([&] { program.run(inputs, outputs, stream); }, stream, repeats);
            // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS computes (n x m) from B then A.
            const cudaDataType_t type = complex                       ? CUDA_C_32F
                                        : c.dtype == einc::DType::f32 ? CUDA_R_32F
                                                                      : CUDA_R_16BF;
            const std::complex<float> one = 1, zero = 0;  // (a real scale reads only the real part)
            const bool batched_b = c.b.size() == c.a.size();
            row.baseline_seconds = time_gpu(
                [&] {
                    check(cublasGemmStridedBatchedEx(
                              cublas, c.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
                              static_cast<int>(c.n), static_cast<int>(c.m), static_cast<int>(c.k), &one,
                              y.data(), type, static_cast<int>(c.b_transposed ? c.k : c.n),
                              batched_b ? c.n * c.k : 0, x.data(), type, static_cast<int>(c.k), c.m * c.k,
                              &zero, direct.data(), type, static_cast<int>(c.n), c.m * c.n,
                              static_cast<int>(c.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmStridedBatchedEx");
                },
                stream, repeats);
            row.torch_seconds = torch_time(c.key);
            row.einops_seconds = torch_time("einops_" + c.key);
            row.target = ">= 0.95 of the direct cuBLAS call";
            rows.push_back(row);
        }
        cublasDestroy(cublas);

        // ---- host dispatch of a cached call ---------------------------------------------------------------
        {
            const einc::Tensor x = random_on_gpu(einc::DType::f32, {2, 3, 8, 8}, 5);
            Row view{
                "dispatch", "dispatch_view",
                "einc::rearrange(x, \"b c h w -> b h w c\") on a GPU tensor (a view), host time per call",
                "einops.rearrange on a torch CUDA tensor"};
            view.einc_seconds = time_host([&] { (void)einc::rearrange(x, "b c h w -> b h w c"); }, 100000);
            view.baseline_seconds = torch_time("einops_rearrange_small");
            view.target = "overhead <= 1 us (aim 100 ns)";
            rows.push_back(view);
            Row launch{"dispatch", "dispatch_kernel",
                       "einc::reduce(x, \"b c h w -> b c\", sum) on a GPU tensor (one kernel launch), host "
                       "time per call",
                       "einops.reduce on a torch CUDA tensor"};
            launch.einc_seconds =
                time_host([&] { (void)einc::reduce(x, "b c h w -> b c", einc::sum); }, 20000);
            launch.baseline_seconds = torch_time("einops_reduce_small");
            launch.target = "a launch plus <= 1 us";
            rows.push_back(launch);
            const einc::Program program =
                einc::Expression(einc::Call{einc::Op::reduce, "b c h w -> b c", einc::sum, {}, false, {}})
                    .bind({x.view()});
            const einc::KernelSignature kernel = einc::kernels_of(program.schedule()).front();
            const int arch = einc::cuda::device_info(0).arch;
            // Where the host time goes, with the launch queue never full (time_host_unqueued): einc's call,
            // the same into a caller's output (no allocation), and the bare driver launch of its kernel.
            Row unqueued{"dispatch", "dispatch_kernel_unqueued",
                         "einc::reduce(x, \"b c h w -> b c\", sum) on a GPU tensor, host time per call, the "
                         "launch queue never full",
                         "cuLaunchKernel of its kernel, likewise"};
            unqueued.einc_seconds =
                time_host_unqueued([&] { (void)einc::reduce(x, "b c h w -> b c", einc::sum); });
            const auto* kernels = std::get_if<einc::strategy::Kernels>(&program.schedule().steps[0].strategy);
            if (kernels && kernels->launches.size() == 1) {
                const einc::KernelLaunch& l = kernels->launches[0];
                const einc::Tensor y = einc::Tensor::empty(einc::DType::f32, {2, 3}, einc::Device::cuda);
                void* pointers[2] = {y.data(), const_cast<void*>(x.data())};  // (destination, source)
                void* arguments[3] = {const_cast<einc::KernelParams*>(&l.params), &pointers[0], &pointers[1]};
                CUfunction function = einc::cuda::kernel_function(l.signature, 0, arch);
                unqueued.baseline_seconds = time_host_unqueued([&] {
                    einc::cuda::check(einc::cuda::driver().launch_kernel(
                                          function, l.grid.x, l.grid.y, l.grid.z, l.block.x, l.block.y,
                                          l.block.z, 0, nullptr, arguments, nullptr),
                                      "cuLaunchKernel");
                });
                Row into{
                    "dispatch", "dispatch_into",
                    "program.run(x, into y) on GPU tensors (bound once, no allocation), host time per call, "
                    "the launch queue never full",
                    "cuLaunchKernel of its kernel, likewise"};
                const einc::Input input[] = {x.view()};
                const einc::TensorView out = y.view();
                into.einc_seconds = time_host_unqueued(
                    [&] { program.run(input, std::span<const einc::TensorView>(&out, 1)); });
                into.baseline_seconds = unqueued.baseline_seconds;
                into.target = "a launch plus <= 1 us";
                rows.push_back(into);
            }
            unqueued.target = "a launch plus <= 1 us";
            rows.push_back(unqueued);
            Row hit{"dispatch", "kernel_cache_hit",
                    fmt::format("kernel cache hit: {} (loaded), host time per lookup", kernel.name()),
                    "(absolute)"};
            hit.einc_seconds = time_host([&] { (void)einc::cuda::kernel_function(kernel, 0, arch); }, 100000);
            hit.target = "<= 1 us";
            rows.push_back(hit);
            check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        }

        // ---- report ---------------------------------------------------------------------------------------
        char date[32];
        const std::time_t now = std::time(nullptr);
        std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
        std::string table =
            fmt::format("# einc GPU benchmarks\n\ndevice: {}\ndate: {}\neinc: {}{}\n\n", device, date,
                        EINC_VERSION, quick ? " (--quick: a quarter of the sizes)" : "");
        table += "Ratios are speed ratios (baseline time / einc time; for reductions, einc's bandwidth / the "
                 "HBM peak): "
                 "1.00 is as fast as the baseline. Operands of a few MiB stay in L2 between repeated calls, "
                 "so their "
                 "bandwidth can exceed HBM's.\n\n";
        table += "| group | case | einc | baseline | ratio | torch | einops | target "
                 "|\n|---|---|---|---|---|---|---|---|\n";
        for (const Row& r : rows) {
            const auto rate = [&](double seconds) {
                if (seconds <= 0) return std::string("-");
                if (r.bytes > 0) return fmt::format("{:.0f} GB/s", r.bytes / seconds / 1e9);
                if (r.flops > 0) return fmt::format("{:.1f} TFLOP/s", r.flops / seconds / 1e12);
                return einc::format_seconds(seconds);
            };
            const std::string ratio =
                r.baseline_seconds > 0 ? fmt::format("{:.2f}", r.baseline_seconds / r.einc_seconds) : "-";
            table += fmt::format("| {} | {} | {} | {} ({}) | {} | {} | {} | {} |\n", r.group, r.name,
                                 rate(r.einc_seconds), rate(r.baseline_seconds), r.baseline, ratio,
                                 rate(r.torch_seconds), rate(r.einops_seconds), r.target);
        }
        fmt::print("{}", table);
        if (!markdown_path.empty()) std::ofstream(markdown_path) << table;
        if (!json_path.empty()) {
            std::ofstream json(json_path);
            json << fmt::format(
                "{{\"device\": \"{}\", \"date\": \"{}\", \"einc\": \"{}\", \"quick\": {}, \"rows\": [\n",
                json_escaped(device), date, EINC_VERSION, quick);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const Row& r = rows[i];
                json << fmt::format("  {{\"group\": \"{}\", \"key\": \"{}\", \"case\": \"{}\", "
                                    "\"einc_seconds\": {}, \"baseline\": \"{}\", "
                                    "\"baseline_seconds\": {}, \"torch_seconds\": {}, \"einops_seconds\": "
                                    "{}, \"bytes\": {}, \"flops\": {}}}{}\n",
                                    r.group, r.key, json_escaped(r.name), r.einc_seconds,
                                    json_escaped(r.baseline), r.baseline_seconds, r.torch_seconds,
                                    r.einops_seconds, r.bytes, r.flops, i + 1 < rows.size() ? "," : "");
            }
            json << "]}\n";
        }
        cudaStreamDestroy(stream);
    } catch (const std::exception& e) {
        fmt::print(stderr, "gpu_bench: {}\n", e.what());
        return 1;
    }
    return 0;
}
