// The generated GPU kernels, executed: every plan is lowered to kernels as for a GPU, the kernels'
// source is compiled for the host under tests/emulation/einc_emulation.hpp, and run_gpu_plan() runs the
// plan through them on CPU memory - then the results must equal the reference interpreter's. This tests
// the kernel text, the lowering and the step sequencing of the CUDA backend on machines with no GPU.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "compiler/bind.hpp"
#include "compiler/codegen.hpp"
#include "compiler/schedule.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/execute.hpp"
#include "runtime/gpu_executor.hpp"
#include "tests/corpus_calls.hpp"
#include "tests/emulated_library.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"
#include "tests/sanitized.hpp"

using namespace einc;

namespace {

struct Case {
    Call call;
    std::vector<TensorView> inputs;
    std::string description;
};

using Run = void (*)(testing::EmulatedLibrary::Invoke, unsigned, unsigned, unsigned, void**, const unsigned*);

// How the emulator runs a launch's blocks.
struct Blocks {
    bool real_grid = false;                // every block of the grid, not at most two
    std::optional<std::uint32_t> shuffle;  // in an order drawn from this seed, not in index order
};

// The kernels of a set of plans, compiled for the host into one shared library.
class EmulatedKernels {
public:
    explicit EmulatedKernels(const std::vector<KernelSignature>& kernels)
        : library_(kernels), run_(library_.function<Run>("einc_emu_run")) {}

