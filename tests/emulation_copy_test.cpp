// The copy kernels (compiler/kernel_abi.hpp: permute, short_side, tiles, vector_copy), run by the host
// emulation (tests/emulation) with every global and shared access, barrier and path mark recorded: their
// results against the reference interpreter for every element size, random permutations of rank 2 to 6
// with extents around every threshold of the rules (tile edges, short sides of 1 to 17, odd sizes), views
// that are misaligned, padded, permuted and reversed, epilogues, and the gpu_bench classes at reduced sizes;
// then what each design promises of its memory traffic, read off the trace: whole 32-byte sectors per warp
// instruction, each byte read and written once, loads issued before the stores that use them, one barrier a
// tile, full tiles on the unchecked path, conflict-free shared memory.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "compiler/bind.hpp"
#include "compiler/codegen.hpp"
#include "compiler/schedule.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/gpu_executor.hpp"
#include "tests/emulated_library.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"
#include "tests/sanitized.hpp"

using namespace einc;

namespace {

// One recorded event of an emulated thread, in its order: the layout the traced library writes.
enum class Event : int { load, store, shared_load, shared_store, barrier, full_tile, edge_tile };
struct Record {
    unsigned block, thread;
    int event;
    unsigned long long address;
    unsigned bytes;
};

// The tracing the kernels are compiled with: the access macros of tests/emulation redefined to record
// into one log (in each thread's program order), when switched on.
constexpr const char* trace_prelude = R"(#include <mutex>
#include <vector>
struct einc_record { unsigned block, thread; int event; unsigned long long address; unsigned bytes; };
static std::mutex einc_trace_mutex;
static std::vector<einc_record> einc_trace_log;
static bool einc_tracing = false;
static void einc_note(int event, const void* address, unsigned bytes) {
    if (!einc_tracing) return;
    std::lock_guard<std::mutex> lock(einc_trace_mutex);
    einc_trace_log.push_back({einc_emu::current.block.x, einc_emu::current.linear, event,
                              (unsigned long long)address, bytes});
}
template <typename T> T* einc_traced(int event, T* p) { einc_note(event, p, sizeof(T)); return p; }
#undef EINC_LD
#undef EINC_ST
#undef EINC_LDS
#undef EINC_STS
#undef EINC_SYNC
#define EINC_LD(pointer) (*einc_traced(0, (pointer)))
#define EINC_ST(pointer, value) (*einc_traced(1, (pointer)) = (value))
#define EINC_LDS(pointer) (*einc_traced(2, (pointer)))
#define EINC_STS(pointer, value) (*einc_traced(3, (pointer)) = (value))
#define EINC_SYNC() (einc_note(4, nullptr, 0), einc_emu::sync())
#define EINC_PATH(path) einc_note(4 + (path), nullptr, 0)
extern "C" void einc_trace(bool on) { einc_tracing = on; einc_trace_log.clear(); }
extern "C" const einc_record* einc_trace_records(unsigned long long* count) {
    *count = einc_trace_log.size();
    return einc_trace_log.data();
}
)";

using Run = void (*)(testing::EmulatedLibrary::Invoke, unsigned, unsigned, unsigned, void**, const unsigned*);

// The kernels of a set of plans, compiled for the host with tracing into one shared library.
class TracedKernels {
public:
    explicit TracedKernels(const std::vector<KernelSignature>& kernels)
        : library_(kernels, trace_prelude), run_(library_.function<Run>("einc_emu_run")),
          trace_(library_.function<void (*)(bool)>("einc_trace")),
          records_(library_.function<const Record* (*)(unsigned long long*)>("einc_trace_records")) {}

    // Every kernel strides over its work by the grid: two blocks run it all (and give a trace of all of it).
    void run(const KernelLaunch& launch, std::span<void* const> pointers) const {
        std::vector<void*> arguments{const_cast<KernelParams*>(&launch.params)};
        for (void* const& p : pointers) arguments.push_back(const_cast<void**>(&p));
        run_(library_.invoker(launch.signature), std::min(launch.grid.x, 2u), launch.block.x, launch.block.y,
             arguments.data(), nullptr);  // (blocks in index order)
    }
    void trace(bool on) const { trace_(on); }
    std::vector<Record> records() const {
        unsigned long long count = 0;
        const Record* first = records_(&count);
        return std::vector<Record>(first, first + count);
    }

private:
    testing::EmulatedLibrary library_;
    Run run_;
    void (*trace_)(bool);
    const Record* (*records_)(unsigned long long*);
};

