// CPU benchmarks: every einc timing beside a baseline measured in the same process, the two run by turns,
// reported as ratios.
//   permutations  vs memcpy (copy bandwidth: bytes read + written)
//   reductions    vs a loop reading the input and writing the output once (read bandwidth, and the output's)
//   einsum        vs the same GEMM called on OpenBLAS directly
//   dispatch      cached one-line call vs a compiled Program vs the work itself; a plan-cache miss
// With numpy on the machine, numpy's times for the same work are shown too, taken in turns with einc's
// (numpy_baseline.py --serve).
//
//   cpu_bench [--quick] [--json FILE] [--markdown FILE]
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "bench/bench_common.hpp"
#include "einc/einc.hpp"
#include "einc_build_info.hpp"
#include "runtime/cpu/parallel.hpp"

#if EINC_HAS_BLAS
#include <cblas.h>
#endif

using einc::bench::json_escaped;
using einc::bench::median;
using einc::bench::seconds_of;

namespace {

using Clock = std::chrono::steady_clock;

// Median seconds of `repeats` runs after `warmup` runs.
double time_it(const std::function<void()>& work, int repeats, int warmup = 2) {
    for (int i = 0; i < warmup; ++i) work();
    std::vector<double> seconds;
    for (int i = 0; i < repeats; ++i) seconds.push_back(seconds_of(work));
    return median(seconds);
}

// Median seconds of einc's work and of its baseline's, taken by turns: in each round one run of each,
// each timed after an untimed run of the same work. On a shared machine whose memory bandwidth moves from
// one second to the next, both see the same moments, and both are timed warm. At least `repeats` rounds,
// and more while the case has taken less than a second (up to five times as many): a millisecond's work
// gets more samples of the machine's moods. Where a peer is given, numpy's runs (in its own process: the
// peer answers one run, timed after an untimed one) take turns too, three after every three rounds:
// after numpy's large calls (a new result each) this machine runs the next work up to twice as slow for
// a while, so each side runs a few times in a row.
struct Timings {
    double einc = 0, baseline = 0, numpy = 0;
};
Timings time_by_turns(const std::function<void()>& einc_work, const std::function<void()>& baseline_work,
                      int repeats, const std::function<double()>& numpy_run = {}) {
    constexpr int turn = 3;
    const auto start = Clock::now();
    const auto enough = [&](int rounds) {
        return rounds >= 5 * repeats ||
               (rounds >= repeats && Clock::now() - start >= std::chrono::seconds(1));
    };
    std::vector<double> einc, baseline, numpy;
    for (int round = 0; round % turn != 0 || !enough(round); ++round) {
        einc_work();
        einc.push_back(seconds_of(einc_work));
        baseline_work();
        baseline.push_back(seconds_of(baseline_work));
        if (numpy_run && round % turn == turn - 1)
            for (int run = 0; run < turn; ++run)
                if (const double s = numpy_run(); s > 0) numpy.push_back(s);
    }
    return {median(einc), median(baseline), numpy.empty() ? 0 : median(numpy)};
}

// Per-call time of a fast operation, timed over many calls.
double time_per_call(const std::function<void()>& work, int calls) {
    return time_it(
               [&] {
                   for (int i = 0; i < calls; ++i) work();
               },
               5, 1) /
           calls;
}

einc::Tensor random_tensor(einc::DType dtype, const einc::Shape& shape, unsigned seed) {
    einc::Tensor t = einc::Tensor::empty(dtype, shape);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    if (dtype == einc::DType::f32)
        for (std::int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    else if (dtype == einc::DType::f64)
        for (std::int64_t i = 0; i < t.numel(); ++i) t.data_as<double>()[i] = u(rng);
    else if (dtype == einc::DType::c64)  // (re, im) pairs
        for (std::int64_t i = 0; i < 2 * t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    else if (dtype == einc::DType::i32)
        for (std::int64_t i = 0; i < t.numel(); ++i)
            t.data_as<std::int32_t>()[i] = std::int32_t(100 * u(rng));
    else if (dtype == einc::DType::f16)  // +-[0.5, 1): a random sign and significand, exponent -1
        for (std::int64_t i = 0; i < t.numel(); ++i)
            t.data_as<std::uint16_t>()[i] = static_cast<std::uint16_t>((rng() & 0x83ff) | (14 << 10));
    else
        throw std::invalid_argument(fmt::format("random_tensor: no values for {}", einc::name_of(dtype)));
    return t;
}

struct Row {
    Row(std::string group_, std::string name_, std::string baseline_)
        : group(std::move(group_)), name(std::move(name_)), baseline(std::move(baseline_)) {}
    std::string group, name, baseline;
    double einc_seconds = 0, baseline_seconds = 0, numpy_seconds = 0;
    double bytes = 0, flops = 0;
    std::string target;
};

// The baselines, run the way einc runs: on every thread when the work is large.
void parallel_memcpy(void* dst, const void* src, std::size_t bytes) {
    const int threads = einc::cpu::thread_count();
    einc::cpu::parallel_for(threads, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) {
            const std::size_t from = bytes * static_cast<std::size_t>(t) / static_cast<std::size_t>(threads);
            const std::size_t to =
                bytes * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(threads);
            std::memcpy(static_cast<char*>(dst) + from, static_cast<const char*>(src) + from, to - from);
        }
    });
}

// Memory for a baseline's copy, from the allocator einc's tensors come from (large ones on huge pages, as
// numpy's are), written once so that no page is first touched while timed.
einc::Tensor baseline_bytes(std::size_t bytes) {
    einc::Tensor t = einc::Tensor::empty(einc::DType::i8, {static_cast<std::int64_t>(bytes)});
    std::memset(t.data(), 1, bytes);
    return t;
}

// The least traffic of a reduction of `n` elements to `m`: the input read once and the output written
// once, interleaved as a reduction interleaves them (each chunk of outputs stored after its inputs are
// read, with the read loop's sums). With m = 1 it is the read loop.
float parallel_read_write(const float* data, std::int64_t n, float* out, std::int64_t m) {
    const int threads = einc::cpu::thread_count();
    const std::int64_t per_output = n / m, chunk = 1024;
    einc::cpu::parallel_for(threads, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t)
            for (std::int64_t o = m * t / threads, last = m * (t + 1) / threads; o < last; o += chunk) {
                const std::int64_t outputs = std::min(chunk, last - o);
                float s[8] = {};
                const float* x = data + o * per_output;
                std::int64_t i = 0;
                for (; i + 8 <= outputs * per_output; i += 8)
                    for (int k = 0; k < 8; ++k) s[k] += x[i + k];
                for (; i < outputs * per_output; ++i) s[0] += x[i];
                std::fill(out + o, out + o + outputs, s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]);
            }
    });
    return out[0];
}

