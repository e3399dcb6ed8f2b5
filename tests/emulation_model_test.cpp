// The GPU model's description of each kernel (compiler/kernel_behaviour.hpp) checked against the kernels'
// own text: every launch runs in the host emulation with tracing on (tests/emulation/einc_emulation.hpp
// records each thread's accesses, batch marks, barriers and shuffles), and what the trace shows - sector
// efficiency, whole sectors, bytes in flight per batch, bank ways, the busiest thread's chain, the
// distinct sectors (HBM bytes), the launches - must equal what the design declared from the launch alone.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "compiler/bind.hpp"
#include "compiler/codegen.hpp"
#include "compiler/gpu_model.hpp"
#include "compiler/kernel_behaviour.hpp"
#include "compiler/schedule.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/execute.hpp"
#include "runtime/gpu_executor.hpp"
#include "tests/emulated_library.hpp"
#include "tests/emulation/einc_trace.h"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"

using namespace einc;

namespace {

static_assert(einc_emu_load == static_cast<int>(LaneEvent::Kind::load) &&
                  einc_emu_store == static_cast<int>(LaneEvent::Kind::store) &&
                  einc_emu_shared_load == static_cast<int>(LaneEvent::Kind::shared_load) &&
                  einc_emu_shared_store == static_cast<int>(LaneEvent::Kind::shared_store) &&
                  einc_emu_batch_mark == static_cast<int>(LaneEvent::Kind::batch_mark) &&
                  einc_emu_barrier == static_cast<int>(LaneEvent::Kind::barrier) &&
                  einc_emu_shuffle == static_cast<int>(LaneEvent::Kind::shuffle),
              "the emulator's event kinds are LaneEvent's, in order");

using Trace = void (*)(testing::EmulatedLibrary::Invoke, unsigned, unsigned, unsigned, void**,
                       const unsigned*, unsigned, einc_emu_sink, void*);

// What a traced launch recorded: each thread's events, by block.
struct Recorded {
    std::map<unsigned, std::vector<std::vector<LaneEvent>>> blocks;  // block -> thread -> events
    unsigned threads = 0;
};

void record(void* context, unsigned block, unsigned thread, const einc_emu_event* events,
            unsigned long long count) {
    Recorded& r = *static_cast<Recorded*>(context);
    auto& threads = r.blocks[block];
    threads.resize(r.threads);
    auto& out = threads[thread];
    out.clear();
    for (unsigned long long e = 0; e < count; ++e)
        out.push_back(LaneEvent{static_cast<LaneEvent::Kind>(events[e].kind), events[e].site, events[e].size,
                                events[e].address});
}

// The kernels of a set of plans compiled for the host into one library, launched traced.
class TracedKernels {
public:
    explicit TracedKernels(const std::vector<KernelSignature>& kernels)
        : library_(kernels), trace_(library_.function<Trace>("einc_emu_trace")) {}

    // Runs `blocks` of the launch (its real grid), recording every thread's events.
    Recorded trace(const KernelLaunch& launch, std::span<void* const> pointers,
                   const std::vector<unsigned>& blocks) const {
        std::vector<void*> arguments{const_cast<KernelParams*>(&launch.params)};
        for (void* const& p : pointers) arguments.push_back(const_cast<void**>(&p));
        Recorded recorded;
        recorded.threads = launch.block.x * launch.block.y;
        trace_(library_.invoker(launch.signature), launch.grid.x, launch.block.x, launch.block.y,
               arguments.data(), blocks.data(), static_cast<unsigned>(blocks.size()), &record, &recorded);
        return recorded;
    }

private:
    testing::EmulatedLibrary library_;
    Trace trace_;
};

// The statistics of a trace: each warp's lanes together, as the description's lane programs are read.
struct Traced {
    TraceStatistics statistics;
    std::unordered_set<std::uint64_t> load_sectors, store_sectors;
};

Traced statistics_of(const Recorded& recorded) {
    Traced t;
    for (const auto& [block, threads] : recorded.blocks) {
        for (std::size_t first = 0; first < threads.size(); first += kernel_warp) {
            const std::size_t end = std::min(threads.size(), first + kernel_warp);
            std::vector<std::vector<LaneEvent>> lanes(threads.begin() + static_cast<std::ptrdiff_t>(first),
                                                      threads.begin() + static_cast<std::ptrdiff_t>(end));
            t.statistics.add(warp_statistics(lanes), 1);
            for (const auto& lane : lanes)
                for (const LaneEvent& e : lane)
                    for (std::uint64_t s = e.address / 32;
                         (e.kind == LaneEvent::Kind::load || e.kind == LaneEvent::Kind::store) &&
                         s <= (e.address + e.size - 1) / 32;
                         ++s)
                        (e.kind == LaneEvent::Kind::load ? t.load_sectors : t.store_sectors).insert(s);
        }
    }
    return t;
}

// Each pointer argument's address modulo 4096: where the real buffers' sectors begin.
BehaviourOptions aligned_as(std::span<void* const> pointers) {
    BehaviourOptions options;
    for (std::size_t a = 0; a < pointers.size(); ++a)
        options.argument_alignment[a] =
            static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(pointers[a]) % 4096);
    return options;
}