// Device operations on host memory: kernels by the emulator (copies need nothing else).
class CopyDevice final : public DeviceOps {
public:
    explicit CopyDevice(const TracedKernels& kernels) : kernels_(kernels) {}
    void* allocate(std::size_t bytes) override { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
    void release(void* memory) override { std::free(memory); }
    void zero(void* memory, std::size_t bytes) override { std::memset(memory, 0, bytes); }
    void launch(const KernelLaunch& launch, std::span<void* const> pointers) override {
        launched.push_back(launch.signature);
        kernels_.run(launch, pointers);
    }
    void gemm(const Gemm&, DType, strategy::GemmCompute, const void*, const void*, void*, void*,
              std::size_t) override {
        FAIL("a copy launched a GEMM");
    }
    std::vector<KernelSignature> launched;

private:
    const TracedKernels& kernels_;
};

// An operand laid out in memory: `memory` its dims outermost first, the row of its innermost dim padded by
// `pad` elements, the dim `reversed` walked backwards (a negative stride), starting `misalign` elements past
// its (256-byte aligned) storage. Values: small random integers, exact in every dtype; elsewhere 77.
struct Laid {
    Tensor storage;
    TensorView view;
};
struct Placement {
    std::vector<std::size_t> memory;  // empty: row-major
    std::int64_t pad = 0, misalign = 0;
    std::optional<std::size_t> reversed;
};
Laid lay_out(DType dtype, const Shape& shape, const Placement& how, std::mt19937& rng) {
    std::vector<std::size_t> memory = how.memory;
    if (memory.empty())
        for (std::size_t d = 0; d < shape.size(); ++d) memory.push_back(d);
    Shape strides(shape.size());
    std::int64_t stride = 1;
    for (std::size_t k = memory.size(); k-- > 0;) {
        strides[memory[k]] = stride;
        stride *= shape[memory[k]] + (k + 1 == memory.size() ? how.pad : 0);
    }
    std::int64_t origin = how.misalign;
    if (how.reversed) {
        origin += (shape[*how.reversed] - 1) * strides[*how.reversed];
        strides[*how.reversed] = -strides[*how.reversed];
    }
    const std::int64_t total = how.misalign + std::max<std::int64_t>(stride, 1);
    std::vector<double> values(static_cast<std::size_t>(total), 77);
    const std::int64_t n = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
    const int span = dtype == DType::boolean                            ? 2
                     : dtype == DType::f8e4m3 || dtype == DType::f8e5m2 ? 16
                                                                        : 120;
    for (std::int64_t flat = 0; flat < n; ++flat) {
        std::int64_t rest = flat, offset = origin;
        for (std::size_t d = shape.size(); d-- > 0;) {
            offset += rest % shape[d] * strides[d];
            rest /= shape[d];
        }
        values[static_cast<std::size_t>(offset)] = static_cast<double>(static_cast<int>(rng() % span));
    }
    Laid laid{reference::make_tensor(dtype, {total}, values), {}};
    laid.view = TensorView{static_cast<std::byte*>(laid.storage.data()) +
                               origin * static_cast<std::int64_t>(size_of(dtype)),
                           dtype, shape, strides};
    return laid;
}

// Whether two results hold the same values, exactly.
bool same(const TensorView& got, const TensorView& expected, std::string& difference) {
    const std::vector<double> a = reference::values_of(got), b = reference::values_of(expected);
    if (a.size() != b.size()) {
        difference = "sizes differ";
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i] && !(std::isnan(a[i]) && std::isnan(b[i]))) {
            difference = fmt::format("element {}: {} where {} was expected", i, a[i], b[i]);
            return false;
        }
    return true;
}

// A materialised rearrange of one laid-out operand, planned and scheduled for a GPU.
struct CopyCase {
    std::string description;
    Call call;
    DType dtype;
    Shape shape;
    Placement layout;
    Epilogue epilogue{};
    std::optional<KernelKind> expected{};  // the kind the rules must choose (aligned buffers), if named
};
struct Prepared {
    const CopyCase* c;
    Laid input;
    Plan plan;
    Schedule gpu;
};

Prepared prepare(const CopyCase& c, std::mt19937& rng) {
    Laid input = lay_out(c.dtype, c.shape, c.layout, rng);
    PlanOptions options;
    options.contiguous = true;
    options.epilogue = c.epilogue;
    Plan plan = testing::bind_and_plan(c.call, std::span(&input.view, 1), options).plan;
    Schedule gpu = schedule(plan, Target::gpu(132));
    return Prepared{&c, std::move(input), std::move(plan), std::move(gpu)};
}

std::vector<KernelSignature> kernels_of_all(const std::vector<Prepared>& prepared) {
    std::vector<KernelSignature> kernels;
    for (const Prepared& p : prepared)
        for (const KernelSignature& k : kernels_of(p.gpu))
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    return kernels;
}

