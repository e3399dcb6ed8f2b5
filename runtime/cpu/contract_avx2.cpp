// The contraction kernels again, their leaf loops compiled for AVX2 + FMA (see isa.hpp).
#define EINC_CPU_ISA avx2
#define EINC_CPU_AVX2 1
#include "runtime/cpu/contract.cpp"
