// `einc emit`: the CUDA kernels a call's plan launches on a GPU - which kernel each step runs, with what
// grid and parameters, and each kernel's source (or, with --ptx, the PTX NVRTC makes of it).
#include <fmt/ostream.h>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "compiler/codegen.hpp"
#include "compiler/lower.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#if EINC_HAS_CUDA
#include "cuda/nvrtc.hpp"
#endif

namespace einc::cli {

int emit(const CallArgs& args, std::ostream& out) {
    Lowered lowered = lower(args.call, load_operands(args).specs, {.until = Stage::planned});
    const Target target = gpu_target(gpu_device(args.device));  // (an unknown --device: after the plan)
    lowered = lower(std::move(lowered), {.until = Stage::scheduled, .target = target});
    const Plan& planned = lowered.plan;
    const Schedule& scheduled = lowered.schedule;
    for (std::size_t s = 0; s < planned.steps.size(); ++s) {
        const ScheduledStep& step = scheduled.steps[s];
        fmt::print(out, "// step {}: {}\n", s + 1, planned.steps[s].why);
        std::visit(Overloaded{
                       [&](const strategy::View&) { fmt::print(out, "//   a view: no kernel\n"); },
                       [&](const strategy::LibraryGemm& library) {
                           const Gemm& gemm = library.gemm;
                           fmt::print(out, "//   cublasGemmStridedBatchedEx: batch {} m {} n {} k {}\n",
                                      gemm.batch, gemm.m, gemm.n, gemm.k);
                       },
                       [&](const strategy::Kernels& kernels) {
                           for (const KernelLaunch& launch : kernels.launches)
                               fmt::print(out, "//   {}<<<{}, ({}, {})>>>  outputs {}  terms {}  split {}\n",
                                          launch.signature.name(), launch.grid.x, launch.block.x,
                                          launch.block.y, launch.params.kept_count,
                                          launch.params.reduced_count, launch.params.split);
                           for (const KernelLaunch& launch : kernels.unaligned_launches)
                               fmt::print(out, "//   with unaligned buffers: {}\n", launch.signature.name());
                       },
                       [](const CpuOnly auto&) {},  // (a GPU schedule has none)
                   },
                   step.strategy);
        if (step.scratch_bytes > 0) fmt::print(out, "//   scratch {} bytes\n", step.scratch_bytes);
    }
    const std::vector<KernelSignature> kernels = kernels_of(scheduled);
    for (const KernelSignature& kernel : kernels) {
        fmt::print(out, "\n");
        if (!args.ptx) {
            fmt::print(out, "{}", kernel_source(kernel));
            continue;
        }
#if EINC_HAS_CUDA
        const cuda::CompiledKernel compiled =
            cuda::compile(kernel_source(kernel), kernel.name(), args.arch, /*ptx=*/true);
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