    void run(const KernelLaunch& launch, std::span<void* const> pointers, const Blocks& blocks = {}) const {
        std::vector<void*> arguments{const_cast<KernelParams*>(&launch.params)};
        for (void* const& p : pointers) arguments.push_back(const_cast<void**>(&p));
        // Every kernel strides over its work by the grid: two blocks are enough, and keep it fast - but the
        // blocks of a one-pass reduction fold into the scratch the schedule sized by its grid: all of them.
        const bool real = blocks.real_grid || launch.signature.kind == KernelKind::reduce_one_pass;
        std::vector<unsigned> order(real ? launch.grid.x : std::min(launch.grid.x, 2u));
        std::iota(order.begin(), order.end(), 0u);
        if (blocks.shuffle) {
            std::mt19937 rng(*blocks.shuffle);
            std::shuffle(order.begin(), order.end(), rng);
        }
        run_(library_.invoker(launch.signature), static_cast<unsigned>(order.size()), launch.block.x,
             launch.block.y, arguments.data(), order.data());
    }

private:
    testing::EmulatedLibrary library_;
    Run run_;
};

// Device operations on host memory, with kernels run by the emulator and GEMMs by the CPU kernel.
class EmulatedDevice final : public DeviceOps {
public:
    explicit EmulatedDevice(const EmulatedKernels& kernels) : kernels_(kernels) {}
    void* allocate(std::size_t bytes) override { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
    void release(void* memory) override { std::free(memory); }
    void zero(void* memory, std::size_t bytes) override { std::memset(memory, 0, bytes); }
    void launch(const KernelLaunch& launch, std::span<void* const> pointers) override {
        kernels_.run(launch, pointers, blocks);
        launched.push_back(launch.signature);
    }
    Blocks blocks;                          // how the next launches run their blocks
    std::vector<KernelSignature> launched;  // every launch so far
    // cuBLAS's part, by the CPU's packed GEMM (in the accumulator cuBLAS uses).
    // cuBLAS may write anywhere in the workspace it is given: scribbled over here, so that a workspace
    // that overlapped a live buffer would show in the results.
    void gemm(const Gemm& g, DType dtype, strategy::GemmCompute, const void* a, const void* b, void* c,
              void* workspace, std::size_t workspace_bytes) override {
        if (workspace) std::memset(workspace, 0xA5, workspace_bytes);
        std::vector<double> scratch(static_cast<std::size_t>(g.m * g.k + g.k * g.n + g.m * g.n));
        cpu::gemm(strategy::PackedGemm{g}, dtype, dtype == DType::f64 ? DType::f64 : DType::f32,
                  static_cast<const std::byte*>(a), static_cast<const std::byte*>(b),
                  static_cast<std::byte*>(c), reinterpret_cast<std::byte*>(scratch.data()));
    }

private:
    const EmulatedKernels& kernels_;
};

// The kernel launches of a GPU step (none for a view or a library GEMM).
std::span<const KernelLaunch> launches_of(const ScheduledStep& step) {
    const auto* kernels = std::get_if<strategy::Kernels>(&step.strategy);
    return kernels ? std::span<const KernelLaunch>(kernels->launches) : std::span<const KernelLaunch>{};
}

struct Prepared {
    Plan plan;
    Schedule gpu;
};

Prepared prepare(const Call& call, std::span<const TensorView> inputs, bool contiguous) {
    PlanOptions options;
    options.contiguous = contiguous;
    Plan plan = testing::bind_and_plan(call, inputs, options).plan;
    Schedule gpu = schedule(plan, Target::gpu(132));
    return Prepared{std::move(plan), std::move(gpu)};
}

// Random calls of every operation and dtype, plus cases chosen to reach each kernel kind.
std::vector<testing::RandomCase> cases() {
    std::vector<testing::RandomCase> all;
    std::mt19937 rng(77);
    const std::pair<Op, std::vector<DType>> mix[] = {
        {Op::rearrange,
         {DType::f32, DType::bf16, DType::i8, DType::f64, DType::f8e4m3, DType::c64, DType::c128}},
        {Op::repeat, {DType::f32, DType::i64, DType::f16}},
        {Op::reduce,
         {DType::f32, DType::f16, DType::i32, DType::boolean, DType::f64, DType::u8, DType::u64, DType::c64}},
        {Op::einsum,
         {DType::f32, DType::i32, DType::bf16, DType::boolean, DType::u16, DType::u64, DType::c64,
          DType::c128}},
        {Op::pack, {DType::f32, DType::c128}},
        {Op::unpack, {DType::i8}},
    };
    for (const auto& [op, dtypes] : mix)
        for (const DType dtype : dtypes)
            for (int i = 0; i < 15; ++i) all.push_back(testing::random_case(rng, op, dtype));
    // Operands of mixed dtypes, promoted as numpy: converting copies, then the promoted dtype's kernels.
    const DType mixed[] = {DType::f64, DType::f32, DType::bf16,    DType::i8,  DType::i32,
                           DType::u8,  DType::u64, DType::boolean, DType::c64, DType::c128};
    for (const Op op : {Op::einsum, Op::pack})
        for (int i = 0; i < 15; ++i) all.push_back(testing::random_mixed_case(rng, op, mixed));
    return all;
}

// Larger calls that the lowering maps to tiles, short sides, vector copies and split reductions.
std::vector<std::pair<Call, Shape>> strategy_cases() {
    return {
        {Call{Op::rearrange, "a b -> b a", Reduction::none, {}, false, {}}, {40, 72}},        // tiles
        {Call{Op::rearrange, "a b -> b a", Reduction::none, {}, false, {}}, {8, 36}},         // short side
        {Call{Op::rearrange, "b a c -> a b c", Reduction::none, {}, false, {}}, {6, 5, 32}},  // vector copy
        {Call{Op::rearrange, "a (b c) -> b a c", Reduction::none, {{"c", 8}}, false, {}},
         {9, 48}},                                                                  // vector copy
        {Call{Op::reduce, "a b -> b", Reduction::sum, {}, false, {}}, {3000, 4}},   // one pass
        {Call{Op::reduce, "a b -> b", Reduction::sum, {}, false, {}}, {3000, 40}},  // columns, split
        {Call{Op::reduce, "a b -> a", Reduction::max, {}, false, {}}, {3, 5000}},   // rows, split
        {Call{Op::reduce, "a b ->", Reduction::mean, {}, false, {}}, {100, 90}},    // one pass, one output
        {Call{Op::reduce, "a b -> a", Reduction::min, {}, false, {}}, {500, 9}},    // short rows
        {Call{Op::reduce, "a b c -> a c", Reduction::sum, {}, false, {}}, {4, 100, 40}},     // columns
        {Call{Op::reduce, "(a 2) (b 2) -> a b", Reduction::mean, {}, false, {}}, {20, 16}},  // small windows
        {Call{Op::einsum, "i j, i j -> i", Reduction::none, {}, false, {}}, {0}},            // contraction
    };
}

// The movements again with complex elements: 16 bytes (c128) and 8 (c64) in the tiles, short side and
// vector copies.
std::vector<std::pair<Call, DType>> complex_cases() {
    std::vector<std::pair<Call, DType>> cases;
    for (const DType dtype : {DType::c64, DType::c128})
        for (const auto& [call, shape] : strategy_cases())
            if (call.op == Op::rearrange) cases.emplace_back(call, dtype);
    return cases;
}

}  // namespace

TEST_CASE("emulated GPU kernels give the reference interpreter's results") {
    std::vector<testing::RandomCase> random = cases();
    testing::sanitizer_sample(random);
    std::vector<Tensor> storage;
    std::vector<Case> all;
    for (testing::RandomCase& c : random) all.push_back(Case{c.call, c.inputs, c.describe()});
    std::mt19937 rng(5);
    std::vector<std::tuple<Call, Shape, DType>> strategies;
    for (auto& [call, shape] : strategy_cases()) strategies.emplace_back(call, shape, DType::f32);
    for (auto& [call, dtype] : complex_cases())
        for (auto& [same, shape] : strategy_cases())
            if (same.pattern == call.pattern && same.sizes == call.sizes)
                strategies.emplace_back(call, shape, dtype);
    for (auto& [call, shape, dtype] : strategies) {
        std::vector<Shape> shapes{shape};
        if (call.op == Op::einsum) shapes = {{37, 300}, {37, 300}};
        std::vector<TensorView> inputs;
        for (const Shape& s : shapes) {
            std::int64_t n = 1;
            for (const std::int64_t e : s) n *= e;
            std::vector<double> values;  // (complex: a real and an imaginary part each)
            for (std::int64_t i = 0; i < n * (is_complex(dtype) ? 2 : 1); ++i)
                values.push_back(static_cast<double>(static_cast<int>(rng() % 7) - 3));
            storage.push_back(reference::make_tensor(dtype, s, values));
            inputs.push_back(storage.back().view());
        }
        all.push_back(
            Case{call, inputs, fmt::format("{} \"{}\" {}", name_of(call.op), call.pattern, name_of(dtype))});
    }

    // Lower every case (materialising movements, so copies run as kernels too), then compile once.
    std::vector<std::pair<const Case*, Prepared>> prepared;
    std::vector<KernelSignature> kernels;
    for (const Case& c : all) {
        for (const bool contiguous : {false, true}) {
            try {
                Prepared p = prepare(c.call, c.inputs, contiguous);
                for (const KernelSignature& k : kernels_of(p.gpu))
                    if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
                prepared.emplace_back(&c, std::move(p));
            } catch (const Error& e) {
                FAIL_CHECK(c.description, ": ", e.what());
            }
        }
    }
    MESSAGE(prepared.size(), " plans, ", kernels.size(), " distinct kernels");
    const EmulatedKernels emulated(kernels);
    EmulatedDevice device(emulated);

    std::map<KernelKind, int> kinds_run;
    for (const auto& entry : prepared) {
        const auto& c =
            entry.first;  // (not a structured binding: CAPTURE's lambda takes it, which Clang 14 refuses)
        const auto& p = entry.second;
        CAPTURE(c->description);
        std::vector<Shape> shapes;
        for (const TensorView& input : c->inputs) shapes.push_back(input.shape);
        const std::vector<Tensor> expected = reference::evaluate(bind(c->call, shapes), c->inputs);
        std::vector<Tensor> results;
        std::vector<TensorView> outputs(p.plan.outputs.size());
        for (std::size_t k = 0; k < outputs.size(); ++k) {
            if (p.plan.view_source(k)) continue;
            results.push_back(Tensor::empty(p.plan.outputs[k].dtype, p.plan.outputs[k].shape));
            outputs[k] = results.back().view();
        }
        run_gpu_plan(p.plan, p.gpu, c->inputs, outputs, device);
        for (const ScheduledStep& step : p.gpu.steps)
            for (const KernelLaunch& launch : launches_of(step)) ++kinds_run[launch.signature.kind];
        REQUIRE(outputs.size() == expected.size());
        for (std::size_t k = 0; k < expected.size(); ++k) {
            std::string difference;
            CHECK_MESSAGE(testing::same_values(outputs[k], expected[k].view(), &difference), difference);
        }
    }
    for (const KernelKind kind :
         {KernelKind::elementwise, KernelKind::permute, KernelKind::vector_copy, KernelKind::short_side,
          KernelKind::tiles, KernelKind::reduce_rows, KernelKind::reduce_columns, KernelKind::finalize,
          KernelKind::reduce_one_pass, KernelKind::reduce_short_rows})
        CHECK_MESSAGE(kinds_run[kind] > 0, "no case ran a ", name_of(kind), " kernel");
}

// The GPU test's corpus check (gpu_test.cpp), with its operand set-up, on the emulated device, for the
// corpus calls whose operands have strides of their own (negative ones too, as numpy allows): host
// storage from testing::filled, copied whole to the device (cuda::to_device), the view moved onto the
// copy (on_gpu), the plan run there, and each result brought back as cuda::to_host does, by a contiguous
// rearrange on the device where it is not row-major.
TEST_CASE("emulated GPU: corpus calls on laid-out operands (negative strides too), set up as the GPU test "
          "does, equal the reference") {
    std::vector<testing::CorpusCall> calls;
    for (const DType dtype : {DType::f32, DType::bf16, DType::i32})
        for (testing::CorpusCall& c : testing::corpus_calls(EINC_CORPUS_DIR, dtype))
            if (std::any_of(c.specs.begin(), c.specs.end(), [](const TensorSpec& s) {
                    return !TensorView{nullptr, s.dtype, s.shape, s.strides}.is_row_major();
                }))
                calls.push_back(std::move(c));
    const auto negative = [](const testing::CorpusCall& c) {
        return std::any_of(c.specs.begin(), c.specs.end(), [](const TensorSpec& s) {
            return std::any_of(s.strides.begin(), s.strides.end(), [](std::int64_t t) { return t < 0; });
        });
    };
    REQUIRE(std::any_of(calls.begin(), calls.end(), negative));  // what this test is for

    struct Run {
        const testing::CorpusCall* call;
        Prepared plan;
        std::vector<std::optional<Prepared>> to_host;  // per output that is not row-major: its copy
    };
    std::vector<Run> runs;
    std::vector<KernelSignature> kernels;
    const auto add_kernels = [&](const Prepared& p) {
        for (const KernelSignature& k : kernels_of(p.gpu))
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    };
    for (const testing::CorpusCall& c : calls) {
        std::vector<TensorView> specs_only;
        for (const TensorSpec& s : c.specs)
            specs_only.push_back(TensorView{nullptr, s.dtype, s.shape, s.strides});
        Run run{&c, prepare(c.call, specs_only, false), {}};
        add_kernels(run.plan);
        for (const TensorSpec& out : run.plan.plan.outputs) {
            const TensorView laid{nullptr, out.dtype, out.shape, out.strides};
            if (laid.is_row_major()) {
                run.to_host.emplace_back();
                continue;
            }
            run.to_host.push_back(prepare(Call{Op::rearrange, "... -> ...", Reduction::none, {}, false, {}},
                                          std::span(&laid, 1), true));
            add_kernels(*run.to_host.back());
        }
        runs.push_back(std::move(run));
    }
    const EmulatedKernels emulated(kernels);
    EmulatedDevice device(emulated);

    std::mt19937 rng(2024);
    for (const Run& run : runs) {
        CAPTURE(run.call->line);
        std::vector<testing::CorpusOperand> host;
        std::vector<Tensor> device_storage;  // the emulated device's memory is host memory
        std::vector<TensorView> host_views, device_views;
        std::vector<Shape> shapes;
        for (const TensorSpec& s : run.call->specs) {
            host.push_back(testing::filled(s, rng));
            const Tensor& storage = host.back().storage;
            device_storage.push_back(Tensor::empty(storage.dtype(), storage.shape()));
            std::memcpy(device_storage.back().data(), storage.data(), storage.nbytes());
            TensorView moved = host.back().view;
            moved.data = static_cast<std::byte*>(device_storage.back().data()) +
                         (static_cast<std::byte*>(moved.data) - static_cast<std::byte*>(storage.data()));
            host_views.push_back(host.back().view);
            device_views.push_back(moved);
            shapes.push_back(s.shape);
        }
        const std::vector<Tensor> expected = reference::evaluate(bind(run.call->call, shapes), host_views);

        const Plan& plan = run.plan.plan;
        std::vector<Tensor> results;
        std::vector<TensorView> outputs(plan.outputs.size());
        for (std::size_t k = 0; k < outputs.size(); ++k) {
            if (plan.view_source(k)) continue;
            results.push_back(Tensor::empty(plan.outputs[k].dtype, plan.outputs[k].shape));
            outputs[k] = results.back().view();
        }
        run_gpu_plan(plan, run.plan.gpu, device_views, outputs, device);
        REQUIRE(outputs.size() == expected.size());
        for (std::size_t k = 0; k < outputs.size(); ++k) {
            TensorView got = outputs[k];
            Tensor dense;
            if (run.to_host[k]) {
                dense = Tensor::empty(got.dtype, got.shape);
                std::vector<TensorView> copied{dense.view()};
                run_gpu_plan(run.to_host[k]->plan, run.to_host[k]->gpu, std::span(&got, 1), copied, device);
                got = copied[0];
            }
            std::string difference;
            CHECK_MESSAGE(testing::same_values(got, expected[k].view(), &difference), difference);
        }
    }
}

// The accumulator policy (compiler/schedule.hpp) differs on purpose between the backends: the CPU folds
// long f32 sums in f64, a GPU in f32. Both are held to one bound: a sum of n terms accumulated in f32 (in
// any order) errs by at most n u S, u = 2^-24 and S the sum of the terms' magnitudes, plus half an ulp for
// rounding the result to f32. Random real data, reductions that schedule every kernel kind and CPU strategy.
TEST_CASE("accumulators: f32 sums on the CPU (f64) and on the emulated GPU (f32) stay within one bound of "
          "the exact sum") {
    const std::pair<Call, Shape> sums[] = {
        {Call{Op::reduce, "a b -> a", Reduction::sum, {}, false, {}},
         {7, 20000}},  // GPU rows, split; CPU rows
        {Call{Op::reduce, "a b -> b", Reduction::sum, {}, false, {}},
         {20000, 7}},  // GPU one pass, 5 blocks; CPU accumulator
        {Call{Op::reduce, "a b -> b", Reduction::sum, {}, false, {}},
         {5000, 70}},  // GPU columns, split; CPU accumulator
        {Call{Op::reduce, "a b ->", Reduction::mean, {}, false, {}}, {300, 700}},  // one output: one pass
        {Call{Op::reduce, "a b c -> b", Reduction::sum, {}, false, {}},
         {40, 50, 30}},  // CPU accumulator over a middle axis
        {Call{Op::reduce, "a (b 8) -> a b", Reduction::sum, {}, false, {}},
         {500, 64}},  // few terms: CPU windows, GPU short rows
    };
    std::mt19937 rng(17);
    std::uniform_real_distribution<double> value(-1, 1);
    std::vector<Tensor> storage;
    std::vector<Prepared> gpu_plans;
    std::vector<KernelSignature> kernels;
    for (const auto& [call, shape] : sums) {
        std::int64_t n = 1;
        for (const std::int64_t e : shape) n *= e;
        std::vector<double> values(static_cast<std::size_t>(n));
        for (double& v : values) v = static_cast<float>(value(rng));
        storage.push_back(reference::make_tensor(DType::f32, shape, values));
        gpu_plans.push_back(prepare(call, std::span(&storage.back().view(), 1), false));
        for (const KernelSignature& k : kernels_of(gpu_plans.back().gpu))
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    }
    const EmulatedKernels emulated(kernels);
    EmulatedDevice device(emulated);
    for (std::size_t c = 0; c < std::size(sums); ++c) {
        const Call& call = sums[c].first;
        CAPTURE(call.pattern);
        const TensorView input = storage[c].view();
        const Plan& plan = gpu_plans[c].plan;
        // The exact sums (the reference interpreter sums in f64, of f32 values: exact to 2^-53 relative), and
        // the sums of magnitudes.
        std::vector<double> magnitudes = reference::values_of(input);
        for (double& m : magnitudes) m = std::fabs(m);
        const Tensor absolute = reference::make_tensor(DType::f32, input.shape, magnitudes);
        const Bound bound = bind(call, std::vector<Shape>{input.shape});
        const std::vector<double> exact =
            reference::values_of(reference::evaluate(bound, std::span(&input, 1))[0].view());
        const std::vector<double> scale =
            reference::values_of(reference::evaluate(bound, std::span(&absolute.view(), 1))[0].view());
        const double terms = static_cast<double>(input.numel()) / static_cast<double>(exact.size());
        const double divisor = call.reduction == Reduction::mean ? terms : 1;

        const Tensor on_cpu = Tensor::empty(DType::f32, plan.outputs[0].shape),
                     on_gpu = Tensor::empty(DType::f32, plan.outputs[0].shape);
        std::vector<TensorView> cpu_out{on_cpu.view()}, gpu_out{on_gpu.view()};
        const Schedule cpu_schedule = schedule(plan, Target::cpu(2, 16, false));
        execute_on_cpu(plan, cpu_schedule, std::span(&input, 1), cpu_out);
        run_gpu_plan(plan, gpu_plans[c].gpu, std::span(&input, 1), gpu_out, device);
        CHECK(cpu_schedule.steps[0].accumulator == (terms > 16 ? DType::f64 : DType::f32));
        CHECK(gpu_plans[c].gpu.steps[0].accumulator == DType::f32);
        const std::vector<double> cpu = reference::values_of(on_cpu.view()),
                                  gpu = reference::values_of(on_gpu.view());
        double worst_cpu = 0, worst_gpu = 0;  // the largest |error| / bound
        for (std::size_t i = 0; i < exact.size(); ++i) {
            const double allowed =
                (terms + 1) * 0x1p-24 * scale[i] / divisor +
                0.5 * std::ldexp(1.0, std::ilogb(std::max(std::fabs(exact[i]), 0x1p-126)) - 23);
            worst_cpu = std::max(worst_cpu, std::fabs(cpu[i] - exact[i]) / allowed);
            worst_gpu = std::max(worst_gpu, std::fabs(gpu[i] - exact[i]) / allowed);
        }
        MESSAGE(call.pattern, ": largest error, as a fraction of the bound: CPU ", worst_cpu, ", GPU ",
                worst_gpu);
        CHECK(worst_cpu <= 1);
        CHECK(worst_gpu <= 1);
    }
}

// The epilogue (out = alpha * result + beta * out) in the generated kernels: copies (what would be a
// tile, short-side or vector copy becomes a permute kernel), reductions unsplit, split (applied by the
// finalize kernel only) and elementwise, contractions, and a GEMM (the emulated cuBLAS: the CPU's packed
// GEMM with the same alpha and beta). The output holds NaN where beta == 0 (never read) and old values
// otherwise; small integers keep every result exact.
TEST_CASE("emulated GPU kernels apply the epilogue (alpha, beta) of copies, reductions and contractions") {
    struct Case {
        Call call;
        std::vector<Shape> shapes;
        DType dtype;
    };
    const auto call = [](Op op, const char* pattern, Reduction reduction = Reduction::none) {
        return Call{op, pattern, reduction, {}, false, {}};
    };
    const Case cases[] = {
        {call(Op::rearrange, "a b -> b a"), {{40, 72}}, DType::f32},        // tiles without epilogue
        {call(Op::rearrange, "b a c -> a b c"), {{6, 5, 32}}, DType::f32},  // a vector copy without epilogue
        {call(Op::rearrange, "a b -> b a"), {{5, 7}}, DType::i32},
        {call(Op::rearrange, "a b -> b a"), {{5, 7}}, DType::bf16},
        {call(Op::reduce, "a b -> b", Reduction::sum), {{3000, 4}}, DType::f32},   // one pass, one block
        {call(Op::reduce, "a b -> b", Reduction::sum), {{3000, 40}}, DType::f32},  // columns, split: finalize
        {call(Op::reduce, "a b -> a", Reduction::max), {{3, 5000}}, DType::f32},   // rows, split
        {call(Op::reduce, "a b -> a", Reduction::sum), {{300, 200}}, DType::f32},  // rows, unsplit
        {call(Op::reduce, "a b ->", Reduction::mean), {{100, 90}}, DType::f64},    // alpha after the mean
        {call(Op::reduce, "a b c -> a c", Reduction::sum),
         {{4, 100, 40}},
         DType::i32},  // columns; i64 result
        {call(Op::reduce, "(a 2) (b 2) -> a b", Reduction::mean), {{20, 16}}, DType::f32},  // elementwise
        {call(Op::reduce, "a b -> b", Reduction::sum), {{40000, 3}}, DType::f32},   // one pass, 4 blocks
        {call(Op::reduce, "a b ->", Reduction::max), {{300, 1000}}, DType::i32},    // one pass, 5 blocks; i32
        {call(Op::reduce, "a b -> a", Reduction::mean), {{300, 12}}, DType::bf16},  // short rows
        {call(Op::einsum, "i j, i j -> i"), {{37, 300}, {37, 300}}, DType::f32},    // contraction
        {call(Op::einsum, "i j, i j -> i j"), {{7, 9}, {7, 9}}, DType::bf16},       // products
        {call(Op::einsum, "i k, k j -> i j"),
         {{6, 5}, {5, 4}},
         DType::i32},  // integer GEMM: contraction kernel
        {call(Op::einsum, "b i k, b k j -> b i j"), {{2, 6, 5}, {2, 5, 4}}, DType::f32},  // cuBLAS
    };
    const std::pair<double, double> factors[] = {{0.5, -2}, {2, 0}, {1, 1}};
    std::mt19937 rng(23);
    std::vector<Tensor> storage;
    struct Run {
        const Case* c;
        std::vector<TensorView> inputs;
        double alpha, beta;
        Prepared prepared;
    };
    std::vector<Run> runs;
    std::vector<KernelSignature> kernels;
    for (const Case& c : cases) {
        std::vector<TensorView> inputs;
        for (const Shape& s : c.shapes) {
            std::vector<double> values(static_cast<std::size_t>(
                std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>())));
            for (double& v : values) v = static_cast<double>(static_cast<int>(rng() % 7) - 3);
            storage.push_back(reference::make_tensor(c.dtype, s, values));
            inputs.push_back(storage.back().view());
        }
        for (const auto& [alpha, beta] : factors) {
            const double a =
                is_floating(c.dtype) ? alpha : std::round(alpha + 1);  // whole factors for integers
            PlanOptions options;
            options.epilogue = Epilogue{a, beta};
            Plan plan = testing::bind_and_plan(c.call, inputs, options).plan;
            Schedule gpu = schedule(plan, Target::gpu(132));
            for (const KernelSignature& k : kernels_of(gpu)) {
                CHECK(k.kind != KernelKind::vector_copy);
                CHECK(k.kind != KernelKind::short_side);
                CHECK(k.kind != KernelKind::tiles);
                if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
            }
            runs.push_back(Run{&c, inputs, a, beta, Prepared{std::move(plan), std::move(gpu)}});
        }
    }
    const EmulatedKernels emulated(kernels);
    EmulatedDevice device(emulated);
    std::map<KernelKind, int> kinds_run;
    for (const Run& r : runs) {
        const std::string description = fmt::format("{} \"{}\" {} alpha {} beta {}", name_of(r.c->call.op),
                                                    r.c->call.pattern, name_of(r.c->dtype), r.alpha, r.beta);
        CAPTURE(description);
        std::vector<Shape> shapes;
        for (const TensorView& input : r.inputs) shapes.push_back(input.shape);
        const Tensor expected_result = reference::evaluate(bind(r.c->call, shapes), r.inputs)[0];
        const std::vector<double> ref = reference::values_of(expected_result.view());
        const TensorSpec& spec = r.prepared.plan.outputs[0];
        std::vector<double> old(ref.size());
        for (std::size_t i = 0; i < old.size(); ++i)
            old[i] = r.beta == 0 && is_floating(spec.dtype)
                         ? NAN
                         : static_cast<double>(static_cast<int>(i % 5) - 2);
        const Tensor out = reference::make_tensor(spec.dtype, spec.shape, old);
        std::vector<TensorView> outputs{out.view()};
        run_gpu_plan(r.prepared.plan, r.prepared.gpu, r.inputs, outputs, device);
        for (const ScheduledStep& step : r.prepared.gpu.steps)
            for (const KernelLaunch& launch : launches_of(step)) ++kinds_run[launch.signature.kind];
        std::vector<double> want(ref.size());
        for (std::size_t i = 0; i < ref.size(); ++i)
            want[i] = r.alpha * ref[i] + (r.beta != 0 ? r.beta * old[i] : 0.0);
        const Tensor expected = reference::make_tensor(spec.dtype, spec.shape, want);
        std::string difference;
        CHECK_MESSAGE(testing::same_values(out.view(), expected.view(), &difference), difference);
    }
    for (const KernelKind kind :
         {KernelKind::elementwise, KernelKind::permute, KernelKind::reduce_rows, KernelKind::reduce_columns,
          KernelKind::finalize, KernelKind::reduce_one_pass, KernelKind::reduce_short_rows})
        CHECK_MESSAGE(kinds_run[kind] > 0, "no case ran a ", name_of(kind), " kernel");
}

