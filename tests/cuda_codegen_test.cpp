// Generated CUDA kernels compile with NVRTC for sm_80 and sm_90 - no GPU needed. Every plan of the test
// corpus is scheduled for a GPU (in several dtypes), and a sample of the distinct kernels that holds every
// pair of their features is compiled.
#include <algorithm>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "compiler/bind.hpp"
#include "compiler/codegen.hpp"
#include "compiler/schedule.hpp"
#include "cuda/nvrtc.hpp"
#include "grammar/diagnostic.hpp"
#include "tests/corpus_calls.hpp"

using namespace einc;

namespace {

// Every kernel the accepted `einc explain` calls of the corpus need, in each dtype that applies.
std::vector<KernelSignature> corpus_kernels(std::size_t& plans) {
    std::vector<KernelSignature> kernels;
    for (const DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i32})
        for (const testing::CorpusCall& c : testing::corpus_calls(EINC_CORPUS_DIR, dtype)) {
            std::vector<Shape> shapes;
            for (const TensorSpec& s : c.specs) shapes.push_back(s.shape);
            PlanOptions options;
            options.contiguous = true;  // every movement materialised: copy kernels too
            const Plan p = plan(bind(c.call, shapes), c.specs, options);
            ++plans;
            for (const KernelSignature& k : kernels_of(schedule(p, Target::gpu(132))))
                if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
        }
    return kernels;
}

std::string sources_of(const KernelSignature& k) {
    std::string names;
    for (const DType d : k.sources) names += fmt::format("{} ", name_of(d));
    return names;
}

// What a kernel's source varies with, one string per feature.
std::vector<std::string> features_of(const KernelSignature& k) {
    return {
        fmt::format("{} k{} r{}", name_of(k.kind), k.kept_rank, k.reduced_rank),
        std::string(name_of(k.op)),
        sources_of(k),
        fmt::format("{} acc {}", name_of(k.destination), name_of(k.accumulator)),
        fmt::format("wide {} partials {}", k.wide_index, k.partials),
        fmt::format("alpha {} beta {}", k.epilogue.alpha, k.epilogue.beta),
        fmt::format("w{} a{} b{} s{} {}", k.vector, k.runs[0], k.runs[1], k.short_extent, k.short_source)};
}

// The kernels that hold, between them, every pair of feature values that some kernel holds (a covering
// array, greedily): the code generator's branches meet in pairs, and NVRTC takes ~0.15 s a kernel and
// architecture, so compiling all ~1250 distinct kernels of these tests twice took 9.5 minutes on 2 cores.
// The emulation tests compile and run every kernel they plan, as C++.
std::vector<KernelSignature> covering_sample(const std::vector<KernelSignature>& kernels) {
    std::set<std::string> pairs;
    std::vector<KernelSignature> sample;
    for (const KernelSignature& k : kernels) {
        const std::vector<std::string> f = features_of(k);
        bool new_pair = false;
        for (std::size_t i = 0; i < f.size(); ++i)
            for (std::size_t j = i + 1; j < f.size(); ++j)
                new_pair |= pairs.insert(fmt::format("{}:{} | {}:{}", i, f[i], j, f[j])).second;
        if (new_pair) sample.push_back(k);
    }
    return sample;
}

// A covering sample of the kernels in one NVRTC program (the prelude is guarded), compiled to PTX for
// sm_90 and, for sm_80, to a cubin (`assemble`: through ptxas, which alone checks the prelude's inline
// PTX) or to PTX - or for one of them only: a kernel's text is the same for every architecture, and the
// prelude's paths per architecture are the corpus sample's to check.
enum class Sm80 : bool { ptx, cubin };
void compile_all(const std::vector<KernelSignature>& all_kernels, Sm80 sm80 = Sm80::cubin, bool sm90 = true,
                 bool sm80_too = true) {
    const std::vector<KernelSignature> kernels = covering_sample(all_kernels);
    MESSAGE(kernels.size(), " of ", all_kernels.size(), " kernels hold every pair of features");
    std::string source;
    for (const KernelSignature& k : kernels) source += kernel_source(k);
    for (const int arch : {80, 90}) {
        if ((arch == 90 && !sm90) || (arch == 80 && !sm80_too)) continue;
        const cuda::CompiledKernel compiled = cuda::compile(source, "einc_corpus", arch,
                                                            /*ptx=*/arch == 90 || sm80 == Sm80::ptx);
        CHECK(compiled.binary.size() > 0);
        CHECK_MESSAGE(compiled.log.find("warning") == std::string::npos, compiled.log);
    }
}

}  // namespace

