// The CUDA backend on a real GPU: every plan of the test corpus runs on the GPU and must equal the CPU
// executor's result; random calls of every operation and dtype, on strided device memory, must equal
// the reference interpreter's. Without a GPU (or without CUDA in the build) each test prints a SKIP line.
#include <cstdio>
#include <cstdlib>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <random>
#include <sys/wait.h>

#include "compiler/bind.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/api.hpp"
#include "runtime/gradient.hpp"
#include "tests/corpus_calls.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"
#if EINC_HAS_CUDA
#include <cuda_runtime_api.h>

#include "cuda/cuda.hpp"
#include "cuda/kernel_cache.hpp"
#endif

using namespace einc;

namespace {

// Whether the test can run; if not, says so on standard output (CI logs show what did not run).
bool gpu_present(const char* test) {
#if EINC_HAS_CUDA
    if (cuda::available()) return true;
    fmt::print("SKIP {}: no CUDA GPU or driver on this machine\n", test);
#else
    fmt::print("SKIP {}: this build has no CUDA backend\n", test);
#endif
    return false;
}

#if EINC_HAS_CUDA

// The same view over a copy of its storage on the GPU.
TensorView on_gpu(const TensorView& view, const Tensor& host_storage, const Tensor& device_storage) {
    TensorView moved = view;
    moved.data = static_cast<std::byte*>(device_storage.data()) +
                 (static_cast<std::byte*>(view.data) - static_cast<std::byte*>(host_storage.data()));
    moved.device = Device::cuda;
    return moved;
}

// Runs one corpus call on the CPU and on the GPU and compares; false when it was too large to run.
bool check_corpus_call(const testing::CorpusCall& c, std::mt19937& rng) {
    const Expression expression(c.call);
    std::vector<TensorView> specs_only;
    for (const TensorSpec& s : c.specs)
        specs_only.push_back(TensorView{nullptr, s.dtype, s.shape, s.strides});
    const Program on_cpu = expression.bind(specs_only);
    // The CPU executor is the slow side: leave out what would take it more than about a second.
    std::int64_t bytes = 0;
    for (const TensorSpec& s : on_cpu.plan().inputs) bytes += s.bytes();
    for (const TensorSpec& s : on_cpu.plan().outputs) bytes += s.bytes();
    if (bytes > (std::int64_t{1} << 30) || on_cpu.plan().total.flops > 2e10) return false;

    std::vector<testing::CorpusOperand> host;
    std::vector<Tensor> device_storage;
    std::vector<Input> host_inputs, device_inputs;
    for (const TensorSpec& s : c.specs) host.push_back(testing::filled(s, rng));
    for (const testing::CorpusOperand& h : host) {
        device_storage.push_back(cuda::to_device(h.storage));
        host_inputs.emplace_back(h.view);
        device_inputs.emplace_back(on_gpu(h.view, h.storage, device_storage.back()));
    }
    const std::vector<Tensor> expected = on_cpu.run(host_inputs);
    std::vector<TensorView> device_views;
    for (const Input& input : device_inputs) device_views.push_back(input.view());
    const std::vector<Tensor> got = expression.bind(device_views).run(device_inputs);
    REQUIRE(got.size() == expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
        CHECK(got[k].view().device == Device::cuda);
        std::string difference;
        CHECK_MESSAGE(testing::same_values(cuda::to_host(got[k]), expected[k], &difference), difference);
    }
    return true;
}

// Runs the `einc` command line in a process of its own, with `environment` (NAME=value ...) set; its exit
// status (-1 if it did not exit) and everything it printed.
struct Printed {
    int status;
    std::string text;
};
Printed run_einc(const std::string& environment, const std::string& arguments) {
    const std::string command = fmt::format("{} '{}' {} 2>&1", environment, EINC_TOOL, arguments);
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    Printed printed{-1, {}};
    for (int c; (c = std::fgetc(pipe)) != EOF;) printed.text += static_cast<char>(c);
    const int status = ::pclose(pipe);
    if (WIFEXITED(status)) printed.status = WEXITSTATUS(status);
    MESSAGE(command, "\n", printed.text);
    return printed;
}

// A row-major host tensor of -1, 0 and 1 at random (exact in every dtype and every sum the tests make).
Tensor random_host(DType dtype, const Shape& shape, std::mt19937& rng) {
    std::int64_t n = 1;
    for (const std::int64_t e : shape) n *= e;
    std::uniform_int_distribution<int> value(-1, 1);
    std::vector<double> values(static_cast<std::size_t>(n));
    for (double& v : values) v = value(rng);
    return reference::make_tensor(dtype, shape, values);
}

// A CUDA graph captured from `work` on `stream` (in global mode: any call that is illegal during capture,
// from any thread, fails it), then instantiated.
struct CapturedGraph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CapturedGraph() = default;
    CapturedGraph(const CapturedGraph&) = delete;
    CapturedGraph& operator=(const CapturedGraph&) = delete;
    ~CapturedGraph() {
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
    }
    // The kinds of its nodes.
    std::vector<cudaGraphNodeType> node_types() const {
        std::size_t count = 0;
        REQUIRE(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess);
        std::vector<cudaGraphNode_t> nodes(count);
        REQUIRE(cudaGraphGetNodes(graph, nodes.data(), &count) == cudaSuccess);
        std::vector<cudaGraphNodeType> types(count);
        for (std::size_t i = 0; i < count; ++i)
            REQUIRE(cudaGraphNodeGetType(nodes[i], &types[i]) == cudaSuccess);
        return types;
    }
};

