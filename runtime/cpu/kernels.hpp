// The CPU kernels, one per plan step kind. Each takes its accesses resolved to memory and runs the
// step's loop nest; steps were canonicalized by the planner (few, large modes, destination-major).
#pragma once

#include <cstddef>
#include <span>

#include "compiler/plan.hpp"

namespace einc::cpu {

// An access resolved to memory: the element of index i is at base + layout(i) * size_of(dtype).
struct Strided {
    std::byte* base = nullptr;
    DType dtype = DType::f32;
    Layout layout;
};

// dst[i] = src[i]; converts when the dtypes differ (as numpy's astype: round to nearest, wrap integers).
void copy(const Strided& src, const Strided& dst);

// dst[i] = op over the source elements that map to i (modes with dst stride 0 are reduced).
void reduce(Reduction op, const Strided& src, const Strided& dst);

// dst[i] = sum over the modes with dst stride 0 of the product of srcs[k][i].
void contract(std::span<const Strided> srcs, const Strided& dst);

// The GEMM of the plan, on matrices at a, b, c (each already offset by its GemmMatrix::offset).
void gemm(const Gemm& gemm, const std::byte* a, const std::byte* b, std::byte* c, DType in, DType out);

}  // namespace einc::cpu