namespace {

// Device operations that count what a run asks for, around the emulated device.
class CountingDevice final : public DeviceOps {
public:
    explicit CountingDevice(DeviceOps& inner) : inner_(inner) {}
    void* allocate(std::size_t bytes) override {
        ++allocations;
        allocated_bytes += bytes;
        return inner_.allocate(bytes);
    }
    void release(void* memory) override {
        ++releases;
        inner_.release(memory);
    }
    void zero(void* memory, std::size_t bytes) override {
        zeroed.emplace_back(static_cast<std::byte*>(memory), bytes);
        inner_.zero(memory, bytes);
    }
    void launch(const KernelLaunch& launch, std::span<void* const> pointers) override {
        inner_.launch(launch, pointers);
    }
    void gemm(const Gemm& g, DType dtype, strategy::GemmCompute compute, const void* a, const void* b,
              void* c, void* workspace, std::size_t workspace_bytes) override {
        gemm_workspaces.emplace_back(static_cast<std::byte*>(workspace), workspace_bytes);
        inner_.gemm(g, dtype, compute, a, b, c, workspace, workspace_bytes);
    }
    int allocations = 0, releases = 0;
    std::size_t allocated_bytes = 0;
    std::vector<std::pair<std::byte*, std::size_t>> gemm_workspaces, zeroed;

private:
    DeviceOps& inner_;
};

}  // namespace

