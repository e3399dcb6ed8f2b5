// The registers and shared memory the GPU model assumes for each kernel (compiler/gpu_model.cpp:
// kernel_resources), against what ptxas allocates for sm_90: every kernel of every corpus plan, in four
// dtypes, with 32- and 64-bit indices, and the route kernels, compiled by NVRTC to PTX and assembled by
// `ptxas -arch=sm_90 -v`. The model's occupancy must be the one ptxas's counts give, so that a kernel that
// grows past it cannot change the blocks resident per SM unnoticed. No GPU needed: the CUDA toolkit.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "compiler/bind.hpp"
#include "compiler/codegen.hpp"
#include "compiler/gpu_model.hpp"
#include "compiler/schedule.hpp"
#include "cuda/nvrtc.hpp"
#include "tests/corpus_calls.hpp"

using namespace einc;

namespace {

std::vector<KernelSignature> kernels_to_check() {
    std::vector<KernelSignature> kernels;
    const auto add = [&](KernelSignature k) {
        for (const bool wide : {false, true}) {
            k.wide_index = wide;
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
        }
    };
    for (const DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i32})
        for (const testing::CorpusCall& c : testing::corpus_calls(EINC_CORPUS_DIR, dtype)) {
            std::vector<Shape> shapes;
            for (const TensorSpec& s : c.specs) shapes.push_back(s.shape);
            PlanOptions options;
            options.contiguous = true;
            const Plan p = plan(bind(c.call, shapes), c.specs, options);
            for (const KernelSignature& k : kernels_of(schedule(p, Target::gpu(132)))) add(k);
        }
    // Complex elements (c128: 16 bytes, the largest tiles' element) through the corpus' data movement.
    for (const DType dtype : {DType::c64, DType::c128})
        for (testing::CorpusCall c : testing::corpus_calls(EINC_CORPUS_DIR, DType::f32)) {
            if (c.call.op != Op::rearrange && c.call.op != Op::repeat) continue;
            std::vector<Shape> shapes;
            for (TensorSpec& s : c.specs) {
                s.dtype = dtype;
                shapes.push_back(s.shape);
            }
            PlanOptions options;
            options.contiguous = true;
            const Plan p = plan(bind(c.call, shapes), c.specs, options);
            for (const KernelSignature& k : kernels_of(schedule(p, Target::gpu(132)))) add(k);
        }
    // A single-source reduction of dtype into dtype, kept modes over one reduced mode.
    const auto reduction = [&](KernelKind kind, Reduction op, DType dtype, int kept_rank, int vector,
                               bool partials) {
        KernelSignature k;
        k.kind = kind;
        k.op = op;
        k.sources = {dtype};
        k.destination = dtype;
        k.accumulator = is_floating(dtype) ? DType::f32 : DType::i64;
        k.kept_rank = kept_rank;
        k.reduced_rank = 1;
        k.partials = partials;
        k.vector = vector;
        add(k);
    };
    // The reductions that read 16-byte vectors of narrow elements, whether or not the corpus reaches them.
    for (const Reduction op : {Reduction::sum, Reduction::max})
        for (const DType dtype : {DType::bf16, DType::i8})
            for (const KernelKind kind : {KernelKind::reduce_rows, KernelKind::reduce_columns})
                for (const bool partials : {false, true})
                    reduction(kind, op, dtype, 2, 16 / static_cast<int>(size_of(dtype)), partials);
    // Packed rows: each P, with the widest accumulator (i64) and the narrowest (f32).
    for (const auto& [dtype, rows_a_vector] : {std::pair{DType::bf16, 4}, std::pair{DType::f32, 2},
                                               std::pair{DType::i8, 8}, std::pair{DType::i8, 4}})
        for (const Reduction op : {Reduction::sum, Reduction::max})
            reduction(KernelKind::reduce_packed_rows, op, dtype, 1, rows_a_vector, false);
    for (const Reduction op : {Reduction::max, Reduction::prod})
        for (const DType dtype : {DType::f32, DType::bf16})
            for (const auto& [kept, reduced] : {std::pair{1, 1}, std::pair{3, 2}}) {
                KernelSignature route;
                route.kind = KernelKind::route;
                route.op = op;
                route.sources = {dtype, dtype};
                route.destination = dtype;
                route.kept_rank = kept;
                route.reduced_rank = reduced;
                add(route);
            }
    return kernels;
}

// A launch of the kernel with its kind's block (the model's occupancy depends on the block's threads:
// kernel_block_threads for every kind but reduce_one_pass).
KernelLaunch launch_of(const KernelSignature& k) {
    KernelLaunch launch{k, {1}, {kernel_block_threads}, {}, {}};
    if (k.kind == KernelKind::reduce_one_pass) launch.block = {one_pass_block_threads};
    return launch;
}

}  // namespace

