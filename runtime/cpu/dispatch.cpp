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

// Each kernel of the instruction set chosen; `tuned`: whether the AVX2 set has it compiled.
#if EINC_HAS_AVX2_KERNELS
#define EINC_DISPATCH(kernel, tuned, ...)                                                                    \
    if (use_avx2() && (tuned)) return avx2::kernel(__VA_ARGS__);                                             \
    baseline::kernel(__VA_ARGS__)
#else
#define EINC_DISPATCH(kernel, tuned, ...) baseline::kernel(__VA_ARGS__)
#endif

void move(const strategy::Move& move, const Data& dst, const Data& src) {
    EINC_DISPATCH(move, true, move, dst, src);
}
void transpose(const strategy::Transpose& transpose, const Data& dst, const Data& src) {
    EINC_DISPATCH(transpose, true, transpose, dst, src);
}
void convert_elements(const strategy::Convert& convert, DType accumulator, const Epilogue& epilogue,
                      const Data& dst, const Data& src) {
    EINC_DISPATCH(convert_elements, true, convert, accumulator, epilogue, dst, src);
}

void reduce(const strategy::ReduceRows& reduce, DType accumulator, const Data& dst, const Data& src) {
    EINC_DISPATCH(reduce, tuned_reduction(src.dtype, reduce.op), reduce, accumulator, dst, src);
}
void reduce(const strategy::ReduceWindows& reduce, DType accumulator, const Data& dst, const Data& src) {
    EINC_DISPATCH(reduce, tuned_reduction(src.dtype, reduce.op), reduce, accumulator, dst, src);
}
void reduce(const strategy::ReduceAccumulate& reduce, DType accumulator, const Epilogue& epilogue,
            const Data& dst, const Data& src, std::byte* scratch) {
    EINC_DISPATCH(reduce, tuned_reduction(src.dtype, reduce.op), reduce, accumulator, epilogue, dst, src,
                  scratch);
}

void contract(const strategy::ContractElementwise& contract, DType accumulator, const Data& dst,
              const Data& src, const Data& src1) {
    EINC_DISPATCH(contract, true, contract, accumulator, dst, src, src1);
}
void contract(const strategy::ContractRows& contract, DType accumulator, const Data& dst, const Data& src,
              const Data& src1) {
    EINC_DISPATCH(contract, true, contract, accumulator, dst, src, src1);
}
void contract(const strategy::ContractAccumulate& contract, DType accumulator, const Epilogue& epilogue,
              const Data& dst, const Data& src, const Data& src1, std::byte* scratch) {
    EINC_DISPATCH(contract, true, contract, accumulator, epilogue, dst, src, src1, scratch);
}

#undef EINC_DISPATCH

}  // namespace einc::cpu