// The first event where a traced thread and its lane program part, for a failure's message.
std::string first_difference(const KernelLaunch& launch, const BehaviourOptions& options,
                             const Recorded& recorded) {
    std::unordered_map<std::uint32_t, std::uint32_t> sites;  // traced site -> declared site
    for (const auto& [block, threads] : recorded.blocks)
        for (unsigned t = 0; t < threads.size(); ++t) {
            const std::vector<LaneEvent> declared = lane_events(launch, options, block, t);
            const std::vector<LaneEvent>& traced = threads[t];
            for (std::size_t e = 0; e < std::max(declared.size(), traced.size()); ++e) {
                if (e >= declared.size() || e >= traced.size())
                    return fmt::format("block {} thread {}: {} events traced, {} declared", block, t,
                                       traced.size(), declared.size());
                const LaneEvent& a = traced[e];
                const LaneEvent& b = declared[e];
                const bool site_agrees = sites.emplace(a.site, b.site).first->second == b.site;
                if (a.kind != b.kind || a.size != b.size || a.address % 4096 != b.address % 4096 ||
                    !site_agrees)
                    return fmt::format("block {} thread {} event {}: traced kind {} size {} address%4096 {}, "
                                       "declared kind {} size {} address%4096 {}{}",
                                       block, t, e, static_cast<int>(a.kind), a.size, a.address % 4096,
                                       static_cast<int>(b.kind), b.size, b.address % 4096,
                                       site_agrees ? "" : " (another site)");
            }
        }
    return "the events agree";
}

