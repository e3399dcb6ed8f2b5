#include "compiler/schedule.hpp"

#include <algorithm>

#include "compiler/checked.hpp"
#include "compiler/schedule_rules.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {

std::string_view name_of(Backend backend) {
    return backend == Backend::cpu ? "cpu" : "cuda";
}

std::string_view name_of(const StepStrategy& strategy) {
    return std::visit([](const auto& s) { return std::decay_t<decltype(s)>::name; }, strategy);
}

Split split_of(const StepStrategy& strategy) {
    return std::visit(
        [](const auto& s) {
            if constexpr (requires { s.split; })
                return s.split;
            else
                return Split::none;
        },
        strategy);
}

namespace strategy {
std::string_view name_of(GemmCompute compute) {
    static constexpr std::string_view names[] = {"f64", "f32", "tf32"};
    static_assert(std::size(names) == static_cast<std::size_t>(GemmCompute::tf32) + 1);
    return names[static_cast<std::size_t>(compute)];
}
}  // namespace strategy

std::string_view name_of(Split split) {
    static constexpr std::string_view names[] = {"none",           "outer",         "rows", "tiles",
                                                 "partials_outer", "partials_rows", "gemms"};
    static_assert(std::size(names) == static_cast<std::size_t>(Split::gemms) + 1);
    return names[static_cast<std::size_t>(split)];
}

std::string_view name_of(TransposeKind kind) {
    static constexpr std::string_view names[] = {"registers", "tiles", "direct", "short_side"};
    static_assert(std::size(names) == static_cast<std::size_t>(TransposeKind::short_side) + 1);
    return names[static_cast<std::size_t>(kind)];
}

Target Target::cpu(int threads, int vector_bytes, bool blas) {
    Target target;
    target.backend = Backend::cpu;
    target.threads = std::max(threads, 1);
    target.vector_bytes = vector_bytes;
    target.blas = blas;
    return target;
}

Target Target::gpu(int multiprocessors, bool allow_tf32) {
    Target target;
    target.backend = Backend::cuda;
    target.multiprocessors = std::max(multiprocessors, 1);
    target.allow_tf32 = allow_tf32;
    return target;
}

bool gemm_in_library(const Plan& plan, const Gemm& gemm, const Target& target) {
    const DType dtype = plan.dtype_of(gemm.a.buffer);
    if (target.backend == Backend::cuda)
        return dtype == DType::f64 || dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
    return target.blas && (dtype == DType::f64 || dtype == DType::f32) && gemm.k > 0;
}

Contract gemm_as_contraction(const Gemm& g) {
    // One index space ([outer,] batch, m, n, k): A is (batch, m, k), B is (batch, k, n), C is (batch, m, n),
    // each with stride 0 along the mode it lacks; the outer mode leads where there is one.
    const Layout a = g.a.layout(g.outer, g.batch, g.m, g.k), b = g.b.layout(g.outer, g.batch, g.k, g.n),
                 c = g.c.layout(g.outer, g.batch, g.m, g.n);
    Contract contraction;
    contraction.srcs.push_back(Access{
        g.a.buffer, g.a.offset, Layout{{a.modes[0], a.modes[1], a.modes[2], Mode{g.n, 0}, a.modes[3]}}});
    contraction.srcs.push_back(Access{
        g.b.buffer, g.b.offset, Layout{{b.modes[0], b.modes[1], Mode{g.m, 0}, b.modes[3], b.modes[2]}}});
    contraction.dst = Access{g.c.buffer, g.c.offset,
                             Layout{{c.modes[0], c.modes[1], c.modes[2], c.modes[3], Mode{g.k, 0}}}};
    if (g.outer == 1)
        for (Access* access : {&contraction.srcs[0], &contraction.srcs[1], &contraction.dst})
            access->layout.modes.erase(access->layout.modes.begin());
    contraction.epilogue = g.epilogue;
    return contraction;
}

namespace detail {

std::optional<std::size_t> transpose_mode(const Layout& dst, const Layout& src, std::int64_t min_extent) {
    const std::size_t rank = dst.rank();
    if (rank < 2) return std::nullopt;
    const Mode dst_last = dst.modes[rank - 1], src_last = src.modes[rank - 1];
    if (dst_last.stride != 1 || src_last.stride == 1 || src_last.stride == 0 || dst_last.extent < min_extent)
        return std::nullopt;
    for (std::size_t k = 0; k + 1 < rank; ++k)
        if (src.modes[k].stride == 1 && src.modes[k].extent >= min_extent) return k;
    return std::nullopt;
}

}  // namespace detail

Schedule schedule(const Plan& plan, const Target& target) {
    Schedule result{target, {}, {}, 0, 0};
    for (const PlanStep& step : plan.steps) {
        result.steps.push_back(target.backend == Backend::cpu
                                   ? detail::schedule_cpu_step(plan, step, target)
                                   : detail::schedule_gpu_step(plan, step.step, target));
        result.steps.back().epilogue = epilogue_of(step.step);
    }
    // The workspace: every temporary (they live across steps), then the scratch the steps share, as large
    // as the largest (steps run one at a time); each piece on a 256-byte boundary.
    // (Sizes saturate: a workspace too large for 64 bits is one no allocation satisfies.)
    const auto aligned = [](std::int64_t bytes) {
        return saturating_mul(saturating_add(bytes, 255) / 256, 256);
    };
    std::int64_t offset = 0;
    for (const TensorSpec& t : plan.temporaries) {
        result.temporary_offsets.push_back(offset);
        offset = saturating_add(offset, aligned(std::max<std::int64_t>(t.bytes(), 1)));
    }
    std::int64_t scratch = 0, own_scratch = 0;
    for (ScheduledStep& step : result.steps) {
        step.scratch_offset = offset;
        scratch = std::max(scratch, step.scratch_bytes);
        if (!std::holds_alternative<strategy::LibraryGemm>(step.strategy))
            own_scratch = std::max(own_scratch, step.scratch_bytes);
    }
    result.workspace_bytes = saturating_add(offset, aligned(scratch));
    result.own_workspace_bytes = own_scratch == 0 ? offset : saturating_add(offset, aligned(own_scratch));
    return result;
}

std::vector<KernelSignature> kernels_of(const Schedule& schedule) {
    std::vector<KernelSignature> kernels;
    for (const ScheduledStep& step : schedule.steps)
        if (const auto* gpu = std::get_if<strategy::Kernels>(&step.strategy))
            for (const auto* launches : {&gpu->launches, &gpu->unaligned_launches})
                for (const KernelLaunch& launch : *launches)
                    if (std::find(kernels.begin(), kernels.end(), launch.signature) == kernels.end())
                        kernels.push_back(launch.signature);
    return kernels;
}

std::vector<KernelSignature> possible_kernels(const Plan& plan, bool any_extents) {
    std::vector<KernelSignature> kernels;
    const auto add = [&](const std::vector<KernelSignature>& more) {
        for (const KernelSignature& k : more)
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    };
    if (!any_extents) {
        for (const int multiprocessors : {1, 1 << 20})
            add(kernels_of(schedule(plan, Target::gpu(multiprocessors))));
        return kernels;
    }
    for (const PlanStep& step : plan.steps) add(detail::possible_gpu_kernels(plan, step.step));
    return kernels;
}

}  // namespace einc