TEST_CASE(
    "gpu model: ptxas's registers and shared memory give every kernel the occupancy the model assumes") {
    const std::string ptxas = EINC_PTXAS;
    if (!cuda::nvrtc_available() || ptxas.empty() || !std::filesystem::exists(ptxas)) {
        MESSAGE("skipped: NVRTC or ptxas (the CUDA toolkit) is not available on this machine");
        return;
    }
    const std::vector<KernelSignature> kernels = kernels_to_check();
    std::string source;
    for (const KernelSignature& k : kernels) source += kernel_source(k);
    const cuda::CompiledKernel compiled = cuda::compile(source, "einc_resources", 90, /*ptx=*/true);
    CHECK_MESSAGE(compiled.log.find("warning") == std::string::npos,
                  compiled.log);  // (codegen's check, sm_90)
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / fmt::format("einc_resources_{}", ::getpid());
    std::filesystem::create_directories(dir);
    {
        std::ofstream ptx(dir / "kernels.ptx", std::ios::binary);
        ptx.write(reinterpret_cast<const char*>(compiled.binary.data()),
                  static_cast<std::streamsize>(
                      std::find(compiled.binary.begin(), compiled.binary.end(), std::byte{0}) -
                      compiled.binary.begin()));
    }
    const std::string command = fmt::format("{} -arch=sm_90 -v {} -o {} 2>&1", ptxas,
                                            (dir / "kernels.ptx").string(), (dir / "kernels.cubin").string());
    std::string log;
    if (FILE* pipe = popen(command.c_str(), "r")) {
        char buffer[4096];
        while (std::fgets(buffer, sizeof buffer, pipe)) log += buffer;
        CHECK(pclose(pipe) == 0);
    }
    std::filesystem::remove_all(dir);
    // "Compiling entry function 'NAME' for 'sm_90'" ... "Used N registers, used B barriers, S bytes smem"
    std::map<std::string, KernelResources> reported;
    const std::regex entry(R"(Compiling entry function '(\w+)')"), used(R"(Used (\d+) registers)"),
        smem(R"((\d+) bytes smem)");
    std::string current;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_search(line, m, entry)) current = m[1];
        if (std::regex_search(line, m, used)) reported[current].registers = std::stoi(m[1]);
        if (std::regex_search(line, m, smem)) reported[current].shared_bytes = std::stoi(m[1]);
    }
    {
        INFO(log.substr(0, 2000));
        REQUIRE(reported.size() >= kernels.size());
    }
    if (const char* path = std::getenv("EINC_WRITE_REGISTERS")) {  // the table kernel_resources reads
        std::map<std::string, int> table;
        for (const auto& [name, r] : reported) table[name] = r.registers;
        std::ofstream out(path);
        out << "// Generated by tests/kernel_resources_test.cpp (EINC_WRITE_REGISTERS): ptxas -arch=sm_90 "
               "-v, "
               "CUDA 13.0.\n";
        for (const auto& [name, registers] : table) out << fmt::format("{{\"{}\", {}}},\n", name, registers);
        MESSAGE("wrote ", table.size(), " kernels' registers to ", path);
    }
    const GpuParameters& gpu = *gpu_parameters("h200");
    std::map<KernelKind, std::pair<int, int>> registers;  // kind -> the fewest, the most
    int estimate_right = 0;
    for (const KernelSignature& k : kernels) {
        CAPTURE(k.name());
        REQUIRE(reported.contains(k.name()));
        const KernelResources actual = reported.at(k.name()), assumed = kernel_resources(k);
        const KernelLaunch launch = launch_of(k);
        CHECK_MESSAGE(!assumed.estimated,
                      "not in compiler/kernel_registers.inc: regenerate it with "
                      "EINC_WRITE_REGISTERS=compiler/kernel_registers.inc build/tests/einc_tests "
                      "-tc='gpu model: ptxas*'");
        CHECK(resident_blocks(launch, actual, gpu) == resident_blocks(launch, assumed, gpu));
        CHECK(actual.shared_bytes == assumed.shared_bytes);
        // How often the estimate for kernels missing from the table would have been right.
        KernelResources estimate = assumed;
        estimate.registers = estimated_registers(k);
        estimate_right +=
            resident_blocks(launch, estimate, gpu) == resident_blocks(launch, actual, gpu) ? 1 : 0;
        auto& [fewest, most] =
            registers.try_emplace(k.kind, actual.registers, actual.registers).first->second;
        fewest = std::min(fewest, actual.registers);
        most = std::max(most, actual.registers);
    }
    std::string figures;
    for (const auto& [kind, range] : registers)
        figures += fmt::format(" {} {}-{};", name_of(kind), range.first, range.second);
    MESSAGE(kernels.size(), " kernels, registers per thread by kind (ptxas, sm_90):", figures,
            " The estimate for kernels not in the table gives the right occupancy for ", estimate_right,
            " of them.");
}