// Runs a prepared case; checks it against the reference (alpha * result + beta * old with an epilogue).
void check_result(const Prepared& p, CopyDevice& device) {
    const CopyCase& c = *p.c;
    const Tensor expected =
        reference::evaluate(bind(c.call, std::vector<Shape>{c.shape}), std::span(&p.input.view, 1))[0];
    const TensorSpec& spec = p.plan.outputs[0];
    std::vector<double> old(static_cast<std::size_t>(
        std::accumulate(spec.shape.begin(), spec.shape.end(), std::int64_t{1}, std::multiplies<>())));
    for (std::size_t i = 0; i < old.size(); ++i) old[i] = static_cast<double>(static_cast<int>(i % 5) - 2);
    const Tensor out = reference::make_tensor(spec.dtype, spec.shape, old);
    std::vector<TensorView> outputs{out.view()};
    run_gpu_plan(p.plan, p.gpu, std::span(&p.input.view, 1), outputs, device);
    std::string difference;
    if (c.epilogue.identity()) {
        CHECK_MESSAGE(same(out.view(), expected.view(), difference), difference);
        return;
    }
    const std::vector<double> ref = reference::values_of(expected.view());
    std::vector<double> want(ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i)
        want[i] = c.epilogue.alpha * ref[i] + c.epilogue.beta * old[i];
    const Tensor scaled = reference::make_tensor(spec.dtype, spec.shape, want);
    CHECK_MESSAGE(same(out.view(), scaled.view(), difference), difference);
}

Call rearrange(const std::string& pattern, AxisSizes sizes = {}) {
    return Call{Op::rearrange, pattern, Reduction::none, std::move(sizes), false, {}};
}

const DType sized[] = {DType::i8, DType::bf16, DType::f32, DType::f64};  // 1, 2, 4 and 8 bytes

// The classes of gpu_bench and of the H200 measurements (../shared/gpu/h200-2026-11-26.md), at sizes the
// emulator runs, each with the kind the rules give it.
std::vector<CopyCase> bench_classes() {
    std::vector<CopyCase> cases;
    const auto add = [&](std::string what, Call call, DType dtype, Shape shape, KernelKind kind) {
        cases.push_back(CopyCase{std::move(what), std::move(call), dtype, std::move(shape), {}, {}, kind});
    };
    add("transpose 4096^2, reduced", rearrange("a b -> b a"), DType::f32, {256, 320}, KernelKind::tiles);
    add("transpose bf16", rearrange("a b -> b a"), DType::bf16, {256, 192}, KernelKind::tiles);
    add("heads split", rearrange("b s (h d) -> b h s d", {{"h", 4}}), DType::bf16, {2, 64, 256},
        KernelKind::vector_copy);
    add("heads merge", rearrange("b h s d -> b s (h d)"), DType::bf16, {2, 4, 64, 64},
        KernelKind::vector_copy);
    add("qkv split", rearrange("b s (k h d) -> k b h s d", {{"k", 3}, {"h", 4}}), DType::bf16,
        {2, 32, 3 * 256}, KernelKind::vector_copy);
    add("NCHW->NHWC, 3 channels", rearrange("b c h w -> b h w c"), DType::f32, {2, 3, 56, 56},
        KernelKind::short_side);
    add("transpose 7840000x4, reduced", rearrange("a b -> b a"), DType::f32, {40000, 4},
        KernelKind::short_side);
    add("short outer side of 8, f32", rearrange("a b -> b a"), DType::f32, {8, 10000},
        KernelKind::short_side);
    add("short outer side of 8, bf16", rearrange("a b -> b a"), DType::bf16, {8, 10000},
        KernelKind::short_side);
    add("short inner side of 8, bf16", rearrange("a b -> b a"), DType::bf16, {10000, 8},
        KernelKind::short_side);
    add("channels-last, 16 channels", rearrange("b c h w -> b h w c"), DType::f32, {2, 16, 32, 32},
        KernelKind::short_side);
    add("channels-first, 16 channels", rearrange("b h w c -> b c h w"), DType::f32, {2, 32, 32, 16},
        KernelKind::short_side);
    add("channels-last, 16 channels, bf16", rearrange("b c h w -> b h w c"), DType::bf16, {2, 16, 32, 32},
        KernelKind::short_side);
    for (const char* six :
         {"a b c d e f -> f d b e c a", "a b c d e f -> c f a e b d", "a b c d e f -> b e f a d c"})
        add(fmt::format("6-D {}", six), rearrange(six), DType::f32, {2, 16, 4, 16, 16, 16},
            KernelKind::tiles);
    add("5-D keeping neither end", rearrange("a b c d e -> e c a d b"), DType::f32, {4, 4, 16, 16, 16},
        KernelKind::tiles);
    add("patchify", rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", {{"p1", 4}, {"p2", 4}}), DType::f32,
        {2, 3, 32, 32}, KernelKind::short_side);
    return cases;
}

