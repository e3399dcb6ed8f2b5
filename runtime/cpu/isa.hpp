// The copy and reduce kernels are compiled twice: for the x86-64 baseline (SSE2), and for AVX2 + FMA in
// a namespace of its own (copy_avx2.cpp, reduce_avx2.cpp). dispatch.cpp picks one at run time, once, by
// what the CPU supports - so the binary runs everywhere and uses wide vectors where they exist.
//
// Only the leaf loops are compiled for AVX2 (EINC_KERNEL: a target attribute, and `flatten` to inline
// what they call): the translation unit itself is not, so the inline and template functions it shares
// with the baseline one are compiled for the baseline in both, and the linker cannot hand an AVX2 copy
// of one to a CPU without AVX2.
#pragma once

#ifndef EINC_CPU_ISA
#define EINC_CPU_ISA baseline
#endif

#if defined(EINC_CPU_AVX2)
#define EINC_KERNEL __attribute__((target("avx2,fma"), flatten))
#else
#define EINC_KERNEL
#endif

#include "runtime/cpu/kernels.hpp"

namespace einc::cpu {

// One set of kernels, for one instruction set (kernels.hpp says what each does).
#define EINC_DECLARE_KERNELS(isa)                                                                            \
    namespace isa {                                                                                          \
    void move(const strategy::Move& move, const Data& dst, const Data& src);                                 \
    void transpose(const strategy::Transpose& transpose, const Data& dst, const Data& src);                  \
    void convert_elements(const strategy::Convert& convert, DType accumulator, const Epilogue& epilogue,     \
                          const Data& dst, const Data& src);                                                 \
    void reduce(const strategy::ReduceRows& reduce, DType accumulator, const Data& dst, const Data& src);    \
    void reduce(const strategy::ReduceWindows& reduce, DType accumulator, const Data& dst, const Data& src); \
    void reduce(const strategy::ReduceAccumulate& reduce, DType accumulator, const Epilogue& epilogue,       \
                const Data& dst, const Data& src, std::byte* scratch);                                       \
    void contract(const strategy::ContractElementwise& contract, DType accumulator, const Data& dst,         \
                  const Data& src, const Data& src1);                                                        \
    void contract(const strategy::ContractRows& contract, DType accumulator, const Data& dst,                \
                  const Data& src, const Data& src1);                                                        \
    void contract(const strategy::ContractAccumulate& contract, DType accumulator, const Epilogue& epilogue, \
                  const Data& dst, const Data& src, const Data& src1, std::byte* scratch);                   \
    }
EINC_DECLARE_KERNELS(baseline)
EINC_DECLARE_KERNELS(avx2)
#undef EINC_DECLARE_KERNELS

// The reductions compiled in full: with AVX2 kernels and leaf loops of fixed sizes (fold.hpp), those of
// floating-point inputs. Integer and boolean ones (and any/all) run the baseline's general loops: they
// fold exactly, so the grouping does not change their values, and compiling every variant of them twice
// cost minutes of every build, for calls that are rarely hot and that SSE2 still vectorises.
constexpr bool tuned_reduction(DType input, Reduction op) {
    const bool floating =
        input == DType::f64 || input == DType::f32 || input == DType::f16 || input == DType::bf16;
    const Combine combine = info_of(op).combine;
    return floating && combine != Combine::logical_or && combine != Combine::logical_and;
}

// The instruction set dispatch() chose: "avx2" or "baseline" (EINC_CPU_ISA=baseline forces it).
const char* kernel_isa();
// The width of the vector registers its transposes use: 32 bytes (AVX2), 16 (SSE2), 0 (none).
int kernel_vector_bytes();

}  // namespace einc::cpu
