// The library `einc aot` generates, compiled and linked into this test by einc_add_kernels() from
// tests/aot/kernels.txt: its embedded binaries are NVRTC's output byte for byte, it registers exactly the
// kernels the corpus needs, its cubins are for the architectures asked for (as the toolkit's cuobjdump
// reads them), and calls of the corpus at sizes it never named find every kernel they launch.
#include <algorithm>
#include <cstdio>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>

#include "cli/aot_corpus.hpp"
#include "compiler/bind.hpp"
#include "runtime/kernel_registry.hpp"
#include "test_kernels.hpp"

using namespace einc;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string output_of(const std::string& command) {
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    pclose(pipe);
    return out;
}

std::vector<AheadOfTimeKernel> registered_here() {
    std::vector<AheadOfTimeKernel> kernels = ahead_of_time_kernels();
    std::erase_if(kernels, [](const AheadOfTimeKernel& k) { return k.name.rfind("einc_", 0) != 0; });
    return kernels;
}

Plan plan_of(const Call& call, std::vector<Shape> shapes, DType dtype, bool contiguous = false) {
    std::vector<TensorSpec> specs;
    for (const Shape& shape : shapes) specs.push_back(TensorSpec{dtype, shape, row_major_strides(shape)});
    PlanOptions options;
    options.contiguous = contiguous;
    return plan(bind(call, shapes), specs, options);
}

}  // namespace

TEST_CASE("aot library: every registered binary is the file NVRTC wrote, byte for byte") {
    std::map<std::string, std::string> files;  // "sm_80.cubin" -> the contents of each module's file
    std::size_t count = 0;
    for (const auto& entry : fs::directory_iterator(EINC_AOT_BINARIES)) {
        files[entry.path().filename().string()] = read_file(entry.path());
        ++count;
    }
    CHECK(count == einc_aot::test_kernels::binary_count);
    std::set<const void*> distinct;
    for (const AheadOfTimeKernel& k : registered_here()) {
        const std::string bytes(reinterpret_cast<const char*>(k.binary.data()), k.binary.size());
        const std::string suffix = k.format == BinaryFormat::cubin ? fmt::format(".sm_{}.cubin", k.arch)
                                                                   : fmt::format(".compute_{}.ptx", k.arch);
        const bool found = std::any_of(files.begin(), files.end(), [&](const auto& f) {
            return f.first.ends_with(suffix) && f.second == bytes;
        });
        CHECK_MESSAGE(found, k.name, suffix);
        distinct.insert(k.binary.data());
    }
    CHECK(distinct.size() == einc_aot::test_kernels::binary_count);
}

TEST_CASE("aot library: it registers exactly the kernels the corpus needs, for sm_80, sm_90 and compute_90") {
    const cli::Corpus corpus = cli::read_corpus(EINC_AOT_CORPUS);
    REQUIRE(corpus.errors.empty());
    CHECK(corpus.entries.size() == einc_aot::test_kernels::call_count);
    std::set<std::string> expected;
    for (const KernelSignature& k : cli::corpus_kernels(corpus)) expected.insert(k.name());
    CHECK(expected.size() == einc_aot::test_kernels::kernel_count);
    std::map<std::string, std::set<std::string>> binaries;  // kernel -> "cubin 80", ...
    for (const AheadOfTimeKernel& k : registered_here())
        binaries[k.name].insert(
            fmt::format("{} {}", k.format == BinaryFormat::cubin ? "cubin" : "ptx", k.arch));
    const std::set<std::string> every_format{"cubin 80", "cubin 90", "ptx 90"};
    std::set<std::string> registered;
    for (const auto& [name, formats] : binaries) {
        registered.insert(name);
        CHECK_MESSAGE(formats == every_format, name);
    }
    CHECK(registered == expected);
    CHECK(std::string(einc_aot::test_kernels::calls[0].location).ends_with("kernels.txt:2"));
}