// Device operations on host memory whose every launch is traced in full and checked against its
// declared behaviour.
class CheckingDevice final : public DeviceOps {
public:
    explicit CheckingDevice(const TracedKernels& kernels) : kernels_(kernels) {}
    void* allocate(std::size_t bytes) override { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
    void release(void* memory) override { std::free(memory); }
    void zero(void* memory, std::size_t bytes) override { std::memset(memory, 0, bytes); }
    void gemm(const Gemm&, DType, strategy::GemmCompute, const void*, const void*, void*, void*,
              std::size_t) override {
        FAIL("these plans have no library GEMM");
    }
    void launch(const KernelLaunch& launch, std::span<void* const> pointers) override {
        ++launches;
        std::vector<unsigned> blocks(launch.grid.x);
        for (unsigned b = 0; b < launch.grid.x; ++b) blocks[b] = b;
        const Recorded recorded = kernels_.trace(launch, pointers, blocks);
        const Traced traced = statistics_of(recorded);
        BehaviourOptions options = aligned_as(pointers);
        options.sampled_warps = 0;
        options.emitted_items = options.emitted_terms = 0;
        const KernelBehaviour declared = behaviour_of(launch, options);
        const TraceStatistics& t = traced.statistics;
        CAPTURE(launch.signature.name());
        INFO(first_difference(launch, options, recorded));
        CHECK(declared.exact);
        CHECK(t.load_sector_efficiency() == doctest::Approx(declared.load_sector_efficiency));
        CHECK(t.store_sector_efficiency() == doctest::Approx(declared.store_sector_efficiency));
        CHECK(t.whole_sector_share() == doctest::Approx(declared.whole_sector_share));
        CHECK(t.active_lane_share() == doctest::Approx(declared.active_lane_share));
        CHECK(t.batch_bytes() == doctest::Approx(declared.batch_bytes));
        CHECK(t.warp_batches == doctest::Approx(declared.warp_batches));
        CHECK(t.longest_chain == doctest::Approx(declared.serial_chain));
        CHECK(t.bank_ways() == doctest::Approx(declared.bank_ways));
        CHECK(t.load_bytes == doctest::Approx(declared.load_bytes));
        CHECK(t.store_bytes == doctest::Approx(declared.store_bytes));
        if (dense) {  // the footprints assume whole buffers that start on a sector
            CHECK(32.0 * static_cast<double>(traced.load_sectors.size()) ==
                  doctest::Approx(declared.hbm_read_bytes));
            CHECK(32.0 * static_cast<double>(traced.store_sectors.size()) ==
                  doctest::Approx(declared.hbm_write_bytes));
        }
        ++checked[launch.signature.kind];
        efficiency[launch.signature.kind].push_back(declared.sector_efficiency);
        lanes[launch.signature.kind].push_back(declared.active_lane_share);
        ways[launch.signature.kind].push_back(declared.bank_ways);
    }
    bool dense = false;
    int launches = 0;
    std::map<KernelKind, int> checked;
    std::map<KernelKind, std::vector<double>> efficiency, lanes, ways;

private:
    const TracedKernels& kernels_;
};

struct ModelCase {
    Call call;
    std::vector<Shape> shapes;
    DType dtype = DType::f32;
    bool contiguous = true;  // permutations into a new buffer, as gpu_bench times them
    Epilogue epilogue{};
};

Call call_of(Op op, const char* pattern, Reduction reduction = Reduction::none, AxisSizes sizes = {}) {
    return Call{op, pattern, reduction, std::move(sizes), false, {}};
}

// gpu_bench's classes at reduced sizes, and cases that reach every kind, edge tiles and epilogues.
std::vector<ModelCase> model_cases() {
    return {
        {call_of(Op::rearrange, "a b -> b a"), {{96, 100}}},                             // tiles, edges
        {call_of(Op::rearrange, "a b -> b a"), {{64, 64}}, DType::bf16},                 // tiles bf16, packed
        {call_of(Op::rearrange, "a b -> b a"), {{40, 72}}, DType::f64},                  // tiles f64
        {call_of(Op::rearrange, "a b -> b a"), {{130, 200}}, DType::i8},                 // tiles i8, edges
        {call_of(Op::rearrange, "a b c d e f -> f d b e c a"), {{16, 2, 2, 3, 2, 16}}},  // 6-D: merged tiles
        {call_of(Op::rearrange, "a b c d e f -> c f a e b d"), {{8, 2, 3, 2, 2, 16}}},   // 6-D
        {call_of(Op::rearrange, "b s (h d) -> b h s d", Reduction::none, {{"h", 4}}),
         {{2, 16, 64}},
         DType::bf16},
        {call_of(Op::rearrange, "b h s d -> b s (h d)"), {{2, 4, 16, 32}}, DType::bf16},  // vector copy
        {call_of(Op::rearrange, "b s (k h d) -> k b h s d", Reduction::none, {{"k", 3}, {"h", 4}}),
         {{2, 8, 96}},
         DType::bf16},
        {call_of(Op::rearrange, "b c h w -> b h w c"), {{2, 3, 10, 12}}},  // short_side (NCHW->NHWC)
        {call_of(Op::rearrange, "b c h w -> b h w c"), {{2, 16, 6, 12}}},  // short_side, 16 channels
        {call_of(Op::rearrange, "b h w c -> b c h w"), {{2, 6, 12, 16}}},  // short_side, the mirror
        {call_of(Op::rearrange, "a b -> b a"), {{3000, 4}}},               // short_side
        {call_of(Op::rearrange, "a b -> b a"), {{8, 200}}, DType::bf16},   // short_side, 8 x N
        {call_of(Op::rearrange, "a b -> b a"), {{30, 7}}},                 // permute (7: no short side)
        {call_of(Op::rearrange, "b c h w -> b h w c"), {{2, 3, 5, 7}}, DType::f32, true, {2, 0}},  // permute
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{64, 32}}},    // reduce_rows (inner)
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{3000, 4}}},   // short rows
        {call_of(Op::reduce, "a b -> b", Reduction::sum), {{3000, 4}}},   // one pass, one block
        {call_of(Op::reduce, "a b -> b", Reduction::sum), {{2048, 32}}},  // one pass, 2 blocks
        {call_of(Op::reduce, "a b ->", Reduction::sum), {{300, 90}}},     // one pass, one block
        {call_of(Op::reduce, "a b -> b", Reduction::sum), {{3000, 40}}},  // columns, split + finalize
        {call_of(Op::reduce, "a b -> a", Reduction::max), {{300, 70}}, DType::bf16},   // short rows
        {call_of(Op::reduce, "a b -> b", Reduction::max), {{70001, 3}}, DType::bf16},  // one pass, 4 blocks
        {call_of(Op::reduce, "a ->", Reduction::sum), {{40003}}, DType::f64},          // one pass, 3 blocks
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{301, 9}}, DType::f16},  // short rows, unaligned
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{500, 8}}, DType::f32, true, {2, 1}},  // epilogue
        {call_of(Op::reduce, "a b -> a", Reduction::max), {{3, 5000}}, DType::bf16},  // vector rows, split
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{40, 1001}}, DType::f16},  // vector rows, heads
        {call_of(Op::reduce, "a b -> b", Reduction::sum), {{300, 96}}, DType::i8},    // vector columns
        {call_of(Op::reduce, "a b -> b", Reduction::max),
         {{5000, 48}},
         DType::bf16},                                                                // vector columns, split
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{5003, 2}}, DType::bf16},  // packed rows, P = 4
        {call_of(Op::reduce, "a b -> a", Reduction::max), {{999, 8}}, DType::i8},     // packed rows, P = 2
        {call_of(Op::reduce, "a b c -> b a", Reduction::sum), {{30, 41, 2}}, DType::f32, true, {2, 1}},
        {call_of(Op::reduce, "b h i j -> b h i", Reduction::max), {{2, 2, 8, 100}}, DType::bf16},
        {call_of(Op::reduce, "b h i j -> b h j", Reduction::sum), {{2, 2, 50, 64}}, DType::bf16},
        {call_of(Op::reduce, "b s e -> b e", Reduction::mean), {{2, 300, 64}}, DType::bf16},
        {call_of(Op::reduce, "(a 2) (b 2) -> a b", Reduction::mean), {{20, 16}}},    // windows
        {call_of(Op::einsum, "i j, i j -> i"), {{37, 300}, {37, 300}}, DType::i32},  // contraction rows
        {call_of(Op::einsum, "i j, i j -> i j"), {{7, 9}, {7, 9}}, DType::bf16},     // products
        {call_of(Op::reduce, "a b -> b", Reduction::sum), {{3000, 4}}, DType::f32, true, {0.5, -2}},  // beta
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{300, 40}}, DType::f32, true, {2, 1}},
        {call_of(Op::rearrange, "a b -> b a"), {{5, 7}}, DType::f32, true, {1, 1}},
    };
}