// What makes a GPU run capturable in a CUDA graph, checked without a GPU: with the caller's workspace,
// run_gpu_plan allocates nothing for any step kind (copies, aligned and not, transposes, split
// reductions with their scratch, contractions, cuBLAS GEMMs, GEMM chains with temporaries, views), and
// gives cuBLAS its part of that workspace (which the emulated cuBLAS scribbles over); run twice on one
// workspace, it gives the same results. Without one, it allocates the temporaries and the kernels'
// scratch only, and leaves cuBLAS to its own pool.
TEST_CASE(
    "emulated GPU runs: with a workspace nothing is allocated, for every step kind; cuBLAS gets its part") {
    struct Case {
        Call call;
        std::vector<Shape> shapes;
        DType dtype;
        bool contiguous;
        std::size_t misalign = 0;  // elements the first input starts past its storage's (aligned) start
    };
    const auto call = [](Op op, const char* pattern, Reduction reduction = Reduction::none) {
        return Call{op, pattern, reduction, {}, false, {}};
    };
    const Case cases[] = {
        {call(Op::rearrange, "a b -> b a"), {{40, 72}}, DType::f32, false},          // a view
        {call(Op::rearrange, "a b -> b a"), {{40, 72}}, DType::f32, true},           // tiles
        {call(Op::rearrange, "b a c -> a b c"), {{6, 5, 32}}, DType::f32, true},     // vector copy
        {call(Op::rearrange, "b a c -> a b c"), {{6, 5, 32}}, DType::f32, true, 1},  // its unaligned launches
        {call(Op::reduce, "a b -> b", Reduction::sum),
         {{3000, 40}},
         DType::f32,
         false},  // columns, split: scratch
        {call(Op::reduce, "a b -> b", Reduction::sum),
         {{40000, 3}},
         DType::f32,
         false},  // one pass, 4 blocks: scratch with its counter
        {call(Op::reduce, "a b -> a", Reduction::max), {{3, 5000}}, DType::f32, false},  // rows, split
        {call(Op::einsum, "i j, i j -> i"), {{37, 300}, {37, 300}}, DType::f32, false},  // contraction
        {call(Op::einsum, "b i k, b k j -> b i j"), {{2, 6, 5}, {2, 5, 4}}, DType::f32, false},  // cuBLAS
        {call(Op::einsum, "i k, k j -> i j"), {{6, 5}, {5, 4}}, DType::i32, false},  // integer GEMM: kernels
        {call(Op::einsum, "i j, j k, k l -> i l"),
         {{8, 12}, {12, 10}, {10, 6}},
         DType::f32,
         false},  // temporary
        {call(Op::einsum, "b i j, b j k, k -> b i"), {{3, 40, 30}, {3, 30, 20}, {20}}, DType::f32, false},
    };
    std::mt19937 rng(31);
    std::vector<Tensor> storage;
    std::vector<std::vector<TensorView>> inputs;
    std::vector<Prepared> plans;
    std::vector<KernelSignature> kernels;
    for (const Case& c : cases) {
        std::vector<TensorView> views;
        for (const Shape& s : c.shapes) {
            std::int64_t n = 1;
            for (const std::int64_t e : s) n *= e;
            const bool first = views.empty();
            std::vector<double> values(static_cast<std::size_t>(n) + (first ? c.misalign : 0));
            for (double& v : values) v = static_cast<double>(static_cast<int>(rng() % 7) - 3);
            storage.push_back(
                reference::make_tensor(c.dtype, {static_cast<std::int64_t>(values.size())}, values));
            TensorView view{static_cast<std::byte*>(storage.back().data()) +
                                (first ? c.misalign : 0) * size_of(c.dtype),
                            c.dtype, s, row_major_strides(s)};
            views.push_back(view);
        }
        inputs.push_back(views);
        plans.push_back(prepare(c.call, views, c.contiguous));
        for (const KernelSignature& k : kernels_of(plans.back().gpu))
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    }
    const EmulatedKernels emulated(kernels);
    EmulatedDevice device(emulated);

    bool ran_view = false, ran_gemm = false, ran_unaligned = false, ran_scratch = false,
         ran_temporary = false, ran_zeroed = false;
    for (std::size_t i = 0; i < std::size(cases); ++i) {
        const Case& c = cases[i];
        const Plan& plan = plans[i].plan;
        const Schedule& gpu = plans[i].gpu;
        CAPTURE(c.call.pattern);
        CAPTURE(c.contiguous);
        CAPTURE(c.misalign);
        std::vector<Shape> shapes;
        for (const TensorView& input : inputs[i]) shapes.push_back(input.shape);
        const std::vector<Tensor> expected = reference::evaluate(bind(c.call, shapes), inputs[i]);
        // The workspace: the temporaries, then the scratch the steps share; each on a 256-byte boundary.
        const auto aligned = [](std::int64_t bytes) { return (bytes + 255) / 256 * 256; };
        std::int64_t shared_scratch = 0, kernel_scratch = 0;
        for (const TensorSpec& t : plan.temporaries)
            shared_scratch += aligned(std::max<std::int64_t>(t.bytes(), 1));
        // What the executor zeroes before a step: (offset in the workspace, bytes), in step order.
        std::vector<std::pair<std::int64_t, std::size_t>> zeroed;
        bool gemm = false;
        for (const ScheduledStep& step : gpu.steps) {
            ran_view |= std::holds_alternative<strategy::View>(step.strategy);
            const bool library = std::holds_alternative<strategy::LibraryGemm>(step.strategy);
            gemm |= library;
            if (library) CHECK(step.scratch_bytes == cublas_workspace_bytes);
            CHECK(step.scratch_offset == shared_scratch);
            if (std::holds_alternative<strategy::Kernels>(step.strategy))
                kernel_scratch = std::max(kernel_scratch, step.scratch_bytes);
            CHECK(step.zeroed_scratch_bytes <= step.scratch_bytes);
            if (step.zeroed_scratch_bytes > 0)
                zeroed.emplace_back(step.scratch_offset, static_cast<std::size_t>(step.zeroed_scratch_bytes));
        }
        ran_gemm |= gemm;
        ran_scratch |= kernel_scratch > 0;
        ran_zeroed |= !zeroed.empty();
        ran_temporary |= !plan.temporaries.empty();
        ran_unaligned |=
            c.misalign > 0 && std::any_of(gpu.steps.begin(), gpu.steps.end(), [](const ScheduledStep& s) {
                const auto* kernels = std::get_if<strategy::Kernels>(&s.strategy);
                return kernels && !kernels->unaligned_launches.empty();
            });
        // Garbage in the caller's workspace, as a reused one holds: nothing may rely on it being zero.
        const std::size_t bytes = static_cast<std::size_t>(gpu.workspace_bytes);
        const std::unique_ptr<std::byte, decltype(&std::free)> caller_workspace(
            bytes > 0 ? static_cast<std::byte*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256)) : nullptr,
            &std::free);
        if (caller_workspace) std::memset(caller_workspace.get(), 0x7F, bytes);
        // No workspace; the caller's, twice (what a graph replays).
        for (const int mode : {0, 1, 2}) {
            CAPTURE(mode);
            const bool caller = mode > 0;
            std::byte* const workspace = caller ? caller_workspace.get() : nullptr;
            std::vector<Tensor> results;
            std::vector<TensorView> outputs(plan.outputs.size());
            for (std::size_t k = 0; k < outputs.size(); ++k) {
                if (plan.view_source(k)) continue;
                results.push_back(Tensor::empty(plan.outputs[k].dtype, plan.outputs[k].shape));
                outputs[k] = results.back().view();
            }
            CountingDevice counting(device);
            run_gpu_plan(plan, gpu, inputs[i], outputs, counting, workspace);
            CHECK(counting.releases == counting.allocations);
            if (caller) {
                CHECK(counting.allocations == 0);
            } else {
                CHECK(counting.allocations == (shared_scratch + kernel_scratch > 0 ? 1 : 0));
                // no cuBLAS workspace
                CHECK(counting.allocated_bytes ==
                      static_cast<std::size_t>(shared_scratch + aligned(kernel_scratch)));
                CHECK(gpu.own_workspace_bytes == shared_scratch + aligned(kernel_scratch));
            }
            for (const auto& [at, size] : counting.gemm_workspaces) {
                if (caller) {  // the scratch of the caller's workspace, nothing before it
                    CHECK(at == workspace + shared_scratch);
                    CHECK(shared_scratch + static_cast<std::int64_t>(size) <= gpu.workspace_bytes);
                    CHECK(size == static_cast<std::size_t>(cublas_workspace_bytes));
                    CHECK(reinterpret_cast<std::uintptr_t>(at) % 256 == 0);
                } else {
                    CHECK(at == nullptr);
                }
            }
            CHECK(counting.gemm_workspaces.empty() != gemm);
            REQUIRE(counting.zeroed.size() == zeroed.size());
            for (std::size_t z = 0; z < zeroed.size(); ++z) {
                CHECK(counting.zeroed[z].second == zeroed[z].second);
                if (caller) CHECK(counting.zeroed[z].first == workspace + zeroed[z].first);
            }
            REQUIRE(outputs.size() == expected.size());
            for (std::size_t k = 0; k < expected.size(); ++k) {
                std::string difference;
                CHECK_MESSAGE(testing::same_values(outputs[k], expected[k].view(), &difference), difference);
            }
        }
    }
    CHECK(ran_view);
    CHECK(ran_gemm);
    CHECK(ran_unaligned);
    CHECK(ran_scratch);
    CHECK(ran_zeroed);
    CHECK(ran_temporary);
}

namespace {

// A tensor whose memory holds its dims in the order `memory` (outermost first): the logical view of
// a row-major buffer of the permuted shape (a transposed input when `memory` is not the identity).
struct Laid {
    Tensor storage;
    TensorView view;
};

Laid lay_out(DType dtype, const Shape& shape, const std::vector<std::size_t>& memory,
             const std::vector<double>& logical) {
    Shape stored;
    for (const std::size_t d : memory) stored.push_back(shape[d]);
    const Shape stored_strides = row_major_strides(stored);
    Shape strides(shape.size());
    for (std::size_t k = 0; k < memory.size(); ++k) strides[memory[k]] = stored_strides[k];
    std::vector<double> values(logical.size());
    const Shape logical_strides = row_major_strides(shape);
    for (std::size_t flat = 0; flat < logical.size(); ++flat) {
        std::int64_t offset = 0;
        for (std::size_t d = 0; d < shape.size(); ++d)
            offset += static_cast<std::int64_t>(flat) / logical_strides[d] % shape[d] * strides[d];
        values[static_cast<std::size_t>(offset)] = logical[flat];
    }
    Tensor storage = reference::make_tensor(dtype, stored, values);
    const TensorView view{storage.data(), dtype, shape, strides};
    return Laid{std::move(storage), view};
}

// Whether two results hold the same values exactly (NaN equals NaN; `signs`: zeros' signs too).
bool identical(const TensorView& got, const TensorView& expected, bool signs, std::string& difference) {
    const std::vector<double> a = reference::values_of(got), b = reference::values_of(expected);
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const bool same = (a[i] == b[i] && (!signs || std::signbit(a[i]) == std::signbit(b[i]))) ||
                          (std::isnan(a[i]) && std::isnan(b[i]));
        if (!same) {
            difference = fmt::format("element {}: {} where {} was expected", i, a[i], b[i]);
            return false;
        }
    }
    return true;
}

}  // namespace