TEST_CASE("codegen: the corpus plans' kernels, every pair of features, compile with NVRTC for sm_80 and 90") {
    if (!cuda::nvrtc_available()) {
        MESSAGE("skipped: NVRTC is not available on this machine");
        return;
    }
    std::size_t plans = 0;
    const std::vector<KernelSignature> kernels = corpus_kernels(plans);
    MESSAGE("NVRTC ", cuda::nvrtc_version(), ": ", kernels.size(), " distinct kernels from ", plans,
            " plans");
    CHECK(plans > 300);
    CHECK(kernels.size() > 20);
    std::set<KernelKind> kinds;
    for (const KernelSignature& k : kernels) kinds.insert(k.kind);
    for (const KernelKind kind :
         {KernelKind::elementwise, KernelKind::permute, KernelKind::vector_copy, KernelKind::short_side,
          KernelKind::tiles, KernelKind::reduce_rows, KernelKind::reduce_columns, KernelKind::finalize})
        CHECK_MESSAGE(kinds.contains(kind), "no corpus plan uses ", name_of(kind));
    // (sm_90: kernel_resources_test compiles every corpus kernel for it, and assembles them, where the
    // toolkit has ptxas)
    const std::string ptxas = EINC_PTXAS;
    compile_all(kernels, Sm80::cubin, /*sm90=*/ptxas.empty() || !std::filesystem::exists(ptxas));
}

// The gradients of reduce max, min and prod are Route steps (plan_route), which no corpus call plans:
// their kernels - every dtype a gradient takes, kept and reduced ranks 0 to 3, strided inputs, an
// epilogue, both index widths (possible_kernels) - compile too (every pair of their features).
TEST_CASE("codegen: the route kernels (gradients of max, min, prod) compile with NVRTC") {
    if (!cuda::nvrtc_available()) {
        MESSAGE("skipped: NVRTC is not available on this machine");
        return;
    }
    struct Case {
        const char* pattern;
        Shape shape, strides;
    };
    const Case cases[] = {
        {"a b -> a", {13, 7}, {7, 1}},
        {"a b -> b", {9, 11}, {1, 9}},
        {"a b c d -> b d", {3, 4, 5, 6}, {1, 3, 12, 60}},
        {"a b c d e -> a c e", {2, 3, 2, 4, 3}, {1, 2, 6, 12, 48}},
        {"a b c -> ", {4, 5, 6}, {30, 6, 1}},
        {"b (h 2) (w 2) -> b h w", {3, 8, 6}, {48, 6, 1}},
    };
    std::vector<KernelSignature> kernels;
    for (const Case& c : cases)
        for (const Reduction op : {Reduction::max, Reduction::min, Reduction::prod})
            for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16})
                for (const Epilogue epilogue : {Epilogue{}, Epilogue{0.5, -2}}) {
                    const Bound forward =
                        bind(Call{Op::reduce, c.pattern, op, {}, false, {}}, std::vector<Shape>{c.shape});
                    const Shape grad_shape = forward.outputs[0].shape();
                    PlanOptions options;
                    options.epilogue = epilogue;
                    const Plan p =
                        plan_route(forward, TensorSpec{dtype, c.shape, c.strides},
                                   TensorSpec{dtype, grad_shape, row_major_strides(grad_shape)}, options);
                    for (const KernelSignature& k : possible_kernels(p, true))
                        if (std::find(kernels.begin(), kernels.end(), k) == kernels.end())
                            kernels.push_back(k);
                }
    REQUIRE(!kernels.empty());
    for (const KernelSignature& k : kernels) CHECK(k.kind == KernelKind::route);
    MESSAGE(kernels.size(), " distinct route kernels");
    compile_all(kernels, Sm80::ptx, /*sm90=*/true, /*sm80_too=*/false);  // (as the one-pass kernels)
}

