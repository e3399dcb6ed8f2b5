// The reduce kernels again, their leaf loops compiled for AVX2 + FMA (see isa.hpp): those of floating-point
// inputs (tuned_reduction).
#define EINC_CPU_ISA avx2
#define EINC_CPU_AVX2 1
#include "runtime/cpu/reduce.cpp"