// The gradients of reduce max, min and prod (Route steps, planned by plan_route) through the route
// kernel: kept and reduced modes of ranks 0 to 3, inputs and output gradients transposed in memory, a
// pooling window, more groups than the emulated grid has threads (its grid-stride loop), in f32, f64,
// f16 and bf16, each kernel also in its 64-bit index variant. The data makes every case of the
// semantics happen: max and min groups with ties, with a NaN (no share), all terms equal; prod groups
// with no zero, one zero and two or more. Values are small integers (max, min) and powers of two (prod),
// so the results are exact: equal to the reference interpreter's, and bit for bit to the CPU executor's;
// with an epilogue, bit for bit to the CPU's.
TEST_CASE("emulated GPU kernels: the gradients of reduce max, min and prod (route kernels)") {
    struct Case {
        const char* pattern;
        Shape shape;
        std::vector<std::size_t> memory;    // x's dims in memory order
        std::vector<std::size_t> kept;      // an element's group: its coordinates along these dims of x,
        std::vector<std::int64_t> windows;  // each divided by this (empty: 1)
        std::vector<std::size_t> grad_memory =
            {};  // the output gradient's dims in memory order (empty: row-major)
    };
    const Case cases[] = {
        {"a b -> a", {13, 7}, {0, 1}, {0}, {}},                                   // k1 r1
        {"a b -> b", {9, 11}, {1, 0}, {1}, {}},                                   // k1 r1, x transposed
        {"a b c -> a c", {5, 6, 7}, {2, 0, 1}, {0, 2}, {}},                       // k2 r1, transposed
        {"a b c d -> b d", {3, 4, 5, 6}, {3, 1, 2, 0}, {1, 3}, {}},               // k2 r2
        {"a b c d e -> a c e", {2, 3, 2, 4, 3}, {4, 3, 2, 1, 0}, {0, 2, 4}, {}},  // k3 r2, reversed
        {"a b c -> ", {4, 5, 6}, {1, 2, 0}, {}, {}},                              // k0 r1: one group
        {"a b c -> c a", {6, 5, 4}, {0, 1, 2}, {2, 0}, {}, {1, 0}},               // gradient transposed
        {"b (h 2) (w 2) -> b h w", {3, 8, 6}, {0, 1, 2}, {0, 1, 2}, {1, 2, 2}},   // k3 r2: 2x2 windows
        {"a b c -> a c", {3, 10, 200}, {0, 1, 2}, {0, 2}, {}},                    // 600 groups
    };
    const Reduction ops[] = {Reduction::max, Reduction::min, Reduction::prod};
    const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
    const std::pair<double, double> epilogues[] = {{1, 0}, {0.5, -2}, {2, 0}};

    struct Run {
        std::string description;
        Reduction op;
        Epilogue epilogue;
        std::vector<Laid> inputs;  // x, the output gradient
        Plan plan;
        Schedule gpu, gpu_wide;  // the latter with every kernel's 64-bit index variant
    };
    std::vector<Run> runs;
    std::vector<KernelSignature> kernels;
    const auto add_kernels = [&](const Schedule& s) {
        for (const KernelSignature& k : kernels_of(s))
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    };
    int nan_groups = 0, tie_groups = 0, equal_groups = 0;
    std::map<int, int> zero_groups;  // zeros in a group (2: two or more) -> groups
    std::mt19937 rng(41);
    for (const Case& c : cases) {
        // The groups: every element's, in x's logical row-major order.
        std::int64_t n = 1;
        for (const std::int64_t e : c.shape) n *= e;
        std::map<std::vector<std::int64_t>, std::vector<std::size_t>> members;
        for (std::int64_t flat = 0; flat < n; ++flat) {
            Shape index(c.shape.size());
            std::int64_t rest = flat;
            for (std::size_t d = c.shape.size(); d-- > 0;) {
                index[d] = rest % c.shape[d];
                rest /= c.shape[d];
            }
            std::vector<std::int64_t> key;
            for (std::size_t k = 0; k < c.kept.size(); ++k)
                key.push_back(index[c.kept[k]] / (c.windows.empty() ? 1 : c.windows[k]));
            members[key].push_back(static_cast<std::size_t>(flat));
        }
        const Call call{Op::reduce, c.pattern, Reduction::max, {}, false, {}};
        const Bound shape_only = einc::bind(call, std::vector<Shape>{c.shape});
        const Shape grad_shape = shape_only.outputs[0].shape();
        std::vector<std::size_t> grad_memory = c.grad_memory;
        if (grad_memory.empty())
            for (std::size_t d = 0; d < grad_shape.size(); ++d) grad_memory.push_back(d);
        for (const Reduction op : ops) {
            // x's values, group by group.
            std::vector<double> x(static_cast<std::size_t>(n));
            int g = 0;
            for (const auto& entry : members) {
                const std::vector<std::size_t>& group = entry.second;
                if (op == Reduction::prod) {
                    const double powers[] = {0.5, 1, 1, 1, 2, -0.5, -1, -1, -2};
                    for (const std::size_t e : group) x[e] = powers[rng() % std::size(powers)];
                    std::vector<std::size_t> order = group;
                    std::shuffle(order.begin(), order.end(), rng);
                    const std::size_t zeros =
                        std::min<std::size_t>(static_cast<std::size_t>(g % 4), order.size());
                    for (std::size_t z = 0; z < zeros; ++z) x[order[z]] = 0;
                    ++zero_groups[static_cast<int>(std::min<std::size_t>(zeros, 2))];
                } else {
                    for (const std::size_t e : group)
                        x[e] = static_cast<double>(static_cast<int>(rng() % 7) - 3);
                    if (g % 5 == 4) {
                        x[group[rng() % group.size()]] = NAN;
                        ++nan_groups;
                    } else if (g % 11 == 7) {
                        for (const std::size_t e : group) x[e] = 2;
                        ++equal_groups;
                    } else {
                        const bool max = op == Reduction::max;
                        double extremum = x[group[0]];
                        for (const std::size_t e : group)
                            extremum = max ? std::max(extremum, x[e]) : std::min(extremum, x[e]);
                        tie_groups += std::count_if(group.begin(), group.end(),
                                                    [&](std::size_t e) { return x[e] == extremum; }) > 1
                                          ? 1
                                          : 0;
                    }
                }
                ++g;
            }
            std::vector<double> grad(static_cast<std::size_t>(
                std::accumulate(grad_shape.begin(), grad_shape.end(), std::int64_t{1}, std::multiplies<>())));
            for (double& v : grad) v = static_cast<double>(static_cast<int>(rng() % 9) - 4);
            for (const DType dtype : dtypes) {
                for (const auto& epilogue : epilogues) {
                    // The epilogues on the first two cases, in f32 and bf16.
                    const bool identity = epilogue.first == 1 && epilogue.second == 0;
                    if (!identity && (&c - cases > 1 || (dtype != DType::f32 && dtype != DType::bf16)))
                        continue;
                    Run run{fmt::format("reduce {} \"{}\" {} x memory order {} alpha {} beta {}", name_of(op),
                                        c.pattern, name_of(dtype), fmt::join(c.memory, " "), epilogue.first,
                                        epilogue.second),
                            op,
                            Epilogue{epilogue.first, epilogue.second},
                            {},
                            {},
                            {},
                            {}};
                    run.inputs.push_back(lay_out(dtype, c.shape, c.memory, x));
                    run.inputs.push_back(lay_out(dtype, grad_shape, grad_memory, grad));
                    Call forward = call;
                    forward.reduction = op;
                    const Bound bound = einc::bind(forward, std::vector<Shape>{c.shape});
                    const TensorSpec x_spec{dtype, run.inputs[0].view.shape, run.inputs[0].view.strides};
                    const TensorSpec grad_spec{dtype, run.inputs[1].view.shape, run.inputs[1].view.strides};
                    PlanOptions options;
                    options.epilogue = run.epilogue;
                    run.plan = plan_route(bound, x_spec, grad_spec, options);
                    REQUIRE(run.plan.steps.size() == 1);
                    REQUIRE(std::holds_alternative<Route>(run.plan.steps[0].step));
                    run.gpu = schedule(run.plan, Target::gpu(132));
                    run.gpu_wide = run.gpu;
                    for (ScheduledStep& step : run.gpu_wide.steps)
                        for (KernelLaunch& launch : std::get<strategy::Kernels>(step.strategy).launches)
                            launch.signature.wide_index = true;
                    // What `einc aot` compiles covers what the schedule launches.
                    const std::vector<KernelSignature> possible = possible_kernels(run.plan, true);
                    for (const KernelSignature& k : kernels_of(run.gpu)) {
                        CHECK(k.kind == KernelKind::route);
                        CHECK_MESSAGE(std::find(possible.begin(), possible.end(), k) != possible.end(),
                                      k.name());
                    }
                    add_kernels(run.gpu);
                    if (dtype == DType::f32) add_kernels(run.gpu_wide);
                    runs.push_back(std::move(run));
                }
            }
        }
    }
    CHECK(nan_groups > 0);
    CHECK(tie_groups > 0);
    CHECK(equal_groups > 0);
    CHECK(zero_groups[0] > 0);
    CHECK(zero_groups[1] > 0);
    CHECK(zero_groups[2] > 0);
    std::set<std::pair<int, int>> ranks;
    for (const KernelSignature& k : kernels) ranks.emplace(k.kept_rank, k.reduced_rank);
    MESSAGE(fmt::format("{} route plans, {} distinct kernels, (kept, reduced) ranks {}", runs.size(),
                        kernels.size(), fmt::join(ranks, " ")));
    CHECK(std::any_of(ranks.begin(), ranks.end(), [](const std::pair<int, int>& k) { return k.first == 0; }));
    CHECK(ranks.contains({3, 2}));

    const EmulatedKernels emulated(kernels);
    EmulatedDevice device(emulated);
    for (const Run& r : runs) {
        CAPTURE(r.description);
        const TensorSpec& spec = r.plan.outputs[0];
        const std::vector<TensorView> inputs{r.inputs[0].view, r.inputs[1].view};
        // What the output held: NaN where beta == 0 (never read), else small integers.
        std::vector<double> old(static_cast<std::size_t>(
            std::accumulate(spec.shape.begin(), spec.shape.end(), std::int64_t{1}, std::multiplies<>())));
        for (std::size_t i = 0; i < old.size(); ++i)
            old[i] = r.epilogue.beta == 0 ? NAN : static_cast<double>(static_cast<int>(i % 5) - 2);
        const Tensor on_cpu = reference::make_tensor(spec.dtype, spec.shape, old);
        std::vector<TensorView> cpu_out{on_cpu.view()};
        execute_on_cpu(r.plan, schedule(r.plan, Target::cpu(2, 16, false)), inputs, cpu_out);
        const bool narrow = spec.dtype == DType::f16 || spec.dtype == DType::bf16;
        for (const Schedule* gpu : {&r.gpu, &r.gpu_wide}) {
            const bool wide = gpu == &r.gpu_wide;
            if (wide && spec.dtype != DType::f32) continue;
            CAPTURE(wide);
            const Tensor on_gpu = reference::make_tensor(spec.dtype, spec.shape, old);
            std::vector<TensorView> gpu_out{on_gpu.view()};
            run_gpu_plan(r.plan, *gpu, inputs, gpu_out, device);
            std::string difference;
            CHECK_MESSAGE(identical(on_gpu.view(), on_cpu.view(), true, difference),
                          "against the CPU executor: ", difference);
            if (r.epilogue.identity()) {
                const reference::PlanRun expected = reference::run_plan(r.plan, inputs);
                CHECK_MESSAGE(identical(on_gpu.view(), expected.outputs[0], false, difference),
                              "against the reference: ", difference);
            } else {
                // alpha * the reference's gradient + beta * old, rounded once (narrow floats: within their
                // tolerance)
                const reference::PlanRun unscaled = reference::run_plan(r.plan, inputs);
                const std::vector<double> ref = reference::values_of(unscaled.outputs[0]);
                std::vector<double> want(ref.size());
                for (std::size_t i = 0; i < ref.size(); ++i)
                    want[i] =
                        r.epilogue.alpha * ref[i] + (r.epilogue.beta != 0 ? r.epilogue.beta * old[i] : 0.0);
                const Tensor expected = reference::make_tensor(spec.dtype, spec.shape, want);
                if (narrow)
                    CHECK_MESSAGE(testing::same_values(on_gpu.view(), expected.view(), &difference),
                                  difference);
                else
                    CHECK_MESSAGE(identical(on_gpu.view(), expected.view(), false, difference),
                                  "against alpha * reference + beta * old: ", difference);
            }
        }
    }
}