// Short sides of every length: NCHW <-> NHWC with S channels, in each element size, long sides that C
// divides and that it does not.
std::vector<CopyCase> short_side_cases() {
    std::vector<CopyCase> cases;
    for (const DType dtype : sized)
        for (int s = 1; s <= short_side_max + 1; ++s)
            for (const std::int64_t hw : {16, 9}) {
                cases.push_back(CopyCase{fmt::format("NCHW->NHWC C={} HW={} {}", s, hw * 4, name_of(dtype)),
                                         rearrange("b c h w -> b h w c"),
                                         dtype,
                                         Shape{2, s, hw, 4},
                                         {}});
                cases.push_back(CopyCase{fmt::format("NHWC->NCHW C={} HW={} {}", s, hw * 4, name_of(dtype)),
                                         rearrange("b h w c -> b c h w"),
                                         dtype,
                                         Shape{2, hw, 4, s},
                                         {}});
            }
    return cases;
}

// 2-D transposes with sides around the tiles' edges, in every element size.
std::vector<CopyCase> tile_edge_cases() {
    std::vector<CopyCase> cases;
    const std::int64_t sides[] = {31, 64, 65, 127, 128, 129};
    for (const DType dtype : sized)
        for (const std::int64_t a : sides)
            for (const std::int64_t b : {std::int64_t{63}, std::int64_t{128}, std::int64_t{130}})
                cases.push_back(CopyCase{fmt::format("{}x{} {}", a, b, name_of(dtype)),
                                         rearrange("a b -> b a"),
                                         dtype,
                                         Shape{a, b},
                                         {}});
    return cases;
}

// Random permutations of rank 2 to 6: extents from around every threshold, layouts at random.
std::vector<CopyCase> random_permutation_cases(std::mt19937& rng, int count) {
    const std::int64_t extents[] = {1,  2,  3,  4,  5,  7,  8,  9,   15,  16,
                                    17, 31, 32, 33, 63, 64, 65, 127, 128, 129};
    const DType dtypes[] = {DType::i8,  DType::boolean, DType::f8e4m3, DType::bf16, DType::f16,
                            DType::f32, DType::i32,     DType::f64,    DType::i64};
    std::vector<CopyCase> cases;
    while (static_cast<int>(cases.size()) < count) {
        const std::size_t rank = 2 + rng() % 5;
        Shape shape;
        std::int64_t n = 1;
        for (std::size_t d = 0; d < rank; ++d) {
            shape.push_back(extents[rng() % std::size(extents)]);
            n *= shape.back();
        }
        if (n > 40000 || n < 2) continue;
        std::vector<std::size_t> order(rank);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        const std::string names = "abcdef";
        std::vector<std::string> in, out;
        for (std::size_t d = 0; d < rank; ++d) {
            in.emplace_back(1, names[d]);
            out.emplace_back(1, names[order[d]]);
        }
        Placement layout;
        switch (rng() % 5) {
        case 0: break;  // row-major
        case 1:
            layout.memory = order;  // as the output: mostly a view, except where a pad or offset is added
            layout.pad = 1;
            break;
        case 2:
            layout.memory.resize(rank);
            std::iota(layout.memory.begin(), layout.memory.end(), 0);
            std::shuffle(layout.memory.begin(), layout.memory.end(), rng);
            break;
        case 3: layout.misalign = 1 + static_cast<std::int64_t>(rng() % 3); break;
        default: layout.reversed = rng() % rank; break;
        }
        const DType dtype = dtypes[rng() % std::size(dtypes)];
        const std::string pattern = fmt::format("{} -> {}", fmt::join(in, " "), fmt::join(out, " "));
        cases.push_back(CopyCase{fmt::format("{} {} {} memory [{}] pad {} misalign {} reversed {}", pattern,
                                             name_of(dtype), fmt::join(shape, "x"),
                                             fmt::join(layout.memory, " "), layout.pad, layout.misalign,
                                             layout.reversed ? static_cast<int>(*layout.reversed) : -1),
                                 rearrange(pattern), dtype, shape, layout});
    }
    return cases;
}

}  // namespace