std::string machine_description() {
    std::string model = "unknown CPU";
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);)
        if (line.rfind("model name", 0) == 0) {
            model = line.substr(line.find(':') + 2);
            break;
        }
    return fmt::format("{}, {} hardware threads, einc {} ({}), BLAS {}", model,
                       std::thread::hardware_concurrency(), EINC_VERSION, EINC_HAS_BLAS ? "OpenBLAS" : "none",
                       EINC_BLAS_VENDOR);
}

}  // namespace

int main(int argc, char** argv) {
    // OpenBLAS's idle threads spin for about 0.1 s after each call (2^28 cycles), einc's and numpy's alike,
    // and would take a core from whatever runs next - numpy's case after einc's, einc's after numpy's, the
    // next case: they are told to sleep at once. (OpenBLAS reads this as it loads: the benchmark starts
    // again.)
    if (std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr && setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0)
        execv("/proc/self/exe", argv);
    const std::optional<einc::bench::Arguments> arguments =
        einc::bench::parse_arguments(argc, argv, "cpu_bench");
    if (!arguments) return 2;
    const bool quick = arguments->quick;
    const std::string& json_path = arguments->json_path;
    const std::string& markdown_path = arguments->markdown_path;
    const int repeats = quick ? 3 : 9;
    const std::int64_t scale = quick ? 4 : 1;  // --quick: a quarter of the sizes
    std::vector<Row> rows;
    einc::bench::PythonPeer numpy("numpy_baseline.py", quick);  // numpy times each case right after einc

    // ---- permutations vs memcpy -----------------------------------------------------------------
    struct Permutation {
        std::string key, pattern;
        einc::Shape shape;
        einc::AxisSizes sizes;
        std::string target;
    };
    const std::vector<Permutation> permutations{
        {"transpose_4096",
         "a b -> b a",
         {4096 / (scale == 1 ? 1 : 2), 4096 / (scale == 1 ? 1 : 2)},
         {},
         ">= 0.5 (inner >= 8)"},
        {"nchw_to_nhwc", "b c h w -> b h w c", {16 / scale, 64, 128, 128}, {}, ">= 0.5 (inner >= 8)"},
        {"heads_split",
         "b s (h d) -> b h s d",
         {8 / scale, 512, 16 * 128},
         {{"h", 16}},
         ">= 0.5 (inner >= 8)"},
        {"perm6d", "a b c d e f -> f d b e c a", {8, 8, 16 / scale, 16, 8, 32}, {}, ">= 0.5 (inner >= 8)"},
        // The same beyond the caches: 16 MB above fits the L3 beside its copy, and so does memcpy's.
        {"perm6d_large",
         "a b c d e f -> f d b e c a",
         {8, 8, 16 / scale, 16, 8, 128},
         {},
         ">= 0.5 (inner >= 8)"},
        {"transpose_inner4", "a b -> b a", {7840000 / scale, 4}, {}, "tiny inner: report"},
        {"nhwc_to_nchw_c3", "b h w c -> b c h w", {64 / scale, 224, 224, 3}, {}, "tiny inner: report"},
        // Issue 28's classes: several modes reversed, channels-last of 3 channels, a permutation the caches
        // hold
        {"perm5d_reverse", "a b c d e -> e d c b a", {16 / scale, 16, 32, 32, 32}, {}, ">= 0.5"},
        {"nchw_to_nhwc_c3", "b c h w -> b h w c", {64 / scale, 3, 224, 224}, {}, ">= 0.5"},
        {"perm3d_in_cache", "a b c -> c b a", {128, 128, 64 / scale}, {}, ">= 0.7 (in the caches)"},
    };
    for (const Permutation& p : permutations) {
        const einc::Tensor x = random_tensor(einc::DType::f32, p.shape, 1);
        const einc::Program program = einc::compile(einc::Op::rearrange, p.pattern, p.sizes)
                                          .bind({x.view()}, einc::Options{.contiguous = true});
        einc::Tensor out = einc::Tensor::empty(einc::DType::f32, program.plan().outputs[0].shape);
        einc::Tensor copy = einc::Tensor::empty(einc::DType::f32, p.shape);
        const std::vector<einc::Input> inputs{x};
        const std::vector<einc::TensorView> outputs{out.view()};
        Row row{"permutation", fmt::format("{} {}", p.pattern, einc::format_shape(p.shape)), "memcpy"};
        row.bytes = 2.0 * static_cast<double>(x.nbytes());
        const Timings t = time_by_turns([&] { program.run(inputs, outputs); },
                                        [&] { parallel_memcpy(copy.data(), x.data(), x.nbytes()); }, repeats,
                                        numpy.run(p.key));
        row.einc_seconds = t.einc;
        row.baseline_seconds = t.baseline;
        row.numpy_seconds = t.numpy;
        row.target = p.target;
        rows.push_back(row);
    }

    // ---- reductions vs read bandwidth ---------------------------------------------------------------
    struct Reduction {
        std::string key, pattern;
        einc::Shape shape;
        einc::Reduction op;
    };
    const std::vector<Reduction> reductions{
        {"sum_inner_4096", "a b -> a", {4096 / scale, 4096}, einc::Reduction::sum},
        {"sum_outer_4096", "a b -> b", {4096 / scale, 4096}, einc::Reduction::sum},
        {"sum_all_4096", "a b ->", {4096 / scale, 4096}, einc::Reduction::sum},
        {"sum_inner_32768x32", "a b -> a", {32768 * 16 / scale, 32}, einc::Reduction::sum},
        {"sum_outer_32768x32", "a b -> b", {32768 * 16 / scale, 32}, einc::Reduction::sum},
        {"sum_inner_7840000x4", "a b -> a", {7840000 / scale, 4}, einc::Reduction::sum},
        {"sum_outer_7840000x4", "a b -> b", {7840000 / scale, 4}, einc::Reduction::sum},
        {"max_inner_32768x32", "a b -> a", {32768 * 16 / scale, 32}, einc::Reduction::max},
        {"min_inner_32768x32", "a b -> a", {32768 * 16 / scale, 32}, einc::Reduction::min},
        {"max_mid", "a b c -> a c", {64 / scale, 512, 512}, einc::Reduction::max},
        {"sum_mid_64x256", "a b c -> a c", {1024 / scale, 64, 256}, einc::Reduction::sum},
        {"mean_pool", "b c (h 2) (w 2) -> b c h w", {16 / scale, 64, 128, 128}, einc::Reduction::mean},
    };
    for (const Reduction& r : reductions) {
        const einc::Tensor x = random_tensor(einc::DType::f32, r.shape, 2);
        const einc::Program program =
            einc::Expression(einc::Call{einc::Op::reduce, r.pattern, r.op, {}, false, {}}).bind({x.view()});
        einc::Tensor out = einc::Tensor::empty(einc::DType::f32, program.plan().outputs[0].shape);
        const std::vector<einc::Input> inputs{x};
        const std::vector<einc::TensorView> outputs{out.view()};
        einc::Tensor written = einc::Tensor::empty(einc::DType::f32, out.shape());
        Row row{"reduction",
                fmt::format("{} {} {}", einc::name_of(r.op), r.pattern, einc::format_shape(r.shape)),
                "read + write loop"};
        row.bytes = static_cast<double>(x.nbytes() + out.nbytes());
        volatile float sink = 0;
        const Timings t =
            time_by_turns([&] { program.run(inputs, outputs); },
                          [&] {
                              sink = parallel_read_write(x.data_as<float>(), x.numel(),
                                                         written.data_as<float>(), written.numel());
                          },
                          repeats, numpy.run(r.key));
        row.einc_seconds = t.einc;
        row.baseline_seconds = t.baseline;
        row.numpy_seconds = t.numpy;
        row.target = ">= 0.8";
        rows.push_back(row);
    }

    // ---- einsum vs the direct GEMM ----------------------------------------------------------------
    struct Contraction {
        std::string key, pattern;
        einc::Shape a, b;
        std::int64_t batch, m, n, k;
        bool b_transposed;  // B given as (n, k)
    };
    const std::int64_t big = quick ? 1024 : 2048;
    const std::vector<Contraction> contractions{
        {"matmul", "i k, k j -> i j", {big, big}, {big, big}, 1, big, big, big, false},
        {"attention_scores", "b i d, b j d -> b i j", {32, 512, 64}, {32, 512, 64}, 32, 512, 512, 64, true},
        {"linear", "b s d, d e -> b s e", {8, 512, 1024}, {1024, 1024}, 1, 4096, 1024, 1024, false},
    };
    for (const Contraction& c : contractions) {
        const einc::Tensor a = random_tensor(einc::DType::f32, c.a, 3),
                           b = random_tensor(einc::DType::f32, c.b, 4);
        const einc::Program program = einc::compile(einc::Op::einsum, c.pattern).bind({a.view(), b.view()});
        einc::Tensor out = einc::Tensor::empty(einc::DType::f32, program.plan().outputs[0].shape);
        einc::Tensor direct = einc::Tensor::empty(einc::DType::f32, program.plan().outputs[0].shape);
        const std::vector<einc::Input> inputs{a, b};
        const std::vector<einc::TensorView> outputs{out.view()};
        Row row{"einsum",
                fmt::format("{} {} {}", c.pattern, einc::format_shape(c.a), einc::format_shape(c.b)),
                "cblas_sgemm"};
        row.flops = 2.0 * static_cast<double>(c.batch * c.m * c.n * c.k);
#if EINC_HAS_BLAS
        const Timings t = time_by_turns(
            [&] { program.run(inputs, outputs); },
            [&] {
                for (std::int64_t i = 0; i < c.batch; ++i)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, c.b_transposed ? CblasTrans : CblasNoTrans,
                                static_cast<int>(c.m), static_cast<int>(c.n), static_cast<int>(c.k), 1.0f,
                                a.data_as<float>() + i * c.m * c.k, static_cast<int>(c.k),
                                b.data_as<float>() + (c.batch > 1 ? i * c.n * c.k : 0),
                                static_cast<int>(c.b_transposed ? c.k : c.n), 0.0f,
                                direct.data_as<float>() + i * c.m * c.n, static_cast<int>(c.n));
            },
            repeats, numpy.run(c.key));
        row.einc_seconds = t.einc;
        row.baseline_seconds = t.baseline;
        row.numpy_seconds = t.numpy;
#else
        row.einc_seconds = time_it([&] { program.run(inputs, outputs); }, repeats);
#endif
        row.target = ">= 0.9 of the direct GEMM";
        rows.push_back(row);
    }

    // ---- a complex64 GEMM: einc's (B in its real form, then one real GEMM of m x 2k x 2n) vs cgemm -------
    {
        const std::int64_t n = quick ? 512 : 1024;
        const einc::Tensor a = random_tensor(einc::DType::c64, {n, n}, 5),
                           b = random_tensor(einc::DType::c64, {n, n}, 6);
        const einc::Program program =
            einc::compile(einc::Op::einsum, "i k, k j -> i j").bind({a.view(), b.view()});
        einc::Tensor out = einc::Tensor::empty(einc::DType::c64, {n, n});
        einc::Tensor direct = einc::Tensor::empty(einc::DType::c64, {n, n});
        const std::vector<einc::Input> inputs{a, b};
        const std::vector<einc::TensorView> outputs{out.view()};
        // B's real form is a temporary: in the caller's workspace, as an engine binds it (allocated by
        // each run instead, its 16 MB are faulted in again every call).
        const einc::Tensor scratch =
            einc::Tensor::empty(einc::DType::i8, {static_cast<std::int64_t>(program.workspace_bytes())});
        const einc::Workspace workspace{scratch.data(), program.workspace_bytes()};
        Row row{"einsum", fmt::format("i k, k j -> i j {0}x{0} {0}x{0} c64 (caller's workspace)", n),
                "cblas_cgemm"};
        row.flops = 8.0 * static_cast<double>(n * n * n);
#if EINC_HAS_BLAS
        const std::array<float, 2> one{1, 0}, zero{0, 0};
        const Timings t =
            time_by_turns([&] { program.run(inputs, outputs, workspace); },
                          [&] {
                              cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n),
                                          static_cast<int>(n), static_cast<int>(n), one.data(), a.data(),
                                          static_cast<int>(n), b.data(), static_cast<int>(n), zero.data(),
                                          direct.data(), static_cast<int>(n));
                          },
                          repeats, numpy.run("matmul_c64"));
        row.einc_seconds = t.einc;
        row.baseline_seconds = t.baseline;
        row.numpy_seconds = t.numpy;