// ---- one-pass reductions (kernel-designs.md section 3, designs A and B) --------------------------------

namespace {

const Reduction all_ops[] = {Reduction::sum,  Reduction::mean, Reduction::max, Reduction::min,
                             Reduction::prod, Reduction::any,  Reduction::all};
const DType gpu_dtypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,
                            DType::i8,  DType::i32, DType::i64, DType::boolean};

// An operand of `shape` whose last dim is contiguous and whose dim before it is `pitch` apart (0: dense,
// row-major), starting `shift` elements past a 16-byte boundary; padding holds 77 (a term read by mistake
// shows). Values in logical row-major order.
struct LaidOperand {
    Tensor storage;
    TensorView view;
};
LaidOperand lay_out_operand(DType dtype, const Shape& shape, std::int64_t pitch, std::int64_t shift,
                            const std::vector<double>& logical) {
    Shape strides = row_major_strides(shape);
    if (pitch > 0 && shape.size() >= 2) {
        strides[shape.size() - 2] = pitch;
        for (std::size_t d = shape.size() - 2; d-- > 0;) strides[d] = strides[d + 1] * shape[d + 1];
    }
    std::int64_t extent = 1;
    for (std::size_t d = 0; d < shape.size(); ++d) extent += (shape[d] - 1) * strides[d];
    std::vector<double> values(static_cast<std::size_t>(shift + extent), 77);
    for (std::size_t flat = 0; flat < logical.size(); ++flat) {
        std::int64_t offset = shift, rest = static_cast<std::int64_t>(flat);
        for (std::size_t d = shape.size(); d-- > 0;) {
            offset += rest % shape[d] * strides[d];
            rest /= shape[d];
        }
        values[static_cast<std::size_t>(offset)] = logical[flat];
    }
    LaidOperand out{reference::make_tensor(dtype, {static_cast<std::int64_t>(values.size())}, values), {}};
    REQUIRE(reinterpret_cast<std::uintptr_t>(out.storage.data()) % 16 == 0);
    out.view = TensorView{static_cast<std::byte*>(out.storage.data()) + shift * std::int64_t(size_of(dtype)),
                          dtype, shape, strides};
    return out;
}

// Terms for `op` over `dtype` whose results are exact in every accumulator and fold order (small integers;
// products of +-1 with a few 2 and 0.5), and that make each output's case happen: outputs whose terms are
// all zero (any false, prod 0) or all non-zero (all true), and for max and min of floats, NaN in some.
// `output(flat)` is the output a term folds into.
template <typename Output>
std::vector<double> one_pass_terms(Reduction op, DType dtype, std::int64_t count, const Output& output,
                                   std::mt19937& rng) {
    std::vector<double> values(static_cast<std::size_t>(count));
    int powers = 24;  // 2s and 0.5s a product may hold and stay exact in f32 (and in bf16)
    for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t mode = output(i) % 5;
        double v = static_cast<double>(static_cast<int>(rng() % 7) - 3);
        if (op == Reduction::prod && is_floating(dtype)) {
            v = rng() % 2 ? 1 : -1;
            if (rng() % 64 == 0 && powers > 0) {
                v = rng() % 2 ? 2 : 0.5;
                --powers;
            }
        }
        if (mode == 1) v = 0;
        if (mode == 2 && v == 0) v = 1;
        if (dtype == DType::boolean) v = v != 0;
        values[static_cast<std::size_t>(i)] = v;
    }
    if ((op == Reduction::max || op == Reduction::min) && is_floating(dtype) && count > 0)
        for (int k = 0; k < 3; ++k) {
            const auto at = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(count));
            if (output(at) % 5 == 3) values[static_cast<std::size_t>(at)] = NAN;
        }
    return values;
}

struct OnePassCase {
    std::string description;
    Call call;
    LaidOperand operand;
    Prepared prepared;
    std::optional<KernelKind> expected;  // the kind the schedule must choose, where the class says it
};

std::vector<KernelSignature> kernels_of_all(const std::vector<OnePassCase>& cases) {
    std::vector<KernelSignature> kernels;
    for (const OnePassCase& c : cases)
        for (const KernelSignature& k : kernels_of(c.prepared.gpu))
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    return kernels;
}

// The kinds a case's GPU schedule launches.
std::vector<KernelKind> kinds_of(const Schedule& gpu) {
    std::vector<KernelKind> kinds;
    for (const ScheduledStep& step : gpu.steps)
        for (const KernelLaunch& launch : launches_of(step)) kinds.push_back(launch.signature.kind);
    return kinds;
}

// Runs a case by `gpu` (its schedule, or a variant of it) on the emulated device (`workspace`: the
// caller's, or none), checks the result against the reference by `compare(got, expected, &difference)`
// and returns it.
template <typename Compare = decltype(&testing::same_values)>
Tensor run_one_pass_case(const OnePassCase& c, const Schedule& gpu, EmulatedDevice& device,
                         std::byte* workspace = nullptr, const Compare& compare = &testing::same_values) {
    const Plan& plan = c.prepared.plan;
    Tensor out = Tensor::empty(plan.outputs[0].dtype, plan.outputs[0].shape);
    std::vector<TensorView> outputs{out.view()};
    run_gpu_plan(plan, gpu, std::span(&c.operand.view, 1), outputs, device, workspace);
    const std::vector<Tensor> expected = reference::evaluate(
        einc::bind(c.call, std::vector<Shape>{c.operand.view.shape}), std::span(&c.operand.view, 1));
    std::string difference;
    CHECK_MESSAGE(compare(outputs[0], expected[0].view(), &difference), difference);
    return out;
}

}  // namespace

// Design A (reduce_one_pass) and design B (reduce_short_rows): every reduction op and every dtype a GPU
// takes, on random shapes of each class - kept modes innermost with K = 1..32 outputs (one and two kept
// modes, full reductions), rows of 1..70 terms (dense, padded, one and two kept modes) - odd sizes, views
// that begin off a 16-byte boundary; NaN among max/min terms. The schedule chooses the kind the class
// says, `einc aot`'s possible_kernels covers it, and the results equal the reference interpreter's. Some
// kernels run again in their 64-bit index variant.
TEST_CASE("emulated GPU: one-pass reductions (designs A and B) for every op and dtype equal the reference") {
    std::mt19937 rng(2026);
    const auto pick = [&](std::int64_t low, std::int64_t high) {
        return low + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(high - low + 1));
    };
    std::vector<OnePassCase> cases;
    // Every random draw is in its own statement or braced list (evaluated in order) or here, after the
    // arguments: function arguments are evaluated in an unspecified order, so GCC and Clang would draw
    // different cases.
    const auto add = [&](Reduction op, DType dtype, const char* pattern, const Shape& shape,
                         std::int64_t pitch, std::int64_t max_shift, std::optional<KernelKind> expected) {
        const std::int64_t shift = pick(0, max_shift);
        const Call call{Op::reduce, pattern, op, {}, false, {}};
        std::int64_t outputs = 1;
        for (const std::int64_t e : einc::bind(call, std::vector<Shape>{shape}).outputs[0].shape())
            outputs *= e;
        std::int64_t count = 1;
        for (const std::int64_t e : shape) count *= e;
        const bool columns = expected == KernelKind::reduce_one_pass;
        const std::int64_t terms = count / outputs;
        // One term is a copy, not a reduction; rows under one 16-byte chunk keep the earlier kernels
        // (short_rows_min_bytes).
        if (terms == 1) expected = std::nullopt;
        if (expected == KernelKind::reduce_short_rows &&
            terms * static_cast<std::int64_t>(size_of(dtype)) < short_rows_min_bytes)
            expected = std::nullopt;
        const std::vector<double> values = one_pass_terms(
            op, dtype, count,
            [&](std::int64_t flat) {
                return columns ? flat % outputs : flat / std::max<std::int64_t>(terms, 1);
            },
            rng);
        LaidOperand operand = lay_out_operand(dtype, shape, pitch, shift, values);
        Prepared prepared = prepare(call, std::span(&operand.view, 1), false);
        cases.push_back(OnePassCase{fmt::format("reduce {} \"{}\" {} {} pitch {} shift {}", name_of(op),
                                                pattern, name_of(dtype), fmt::join(shape, "x"), pitch, shift),
                                    call, std::move(operand), std::move(prepared), expected});
    };
    constexpr auto A = KernelKind::reduce_one_pass;
    constexpr auto B = KernelKind::reduce_short_rows;
    int combination = 0;
    for (const Reduction op : all_ops)
        for (const DType dtype : gpu_dtypes) {
            if (info_of(op).result == ResultRule::floating && !is_floating(dtype)) continue;
            const std::int64_t lanes = 16 / static_cast<std::int64_t>(size_of(dtype));
            const std::int64_t block = lanes * one_pass_min_vectors * one_pass_block_threads;  // one block's
            const std::int64_t k = pick(1, 32);
            // A: a few blocks, then one; a full reduction; two kept modes
            add(op, dtype, "a c -> c", {(2 * block + pick(1, block)) / k, k}, 0, lanes - 1, A);
            add(op, dtype, "a c -> c", {pick(1, 300), pick(1, 32)}, 0, lanes - 1, A);
            add(op, dtype, "a b ->", {pick(1, 70), 3 * block / 70 + pick(0, 999)}, 0, lanes - 1, A);
            if (combination % 3 == 0)
                add(op, dtype, "a b c -> b c", {pick(100, 3000), pick(2, 4), pick(2, 8)}, 0, lanes - 1, A);
            // B: dense rows, padded rows, two kept modes
            const std::int64_t short_terms = std::min<std::int64_t>(70, 32 * lanes);
            add(op, dtype, "a b -> a", {pick(1, 700), pick(2, short_terms)}, 0, lanes - 1, B);
            const std::int64_t r = pick(2, short_terms);
            const std::int64_t pitch = r + pick(0, 9);
            const bool shifted = pick(0, 1) == 1;
            add(op, dtype, "a b -> a", {pick(1, 700), r}, pitch, shifted ? lanes - 1 : 0, B);
            if (combination % 3 == 1)
                add(op, dtype, "a b c -> a b", {pick(2, 30), pick(2, 30), pick(2, short_terms)}, 0, lanes - 1,
                    B);
            ++combination;
        }
    // Every K of A and one past it (the earlier kernels), every row length of B, in f32 and i8 (V = 4 and
    // 16).
    for (const DType dtype : {DType::f32, DType::i8}) {
        const std::int64_t lanes = 16 / static_cast<std::int64_t>(size_of(dtype));
        const std::int64_t block = lanes * one_pass_min_vectors * one_pass_block_threads;
        for (std::int64_t k = 1; k <= 33; ++k)
            add(k % 2 ? Reduction::sum : Reduction::max, dtype, "a c -> c",
                {(block + pick(1, 2 * block)) / k, k}, 0, lanes - 1,
                k <= 32 ? std::optional(A) : std::nullopt);
        for (std::int64_t r = 1; r <= 70; ++r)
            add(r % 2 ? Reduction::sum : Reduction::min, dtype, "a b -> a", {pick(1, 200), r}, r + r % 3, 3,
                r > 1 ? std::optional(B) : std::nullopt);
    }
    // The library holds every case's kernels, sanitized or not, so that the sanitized suite finds the
    // Release suite's library in the cache (emulated_library.hpp); sanitized, a sample of the cases runs.
    const std::vector<KernelSignature> kernels = kernels_of_all(cases);
    // The 64-bit index variants of a few.
    std::vector<std::pair<const OnePassCase*, Schedule>> wide;
    std::vector<KernelSignature> all_kernels = kernels;
    for (std::size_t i = 0; i < cases.size(); i += 17) {
        Schedule s = cases[i].prepared.gpu;
        for (ScheduledStep& step : s.steps)
            if (auto* k = std::get_if<strategy::Kernels>(&step.strategy))
                for (KernelLaunch& launch : k->launches) launch.signature.wide_index = true;
        for (const KernelSignature& k : kernels_of(s))
            if (std::find(all_kernels.begin(), all_kernels.end(), k) == all_kernels.end())
                all_kernels.push_back(k);
        wide.emplace_back(&cases[i], std::move(s));
    }
    MESSAGE(cases.size(), " cases, ", all_kernels.size(), " distinct kernels");
    const EmulatedKernels emulated(all_kernels);
    EmulatedDevice device(emulated);
    std::map<KernelKind, int> kinds_run;
    int multi_block = 0;
    for (std::size_t i = 0; i < cases.size(); i += testing::sample_every) {
        const OnePassCase& c = cases[i];
        CAPTURE(c.description);
        const std::vector<KernelKind> kinds = kinds_of(c.prepared.gpu);
        for (const KernelKind kind : kinds) ++kinds_run[kind];
        if (c.expected) CHECK(kinds == std::vector<KernelKind>{*c.expected});
        for (const ScheduledStep& step : c.prepared.gpu.steps)
            for (const KernelLaunch& launch : launches_of(step))
                if (launch.signature.kind == KernelKind::reduce_one_pass && launch.grid.x > 1) ++multi_block;
        const std::vector<KernelSignature> possible = possible_kernels(c.prepared.plan, true);
        for (const KernelSignature& k : kernels_of(c.prepared.gpu))
            CHECK_MESSAGE(std::find(possible.begin(), possible.end(), k) != possible.end(), k.name());
        run_one_pass_case(c, c.prepared.gpu, device);
    }
    for (std::size_t i = 0; i < wide.size(); i += testing::sample_every) {
        CAPTURE(wide[i].first->description);
        run_one_pass_case(*wide[i].first, wide[i].second, device);
    }
    MESSAGE(kinds_run[KernelKind::reduce_one_pass], " reduce_one_pass runs (", multi_block,
            " of more than one block), ", kinds_run[KernelKind::reduce_short_rows],
            " reduce_short_rows runs");
    CHECK(kinds_run[KernelKind::reduce_one_pass] > 100 / testing::sample_every);
    CHECK(multi_block > 50 / testing::sample_every);
    CHECK(kinds_run[KernelKind::reduce_short_rows] > 100 / testing::sample_every);
}