TEST_CASE("emulated copy kernels: every element size, random permutations of rank 2 to 6, short sides, tile "
          "edges, odd and misaligned views and the bench classes equal the reference") {
    std::mt19937 rng(2026);
    std::vector<CopyCase> cases = bench_classes();
    for (std::vector<CopyCase> more : {short_side_cases(), tile_edge_cases()})
        cases.insert(cases.end(), more.begin(), more.end());
    // Sanitized, a sample of the random permutations runs; the library holds the kernels of all of them, so
    // that the sanitized suite finds the Release suite's library in the cache (emulated_library.hpp).
    const std::size_t random_begin = cases.size();
    for (CopyCase& c : random_permutation_cases(rng, 160)) cases.push_back(std::move(c));
    const std::size_t random_end = cases.size();
    const auto runs = [&](std::size_t i) {
        return i < random_begin || i >= random_end || (i - random_begin) % testing::sample_every == 0;
    };
    // Views that are misaligned (the unaligned launches), padded, reversed; epilogues (permute kernels).
    cases.push_back(CopyCase{"NCHW->NHWC misaligned by one element",
                             rearrange("b c h w -> b h w c"),
                             DType::f32,
                             {2, 3, 16, 16},
                             Placement{{}, 0, 1, std::nullopt}});
    cases.push_back(CopyCase{"transpose bf16 misaligned by one element",
                             rearrange("a b -> b a"),
                             DType::bf16,
                             {130, 128},
                             Placement{{}, 0, 1, std::nullopt}});
    cases.push_back(CopyCase{"transpose, rows padded",
                             rearrange("a b -> b a"),
                             DType::f32,
                             {100, 70},
                             Placement{{}, 3, 0, std::nullopt},
                             {},
                             KernelKind::tiles});
    cases.push_back(CopyCase{"transpose, rows reversed",
                             rearrange("a b -> b a"),
                             DType::f32,
                             {100, 70},
                             Placement{{}, 0, 0, 0},
                             {},
                             KernelKind::tiles});
    cases.push_back(CopyCase{"NCHW->NHWC, channels reversed",
                             rearrange("b c h w -> b h w c"),
                             DType::f32,
                             {2, 3, 16, 16},
                             Placement{{}, 0, 0, 1},
                             {},
                             KernelKind::short_side});
    cases.push_back(CopyCase{"6-D, batch reversed",
                             rearrange("a b c d e f -> f d b e c a"),
                             DType::f64,
                             {3, 16, 4, 8, 16, 8},
                             Placement{{}, 0, 0, 0},
                             {},
                             KernelKind::tiles});
    for (const DType dtype : {DType::f32, DType::bf16, DType::i32})
        cases.push_back(CopyCase{fmt::format("transpose with an epilogue, {}", name_of(dtype)),
                                 rearrange("a b -> b a"),
                                 dtype,
                                 {100, 70},
                                 {},
                                 Epilogue{dtype == DType::i32 ? 3.0 : 0.5, -2},
                                 KernelKind::permute});

    std::vector<Prepared> prepared;
    for (const CopyCase& c : cases) prepared.push_back(prepare(c, rng));
    const std::vector<KernelSignature> kernels = kernels_of_all(prepared);
    std::map<KernelKind, int> kinds;
    for (const KernelSignature& k : kernels) ++kinds[k.kind];
    MESSAGE(fmt::format("{} copies, {} distinct kernels: {} permute, {} vector_copy, {} short_side, {} tiles",
                        prepared.size(), kernels.size(), kinds[KernelKind::permute],
                        kinds[KernelKind::vector_copy], kinds[KernelKind::short_side],
                        kinds[KernelKind::tiles]));
    const TracedKernels emulated(kernels);
    CopyDevice device(emulated);
    std::set<std::string> geometries;  // what ran: short sides (S, C, side) and tiles (word, runs)
    bool unaligned_ran = false;
    for (std::size_t i = 0; i < prepared.size(); ++i) {
        if (!runs(i)) continue;
        const Prepared& p = prepared[i];
        CAPTURE(p.c->description);
        if (p.c->expected) {
            const std::vector<KernelSignature> chosen = kernels_of(p.gpu);
            REQUIRE(!chosen.empty());
            CHECK_MESSAGE(chosen[0].kind == *p.c->expected, chosen[0].name());
        }
        device.launched.clear();
        check_result(p, device);
        for (const KernelSignature& k : device.launched) {
            if (k.kind == KernelKind::short_side)
                geometries.insert(fmt::format("s{}{}c{}", k.short_extent, k.short_source, k.vector));
            if (k.kind == KernelKind::tiles)
                geometries.insert(
                    fmt::format("{}w{}a{}b{}", size_of(k.destination), k.vector, k.runs[0], k.runs[1]));
            const auto* steps = std::get_if<strategy::Kernels>(&p.gpu.steps[0].strategy);
            unaligned_ran |= steps && !steps->unaligned_launches.empty() &&
                             k == steps->unaligned_launches[0].signature &&
                             !(k == steps->launches[0].signature);
        }
    }
    MESSAGE(fmt::format("geometries run: {}", fmt::join(geometries, " ")));
    CHECK(unaligned_ran);
    // Every short side from 2 to 16 ran, on both sides; tiles of every word size, packed and not, with runs
    // of several modes.
    for (int s = 2; s <= short_side_max; ++s)
        for (const bool source : {false, true})
            CHECK_MESSAGE(std::any_of(geometries.begin(), geometries.end(),
                                      [&](const std::string& g) {
                                          return g.starts_with(fmt::format("s{}{}", s, source));
                                      }),
                          "no short side of ", s, source ? " in the source" : " in the destination");
    for (const char* tile : {"1w4a1b1", "1w1a1b1", "2w2a1b1", "2w1a1b1", "4w1a1b1", "8w1a1b1", "4w1a2b2"})
        CHECK_MESSAGE(geometries.contains(tile), "no tiles ", tile);
}

