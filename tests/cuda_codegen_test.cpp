// Generated CUDA kernels compile with NVRTC for sm_80 and sm_90 - no GPU needed. Every plan of the test
// corpus is scheduled for a GPU (in several dtypes) and every distinct kernel is compiled.
#include <algorithm>
#include <doctest/doctest.h>
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

// All kernels in one NVRTC program per architecture (the prelude is guarded).
void compile_all(const std::vector<KernelSignature>& kernels, int arch) {
    std::string source;
    for (const KernelSignature& k : kernels) source += kernel_source(k);
    const cuda::CompiledKernel compiled = cuda::compile(source, "einc_corpus", arch);
    CHECK(compiled.binary.size() > 0);
    CHECK_MESSAGE(compiled.log.find("warning") == std::string::npos, compiled.log);
}

}  // namespace

TEST_CASE("codegen: every kernel of every corpus plan compiles with NVRTC for sm_80 and sm_90") {
    if (!cuda::nvrtc_available()) {
        MESSAGE("skipped: NVRTC is not available on this machine");
        return;
    }
    std::size_t plans = 0;
    const std::vector<KernelSignature> kernels = corpus_kernels(plans);
    MESSAGE("NVRTC ", cuda::nvrtc_version(), ": ", kernels.size(), " distinct kernels from ", plans, " plans");
    CHECK(plans > 300);
    CHECK(kernels.size() > 20);
    std::set<KernelKind> kinds;
    for (const KernelSignature& k : kernels) kinds.insert(k.kind);
    for (const KernelKind kind : {KernelKind::elementwise, KernelKind::vector_copy, KernelKind::transpose, KernelKind::reduce_rows,
                                  KernelKind::reduce_columns, KernelKind::finalize})
        CHECK_MESSAGE(kinds.contains(kind), "no corpus plan uses ", name_of(kind));
    compile_all(kernels, 80);
    compile_all(kernels, 90);
}

TEST_CASE("codegen: a failing compilation is an einc::Error carrying NVRTC's log") {
    if (!cuda::nvrtc_available()) {
        MESSAGE("skipped: NVRTC is not available on this machine");
        return;
    }
    CHECK_THROWS_WITH_AS(cuda::compile("extern \"C\" __global__ void broken() { undeclared(); }", "broken", 90),
                         doctest::Contains("undeclared"), Error);
}
