// The CPU kernels, one per strategy of the schedule (compiler/schedule.hpp). Each runs one scheduled step
// on memory: the loop nest in traversal order, the split between threads, the accumulator and the scratch
// are the schedule's; a kernel only carries them out.
#pragma once

#include <cstddef>

#include "compiler/schedule.hpp"
#include "runtime/run_memory.hpp"

namespace einc::cpu {

// Where an access's elements are: the element of index i is at base + layout(i) * size_of(dtype), the
// layout being the strategy's nest.
using Data = Operand;

// dst[i] = src[i], moved by element size (bit-exact, any dtype).
void move(const strategy::Move& move, const Data& dst, const Data& src);
void transpose(const strategy::Transpose& transpose, const Data& dst, const Data& src);
// dst[i] = src[i] converted (round to nearest, wrap integers), then through the epilogue (in the
// accumulator) where it is not the identity.
void convert_elements(const strategy::Convert& convert, DType accumulator, const Epilogue& epilogue,
                      const Data& dst, const Data& src);

// dst[i] = op over the source elements that map to i. @pre scratch holds the step's scratch_bytes
void reduce(const strategy::ReduceRows& reduce, DType accumulator, const Data& dst, const Data& src);
void reduce(const strategy::ReduceWindows& reduce, DType accumulator, const Data& dst, const Data& src);
void reduce(const strategy::ReduceAccumulate& reduce, DType accumulator, const Epilogue& epilogue,
            const Data& dst, const Data& src, std::byte* scratch);

// dst[i] = sum over the modes with dst stride 0 of src[i] * src1[i]. @pre scratch holds the step's
// scratch_bytes
void contract(const strategy::ContractElementwise& contract, DType accumulator, const Data& dst,
              const Data& src, const Data& src1);
void contract(const strategy::ContractRows& contract, DType accumulator, const Data& dst, const Data& src,
              const Data& src1);
void contract(const strategy::ContractAccumulate& contract, DType accumulator, const Epilogue& epilogue,
              const Data& dst, const Data& src, const Data& src1, std::byte* scratch);

// dst = the gradient of reducing src by route.op (max, min, prod) given grad, the reduction's output
// gradient; the nest's first route.kept modes index the groups (compiler/plan.hpp, Route).
void route(const strategy::Route& route, DType accumulator, const Epilogue& epilogue, const Data& dst,
           const Data& src, const Data& grad);

// The strategy's GEMM on matrices at a, b, c (each already offset by its GemmMatrix::offset), of `dtype`.
// @pre scratch holds the step's scratch_bytes
void gemm(const strategy::LibraryGemm& gemm, DType dtype, const std::byte* a, const std::byte* b,
          std::byte* c);
void gemm(const strategy::LibraryGemv& gemv, DType dtype, const std::byte* a, const std::byte* b,
          std::byte* c);
void gemm(const strategy::PackedGemm& packed, DType dtype, DType accumulator, const std::byte* a,
          const std::byte* b, std::byte* c, std::byte* scratch);

}  // namespace einc::cpu