std::vector<double> small_integers(std::mt19937& rng, std::int64_t n) {
    std::vector<double> values(static_cast<std::size_t>(n));
    for (double& v : values) v = static_cast<double>(static_cast<int>(rng() % 7) - 3);
    return values;
}

}  // namespace

TEST_CASE("emulated GPU model: every launch's traced accesses equal its kernel's declared behaviour") {
    std::mt19937 rng(61);
    struct Run {
        std::string description;
        Plan plan;
        Schedule gpu;
        std::vector<TensorView> inputs;
        bool dense;
    };
    std::vector<Tensor> storage;
    std::vector<Run> runs;
    for (const ModelCase& c : model_cases()) {
        std::vector<TensorView> inputs;
        for (const Shape& s : c.shapes) {
            std::int64_t n = 1;
            for (const std::int64_t e : s) n *= e;
            storage.push_back(reference::make_tensor(c.dtype, s, small_integers(rng, n)));
            inputs.push_back(storage.back().view());
        }
        PlanOptions options;
        options.contiguous = c.contiguous;
        options.epilogue = c.epilogue;
        Plan plan = testing::bind_and_plan(c.call, inputs, options).plan;
        Schedule gpu = schedule(plan, Target::gpu(132));
        runs.push_back(Run{fmt::format("{} \"{}\" {}", name_of(c.call.op), c.call.pattern, name_of(c.dtype)),
                           std::move(plan), std::move(gpu), inputs, true});
    }
    // Random calls: operands permuted, sliced, broadcast, reversed (their footprints are not whole buffers).
    for (const auto& [op, dtype] :
         {std::pair{Op::rearrange, DType::f32}, std::pair{Op::rearrange, DType::bf16},
          std::pair{Op::reduce, DType::f32}, std::pair{Op::reduce, DType::i32},
          std::pair{Op::einsum, DType::f32}, std::pair{Op::repeat, DType::f16}})
        for (int i = 0; i < 6; ++i) {
            testing::RandomCase random = testing::random_case(rng, op, dtype);
            try {
                PlanOptions options;
                options.contiguous = true;
                Plan plan = testing::bind_and_plan(random.call, random.inputs, options).plan;
                Schedule gpu = schedule(plan, Target::gpu(132));
                for (Tensor& t : random.storage) storage.push_back(std::move(t));
                runs.push_back(Run{random.describe(), std::move(plan), std::move(gpu), random.inputs, false});
            } catch (const Error&) {
                // (a call no GPU kernel takes - fp8 arithmetic, too high a rank - has nothing to check)
            }
        }
    // The gradients of max and prod: route kernels.
    for (const Reduction op : {Reduction::max, Reduction::prod}) {
        const Shape shape{5, 6, 40};
        const Bound bound = einc::bind(call_of(Op::reduce, "a b c -> a c", op), std::vector<Shape>{shape});
        const Shape grad_shape = bound.outputs[0].shape();
        std::int64_t n = 5 * 6 * 40, g = grad_shape[0] * grad_shape[1];
        storage.push_back(reference::make_tensor(DType::f32, shape, small_integers(rng, n)));
        const TensorView x = storage.back().view();
        storage.push_back(reference::make_tensor(DType::f32, grad_shape, small_integers(rng, g)));
        const TensorView grad = storage.back().view();
        Plan plan = plan_route(bound, TensorSpec{DType::f32, x.shape, x.strides},
                               TensorSpec{DType::f32, grad.shape, grad.strides});
        Schedule gpu = schedule(plan, Target::gpu(132));
        runs.push_back(
            Run{fmt::format("route {}", name_of(op)), std::move(plan), std::move(gpu), {x, grad}, true});
    }
    // (a library GEMM has no kernel of einc's to check)
    std::erase_if(runs, [](const Run& r) {
        return std::any_of(r.gpu.steps.begin(), r.gpu.steps.end(), [](const ScheduledStep& s) {
            return std::holds_alternative<strategy::LibraryGemm>(s.strategy);
        });
    });
    std::vector<KernelSignature> kernels;
    for (const Run& r : runs)
        for (const KernelSignature& k : kernels_of(r.gpu))
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    const TracedKernels traced(kernels);
    CheckingDevice device(traced);
    int steps = 0;
    for (const Run& r : runs) {
        CAPTURE(r.description);
        device.dense = r.dense;
        std::vector<Tensor> results;
        std::vector<TensorView> outputs(r.plan.outputs.size());
        for (std::size_t k = 0; k < outputs.size(); ++k) {
            if (r.plan.view_source(k)) continue;
            results.push_back(Tensor::empty(r.plan.outputs[k].dtype, r.plan.outputs[k].shape));
            outputs[k] = results.back().view();
        }
        // The launches the model counts are the launches that run.
        int predicted_launches = 0;
        for (std::size_t s = 0; s < r.plan.steps.size(); ++s)
            if (const auto p = predict_step(r.plan, r.gpu, s, *gpu_parameters("h200"))) {
                predicted_launches += static_cast<int>(p->kernels.size());
                ++steps;
            }
        const int before = device.launches;
        run_gpu_plan(r.plan, r.gpu, r.inputs, outputs, device);
        CHECK(device.launches - before == predicted_launches);
    }
    std::string figures;
    for (const auto& [kind, count] : device.checked) {
        const auto range = [](const std::vector<double>& v) {
            return fmt::format("{:.2f}-{:.2f}", *std::min_element(v.begin(), v.end()),
                               *std::max_element(v.begin(), v.end()));
        };
        figures += fmt::format("\n  {} {}: sector efficiency {}, active lanes {}, bank ways {}",
                               name_of(kind), count, range(device.efficiency[kind]),
                               range(device.lanes[kind]), range(device.ways[kind]));
    }
    MESSAGE(runs.size(), " plans, ", steps, " kernel steps, ", device.launches, " launches traced:", figures);
    for (const KernelKind kind :
         {KernelKind::elementwise, KernelKind::permute, KernelKind::vector_copy, KernelKind::short_side,
          KernelKind::tiles, KernelKind::reduce_rows, KernelKind::reduce_columns, KernelKind::finalize,
          KernelKind::route, KernelKind::reduce_one_pass, KernelKind::reduce_short_rows,
          KernelKind::reduce_packed_rows})
        CHECK_MESSAGE(device.checked[kind] > 0, "no case checked a ", name_of(kind), " kernel");
}