TEST_CASE("aot library: the cubins are for the architectures asked for, as cuobjdump reads them") {
    if (std::string(EINC_CUOBJDUMP).empty()) {
        fmt::print("SKIP aot cuobjdump: cuobjdump not found (it comes with the CUDA toolkit, or pip install "
                   "nvidia-cuda-cuobjdump)\n");
        return;
    }
    std::size_t checked = 0;
    for (const auto& entry : fs::directory_iterator(EINC_AOT_BINARIES)) {
        const std::string name = entry.path().filename().string();
        if (entry.path().extension() == ".ptx") {
            const std::string arch = name.substr(name.find("compute_") + 8, 2);
            CHECK_MESSAGE(read_file(entry.path()).find(".target sm_" + arch) != std::string::npos, name);
            continue;
        }
        const std::string arch = name.substr(name.find(".sm_") + 4, 2);
        const std::string listing =
            output_of(fmt::format("'{}' -elf '{}' 2>&1", EINC_CUOBJDUMP, entry.path().string()));
        CHECK_MESSAGE(listing.find("ELF: type=ET_EXEC") != std::string::npos, name, ": ",
                      listing.substr(0, 300));
        CHECK_MESSAGE(listing.find("sm=" + arch + ",") != std::string::npos, name, ": ",
                      listing.substr(0, 300));
        ++checked;
    }
    CHECK(checked == 2 * (einc_aot::test_kernels::binary_count / 3));
}

TEST_CASE("aot library: calls of the corpus, at sizes it never named, find every kernel; other calls miss") {
    struct Case {
        Call call;
        std::vector<Shape> shapes;
        DType dtype;
    };
    const Case cases[] = {
        {{Op::rearrange, "b c h w -> b h w c", Reduction::none, {}, false, {}}, {{5, 3, 37, 41}}, DType::f32},
        {{Op::rearrange, "b c h w -> b h w c", Reduction::none, {}, false, {}}, {{2, 64, 7, 9}}, DType::bf16},
        {{Op::reduce, "b s e -> b s", Reduction::mean, {}, false, {}}, {{3, 197, 768}}, DType::bf16},
        {{Op::reduce, "b s e -> b e", Reduction::sum, {}, false, {}}, {{6, 1000, 17}}, DType::f32},
        {{Op::reduce, "b s e -> b e", Reduction::sum, {}, false, {}}, {{1, 100000, 2}}, DType::f32},
        {{Op::einsum, "i j, j -> i", Reduction::none, {}, false, {}}, {{64, 32}, {32}}, DType::i32},
        {{Op::repeat, "h w -> (h 2) (w 2)", Reduction::none, {}, false, {}}, {{123, 45}}, DType::f16},
    };
    for (const Case& c : cases)
        for (const bool contiguous : {false, true})
            for (const int arch : {80, 86, 90, 100})  // 86: the sm_80 cubin; 100: the compute_90 PTX
                for (const int multiprocessors : {132, 108, 46}) {
                    CAPTURE(c.call.pattern);
                    const Schedule gpu = schedule(plan_of(c.call, c.shapes, c.dtype, contiguous),
                                                  Target::gpu(multiprocessors));
                    const std::vector<KernelSignature> missing = missing_ahead_of_time(gpu, arch);
                    CHECK_MESSAGE(missing.empty(), "sm_", arch, " misses ",
                                  missing.empty() ? "" : missing[0].name());
                }
    const Call outside{Op::rearrange, "a b c -> c b a", Reduction::none, {}, false, {}};
    CHECK_FALSE(missing_ahead_of_time(
                    schedule(plan_of(outside, {{40, 50, 60}}, DType::f64, true), Target::gpu(132)), 90)
                    .empty());
    const Call in_corpus{Op::rearrange, "b c h w -> b h w c", Reduction::none, {}, false, {}};
    CHECK_FALSE(missing_ahead_of_time(
                    schedule(plan_of(in_corpus, {{5, 3, 37, 41}}, DType::f32, true), Target::gpu(132)), 75)
                    .empty());  // older than sm_80
}