#else
        row.einc_seconds = time_it([&] { program.run(inputs, outputs, workspace); }, repeats);
#endif
        row.target = ">= 0.9 of the direct GEMM, >= 0.9x numpy";
        rows.push_back(row);
    }

    // ---- the call classes numpy is the obvious line for: einc's bandwidth against a copy of the bytes the
    // cost model moves (read + written), numpy beside ------------------------------------------------
    struct NumpyCase {
        std::string key;
        einc::Op op;
        std::string pattern;
        einc::Reduction reduction;
        std::vector<einc::Shape> shapes;
        std::string target;
        std::vector<einc::DType> dtypes = {};  // the operands', f32 where not given
    };
    const std::vector<NumpyCase> numpy_cases{
        {"elementwise_product",
         einc::Op::einsum,
         "i j, i j -> i j",
         einc::Reduction::none,
         {{2048 / scale, 2048}, {2048 / scale, 2048}},
         ">= 0.7 of copy, >= 1x numpy"},
        {"scale_rows",
         einc::Op::einsum,
         "b s e, e -> b s e",
         einc::Reduction::none,
         {{8 / scale, 512, 1024}, {1024}},
         ">= 0.7 of copy, >= 1x numpy"},
        {"dot",
         einc::Op::einsum,
         "i, i ->",
         einc::Reduction::none,
         {{4194304 / scale}, {4194304 / scale}},
         ">= 1x numpy"},
        {"matvec",
         einc::Op::einsum,
         "i j, j -> i",
         einc::Reduction::none,
         {{4096 / scale, 4096}, {4096}},
         ">= 1x numpy"},
        {"row_dot",
         einc::Op::einsum,
         "b i j, b i j -> b",
         einc::Reduction::none,
         {{64 / scale, 256, 256}, {64 / scale, 256, 256}},
         ">= 1x numpy"},
        {"max_all",
         einc::Op::reduce,
         "a ->",
         einc::Reduction::max,
         {{16777216 / scale}},
         ">= 0.8 of copy, >= 1x numpy"},
        {"max_rows",
         einc::Op::reduce,
         "a b -> a",
         einc::Reduction::max,
         {{16384 / scale, 1024}},
         ">= 0.8 of copy, >= 1x numpy"},
        {"attention_natural",
         einc::Op::einsum,
         "b i h d, b j h d -> b h i j",
         einc::Reduction::none,
         {{8 / scale, 197, 12, 64}, {8 / scale, 197, 12, 64}},
         ">= 1x numpy"},
        {"perm3d",
         einc::Op::rearrange,
         "a b c -> c b a",
         einc::Reduction::none,
         {{256 / scale, 256, 256}},
         ">= 0.5 of copy, >= 1x numpy"},
        {"perm5d",
         einc::Op::rearrange,
         "a b c d e -> e c a d b",
         einc::Reduction::none,
         {{16 / scale, 16, 32, 32, 32}},
         ">= 0.5 of copy, >= 1x numpy"},
        // mixed dtypes: each part converted as it is copied (numpy.concatenate promotes alike)
        {"pack_f32_i32",
         einc::Op::pack,
         "a *",
         einc::Reduction::none,
         {{2048 / scale, 4096}, {2048 / scale, 4096}},
         ">= 0.7 of copy, >= 1x numpy",
         {einc::DType::f32, einc::DType::i32}},
        {"pack_f16_f32",
         einc::Op::pack,
         "a *",
         einc::Reduction::none,
         {{2048 / scale, 4096}, {2048 / scale, 4096}},
         ">= 0.7 of copy, >= 1x numpy",
         {einc::DType::f16, einc::DType::f32}},
    };
    for (const NumpyCase& c : numpy_cases) {
        std::vector<einc::Tensor> operands;
        std::vector<einc::TensorView> views;
        for (std::size_t i = 0; i < c.shapes.size(); ++i) {
            const einc::DType dtype = c.dtypes.empty() ? einc::DType::f32 : c.dtypes[i];
            operands.push_back(random_tensor(dtype, c.shapes[i], static_cast<unsigned>(10 + i)));
            views.push_back(operands.back().view());
        }
        const einc::Program program =
            einc::Expression(einc::Call{c.op, c.pattern, c.reduction, {}, false, {}})
                .bind(views, einc::Options{.contiguous = true});
        const einc::TensorSpec& result = program.plan().outputs[0];
        einc::Tensor out = einc::Tensor::empty(result.dtype, result.shape);
        const std::vector<einc::Input> inputs(operands.begin(), operands.end());
        const std::vector<einc::TensorView> outputs{out.view()};
        std::string shapes;
        for (std::size_t i = 0; i < c.shapes.size(); ++i)
            shapes += fmt::format(" {}{}", einc::format_shape(c.shapes[i]),
                                  c.dtypes.empty() ? "" : fmt::format(" {}", einc::name_of(c.dtypes[i])));
        const std::string reduction =
            c.op == einc::Op::reduce ? fmt::format("{} ", einc::name_of(c.reduction)) : "";
        Row row{"vs numpy", fmt::format("{}{}{}", reduction, c.pattern, shapes), "memcpy of the bytes moved"};
        row.bytes = program.plan().total.bytes();
        const std::size_t half = static_cast<std::size_t>(row.bytes / 2);
        const einc::Tensor from = baseline_bytes(half), to = baseline_bytes(half);
        const Timings t =
            time_by_turns([&] { program.run(inputs, outputs); },
                          [&] { parallel_memcpy(to.data(), from.data(), half); }, repeats, numpy.run(c.key));
        row.einc_seconds = t.einc;
        row.baseline_seconds = t.baseline;
        row.numpy_seconds = t.numpy;
        row.target = c.target;
        rows.push_back(row);
    }

    // ---- backward: every input's gradient (einc::gradient, into buffers bound once) vs numpy --------
    struct BackwardCase {
        std::string key;
        einc::Call call;
        std::vector<einc::Shape> shapes;
    };
    const std::vector<BackwardCase> backward_cases{
        {"backward_linear",
         einc::Call{einc::Op::einsum, "b s d, d e -> b s e", einc::Reduction::none, {}, false, {}},
         {{8 / scale, 512, 1024}, {1024, 1024}}},
        {"backward_attention_natural",
         einc::Call{einc::Op::einsum, "b i h d, b j h d -> b h i j", einc::Reduction::none, {}, false, {}},
         {{8 / scale, 197, 12, 64}, {8 / scale, 197, 12, 64}}},
        {"backward_max_rows",
         einc::Call{einc::Op::reduce, "a b -> a", einc::Reduction::max, {}, false, {}},
         {{16384 / scale, 1024}}},
    };
    for (const BackwardCase& c : backward_cases) {
        std::vector<einc::Tensor> operands, output_gradients, gradients;
        std::vector<einc::TensorView> views, gradient_views, into;
        for (std::size_t i = 0; i < c.shapes.size(); ++i) {
            operands.push_back(random_tensor(einc::DType::f32, c.shapes[i], static_cast<unsigned>(20 + i)));
            views.push_back(operands.back().view());
            gradients.push_back(einc::Tensor::empty(einc::DType::f32, c.shapes[i]));
            into.push_back(gradients.back().view());
        }
        const einc::Program forward = einc::Expression(c.call).bind(views);
        for (const einc::TensorSpec& out : forward.plan().outputs) {
            output_gradients.push_back(random_tensor(einc::DType::f32, out.shape, 30));
            gradient_views.push_back(output_gradients.back().view());
        }
        const einc::Gradient gradient = einc::gradient(c.call, views, gradient_views, into);
        const std::vector<einc::Input> inputs(operands.begin(), operands.end()),
            dys(output_gradients.begin(), output_gradients.end());
        std::string shapes;
        for (const einc::Shape& shape : c.shapes) shapes += fmt::format(" {}", einc::format_shape(shape));
        const std::string reduction =
            c.call.op == einc::Op::reduce ? fmt::format("{} ", einc::name_of(c.call.reduction)) : "";
        Row row{"backward", fmt::format("{}{}{}", reduction, c.call.pattern, shapes),
                "memcpy of the bytes moved"};
        row.bytes = gradient.backward_cost().bytes();
        const std::size_t half = static_cast<std::size_t>(row.bytes / 2);
        const einc::Tensor from = baseline_bytes(half), to = baseline_bytes(half);
        const Timings t =
            time_by_turns([&] { gradient.run(inputs, dys, into); },
                          [&] { parallel_memcpy(to.data(), from.data(), half); }, repeats, numpy.run(c.key));
        row.einc_seconds = t.einc;
        row.baseline_seconds = t.baseline;
        row.numpy_seconds = t.numpy;
        row.target = ">= 1x numpy";
        rows.push_back(row);
    }

    // ---- dispatch ---------------------------------------------------------------------------------
    {
        const einc::Tensor x = random_tensor(einc::DType::f32, {2, 3, 8, 8}, 5);
        const einc::Program program =
            einc::compile(einc::Op::rearrange, "b c h w -> b h w c").bind({x.view()});
        const int calls = quick ? 20000 : 200000;
        Row cached{"dispatch", "einc::rearrange(x, \"b c h w -> b h w c\") (a view), per call",
                   "Program::run"};
        cached.einc_seconds = time_per_call([&] { (void)einc::rearrange(x, "b c h w -> b h w c"); }, calls);
        cached.baseline_seconds = time_per_call([&] { (void)program.run({x}); }, calls);
        cached.numpy_seconds = numpy.seconds("einops_rearrange_small", 5);
        cached.target = "overhead <= 1 us (aim 100 ns)";
        rows.push_back(cached);

        einc::PlanCache no_cache(0);
        const std::vector<einc::Input> inputs{x};
        Row miss{"dispatch", "plan-cache miss: parse + bind + plan of \"b c h w -> b h w c\"", "(absolute)"};
        miss.einc_seconds = time_per_call(
            [&] {
                (void)no_cache.get(einc::CallRef{einc::Op::rearrange, "b c h w -> b h w c"}, inputs, {});
            },
            quick ? 2000 : 20000);
        miss.target = "<= 20 us";
        rows.push_back(miss);
        const einc::Tensor q = random_tensor(einc::DType::f32, {2, 4, 8}, 6),
                           k = random_tensor(einc::DType::f32, {2, 5, 8}, 7);
        const std::vector<einc::Input> qk{q, k};
        Row miss_einsum{"dispatch", "plan-cache miss: parse + bind + plan of \"b i d, b j d -> b i j\"",
                        "(absolute)"};
        miss_einsum.einc_seconds = time_per_call(
            [&] {
                (void)no_cache.get(einc::CallRef{einc::Op::einsum, "b i d, b j d -> b i j"}, qk, {});
            },
            quick ? 2000 : 20000);
        miss_einsum.numpy_seconds = numpy.seconds("numpy_einsum_optimize_small", 5);
        miss_einsum.target = "<= 20 us";
        rows.push_back(miss_einsum);
    }

    // ---- report -------------------------------------------------------------------------------------
    std::string table = fmt::format("# einc CPU benchmarks\n\nmachine: {}\nthreads used by einc: {}\n\n",
                                    machine_description(), einc::cpu::thread_count());
    table += "| group | case | einc | baseline | einc / baseline speed | numpy | target "
             "|\n|---|---|---|---|---|---|---|\n";
    for (const Row& r : rows) {
        const auto rate = [&](double seconds) {
            if (r.bytes > 0) return fmt::format("{:.1f} GB/s", r.bytes / seconds / 1e9);
            if (r.flops > 0) return fmt::format("{:.1f} GFLOP/s", r.flops / seconds / 1e9);
            return einc::format_seconds(seconds);
        };
        const std::string baseline = r.baseline_seconds > 0
                                         ? fmt::format("{} ({})", rate(r.baseline_seconds), r.baseline)
                                         : r.baseline;
        const std::string ratio =
            r.baseline_seconds > 0 ? fmt::format("{:.2f}", r.baseline_seconds / r.einc_seconds) : "-";
        const std::string numpy_column = r.numpy_seconds > 0
                                             ? fmt::format("{} (einc {:.1f}x faster)", rate(r.numpy_seconds),
                                                           r.numpy_seconds / r.einc_seconds)
                                             : "-";
        table += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", r.group, r.name, rate(r.einc_seconds),
                             baseline, ratio, numpy_column, r.target);
    }
    fmt::print("{}", table);
    if (!markdown_path.empty()) std::ofstream(markdown_path) << table;
    if (!json_path.empty()) {
        std::ofstream json(json_path);
        json << "{\"machine\": \"" << machine_description() << "\", \"rows\": [\n";
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            json << fmt::format("  {{\"group\": \"{}\", \"case\": \"{}\", \"einc_seconds\": {}, "
                                "\"baseline\": \"{}\", \"baseline_seconds\": {}, "
                                "\"numpy_seconds\": {}, \"bytes\": {}, \"flops\": {}}}{}\n",
                                r.group, json_escaped(r.name), r.einc_seconds, json_escaped(r.baseline),
                                r.baseline_seconds, r.numpy_seconds, r.bytes, r.flops,
                                i + 1 < rows.size() ? "," : "");
        }
        json << "]}\n";
    }
    return 0;
}