template <typename Work>
void capture(CapturedGraph& captured, cudaStream_t stream, Work work) {
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    std::string failure;
    try {
        work();
    } catch (const Error& e) {
        failure = e.what();
    }
    const cudaError_t ended = cudaStreamEndCapture(stream, &captured.graph);
    cudaGetLastError();
    REQUIRE_MESSAGE(failure.empty(), "the run failed during capture: ", failure);
    REQUIRE_MESSAGE(ended == cudaSuccess, "cudaStreamEndCapture: ", cudaGetErrorString(ended));
    const cudaError_t instantiated = cudaGraphInstantiate(&captured.exec, captured.graph, 0);
    REQUIRE_MESSAGE(instantiated == cudaSuccess, "cudaGraphInstantiate: ", cudaGetErrorString(instantiated));
}

#endif

}  // namespace

TEST_CASE("gpu: every plan of the test corpus equals the CPU executor's result") {
    if (!gpu_present("gpu corpus")) return;
#if EINC_HAS_CUDA
    MESSAGE("on ", cuda::describe_device());
    std::mt19937 rng(2024);
    for (const DType dtype : {DType::f32, DType::bf16, DType::i32}) {
        const std::vector<testing::CorpusCall> calls = testing::corpus_calls(EINC_CORPUS_DIR, dtype);
        std::size_t ran = 0, too_large = 0;
        for (const testing::CorpusCall& c : calls) {
            CAPTURE(c.line);
            try {
                (check_corpus_call(c, rng) ? ran : too_large) += 1;
            } catch (const Error& e) {
                FAIL_CHECK(e.what());
            }
        }
        fmt::print("gpu corpus, {}: {} of {} plans matched the CPU executor, {} too large for the CPU side\n",
                   name_of(dtype), ran, calls.size(), too_large);
        // Every call of the corpus ran or was too large (a call that threw counts as neither), and the
        // large ones are the few the corpus has to test sizes, not most of it.
        CHECK(ran + too_large == calls.size());
        CHECK(too_large * 10 < calls.size());
    }
#endif
}