namespace {

// Device operations whose launches run only a few blocks each - the first, the middle, the last, and the
// block of the last tile - with the launch's real grid, traced, and compared with the behaviour the
// design declares by sampling warps as `einc explain` does. (The results are not whole: not checked.)
class SamplingDevice final : public DeviceOps {
public:
    explicit SamplingDevice(const TracedKernels& kernels) : kernels_(kernels) {}
    void* allocate(std::size_t bytes) override { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
    void release(void* memory) override { std::free(memory); }
    void zero(void* memory, std::size_t bytes) override { std::memset(memory, 0, bytes); }
    void gemm(const Gemm&, DType, strategy::GemmCompute, const void*, const void*, void*, void*,
              std::size_t) override {
        FAIL("these plans have no library GEMM");
    }
    void launch(const KernelLaunch& launch, std::span<void* const> pointers) override {
        const unsigned grid = launch.grid.x;
        std::set<unsigned> blocks{0, grid / 2, grid - 1};
        if (launch.signature.kind == KernelKind::tiles)  // the block of the last tile, an edge one
            blocks.insert(static_cast<unsigned>((launch.params.kept_count - 1) % grid));
        const std::vector<unsigned> sampled(blocks.begin(), blocks.end());
        if (launch.signature.kind == KernelKind::reduce_one_pass && grid > 1) {
            // The blocks not sampled have arrived before: the last sampled, block grid - 1, folds them all
            // (the counter, zeroed before the launch, counts the blocks: kernel_abi.hpp).
            const std::uint64_t arrived = grid - sampled.size();
            for (std::size_t a = 0; a < launch.arguments.size(); ++a)
                if (launch.arguments[a] == KernelArgument::scratch) std::memcpy(pointers[a], &arrived, 8);
        }
        const Recorded recorded = kernels_.trace(launch, pointers, sampled);
        const TraceStatistics t = statistics_of(recorded).statistics;
        // The design's lane programs for the same blocks, in full: what the trace must equal.
        BehaviourOptions same = aligned_as(pointers);
        same.blocks = sampled;
        same.emitted_items = same.emitted_terms = 0;
        const KernelBehaviour declared = behaviour_of(launch, same);
        CAPTURE(launch.signature.name());
        CAPTURE(grid);
        INFO(first_difference(launch, same, recorded));
        CHECK(t.load_sector_efficiency() == doctest::Approx(declared.load_sector_efficiency));
        CHECK(t.store_sector_efficiency() == doctest::Approx(declared.store_sector_efficiency));
        CHECK(t.active_lane_share() == doctest::Approx(declared.active_lane_share));
        CHECK(t.batch_bytes() == doctest::Approx(declared.batch_bytes));
        CHECK(t.bank_ways() == doctest::Approx(declared.bank_ways));
        CHECK(t.longest_chain == doctest::Approx(declared.serial_chain));
        // What `einc explain` declares (16 warps spread over the grid, loops cut short and scaled): the same
        // figures, as far as a sample of other warps can tell.
        const KernelBehaviour estimated = behaviour_of(launch, aligned_as(pointers));
        CHECK(estimated.sector_efficiency == doctest::Approx(declared.sector_efficiency).epsilon(0.02));
        CHECK(estimated.batch_bytes ==
              doctest::Approx(declared.batch_bytes).epsilon(0.25));  // (tails differ)
        CHECK(estimated.serial_chain == doctest::Approx(declared.serial_chain).epsilon(0.02));
        figures.push_back(
            fmt::format("{} <<<{}>>>: blocks {} traced: sector efficiency {:.2f}, {:.0f} B a warp's "
                        "batch, chain {:.0f} (as declared); explain's estimate: {:.2f}, {:.0f} B, {:.0f}",
                        name_of(launch.signature.kind), grid, fmt::join(sampled, " "), t.sector_efficiency(),
                        t.batch_bytes(), t.longest_chain, estimated.sector_efficiency, estimated.batch_bytes,
                        estimated.serial_chain));
    }
    std::vector<std::string> figures;

private:
    const TracedKernels& kernels_;
};

}  // namespace

TEST_CASE("emulated GPU model: large launches, traced from sampled blocks with their real grid, agree with "
          "the behaviour declared from sampled warps") {
    // gpu_bench's classes at their sizes, or at a quarter where those take more than 128 MB.
    const ModelCase cases[] = {
        {call_of(Op::rearrange, "a b -> b a"), {{4096, 4096}}},
        {call_of(Op::rearrange, "a b c d e f -> f d b e c a"), {{16, 8, 16, 8, 16, 16}}},
        {call_of(Op::rearrange, "a b c d e f -> b e f a d c"), {{16, 8, 16, 8, 16, 16}}},
        {call_of(Op::rearrange, "b s (h d) -> b h s d", Reduction::none, {{"h", 16}}),
         {{8, 2048, 2048}},
         DType::bf16},
        {call_of(Op::rearrange, "b c h w -> b h w c"), {{64, 3, 224, 224}}},
        {call_of(Op::rearrange, "a b -> b a"), {{1960000, 4}}},
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{32768, 32}}},
        {call_of(Op::reduce, "a b -> b", Reduction::sum), {{1960000, 4}}},
        {call_of(Op::reduce, "a b ->", Reduction::sum), {{1960000, 4}}},
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{1960000, 4}}},
        {call_of(Op::reduce, "b h i j -> b h i", Reduction::max), {{1, 4, 2048, 2048}}, DType::bf16},
        {call_of(Op::reduce, "b h i j -> b h j", Reduction::sum), {{1, 4, 2048, 2048}}, DType::bf16},
        {call_of(Op::reduce, "b s e -> b e", Reduction::mean), {{8, 2048, 2048}}, DType::bf16},
        {call_of(Op::reduce, "a b -> a", Reduction::sum), {{16777216, 2}}, DType::bf16},
    };
    struct Run {
        Plan plan;
        Schedule gpu;
        const ModelCase* c;
    };
    std::vector<Run> runs;
    std::vector<KernelSignature> kernels;
    for (const ModelCase& c : cases) {
        std::vector<TensorView> specs;  // (planned from layouts alone; memory comes per run)
        for (const Shape& s : c.shapes)
            specs.push_back(TensorView{nullptr, c.dtype, s, row_major_strides(s)});
        PlanOptions options;
        options.contiguous = c.contiguous;
        Plan plan = testing::bind_and_plan(c.call, specs, options).plan;
        Schedule gpu = schedule(plan, Target::gpu(132));
        for (const KernelSignature& k : kernels_of(gpu))
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
        runs.push_back(Run{std::move(plan), std::move(gpu), &c});
    }
    const TracedKernels traced(kernels);
    SamplingDevice device(traced);
    for (const Run& r : runs) {
        std::vector<Tensor> storage;
        std::vector<TensorView> inputs;
        for (const Shape& s : r.c->shapes) {
            storage.push_back(Tensor::empty(r.c->dtype, s));  // (values do not matter to the trace)
            inputs.push_back(storage.back().view());
        }
        std::vector<TensorView> outputs(r.plan.outputs.size());
        for (std::size_t k = 0; k < outputs.size(); ++k) {
            storage.push_back(Tensor::empty(r.plan.outputs[k].dtype, r.plan.outputs[k].shape));
            outputs[k] = storage.back().view();
        }
        run_gpu_plan(r.plan, r.gpu, inputs, outputs, device);
    }
    MESSAGE(fmt::format("{}", fmt::join(device.figures, "\n")));
    CHECK(device.figures.size() >= std::size(cases));
}