// The one-pass reduction kernels (designs A and B, packed rows): every reduction op, every dtype a GPU takes,
// kept ranks 0 to 2, with and without an epilogue, both index widths (possible_kernels) - compile too (every
// pair of their features).
TEST_CASE("codegen: the one-pass reduction kernels compile with NVRTC") {
    if (!cuda::nvrtc_available()) {
        MESSAGE("skipped: NVRTC is not available on this machine");
        return;
    }
    struct Case {
        const char* pattern;
        Shape shape;
        Shape strides;  // (empty: row-major)
    };
    // (A's kept modes are part of one dense run, so they merge into one: its kept rank is 0 or 1)
    const Case cases[] = {
        {"a b ->", {40, 50}, {}},                 // A, K = 1
        {"a c -> c", {40, 5}, {}},                // A, one kept mode
        {"a b c -> b c", {9, 2, 3}, {}},          // A, two kept modes, merged
        {"a b -> a", {40, 7}, {}},                // B, one kept mode
        {"a b c -> a b", {4, 5, 6}, {}},          // B, two kept modes, merged
        {"a b c -> a b", {4, 5, 6}, {41, 8, 1}},  // B, two kept modes: padded rows
        {"a b -> a", {40, 2}, {}},                // packed rows
        {"a b c -> b a", {4, 5, 2}, {}},          // packed rows, two kept modes
    };
    std::vector<KernelSignature> kernels;
    for (const Case& c : cases)
        for (const Reduction op : {Reduction::sum, Reduction::mean, Reduction::max, Reduction::min,
                                   Reduction::prod, Reduction::any, Reduction::all})
            for (const DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i8, DType::i32,
                                      DType::i64, DType::boolean}) {
                if (op == Reduction::mean && !is_floating(dtype)) continue;
                const Bound bound =
                    bind(Call{Op::reduce, c.pattern, op, {}, false, {}}, std::vector<Shape>{c.shape});
                const bool whole =
                    !is_floating(reduced_dtype(op, dtype));  // (integer results: whole factors)
                for (const Epilogue& epilogue : {Epilogue{}, whole ? Epilogue{2, -1} : Epilogue{0.5, -2}}) {
                    PlanOptions options;
                    options.epilogue = epilogue;
                    const Plan p = plan(
                        bound,
                        std::vector<TensorSpec>{
                            {dtype, c.shape, c.strides.empty() ? row_major_strides(c.shape) : c.strides}},
                        options);
                    for (const KernelSignature& k : possible_kernels(p, true))
                        if ((k.kind == KernelKind::reduce_one_pass ||
                             k.kind == KernelKind::reduce_short_rows ||
                             k.kind == KernelKind::reduce_packed_rows) &&
                            std::find(kernels.begin(), kernels.end(), k) == kernels.end())
                            kernels.push_back(k);
                }
            }
    std::set<std::pair<KernelKind, int>> kinds;
    for (const KernelSignature& k : kernels) kinds.emplace(k.kind, k.kept_rank);
    CHECK(kinds == std::set<std::pair<KernelKind, int>>{{KernelKind::reduce_one_pass, 0},
                                                        {KernelKind::reduce_one_pass, 1},
                                                        {KernelKind::reduce_short_rows, 1},
                                                        {KernelKind::reduce_short_rows, 2},
                                                        {KernelKind::reduce_packed_rows, 1},
                                                        {KernelKind::reduce_packed_rows, 2}});
    MESSAGE(kernels.size(), " distinct one-pass kernels");
    // (to PTX for sm_90 alone: the corpus's sample above takes the prelude through both architectures)
    compile_all(kernels, Sm80::ptx, /*sm90=*/true, /*sm80_too=*/false);
}

TEST_CASE("codegen: a failing compilation is an einc::Error carrying NVRTC's log") {
    if (!cuda::nvrtc_available()) {
        MESSAGE("skipped: NVRTC is not available on this machine");
        return;
    }
    CHECK_THROWS_WITH_AS(
        cuda::compile("extern \"C\" __global__ void broken() { undeclared(); }", "broken", 90),
        doctest::Contains("undeclared"), Error);
}