TEST_CASE("gpu: gpu_bench's classes at sizes of many blocks equal the CPU executor, run after run") {
    if (!gpu_present("gpu kernel classes")) return;
#if EINC_HAS_CUDA
    // The corpus's operands are small: these reach the one-pass reductions' many blocks and last-block
    // fold, short rows, short-side and tiled copies (edge tiles included) and merged tiles. Sums in f32,
    // f64 and i32 (exact for -1, 0 and 1), max and min in bf16. Three runs each: new data every time, the
    // arrival counter zeroed before each.
    struct Class {
        Op op;
        const char* pattern;
        Reduction reduction;
        DType dtype;
        Shape shape;
    };
    const Class classes[] = {
        {Op::reduce, "a b -> b", Reduction::sum, DType::f32, {200003, 3}},
        {Op::reduce, "a b -> b", Reduction::sum, DType::f32, {65536, 32}},
        {Op::reduce, "a b -> b", Reduction::mean, DType::f32, {131072, 8}},
        {Op::reduce, "a b -> b", Reduction::max, DType::bf16, {500001, 2}},
        {Op::reduce, "a ->", Reduction::sum, DType::f64, {1000003}},
        {Op::reduce, "a b ->", Reduction::sum, DType::i32, {4096, 999}},
        {Op::reduce, "a ->", Reduction::min, DType::bf16, {1 << 20}},
        {Op::reduce, "a b -> a", Reduction::sum, DType::f32, {100000, 4}},
        {Op::reduce, "a b -> a", Reduction::sum, DType::f32, {32768, 32}},
        {Op::reduce, "a b -> a", Reduction::max, DType::bf16, {50000, 7}},
        {Op::rearrange, "a b -> (b a)", Reduction::none, DType::f32, {1000, 1000}},
        {Op::rearrange, "a b -> (b a)", Reduction::none, DType::bf16, {1000, 999}},
        {Op::rearrange, "a b -> (b a)", Reduction::none, DType::i8, {999, 1001}},
        {Op::rearrange, "a b -> (b a)", Reduction::none, DType::bf16, {8, 100003}},
        {Op::rearrange, "a b -> (b a)", Reduction::none, DType::f32, {100003, 4}},
        {Op::rearrange, "b c h w -> b (h w c)", Reduction::none, DType::f32, {4, 3, 224, 224}},
        {Op::rearrange, "b h w c -> b (c h w)", Reduction::none, DType::f32, {4, 64, 64, 16}},
        {Op::rearrange, "a b c -> (c b a)", Reduction::none, DType::f32, {64, 128, 128}},
        {Op::rearrange, "a b c d e f -> (f d b e c a)", Reduction::none, DType::f32, {16, 8, 16, 8, 16, 16}},
    };
    std::mt19937 rng(27);
    for (const Class& c : classes) {
        const testing::CorpusCall call{fmt::format("{} \"{}\" {} {} {}", name_of(c.op), c.pattern,
                                                   name_of(c.reduction), name_of(c.dtype),
                                                   format_shape(c.shape)),
                                       Call{c.op, c.pattern, c.reduction, {}, false, {}},
                                       {TensorSpec{c.dtype, c.shape, row_major_strides(c.shape)}}};
        CAPTURE(call.line);
        for (int run = 0; run < 3; ++run) CHECK(check_corpus_call(call, rng));
    }
#endif
}

TEST_CASE("gpu: random calls of every operation and dtype, on strided device memory, equal the reference") {
    if (!gpu_present("gpu random calls")) return;
#if EINC_HAS_CUDA
    std::mt19937 rng(99);
    const std::pair<Op, std::vector<DType>> mix[] = {
        {Op::rearrange,
         {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::i8, DType::i64,
          DType::boolean, DType::c64, DType::c128}},
        {Op::repeat, {DType::f32, DType::bf16, DType::i8, DType::i64, DType::c128}},
        {Op::reduce,
         {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i8, DType::i32, DType::i64, DType::boolean,
          DType::u8, DType::i16, DType::u64, DType::c64, DType::c128}},
        {Op::einsum,
         {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i32, DType::boolean, DType::u32, DType::u64,
          DType::c64, DType::c128}},
        {Op::pack, {DType::f32, DType::i8, DType::c64}},
        {Op::unpack, {DType::bf16}},
    };
    const DType promoted[] = {DType::f64, DType::f32, DType::f16,     DType::bf16, DType::i8,  DType::i64,
                              DType::u8,  DType::u64, DType::boolean, DType::c64,  DType::c128};
    for (const auto& [op, dtypes] : mix)
        for (const DType dtype : dtypes)
            for (int i = 0; i < 40; ++i) {
                // (pack and einsum: every other case of operands of mixed dtypes)
                const testing::RandomCase c = (op == Op::einsum || op == Op::pack) && i % 2 == 1
                                                  ? testing::random_mixed_case(rng, op, promoted)
                                                  : testing::random_case(rng, op, dtype);
                CAPTURE(c.describe());
                try {
                    std::vector<Shape> shapes;
                    for (const TensorView& input : c.inputs) shapes.push_back(input.shape);
                    const std::vector<Tensor> expected = reference::evaluate(bind(c.call, shapes), c.inputs);
                    std::vector<Tensor> device_storage;
                    std::vector<TensorView> device_inputs;
                    for (std::size_t k = 0; k < c.inputs.size(); ++k) {
                        // random_case gives input k its own storage k
                        device_storage.push_back(cuda::to_device(c.storage[k]));
                        device_inputs.push_back(on_gpu(c.inputs[k], c.storage[k], device_storage.back()));
                    }
                    const std::vector<Tensor> got =
                        Expression(c.call)
                            .bind(device_inputs)
                            .run(std::vector<Input>(device_inputs.begin(), device_inputs.end()));
                    REQUIRE(got.size() == expected.size());
                    for (std::size_t k = 0; k < got.size(); ++k) {
                        std::string difference;
                        CHECK_MESSAGE(testing::same_values(cuda::to_host(got[k]), expected[k], &difference),
                                      difference);
                    }
                } catch (const Error& e) {
                    FAIL_CHECK(e.what());
                }
            }
#endif
}