// A permute kernel walks its destination in order: where the source's neighbouring elements lie along
// a mode the walk visits again only after the L2's reuse limit, each sector comes back from HBM once per
// visit. The declared HBM bytes, against the trace's sectors counted once per visit that comes after more
// than the limit of the grid's traffic (the limit small, and the grid too, so that small operands show it).
TEST_CASE("emulated GPU model: HBM re-reads of a permute kernel's source, declared and traced") {
    struct ReuseCase {
        Call call;
        Shape shape;
        double rereads;
    };
    const ReuseCase cases[] = {
        {call_of(Op::rearrange, "a b -> b a"), {20000, 4}, 4},  // 7840000x4's class: 4 sweeps
        {call_of(Op::rearrange, "a b -> b a"), {20000, 2}, 2},
        {call_of(Op::rearrange, "b c h w -> b h w c"), {4, 3, 32, 32}, 1},  // NCHW->NHWC: none
    };
    const double reuse_limit = 16 << 10;
    for (const ReuseCase& c : cases) {
        CAPTURE(c.call.pattern);
        Tensor input = Tensor::empty(DType::f32, c.shape);
        const TensorView view = input.view();
        PlanOptions options;
        options.contiguous = true;
        options.epilogue = {2, 0};  // (arithmetic: permute, which the short sides would otherwise not take)
        const Plan plan = testing::bind_and_plan(c.call, std::span(&view, 1), options).plan;
        const Schedule gpu = schedule(plan, Target::gpu(1));  // 32 blocks: the walk sweeps the grid often
        const KernelLaunch& launch = std::get<strategy::Kernels>(gpu.steps.at(0).strategy).launches.at(0);
        REQUIRE(launch.signature.kind == KernelKind::permute);
        Tensor output = Tensor::empty(DType::f32, plan.outputs[0].shape);
        void* const pointers[] = {output.data(), input.data()};
        const TracedKernels traced({launch.signature});
        std::vector<unsigned> blocks(launch.grid.x);
        for (unsigned b = 0; b < launch.grid.x; ++b) blocks[b] = b;
        const Recorded recorded = traced.trace(launch, pointers, blocks);
        // Each load's time: the index in the walk of the element it loads - its thread's grid-stride
        // iteration (the batch marks before it), its block, which of its elements, its thread.
        std::unordered_map<std::uint64_t, std::vector<std::int64_t>> visits;
        constexpr std::int64_t width = kernel_block_threads, per_block = permute_per_thread * width;
        for (const auto& [block, threads] : recorded.blocks)
            for (std::size_t thread = 0; thread < threads.size(); ++thread) {
                std::int64_t iteration = 0, element = 0;
                for (const LaneEvent& e : threads[thread]) {
                    if (e.kind == LaneEvent::Kind::batch_mark) {
                        ++iteration;
                        element = 0;
                    }
                    if (e.kind == LaneEvent::Kind::load)
                        visits[e.address / 32].push_back((iteration * launch.grid.x + block) * per_block +
                                                         element++ * width +
                                                         static_cast<std::int64_t>(thread));
                }
            }
        const double per_index = 8;  // bytes of the walk an element: a 4-byte load and a 4-byte store
        double reads = 0;
        for (auto& [sector, times] : visits) {
            std::sort(times.begin(), times.end());
            reads += 1;
            for (std::size_t k = 1; k < times.size(); ++k)
                reads += static_cast<double>(times[k] - times[k - 1]) * per_index > reuse_limit ? 1 : 0;
        }
        BehaviourOptions options_declared = aligned_as(pointers);
        options_declared.reuse_limit_bytes = reuse_limit;
        const KernelBehaviour declared = behaviour_of(launch, options_declared);
        CHECK(declared.reread_factor == c.rereads);
        CHECK(32 * reads == doctest::Approx(declared.hbm_read_bytes).epsilon(0.02));
        MESSAGE(fmt::format("{} {}: each source sector read {:.2f} times (declared {})", c.call.pattern,
                            format_shape(c.shape),
                            32 * reads / (declared.hbm_read_bytes / declared.reread_factor),
                            declared.reread_factor));
    }
}

