// `einc emit`: the CUDA kernels a call's plan launches on a GPU - which kernel each step runs, with what
// grid and parameters, and each kernel's source (or, with --ptx, the PTX NVRTC makes of it).
#include <algorithm>
#include <fmt/ostream.h>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "compiler/bind.hpp"
#include "compiler/codegen.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#if EINC_HAS_CUDA
#include "cuda/nvrtc.hpp"
#endif

namespace einc::cli {

int emit(const CallArgs& args, std::ostream& out) {
    const std::vector<TensorSpec> inputs = load_operands(args).specs;
    std::vector<Shape> shapes;
    for (const TensorSpec& input : inputs) shapes.push_back(input.shape);
    const Plan planned = plan(bind(args.call, shapes), inputs);
    std::vector<KernelSignature> kernels;
    for (std::size_t s = 0; s < planned.steps.size(); ++s) {
        const Step& step = planned.steps[s].step;
        fmt::print(out, "// step {}: {}\n", s + 1, planned.steps[s].why);
        if (std::holds_alternative<View>(step)) {
            fmt::print(out, "//   a view: no kernel\n");
            continue;
        }
        if (const auto* gemm = std::get_if<Gemm>(&step); gemm && is_floating(planned.inputs.front().dtype)) {
            fmt::print(out, "//   cublasGemmStridedBatchedEx: batch {} m {} n {} k {}\n", gemm->batch, gemm->m, gemm->n, gemm->k);
            continue;
        }
        const GpuStep lowered = lower_to_kernels(planned, step);
        for (const KernelLaunch& launch : lowered.launches) {
            fmt::print(out, "//   {}<<<{}, ({}, {})>>>  outputs {}  terms {}  split {}\n", launch.signature.name(), launch.grid.x,
                       launch.block.x, launch.block.y, launch.params.kept_count, launch.params.reduced_count, launch.params.split);
            if (std::find(kernels.begin(), kernels.end(), launch.signature) == kernels.end()) kernels.push_back(launch.signature);
        }
        if (lowered.workspace_bytes > 0) fmt::print(out, "//   workspace {} bytes\n", lowered.workspace_bytes);
    }
    for (const KernelSignature& kernel : kernels) {
        fmt::print(out, "\n");
        if (!args.ptx) {
            fmt::print(out, "{}", kernel_source(kernel));
            continue;
        }
#if EINC_HAS_CUDA
        const cuda::CompiledKernel compiled = cuda::compile(kernel_source(kernel), kernel.name(), args.arch, /*ptx=*/true);
        std::string_view ptx(reinterpret_cast<const char*>(compiled.binary.data()), compiled.binary.size());
        while (!ptx.empty() && ptx.back() == '\0') ptx.remove_suffix(1);  // NVRTC counts the terminator
        fmt::print(out, "{}", ptx);
#else
        throw Error(ErrorKind::unsupported, "--ptx needs a build of einc with CUDA (NVRTC)");
#endif
    }
    return exit_ok;
}

}  // namespace einc::cli