TEST_CASE("gpu: a rearrange that is a view stays on the GPU and moves nothing") {
    if (!gpu_present("gpu views")) return;
#if EINC_HAS_CUDA
    const Tensor x = Tensor::empty(DType::bf16, {8, 3, 32, 32}, Device::cuda);
    const Tensor y = rearrange(x, "b c h w -> b h w c");
    CHECK(y.data() == x.data());
    CHECK(y.view().device == Device::cuda);
    CHECK(y.view().strides == Shape{3072, 32, 1, 1024});
#endif
}

TEST_CASE("gpu: work runs on the caller's stream; results are allocated and freed in that stream's order") {
    if (!gpu_present("gpu streams")) return;
#if EINC_HAS_CUDA
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    {
        const Tensor host = reference::make_tensor(DType::f32, {64, 48}, std::vector<double>(64 * 48, 1.0));
        const Tensor x = cuda::to_device(host);
        const Program sum_rows = compile(Op::reduce, "a b -> a", {}, Reduction::sum).bind({x});
        std::vector<Tensor> results;
        for (int i = 0; i < 50; ++i) results.push_back(sum_rows.run({x}, stream)[0]);
        REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
        for (const Tensor& r : results)
            CHECK(reference::values_of(cuda::to_host(r)) == std::vector<double>(64, 48.0));
        results.clear();  // given back on `stream`, which is still alive
        REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    }
    CHECK(cudaStreamDestroy(stream) == cudaSuccess);
#endif
}

TEST_CASE("gpu: max and min propagate NaN, as PyTorch does") {
    if (!gpu_present("gpu NaN")) return;
#if EINC_HAS_CUDA
    const double nan = std::nan("");
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        const Tensor x = reference::make_tensor(dtype, {2, 4}, {1, nan, 3, 2, 4, 5, -1, 0});
        for (const Reduction r : {Reduction::max, Reduction::min}) {
            const std::vector<double> rows =
                reference::values_of(cuda::to_host(reduce(cuda::to_device(x), "a b -> a", r)));
            CHECK(std::isnan(rows[0]));
            CHECK(rows[1] == (r == Reduction::max ? 5 : -1));
        }
    }
#endif
}

