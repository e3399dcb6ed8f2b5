// Chooses, once, the kernels for the CPU this runs on (see isa.hpp).
#include <cstdlib>
#include <cstring>

#include "einc_build_info.hpp"
#include "runtime/cpu/isa.hpp"

namespace einc::cpu {
namespace {

bool use_avx2() {
#if EINC_HAS_AVX2_KERNELS
    static const bool chosen = [] {
        const char* forced = std::getenv("EINC_CPU_ISA");
        if (forced && std::strcmp(forced, "baseline") == 0) return false;
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return chosen;
#else
    return false;
#endif
}

}  // namespace

const char* kernel_isa() {
    return use_avx2() ? "avx2" : "baseline";
}

int kernel_vector_bytes() {
#if defined(__SSE2__)
    return use_avx2() ? 32 : 16;
#else
    return 0;
#endif
}

void copy(const ScheduledStep& step, const Data& dst, const Data& src) {
#if EINC_HAS_AVX2_KERNELS
    if (use_avx2()) return avx2::copy(step, dst, src);
#endif
    baseline::copy(step, dst, src);
}

void reduce(const ScheduledStep& step, Reduction op, const Data& dst, const Data& src, std::byte* scratch) {
#if EINC_HAS_AVX2_KERNELS
    if (use_avx2() && tuned_reduction(src.dtype, op)) return avx2::reduce(step, op, dst, src, scratch);
#endif
    baseline::reduce(step, op, dst, src, scratch);
}

void contract(const ScheduledStep& step, const Data& dst, const Data& src, const Data& src1,
              std::byte* scratch) {
#if EINC_HAS_AVX2_KERNELS
    if (use_avx2()) return avx2::contract(step, dst, src, src1, scratch);
#endif
    baseline::contract(step, dst, src, src1, scratch);
}

}  // namespace einc::cpu