// Stores that fill part of their sectors cost HBM a sector's share more where they stream through more
// than the L2 holds (gpu_model.hpp, D): hand-computed from a behaviour with half-filled sectors.
TEST_CASE("GPU model: stores of part of a sector cost more only where they stream past the L2") {
    const GpuParameters& gpu = *gpu_parameters("h200");
    KernelLaunch launch;
    launch.grid = {4224, 1, 1};
    launch.block = {kernel_block_threads, 1, 1};
    KernelBehaviour half;
    half.store_sector_efficiency = 0.5;
    half.hbm_read_bytes = half.hbm_write_bytes = 268e6;
    const KernelPrediction streaming = predict_kernel(launch, half, gpu, false);
    CHECK(streaming.hbm_bytes == doctest::Approx(268e6 + 268e6 * 2));
    CHECK(streaming.bandwidth_seconds == doctest::Approx(804e6 / gpu.bandwidth));
    KernelBehaviour whole = half;
    whole.store_sector_efficiency = 1;
    CHECK(predict_kernel(launch, whole, gpu, false).hbm_bytes == doctest::Approx(536e6));
    KernelBehaviour small = half;  // within the L2: the sectors are merged there
    small.hbm_read_bytes = small.hbm_write_bytes = 38e6;
    CHECK(predict_kernel(launch, small, gpu, false).hbm_bytes == doctest::Approx(76e6));
    CHECK(predict_kernel(launch, half, gpu, true).hbm_bytes == doctest::Approx(536e6));
}