// Design A's fold across blocks is deterministic for a fixed grid, whichever block finishes last: each
// case (G >= 3 blocks, real-valued terms, so that another association of the same sums would round
// differently) runs in index order and in shuffled block orders, giving the same bits each time and the
// reference's values within rounding, from a caller's workspace holding garbage - bytes 00, FF, 7F,
// random, a counter near its wrap - and from an allocation of its own. The executor zeroes the counter
// (the first 16 bytes of the step's scratch) before each launch, and every block adds one to it.
TEST_CASE("emulated GPU: one-pass reductions give the same bits in any block order, from a workspace of "
          "garbage too; each block counts once from the zeroed counter") {
    struct Spec {
        Reduction op;
        DType dtype;
        const char* pattern;
        Shape shape;
        std::int64_t shift;
    };
    const Spec specs[] = {
        {Reduction::sum, DType::f32, "a c -> c", {30001, 3}, 1},    // K = 3: period 3, no register fold
        {Reduction::sum, DType::f32, "a ->", {120003}, 0},          // a full reduction
        {Reduction::mean, DType::bf16, "a c -> c", {30000, 8}, 5},  // K = V: one column a slot
        {Reduction::sum, DType::f64, "a c -> c", {9000, 5}, 1},
        {Reduction::max, DType::f16, "a c -> c", {9001, 32}, 3},
        {Reduction::prod, DType::i64, "a c -> c", {20000, 2}, 0},
    };
    std::mt19937 rng(99);
    std::uniform_real_distribution<double> real(-1, 1);
    std::vector<OnePassCase> cases;
    for (const Spec& spec : specs) {
        const Call call{Op::reduce, spec.pattern, spec.op, {}, false, {}};
        std::int64_t count = 1;
        for (const std::int64_t e : spec.shape) count *= e;
        std::vector<double> values(static_cast<std::size_t>(count));
        for (double& v : values)
            v = spec.op == Reduction::prod ? static_cast<double>(static_cast<int>(rng() % 7) - 3) : real(rng);
        LaidOperand operand = lay_out_operand(spec.dtype, spec.shape, 0, spec.shift, values);
        Prepared prepared = prepare(call, std::span(&operand.view, 1), false);
        cases.push_back(
            OnePassCase{fmt::format("reduce {} \"{}\" {} {} shift {}", name_of(spec.op), spec.pattern,
                                    name_of(spec.dtype), fmt::join(spec.shape, "x"), spec.shift),
                        call, std::move(operand), std::move(prepared), KernelKind::reduce_one_pass});
    }
    const EmulatedKernels emulated(kernels_of_all(cases));
    EmulatedDevice device(emulated);
    const std::uint64_t near_wrap = ~std::uint64_t{0} - 1;
    for (const OnePassCase& c : cases) {
        CAPTURE(c.description);
        REQUIRE(kinds_of(c.prepared.gpu) == std::vector<KernelKind>{KernelKind::reduce_one_pass});
        const KernelLaunch& launch =
            std::get<strategy::Kernels>(c.prepared.gpu.steps[0].strategy).launches[0];
        CHECK(launch.grid.x >= 3);
        CHECK(c.prepared.gpu.steps[0].scratch_bytes ==
              one_pass_counter_bytes + std::int64_t{launch.grid.x} * launch.params.kept_count *
                                           std::int64_t(size_of(launch.signature.accumulator)));
        const auto bytes = static_cast<std::size_t>(c.prepared.gpu.workspace_bytes);
        const std::unique_ptr<std::byte, decltype(&std::free)> workspace(
            static_cast<std::byte*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256)), &std::free);
        REQUIRE(c.prepared.gpu.steps[0].zeroed_scratch_bytes == one_pass_counter_bytes);
        std::byte* const counter = workspace.get() + c.prepared.gpu.steps[0].scratch_offset;
        const auto counter_word = [&](int k) {
            std::uint64_t word;
            std::memcpy(&word, counter + 8 * k, 8);
            return word;
        };
        // Within rounding of the exact results: a fold of n terms in the accumulator errs by at most
        // n u S (S the sum of the terms' magnitudes), the result's rounding by half an ulp of its dtype.
        const std::int64_t columns = launch.params.kept_count, terms = launch.params.reduced_count;
        std::vector<double> magnitudes(static_cast<std::size_t>(columns));
        const std::vector<double> values = reference::values_of(c.operand.view);
        for (std::size_t i = 0; i < values.size(); ++i)
            magnitudes[i % static_cast<std::size_t>(columns)] += std::fabs(values[i]);
        const DType out_dtype = c.prepared.plan.outputs[0].dtype;
        const double unit = launch.signature.accumulator == DType::f64 ? 0x1p-53 : 0x1p-24;
        const double rounding = out_dtype == DType::bf16  ? 0x1p-8
                                : out_dtype == DType::f16 ? 0x1p-11
                                : out_dtype == DType::f32 ? 0x1p-24
                                                          : 0x1p-53;
        const double divisor = c.call.reduction == Reduction::mean ? static_cast<double>(terms) : 1;
        const auto within = [&](const TensorView& got, const TensorView& expected, std::string* difference) {
            const std::vector<double> a = reference::values_of(got), b = reference::values_of(expected);
            for (std::size_t i = 0; i < a.size(); ++i) {
                const double allowed = static_cast<double>(terms + 1) * unit * magnitudes[i] / divisor +
                                       rounding * std::fabs(b[i]);
                if (!(std::fabs(a[i] - b[i]) <= allowed)) {
                    *difference = fmt::format("output {}: {} where {} was expected (within {})", i, a[i],
                                              b[i], allowed);
                    return false;
                }
            }
            return true;
        };
        // The run in index order, with no workspace (its own allocation, which the allocator does not zero).
        device.blocks = {};
        const Tensor first = run_one_pass_case(c, c.prepared.gpu, device, nullptr, within);
        const auto same_bits = [&](const Tensor& t) {
            return std::memcmp(t.data(), first.data(), t.nbytes()) == 0;
        };
        std::mt19937 garbage(7);
        for (int run = 0; run < 8; ++run) {
            CAPTURE(run);
            // Garbage before some runs; the last run's counter before the others.
            if (run < 5) {
                std::memset(workspace.get(), run == 0 ? 0x00 : run == 1 ? 0xFF : 0x7F, bytes);
                if (run == 3)
                    for (std::size_t b = 0; b < bytes; ++b) workspace.get()[b] = std::byte(garbage() & 0xFF);
                if (run == 4) std::memcpy(counter, &near_wrap, 8);
            }
            device.blocks.shuffle = run == 0 ? std::nullopt : std::optional<std::uint32_t>(run);
            const Tensor again = run_one_pass_case(c, c.prepared.gpu, device, workspace.get(), within);
            CHECK(same_bits(again));
            CHECK(counter_word(0) == launch.grid.x);
        }
    }
}

