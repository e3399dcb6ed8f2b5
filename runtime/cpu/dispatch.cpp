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

const char* kernel_isa() { return use_avx2() ? "avx2" : "baseline"; }

void copy(const Strided& src, const Strided& dst) {
#if EINC_HAS_AVX2_KERNELS
    if (use_avx2()) return avx2::copy(src, dst);
#endif
    baseline::copy(src, dst);
}

void reduce(Reduction op, const Strided& src, const Strided& dst) {
#if EINC_HAS_AVX2_KERNELS
    if (use_avx2()) return avx2::reduce(op, src, dst);
#endif
    baseline::reduce(op, src, dst);
}

void contract(std::span<const Strided> srcs, const Strided& dst) {
#if EINC_HAS_AVX2_KERNELS
    if (use_avx2()) return avx2::contract(srcs, dst);
#endif
    baseline::contract(srcs, dst);
}

}  // namespace einc::cpu