TEST_CASE(
    "gpu: gradients equal the CPU's (GEMMs, a GEMM per b, routes with ties and zeros, a diagonal, repeats)") {
    if (!gpu_present("gpu gradients")) return;
#if EINC_HAS_CUDA
    struct Case {
        Call call;
        std::vector<Shape> shapes;
    };
    const auto call = [](Op op, const char* pattern, Reduction r = Reduction::none, AxisSizes sizes = {}) {
        return Call{op, pattern, r, std::move(sizes), false, {}};
    };
    const std::vector<Case> cases{
        {call(Op::einsum, "b d, d k -> b k"), {{16, 32}, {32, 24}}},
        {call(Op::einsum, "b i h d, b j h d -> b h i j"), {{2, 12, 3, 8}, {2, 10, 3, 8}}},
        {call(Op::einsum, "i i j -> j"), {{5, 5, 7}}},
        {call(Op::reduce, "b (h 2) -> b h", Reduction::max), {{8, 12}}},
        {call(Op::reduce, "a b -> b", Reduction::min), {{9, 6}}},
        {call(Op::reduce, "a b -> a", Reduction::prod), {{6, 5}}},
        {call(Op::reduce, "a b c -> a c", Reduction::mean), {{4, 8, 6}}},
        {call(Op::repeat, "h w -> h (w 2) c", Reduction::none, {{"c", 3}}), {{5, 7}}},
        {call(Op::rearrange, "b (h w) c -> b h w c", Reduction::none, {{"h", 2}}), {{3, 8, 5}}},
    };
    std::mt19937 rng(41);
    std::uniform_int_distribution<int> small(-2, 2);  // ties and zeros, exact sums in f32
    const auto numel = [](const Shape& shape) {
        std::size_t n = 1;
        for (const std::int64_t e : shape) n *= static_cast<std::size_t>(e);
        return n;
    };
    for (const DType dtype : {DType::f32, DType::f64}) {
        for (const Case& c : cases) {
            INFO(name_of(c.call.op), " ", c.call.pattern, " ", name_of(dtype));
            std::vector<Tensor> host, device;
            for (const Shape& shape : c.shapes) {
                std::vector<double> values(numel(shape));
                for (double& v : values) v = small(rng);
                host.push_back(reference::make_tensor(dtype, shape, values));
                device.push_back(cuda::to_device(host.back()));
            }
            std::vector<TensorView> host_views, device_views;
            for (const Tensor& t : host) host_views.push_back(t.view());
            for (const Tensor& t : device) device_views.push_back(t.view());
            const Gradient on_cpu = gradient(c.call, host_views), on_gpu = gradient(c.call, device_views);
            std::vector<Tensor> g_host, g_device;
            for (const TensorSpec& out : on_cpu.forward().plan().outputs) {
                std::vector<double> values(numel(out.shape));
                for (double& v : values) v = small(rng);
                g_host.push_back(reference::make_tensor(dtype, out.shape, values));
                g_device.push_back(cuda::to_device(g_host.back()));
            }
            const std::vector<Input> xh(host.begin(), host.end()), xd(device.begin(), device.end());
            const std::vector<Input> gh(g_host.begin(), g_host.end()), gd(g_device.begin(), g_device.end());
            const std::vector<Tensor> expected = on_cpu.run(xh, gh), got = on_gpu.run(xd, gd);
            REQUIRE(got.size() == expected.size());
            for (std::size_t k = 0; k < got.size();
                 ++k) {  // exact, but for mean's 1/n (rounded once either way)
                const std::vector<double> a = reference::values_of(cuda::to_host(got[k])),
                                          b = reference::values_of(expected[k]);
                REQUIRE(a.size() == b.size());
                for (std::size_t i = 0; i < a.size(); ++i)
                    CHECK(std::fabs(a[i] - b[i]) <= 1e-6 * std::fabs(b[i]));
            }
        }
    }
#endif
}

TEST_CASE("gpu: f32 GEMMs are exact by default, TF32 only when asked for") {
    if (!gpu_present("gpu tf32")) return;
#if EINC_HAS_CUDA
    // 1 + 2^-12 is exact in f32 but not in TF32 (10 mantissa bits): the product tells the modes apart.
    const double fine = 1.0 + 1.0 / 4096;
    const Tensor a = cuda::to_device(reference::make_tensor(DType::f32, {1, 1}, {fine}));
    const Tensor b = cuda::to_device(reference::make_tensor(DType::f32, {1, 1}, {1.0}));
    CHECK(reference::values_of(cuda::to_host(einsum("i k, k j -> i j", a, b)))[0] == fine);
    const double tf32 = reference::values_of(
        cuda::to_host(einsum("i k, k j -> i j", {a, b}, Options{.allow_tf32 = true})))[0];
    CHECK(std::fabs(tf32 - fine) < 1e-3);
    MESSAGE("TF32 product: ", tf32);
#endif
}

TEST_CASE("gpu: out of memory is an einc::Error that says how much was asked and how much is free") {
    if (!gpu_present("gpu out of memory")) return;
#if EINC_HAS_CUDA
    CHECK_THROWS_WITH_AS(Tensor::empty(DType::f32, {1 << 20, 1 << 20, 64}, Device::cuda),
                         doctest::Contains("out of memory"), Error);
    const Tensor small = Tensor::zeros(DType::f32, {4, 4}, Device::cuda);  // the GPU still works after
    CHECK(reference::values_of(cuda::to_host(reduce(small, "a b ->", Reduction::sum)))[0] == 0);
#endif
}