namespace {

// The trace of a launch, by thread and by warp instruction.
struct Trace {
    std::map<std::pair<unsigned, unsigned>, std::vector<Record>> threads;  // (block, thread) -> its events

    explicit Trace(const std::vector<Record>& records) {
        for (const Record& r : records) threads[{r.block, r.thread}].push_back(r);
    }
    // The events of `event` of each warp, as instructions: the k-th such event of each of its 32 lanes
    // (where all 32 have one).
    std::vector<std::vector<Record>> instructions(Event event) const {
        std::map<std::pair<unsigned, unsigned>, std::vector<std::vector<Record>>> lanes;  // (block, warp)
        for (const auto& [key, events] : threads) {
            auto& warp = lanes[{key.first, key.second / 32}];
            warp.emplace_back();
            for (const Record& r : events)
                if (r.event == static_cast<int>(event)) warp.back().push_back(r);
        }
        std::vector<std::vector<Record>> out;
        for (const auto& [key, warp] : lanes) {
            if (warp.size() != 32) continue;
            std::size_t n = warp[0].size();
            for (const auto& lane : warp) n = std::min(n, lane.size());
            for (std::size_t k = 0; k < n; ++k) {
                std::vector<Record> instruction;
                for (const auto& lane : warp) instruction.push_back(lane[k]);
                out.push_back(instruction);
            }
        }
        return out;
    }
    // The events of `event` of each warp, by rounds: a thread's round is its loads up to the stores that
    // follow them; the k-th rounds of a warp's 32 lanes together (where all 32 have one).
    std::vector<std::vector<Record>> rounds(Event event) const {
        std::map<std::pair<unsigned, unsigned>, std::vector<std::vector<std::vector<Record>>>> lanes;
        for (const auto& [key, events] : threads) {
            auto& warp = lanes[{key.first, key.second / 32}];
            warp.emplace_back();
            bool storing = true;
            for (const Record& r : events) {
                const bool load = r.event == static_cast<int>(Event::load);
                if (load && storing) warp.back().emplace_back();
                storing = !load;
                if (r.event == static_cast<int>(event)) warp.back().back().push_back(r);
            }
        }
        std::vector<std::vector<Record>> out;
        for (const auto& [key, warp] : lanes) {
            if (warp.size() != 32) continue;
            std::size_t n = warp[0].size();
            for (const auto& lane : warp) n = std::min(n, lane.size());
            for (std::size_t k = 0; k < n; ++k) {
                std::vector<Record> round;
                for (const auto& lane : warp) round.insert(round.end(), lane[k].begin(), lane[k].end());
                out.push_back(round);
            }
        }
        return out;
    }
};

// Whether the bytes of a warp instruction fill every 32-byte sector they touch.
bool whole_sectors(const std::vector<Record>& instruction) {
    std::map<unsigned long long, std::set<unsigned long long>> sectors;
    for (const Record& r : instruction)
        for (unsigned b = 0; b < r.bytes; ++b) sectors[(r.address + b) / 32].insert(r.address + b);
    return std::all_of(sectors.begin(), sectors.end(), [](const auto& s) { return s.second.size() == 32; });
}

// The most distinct 4-byte words a shared-memory instruction reads or writes in one bank (1: no
// conflict); 8-byte accesses go a half-warp at a time, 16-byte ones a quarter.
int bank_ways(const std::vector<Record>& instruction) {
    const std::size_t group = 128 / std::max(4u, instruction[0].bytes);  // lanes a wavefront serves
    int worst = 0;
    for (std::size_t first = 0; first < instruction.size(); first += group) {
        std::map<unsigned long long, std::set<unsigned long long>> banks;
        for (std::size_t i = first; i < first + group && i < instruction.size(); ++i)
            for (unsigned b = 0; b < instruction[i].bytes; b += 4) {
                const unsigned long long word = (instruction[i].address + b) / 4;
                banks[word % 32].insert(word);
            }
        for (const auto& bank : banks) worst = std::max(worst, static_cast<int>(bank.second.size()));
    }
    return worst;
}

// How often each byte of the trace's global loads (or stores) was accessed: every one once.
bool each_byte_once(const Trace& trace, Event event, std::int64_t bytes) {
    std::map<unsigned long long, int> seen;
    for (const auto& [key, events] : trace.threads)
        for (const Record& r : events)
            if (r.event == static_cast<int>(event))
                for (unsigned b = 0; b < r.bytes; ++b) ++seen[r.address + b];
    return static_cast<std::int64_t>(seen.size()) == bytes &&
           std::all_of(seen.begin(), seen.end(), [](const auto& s) { return s.second == 1; });
}

int count(const std::vector<Record>& events, Event event) {
    return static_cast<int>(std::count_if(
        events.begin(), events.end(), [&](const Record& r) { return r.event == static_cast<int>(event); }));
}

}  // namespace

