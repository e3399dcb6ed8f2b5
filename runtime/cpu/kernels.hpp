// The CPU kernels, one per kind of plan step. Each runs one scheduled step (compiler/schedule.hpp) on
// memory: the strategy, the loop nest in traversal order, the accumulator, the split between threads and
// the scratch are the schedule's; a kernel only carries them out.
#pragma once

#include <cstddef>

#include "compiler/schedule.hpp"

namespace einc::cpu {

// Where an access's elements are: the element of index i is at base + layout(i) * size_of(dtype), the
// layout being the step's nest.
struct Data {
    std::byte* base = nullptr;
    DType dtype = DType::f32;
};

// Strategy move, convert or transpose: dst[i] = src[i], converted (round to nearest, wrap integers) where
// the dtypes differ.
void copy(const ScheduledStep& step, const Data& dst, const Data& src);

// Strategy reduce_rows, reduce_windows or reduce_accumulate: dst[i] = op over the source elements that
// map to i. @pre scratch holds step.scratch_bytes
void reduce(const ScheduledStep& step, Reduction op, const Data& dst, const Data& src, std::byte* scratch);

// Strategy contract_accumulate: dst[i] = sum over the modes with dst stride 0 of src[i] * src1[i].
// @pre scratch holds step.scratch_bytes
void contract(const ScheduledStep& step, const Data& dst, const Data& src, const Data& src1,
              std::byte* scratch);

// Strategy route: dst = the gradient of reducing src by `op` (max, min, prod) given grad, the reduction's
// output gradient; the nest's first `kept` modes index the groups (compiler/plan.hpp, Route).
void route(const ScheduledStep& step, Reduction op, std::uint32_t kept, const Data& dst, const Data& src,
           const Data& grad);

// Strategy library_gemm or packed_gemm, on matrices at a, b, c (each already offset by its
// GemmMatrix::offset). @pre scratch holds step.scratch_bytes
void gemm(const ScheduledStep& step, const Gemm& gemm, DType dtype, const std::byte* a, const std::byte* b,
          std::byte* c, std::byte* scratch);

}  // namespace einc::cpu