TEST_CASE("gpu: kernels are compiled once, then found in memory; with EINC_JIT=0 a miss names the call") {
    if (!gpu_present("gpu kernel cache")) return;
#if EINC_HAS_CUDA
    const Tensor x = Tensor::zeros(DType::i64, {6, 10, 14}, Device::cuda);
    const Expression transpose = compile(Op::rearrange, "a b c -> c a b");
    (void)transpose.bind({x}, Options{.contiguous = true});
    const cuda::KernelCacheStats before = cuda::kernel_cache_stats();
    (void)transpose.bind({x}, Options{.contiguous = true});
    const cuda::KernelCacheStats after = cuda::kernel_cache_stats();
    CHECK(after.memory_hits > before.memory_hits);
    CHECK(after.compiled == before.compiled);

    // A miss needs a kernel that is not in memory: whatever this process has run, a fresh `einc` has
    // nothing loaded and no kernel compiled ahead of time, so with EINC_JIT=0 its first kernel is a miss.
    // (A permutation alone would not do: it is a view, and launches nothing.)
    const Printed miss = run_einc(
        "EINC_JIT=0",
        "bench rearrange 'a b c d e f g -> (g e c a f d b)' 2x3x2x3x2x3x5 --dtype f8e5m2 --backend cuda");
    CHECK(miss.status == 1);
    CHECK(miss.text.find("EINC_JIT=0 forbids compiling it now") != std::string::npos);
    CHECK(miss.text.find("needed by rearrange \"a b c d e f g -> (g e c a f d b)\"") != std::string::npos);
#endif
}

TEST_CASE("gpu: cuBLAS is loaded at the first GEMM; where it cannot be, binding the GEMM says so") {
    if (!gpu_present("gpu cuBLAS loading")) return;
#if EINC_HAS_CUDA
    const Printed missing = run_einc("EINC_CUBLAS=/no-such-dir/libcublas.so",
                                     "bench einsum 'i k, k j -> i j' 64x64 64x64 --backend cuda");
    CHECK(missing.status == 1);
    CHECK(missing.text.find("cuBLAS is not available") != std::string::npos);
    CHECK(missing.text.find("tried: /no-such-dir/libcublas.so") != std::string::npos);
    // A reduction needs no cuBLAS: it runs where cuBLAS cannot be loaded.
    CHECK(run_einc("EINC_CUBLAS=/no-such-dir/libcublas.so",
                   "bench reduce 'a b -> a' sum 64x64 --backend cuda --repeat 1")
              .status == 0);
#endif
}