TEST_CASE("emulated copy kernels: the memory traffic each design promises, read off the emulator's trace") {
    struct Expect {
        CopyCase c;
        int loads_per_item = 0, stores_per_item = 0;  // short_side, permute: a thread's, between barriers
        int full_tiles = -1, edge_tiles = -1;         // tiles
        int shared_ways = 1;                          // tiles, short_side: the worst bank conflict
    };
    const auto copy = [](std::string what, const char* pattern, DType dtype, Shape shape, KernelKind kind,
                         Epilogue epilogue = {}) {
        return CopyCase{std::move(what), rearrange(pattern), dtype, std::move(shape), {}, epilogue, kind};
    };
    std::vector<Expect> expects = {
        // Short sides: S loads of C elements, S*C*size/16 stores of 16 bytes through the warp's stage (its
        // stride an odd number of vectors: two ways at most where a thread's block is 2, 4 or 6 vectors);
        // or the mirror, with no stage.
        {copy("NCHW->NHWC C=3 f32", "b c h w -> b h w c", DType::f32, {2, 3, 32, 32}, KernelKind::short_side),
         3, 3},
        {copy("NCHW->NHWC C=3 bf16", "b c h w -> b h w c", DType::bf16, {2, 3, 32, 32},
              KernelKind::short_side),
         3, 3},
        {copy("NCHW->NHWC C=16 i8", "b c h w -> b h w c", DType::i8, {2, 16, 32, 32}, KernelKind::short_side),
         16, 4, -1, -1, 2},
        {copy("NCHW->NHWC C=8 f64", "b c h w -> b h w c", DType::f64, {2, 8, 16, 16}, KernelKind::short_side),
         8, 4, -1, -1, 2},
        {copy("8 x N f32", "a b -> b a", DType::f32, {8, 4096}, KernelKind::short_side), 8, 4, -1, -1, 2},
        {copy("9 x N f32 (two passes)", "a b -> b a", DType::f32, {9, 4096}, KernelKind::short_side), 9, 9},
        {copy("N x 4 f32", "a b -> b a", DType::f32, {4096, 4}, KernelKind::short_side), 4, 4, -1, -1, 0},
        {copy("NHWC->NCHW C=16 f32", "b h w c -> b c h w", DType::f32, {2, 32, 32, 16},
              KernelKind::short_side),
         4, 16, -1, -1, 0},
        // Tiles: 64 x 64 f32, 128 x 64 bf16 pairs, 128 x 128 bytes as words, 64 x 32 f64; all full, or with
        // edges; runs of several modes.
        {copy("256 x 192 f32", "a b -> b a", DType::f32, {192, 256}, KernelKind::tiles), 0, 0, 12, 0},
        {copy("256 x 128 bf16", "a b -> b a", DType::bf16, {128, 256}, KernelKind::tiles), 0, 0, 4, 0},
        {copy("256 x 256 i8", "a b -> b a", DType::i8, {256, 256}, KernelKind::tiles), 0, 0, 4, 0},
        {copy("128 x 128 f64", "a b -> b a", DType::f64, {128, 128}, KernelKind::tiles), 0, 0, 8, 0},
        {copy("100 x 70 f32", "a b -> b a", DType::f32, {70, 100}, KernelKind::tiles), 0, 0, 1, 3},
        {copy("101 x 67 bf16, unpacked", "a b -> b a", DType::bf16, {67, 101}, KernelKind::tiles), 0, 0, 1,
         3},
        {copy("130 x 67 i8, unpacked", "a b -> b a", DType::i8, {67, 130}, KernelKind::tiles), 0, 0, 2, 4},
        {copy("6-D f32", "a b c d e f -> f d b e c a", DType::f32, {16, 2, 16, 2, 16, 16}, KernelKind::tiles),
         0, 0, 64, 0},
        // Element by element: 4 loads, then 4 stores.
        {copy("transpose with an epilogue", "a b -> b a", DType::f32, {64, 48}, KernelKind::permute,
              Epilogue{2, 0}),
         4, 4},
    };
    std::mt19937 rng(7);
    std::vector<Prepared> prepared;
    for (const Expect& e : expects) prepared.push_back(prepare(e.c, rng));
    const TracedKernels emulated(kernels_of_all(prepared));
    CopyDevice device(emulated);
    for (std::size_t i = 0; i < expects.size(); ++i) {
        const Expect& e = expects[i];
        const Prepared& p = prepared[i];
        CAPTURE(e.c.description);
        const std::vector<KernelSignature> chosen = kernels_of(p.gpu);
        REQUIRE(chosen.size() >= 1);
        REQUIRE_MESSAGE(chosen[0].kind == *e.c.expected, chosen[0].name());
        emulated.trace(true);
        check_result(p, device);
        const Trace trace(emulated.records());
        emulated.trace(false);
        const std::int64_t bytes =
            std::accumulate(e.c.shape.begin(), e.c.shape.end(), std::int64_t{1}, std::multiplies<>()) *
            static_cast<std::int64_t>(size_of(e.c.dtype));
        CHECK(each_byte_once(trace, Event::store, bytes));
        if (e.c.epilogue.identity()) CHECK(each_byte_once(trace, Event::load, bytes));
        const KernelKind kind = chosen[0].kind;
        if (kind != KernelKind::tiles) {
            // No barrier; each thread's events are rounds of its loads, then its stores.
            std::map<std::tuple<unsigned, unsigned, std::size_t>, int> warp_stores;  // (block, warp, round)
            for (const auto& [key, events] : trace.threads) {
                REQUIRE(count(events, Event::barrier) == 0);
                struct Round {
                    int loads = 0, stores = 0;
                    unsigned bytes = 0;
                };
                std::vector<Round> rounds;
                for (const Record& r : events) {
                    const bool load = r.event == static_cast<int>(Event::load);
                    if (!load && r.event != static_cast<int>(Event::store)) continue;
                    if (rounds.empty() || (load && rounds.back().stores > 0)) rounds.emplace_back();
                    (load ? rounds.back().loads : rounds.back().stores) += 1;
                    if (load) rounds.back().bytes += r.bytes;
                }
                for (std::size_t r = 0; r < rounds.size(); ++r) {
                    const Round& round = rounds[r];
                    if (kind == KernelKind::permute) {  // (a thread's last round may hold fewer than 4)
                        CHECK(round.loads >= 1);
                        CHECK(round.loads <= e.loads_per_item);
                        CHECK(round.stores == round.loads);
                    } else {  // >= 32 bytes in flight a thread
                        CHECK(round.loads == e.loads_per_item);
                        CHECK(round.bytes >= 32);
                        if (chosen[0].short_source)
                            CHECK(round.stores == e.stores_per_item);
                        else
                            warp_stores[{key.first, key.second / 32, r}] += round.stores;
                    }
                }
            }
            // Staged stores: a warp stores its lanes' blocks together, not each lane its own.
            for (const auto& [round, stores] : warp_stores) CHECK(stores == 32 * e.stores_per_item);
            // Whole sectors: each warp instruction along the short rows (C elements a lane, lanes side by
            // side) and each store (the warp's vectors in order, from its stage); the loads of the contiguous
            // block, each warp's round (a lane's S*C elements follow the last lane's, in several
            // instructions).
            if (kind == KernelKind::short_side) {
                for (const Event event : {Event::load, Event::store}) {
                    const bool rows = event == Event::store || !chosen[0].short_source;
                    for (const auto& accesses : rows ? trace.instructions(event) : trace.rounds(event))
                        REQUIRE_MESSAGE(whole_sectors(accesses), "a warp uses part of a sector");
                }
                int ways = 0;
                for (const Event event : {Event::shared_load, Event::shared_store})
                    for (const auto& instruction : trace.instructions(event))
                        ways = std::max(ways, bank_ways(instruction));
                CHECK(ways == e.shared_ways);
            }
            continue;
        }
        // Tiles: a path mark and one barrier a tile; its loads (all of them) before its shared stores.
        int full = 0, edge = 0;
        for (const auto& [key, events] : trace.threads) {
            const int tiles = count(events, Event::full_tile) + count(events, Event::edge_tile);
            CHECK(count(events, Event::barrier) == tiles);
            if (key.second == 0) {
                full += count(events, Event::full_tile);
                edge += count(events, Event::edge_tile);
            }
            const TileShape shape = tile_shape(static_cast<int>(size_of(e.c.dtype)), chosen[0].vector);
            const int words = shape.a * shape.b / chosen[0].vector / kernel_block_threads;
            bool in_full = false;
            int loads = 0;
            for (const Record& r : events) {
                if (r.event == static_cast<int>(Event::full_tile) ||
                    r.event == static_cast<int>(Event::edge_tile)) {
                    in_full = r.event == static_cast<int>(Event::full_tile);
                    loads = 0;
                } else if (r.event == static_cast<int>(Event::load)) {
                    ++loads;
                } else if (r.event == static_cast<int>(Event::shared_store) && in_full) {
                    REQUIRE(loads == words);  // all 16 (8) loads issued before the first shared store
                    in_full = false;
                }
            }
        }
        CHECK(full == e.full_tiles);
        CHECK(edge == e.edge_tiles);
        if (e.edge_tiles == 0)
            for (const Event event : {Event::load, Event::store})
                for (const auto& instruction : trace.instructions(event))
                    REQUIRE_MESSAGE(whole_sectors(instruction), "a warp instruction uses part of a sector");
        int ways = 0;
        for (const Event event : {Event::shared_load, Event::shared_store})
            for (const auto& instruction : trace.instructions(event))
                ways = std::max(ways, bank_ways(instruction));
        CHECK(ways == e.shared_ways);
    }
}