// reduce_rows and reduce_columns over 1- and 2-byte elements read 16-byte vectors: rows that are dense at any
// alignment (rows of odd lengths and pitches, views off a 16-byte boundary: each row peels its own head
// and tail), rows split across blocks, and columns in groups of V = 16 / size outputs where every term's
// vector is aligned - else the launches without vectors run (a view off a boundary) or the schedule keeps
// them (the kept extent no multiple of V, padded rows). Every op and narrow dtype, NaN among max/min terms;
// the results equal the reference interpreter's, and the launches that ran are the ones the case expects.
TEST_CASE("emulated GPU: narrow rows and columns reductions read 16-byte vectors and equal the reference") {
    std::mt19937 rng(2027);
    const auto pick = [&](std::int64_t low, std::int64_t high) {
        return low + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(high - low + 1));
    };
    struct Expected {
        KernelKind kind;
        bool vector;  // the launch that runs reads vectors
    };
    std::vector<OnePassCase> cases;
    std::vector<Expected> expected;
    // `output(shape, flat)`: the output a term of the row-major operand folds into.
    const auto add = [&](Reduction op, DType dtype, const char* pattern, const Shape& shape,
                         std::int64_t pitch, std::int64_t shift, Expected runs, auto output) {
        const Call call{Op::reduce, pattern, op, {}, false, {}};
        std::int64_t count = 1;
        for (const std::int64_t e : shape) count *= e;
        const std::vector<double> values = one_pass_terms(
            op, dtype, count, [&](std::int64_t flat) { return output(shape, flat); }, rng);
        LaidOperand operand = lay_out_operand(dtype, shape, pitch, shift, values);
        Prepared prepared = prepare(call, std::span(&operand.view, 1), false);
        cases.push_back(OnePassCase{fmt::format("reduce {} \"{}\" {} {} pitch {} shift {}", name_of(op),
                                                pattern, name_of(dtype), fmt::join(shape, "x"), pitch, shift),
                                    call, std::move(operand), std::move(prepared), runs.kind});
        expected.push_back(runs);
    };
    const auto row = [](const Shape& shape, std::int64_t flat) { return flat / shape.back(); };
    const auto row_of_two = [](const Shape& shape, std::int64_t flat) {
        return flat / (shape[1] * shape[2]);
    };
    const auto column = [](const Shape& shape, std::int64_t flat) { return flat % shape.back(); };
    const auto bhj = [](const Shape& shape, std::int64_t flat) {  // "b h i j -> b h j"
        return flat / (shape[2] * shape[3]) * shape[3] + flat % shape[3];
    };
    constexpr auto rows = KernelKind::reduce_rows;
    constexpr auto columns = KernelKind::reduce_columns;
    // Every op in bf16; the other narrow dtypes with the ops whose folds differ for them (each combination
    // compiles some ten kernels).
    const std::pair<DType, std::vector<Reduction>> combinations[] = {
        {DType::bf16, {all_ops, all_ops + std::size(all_ops)}},
        {DType::f16, {Reduction::sum, Reduction::max}},
        {DType::i8, {Reduction::sum, Reduction::min, Reduction::prod}},
        {DType::boolean, {Reduction::any, Reduction::all}},
    };
    int combination = 0;
    for (const auto& [dtype, ops] : combinations)
        for (const Reduction op : ops) {
            const std::int64_t V = 16 / static_cast<std::int64_t>(size_of(dtype));
            const std::int64_t long_row =
                short_rows_max_bytes / static_cast<std::int64_t>(size_of(dtype)) + 1;
            // Rows: dense, padded (odd pitches), split across blocks, two reduced modes dense and padded.
            add(op, dtype, "a b -> a", {pick(2, 40), pick(long_row, 3000)}, 0, pick(0, V - 1), {rows, true},
                row);
            const std::int64_t r = pick(long_row, 2000);
            add(op, dtype, "a b -> a", {pick(2, 30), r}, r + pick(1, 9), pick(0, V - 1), {rows, true}, row);
            if (combination % 2 == 0)
                add(op, dtype, "a b -> a", {pick(2, 3), pick(40000, 70000)}, 0, pick(0, V - 1), {rows, true},
                    row);
            add(op, dtype, "a b c -> a", {pick(2, 9), pick(2, 20), pick(long_row / 2 + 1, 300)}, 0,
                pick(0, V - 1), {rows, true}, row_of_two);
            if (combination % 3 == 0)
                add(op, dtype, "a b c -> a", {pick(2, 9), pick(2, 20), pick(long_row / 2 + 1, 300)},
                    long_row / 2 + 300 + pick(1, 9), 0, {rows, false}, row_of_two);
            // Columns: aligned (vectors), split across blocks, off a boundary (the launches without
            // vectors), a kept extent no multiple of V (no vectors).
            add(op, dtype, "a b -> b", {pick(17, 300), V * pick(5, 60)}, 0, 0, {columns, true}, column);
            add(op, dtype, "b h i j -> b h j", {2, 3, pick(17, 3000), V * pick(1, 8)}, 0, 0, {columns, true},
                bhj);
            if (combination % 2 == 1)
                add(op, dtype, "a b -> b", {pick(17, 300), V * pick(5, 60)}, 0, pick(1, V - 1),
                    {columns, false}, column);
            if (combination % 3 == 1)
                add(op, dtype, "a b -> b", {pick(17, 300), V * pick(5, 60) + pick(1, V - 1)}, 0, 0,
                    {columns, false}, column);
            ++combination;
        }
    const std::vector<KernelSignature> kernels = kernels_of_all(cases);
    MESSAGE(cases.size(), " cases, ", kernels.size(), " distinct kernels");
    const EmulatedKernels emulated(kernels);
    EmulatedDevice device(emulated);
    std::map<std::pair<KernelKind, bool>, int> ran;
    for (std::size_t i = 0; i < cases.size(); i += testing::sample_every) {
        const OnePassCase& c = cases[i];
        CAPTURE(c.description);
        const std::vector<KernelSignature> possible = possible_kernels(c.prepared.plan, true);
        for (const KernelSignature& k : kernels_of(c.prepared.gpu))
            CHECK_MESSAGE(std::find(possible.begin(), possible.end(), k) != possible.end(), k.name());
        device.launched.clear();
        run_one_pass_case(c, c.prepared.gpu, device);
        REQUIRE(!device.launched.empty());
        const KernelSignature& first = device.launched.front();
        CHECK(first.kind == expected[i].kind);
        CHECK((first.vector > 0) == expected[i].vector);
        ++ran[{first.kind, first.vector > 0}];
        if (first.partials) ++ran[{KernelKind::finalize, first.vector > 0}];
    }
    MESSAGE(ran[{rows, true}], " vector rows runs (", ran[{KernelKind::finalize, true}], " split), ",
            ran[{columns, true}], " vector columns runs, ", ran[{columns, false}],
            " columns without vectors, ", ran[{rows, false}], " rows without");
    CHECK(ran[{rows, true}] > 40 / testing::sample_every);
    CHECK(ran[{columns, true}] > 12 / testing::sample_every);  // (28 of 28 in full, 4 sanitized)
    CHECK(ran[{KernelKind::finalize, true}] > 10 / testing::sample_every);
    CHECK(ran[{columns, false}] > 5 / testing::sample_every);
}

// Rows of 2, 4 and 8 bytes packed back to back (reduce_packed_rows): every op and dtype a GPU takes, each
// row length that packs, row counts that leave a tail after the last whole vector, sources off a 16-byte
// boundary (a row a thread), destinations of two kept modes in another order (each row's offset
// decomposed), NaN among max/min terms; the results equal the reference interpreter's.
TEST_CASE("emulated GPU: packed rows of 2, 4 and 8 bytes for every op and dtype equal the reference") {
    std::mt19937 rng(2028);
    const auto pick = [&](std::int64_t low, std::int64_t high) {
        return low + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(high - low + 1));
    };
    std::vector<OnePassCase> cases;
    const auto add = [&](Reduction op, DType dtype, const char* pattern, const Shape& shape,
                         std::int64_t shift, auto output) {
        const Call call{Op::reduce, pattern, op, {}, false, {}};
        std::int64_t count = 1;
        for (const std::int64_t e : shape) count *= e;
        const std::vector<double> values = one_pass_terms(
            op, dtype, count, [&](std::int64_t flat) { return output(shape, flat); }, rng);
        LaidOperand operand = lay_out_operand(dtype, shape, 0, shift, values);
        Prepared prepared = prepare(call, std::span(&operand.view, 1), false);
        cases.push_back(OnePassCase{fmt::format("reduce {} \"{}\" {} {} shift {}", name_of(op), pattern,
                                                name_of(dtype), fmt::join(shape, "x"), shift),
                                    call, std::move(operand), std::move(prepared),
                                    KernelKind::reduce_packed_rows});
    };
    const auto row = [](const Shape& shape, std::int64_t flat) { return flat / shape.back(); };
    int combination = 0, runs = 0, aligned_runs = 0;
    for (const Reduction op : all_ops)
        for (const DType dtype : gpu_dtypes) {
            if (info_of(op).result == ResultRule::floating && !is_floating(dtype)) continue;
            const auto size = static_cast<std::int64_t>(size_of(dtype));
            for (std::int64_t r = 2; packed_rows(r * size); r *= 2) {
                const std::int64_t P = 16 / (r * size);
                // many vector batches and a tail; a few rows only (the tail alone); off a boundary
                add(op, dtype, "a r -> a", {P * 32 * 4 * pick(1, 5) + pick(0, P - 1), r}, 0, row);
                if (combination % 2 == 0) add(op, dtype, "a r -> a", {pick(2, 2 * P), r}, 0, row);
                if (combination % 3 == 0)
                    add(op, dtype, "a r -> a", {pick(100, 900), r}, pick(1, 16 / size - 1), row);
                if (combination % 3 == 1)
                    add(op, dtype, "a b r -> b a", {pick(2, 40), pick(2, 40), r}, 0, row);
                ++combination;
            }
        }
    const EmulatedKernels emulated(kernels_of_all(cases));
    EmulatedDevice device(emulated);
    for (std::size_t i = 0; i < cases.size(); i += testing::sample_every) {
        const OnePassCase& c = cases[i];
        CAPTURE(c.description);
        CHECK(kinds_of(c.prepared.gpu) == std::vector<KernelKind>{KernelKind::reduce_packed_rows});
        const std::vector<KernelSignature> possible = possible_kernels(c.prepared.plan, true);
        for (const KernelSignature& k : kernels_of(c.prepared.gpu))
            CHECK_MESSAGE(std::find(possible.begin(), possible.end(), k) != possible.end(), k.name());
        run_one_pass_case(c, c.prepared.gpu, device);
        ++runs;
        aligned_runs += reinterpret_cast<std::uintptr_t>(c.operand.view.data) % 16 == 0;
    }
    MESSAGE(cases.size(), " cases, ", runs, " run, ", aligned_runs, " from a 16-byte boundary");
    CHECK(aligned_runs > 60 / testing::sample_every);
    CHECK(runs - aligned_runs > 10 / testing::sample_every);
}
