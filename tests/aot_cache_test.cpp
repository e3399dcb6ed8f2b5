// `einc aot` through the kernel disk cache (CUDA builds; NVRTC, no GPU needed): a second run compiles
// nothing and writes the same files; a corrupt or foreign cache file is recompiled and replaced, never
// embedded; the PTX taken from a cubin's compile is the PTX a compute_<arch> compile gives.
#include <algorithm>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <regex>
#include <unistd.h>

#include "cli_capture.hpp"
#include "cuda/kernel_cache.hpp"
#include "cuda/nvrtc.hpp"

using namespace einc;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path = fs::temp_directory_path() / fmt::format("einc-aot-cache-test-{}", ::getpid());
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file `einc aot -o dir` wrote (the source, the header, the binaries), by path under dir.
std::map<std::string, std::string> outputs(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir))
        if (entry.is_regular_file())
            files[fs::relative(entry.path(), dir).string()] = read_file(entry.path());
    return files;
}

// "3 of 6 modules from the cache" in the output of einc aot -> {3, 6}.
std::pair<int, int> cache_hits(const std::string& out) {
    std::smatch match;
    REQUIRE_MESSAGE(std::regex_search(out, match, std::regex(R"((\d+) of (\d+) modules? from the cache)")),
                    out);
    return {std::stoi(match[1]), std::stoi(match[2])};
}

}  // namespace

TEST_CASE("aot cache: a second run compiles nothing; corrupt and foreign cache files are recompiled") {
    if (!cuda::nvrtc_available()) {
        fmt::print("SKIP aot cache: NVRTC is not available\n");
        return;
    }
    TempDir dir;
    const fs::path corpus = dir.path / "kernels.txt";
    // Three kernels, one module: a cubin for sm_80, and a cubin and PTX for sm_90 (two NVRTC runs).
    std::ofstream(corpus) << "rearrange \"b c h w -> b h w c\" 2x3x4x5 --dtype f32\n"
                             "reduce \"b s e -> b e\" sum 3x50x7 --dtype f32\n";
    const fs::path cache = dir.path / "cache";
    const auto aot = [&](const std::string& out) {
        const testing::CliResult r =
            testing::einc_cli({"aot", corpus.string(), "-o", (dir.path / out).string(), "--arch",
                               "sm_80,sm_90", "--cache-dir", cache.string()});
        REQUIRE_MESSAGE(r.status == 0, r.err);
        return r.out;
    };

    const auto [none, modules] = cache_hits(aot("first"));
    CHECK(none == 0);
    REQUIRE(modules == 3);
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(cache)) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    CHECK(files.size() == static_cast<std::size_t>(modules));  // nothing else: no temporaries

    CHECK(cache_hits(aot("second")) == std::pair(modules, modules));
    CHECK(outputs(dir.path / "second") == outputs(dir.path / "first"));

    // One file with a flipped byte, one replaced by another intact file (a foreign key): both are
    // recompiled, and the output is still NVRTC's.
    REQUIRE(files.size() >= 3);
    std::string flipped = read_file(files[0]);
    flipped.back() = static_cast<char>(flipped.back() ^ 1);
    std::ofstream(files[0], std::ios::binary | std::ios::trunc) << flipped;
    fs::copy_file(files[2], files[1], fs::copy_options::overwrite_existing);
    const auto [hits, total] = cache_hits(aot("third"));
    CHECK(total == modules);
    CHECK(hits <= 1);  // at most the NVRTC run that made neither file
    CHECK(outputs(dir.path / "third") == outputs(dir.path / "first"));
    CHECK(cache_hits(aot("fourth")) == std::pair(modules, modules));  // replaced by good files

    // Without a cache: the same files, compiled.
    const testing::CliResult uncached =
        testing::einc_cli({"aot", corpus.string(), "-o", (dir.path / "uncached").string(), "--arch",
                           "sm_80,sm_90", "--no-cache"});
    REQUIRE_MESSAGE(uncached.status == 0, uncached.err);
    CHECK(uncached.out.find("no disk cache") != std::string::npos);
    CHECK(outputs(dir.path / "uncached") == outputs(dir.path / "first"));
}

TEST_CASE("aot cache: the PTX of a cubin's compile is the PTX of a compute_<arch> compile") {
    if (!cuda::nvrtc_available()) {
        fmt::print("SKIP aot cache: NVRTC is not available\n");
        return;
    }
    const std::string source = "extern \"C\" __global__ void twice(float* x, int n) {\n"
                               "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                               "    if (i < n) x[i] = 2.0f * x[i] + __shfl_down_sync(0xffffffffu, x[i], 1);\n"
                               "}\n";
    for (const int arch : {80, 90}) {
        CAPTURE(arch);
        const cuda::CompiledKernel both = cuda::compile_with_ptx(source, "twice", arch);
        CHECK(both.binary == cuda::compile(source, "twice", arch).binary);
        CHECK(both.ptx == cuda::compile(source, "twice", arch, /*ptx=*/true).binary);
        const std::string ptx(reinterpret_cast<const char*>(both.ptx.data()), both.ptx.size());
        CHECK(ptx.find(fmt::format(".target sm_{}", arch)) != std::string::npos);
    }
}

TEST_CASE("aot cache: usage errors") {
    const testing::CliResult r =
        testing::einc_cli({"aot", "k.txt", "-o", "out", "--no-cache", "--cache-dir", "somewhere"});
    CHECK(r.status != 0);
    CHECK(r.err.find("--no-cache and --cache-dir") != std::string::npos);
}