// What an inference engine does: bind once, allocate the outputs and the workspace, capture
// Program::run(inputs, outputs, workspace, stream) in a CUDA graph, then replay it on new data copied
// into the same inputs. Binding did everything that cannot be captured (kernels compiled and loaded,
// cuBLAS opened); the captured run allocates nothing - its graph has no memory-allocation node, and
// cuBLAS works in its part of the workspace. Without a workspace, einc's own allocations are
// stream-ordered, so such a run is captured too (as allocation nodes).
TEST_CASE("gpu: a bound program with a workspace runs in a captured CUDA graph, replayed on new data") {
    if (!gpu_present("gpu graph capture")) return;
#if EINC_HAS_CUDA
    struct Case {
        Op op;
        const char* pattern;
        Reduction reduction;
        std::vector<Shape> shapes;
        DType dtype;
        bool gemm;  // a cuBLAS GEMM is among its steps
    };
    const Case cases[] = {
        {Op::einsum, "b i k, b k j -> b i j", Reduction::none, {{4, 64, 32}, {4, 32, 48}}, DType::f32, true},
        {Op::einsum, "b i d, b j d -> b i j", Reduction::none, {{2, 40, 32}, {2, 24, 32}}, DType::bf16, true},
        {Op::reduce, "a b -> b", Reduction::sum, {{3000, 4}}, DType::f32, false},  // split: kernel scratch
        {Op::reduce, "a b -> a", Reduction::max, {{3, 5000}}, DType::f32, false},
        {Op::rearrange, "a b c -> c a b", Reduction::none, {{64, 48, 40}}, DType::f32, false},  // a transpose
                                                                                                // copy
        {Op::einsum,
         "i j, j k, k l -> i l",
         Reduction::none,
         {{64, 48}, {48, 80}, {80, 32}},
         DType::f32,
         true},  // a temporary
    };
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    int device = 0;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    cudaMemPool_t pool = nullptr;
    REQUIRE(cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess);
    std::mt19937 rng(515);
    for (const Case& c : cases) {
        CAPTURE(c.pattern);
        const Expression expression = compile(c.op, c.pattern, {}, c.reduction);
        std::vector<Tensor> host, on_device;
        std::vector<Input> device_inputs;
        std::vector<TensorView> host_views, device_views;
        for (const Shape& shape : c.shapes) {
            host.push_back(random_host(c.dtype, shape, rng));
            on_device.push_back(cuda::to_device(host.back()));
            host_views.push_back(host.back().view());
            device_views.push_back(on_device.back().view());
            device_inputs.emplace_back(on_device.back());
        }
        const Program cpu = expression.bind(host_views, Options{.contiguous = true});
        const Program gpu = expression.bind(device_views, Options{.contiguous = true});
        std::vector<Tensor> results;
        std::vector<TensorView> outputs;
        for (const TensorSpec& out : gpu.plan().outputs) {
            results.push_back(Tensor::empty(out.dtype, out.shape, Device::cuda));
            outputs.push_back(results.back().view());
        }
        const std::size_t bytes = gpu.workspace_bytes();
        if (c.gemm) CHECK(bytes >= static_cast<std::size_t>(cublas_workspace_bytes));
        MESSAGE(c.pattern, ": workspace ", bytes, " bytes");
        const Tensor workspace_memory =
            bytes > 0 ? Tensor::empty(DType::i8, {static_cast<std::int64_t>(bytes)}, Device::cuda) : Tensor();
        const Workspace workspace{bytes > 0 ? workspace_memory.data() : nullptr, bytes};

        CapturedGraph captured;
        capture(captured, stream, [&] { gpu.run(device_inputs, outputs, workspace, stream); });
        const std::vector<cudaGraphNodeType> types = captured.node_types();
        CHECK(!types.empty());
        for (const cudaGraphNodeType type : types) {
            CHECK(type != cudaGraphNodeTypeMemAlloc);
            CHECK(type != cudaGraphNodeTypeMemFree);
        }

        // Two replays, each on new data copied into the inputs the graph was captured with.
        const auto replay_and_compare = [&](cudaGraphExec_t exec) {
            for (int round = 0; round < 2; ++round) {
                CAPTURE(round);
                std::vector<Tensor> fresh;
                for (std::size_t k = 0; k < c.shapes.size(); ++k) {
                    fresh.push_back(random_host(c.dtype, c.shapes[k], rng));
                    REQUIRE(cudaMemcpyAsync(on_device[k].data(), fresh[k].data(), fresh[k].nbytes(),
                                            cudaMemcpyHostToDevice, stream) == cudaSuccess);
                }
                REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
                REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
                const std::vector<Tensor> expected = cpu.run(std::vector<Input>(fresh.begin(), fresh.end()));
                REQUIRE(expected.size() == results.size());
                for (std::size_t k = 0; k < results.size(); ++k) {
                    std::string difference;
                    CHECK_MESSAGE(testing::same_values(cuda::to_host(results[k]), expected[k], &difference),
                                  difference);
                }
            }
        };
        replay_and_compare(captured.exec);

        // Not captured either, a run with the workspace takes nothing from the stream-ordered pool.
        std::size_t used = 0, high = 0;
        REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess);
        std::size_t zero = 0;
        REQUIRE(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero) == cudaSuccess);
        for (int i = 0; i < 3; ++i) gpu.run(device_inputs, outputs, workspace, stream);
        REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
        REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high) == cudaSuccess);
        CHECK(high == used);

        // Without a workspace (einc's kernels only: cuBLAS then uses its own pool), the run's temporaries
        // and scratch are allocated in stream order: captured as allocation nodes, replayed alike.
        if (!c.gemm) {
            CapturedGraph allocating;
            capture(allocating, stream, [&] { gpu.run(device_inputs, outputs, stream); });
            bool allocates = false;
            for (const cudaGraphNodeType type : allocating.node_types())
                allocates |= type == cudaGraphNodeTypeMemAlloc;
            CHECK(allocates == (bytes > 0));
            replay_and_compare(allocating.exec);
        }
    }
    CHECK(cudaStreamDestroy(stream) == cudaSuccess);
#endif
}
