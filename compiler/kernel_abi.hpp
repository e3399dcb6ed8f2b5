// The contract between the GPU schedule (which chooses kernels and their launches), codegen (which
// writes their source) and the CUDA backend (which loads and launches them): what identifies a kernel,
// and what every kernel receives at launch. Plain data, no CUDA.
//
// A kernel's source depends only on its signature - what it does, the dtypes, the ranks, the index width -
// never on extents or strides: those arrive at launch in KernelParams. One compiled kernel serves every
// shape of its family (the JIT compiles each family once; einc aot compiles them ahead of time).
//
//   elementwise     one thread per destination element; loops over reduced modes, if any
//                   (copies with broadcasts or conversions, elementwise products, small reductions)
//   vector_copy     16-byte loads and stores along a mode contiguous on both sides
//   transpose       32x32 shared-memory tiles (padded against bank conflicts) between a source-contiguous
//                   and a destination-contiguous mode
//   reduce_rows     a warp per output, along a source-contiguous reduced mode
//   reduce_columns  a thread per output, along a source-contiguous kept mode
//   finalize        folds the partial results of a reduction split across blocks (deterministic)
//   route           the gradient of a max, min or prod reduction (plan.hpp, Route): a thread per group of
//                   terms, which walks them twice - finds the extremum and its ties (or the product of the
//                   non-zero terms and the zeros), then writes every term's share of the group's gradient
//   reduce_one_pass a source that is one dense run whose innermost K <= 32 elements are the kept ones
//                   (K = 1: a full reduction), read once as 16-byte vectors by a grid of few blocks; each
//                   block folds its columns and the last block to finish folds every block's, in block
//                   order: one launch, deterministic for a fixed grid (kernel-designs.md, design A)
//   reduce_short_rows each output's terms one contiguous row of at most short_rows_max_bytes: a few lanes
//                   per row, 16-byte loads where the rows are aligned, rows gathered into consecutive
//                   lanes for coalesced stores (kernel-designs.md, design B)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "call.hpp"
#include "dtype.hpp"
#include "epilogue.hpp"

namespace einc {

enum class KernelKind : std::uint8_t {
    elementwise,
    vector_copy,
    transpose,
    reduce_rows,
    reduce_columns,
    finalize,
    route,
    reduce_one_pass,
    reduce_short_rows
};
std::string_view name_of(KernelKind kind);

// The launch geometry of the generated kernels, decided here once: the schedule sizes its grids by it,
// codegen writes it into the kernels' source, and the executor checks buffers against it.
inline constexpr int kernel_block_threads = 256;  // threads of a block (elementwise, reductions, route)
inline constexpr int kernel_warp = 32;            // reduce_rows: a warp per output
inline constexpr int kernel_vector_bytes = 16;    // vector_copy: 16-byte words, on buffers aligned to them
inline constexpr int transpose_tile = 32;         // transpose: square tiles of 32 x 32 elements,
inline constexpr int transpose_block_rows = 8;    // moved by blocks of 32 x 8 threads

// reduce_one_pass: blocks of 512 threads, at most 2 per multiprocessor (its __launch_bounds__, which caps
// registers at 64), each thread with 4 independent 16-byte loads in flight (64 KB per multiprocessor), and
// at least 16 vectors a thread, so that a block's fold and the last block's are small beside its loads.
inline constexpr int one_pass_block_threads = 512;
inline constexpr int one_pass_blocks_per_multiprocessor = 2;
inline constexpr int one_pass_batch = 4;
inline constexpr int one_pass_min_vectors = 16;
inline constexpr int one_pass_max_columns = 32;  // K, the kept outputs: a warp's lanes hold them
// Its scratch (with more than one block): the arrival counter, then a partial result per block and column.
// The counter is one 64-bit word: one_pass_counter_tag in its upper 48 bits and the blocks arrived so far
// below, so that a word without the tag (a new workspace's garbage, another step's scratch) reads as no
// block arrived; the last block leaves the tag and 0 (kernel-designs.md; codegen.cpp, one_pass()).
inline constexpr std::int64_t one_pass_counter_bytes = 16;  // the partials after it stay 16-byte aligned
inline constexpr std::uint64_t one_pass_counter_tag = 0x65696E635244;  // "eincRD"
inline constexpr int one_pass_max_blocks = 0xFFFF;                     // what the counter's 16 bits count

// reduce_short_rows: blocks of 256 threads; rows of at most a warp of 16-byte chunks, so that a lane loads
// at most one chunk of a row; 4 groups of rows a warp loads before folding (64 bytes a lane in flight).
inline constexpr int short_rows_block_threads = 256;
inline constexpr int short_rows_batch = 4;
inline constexpr int short_rows_max_bytes = kernel_warp * kernel_vector_bytes;

inline constexpr int max_kernel_rank = 12;  // modes of kept or of reduced axes, after canonicalization
inline constexpr int max_kernel_sources =
    2;  // an elementwise product reads two; route reads x and the gradient

// Everything a kernel's source text depends on.
struct KernelSignature {
    KernelKind kind = KernelKind::elementwise;
    Reduction op =
        Reduction::none;         // none: a copy; sum over products for a contraction; route: max, min, prod
    std::vector<DType> sources;  // dtypes of the sources (empty for finalize; route: x, then the gradient)
    DType destination = DType::f32;
    DType accumulator = DType::f32;  // what reductions fold in
    int kept_rank = 0, reduced_rank = 0;
    bool wide_index = false;  // 64-bit index arithmetic (some extent or offset needs it)
    bool partials = false;    // reduce kinds: write per-chunk partial results
    // out = alpha * value + beta * out, baked into the source as constants (so the name, the caches' key,
    // and `einc aot`'s corpus carry it); only kernels that store into an output have one (not partials).
    Epilogue epilogue;
    friend bool operator==(const KernelSignature&, const KernelSignature&) = default;

    // A readable, unique C identifier: "einc_reduce_rows_sum_f32_to_f32_k1_r1_i32", with an epilogue
    // "..._i32_alpha0p5_betam2" (alpha 0.5, beta -2).
    std::string name() const;
};

// Launch-time arguments, passed by value to every kernel; mirrors `einc_params` in kernel_source().
// Strides in elements; access 0 is the destination, 1.. the sources (partials are addressed by index).
struct KernelParams {
    std::int64_t kept_extent[max_kernel_rank] = {};
    std::int64_t reduced_extent[max_kernel_rank] = {};
    std::int64_t kept_stride[1 + max_kernel_sources][max_kernel_rank] = {};
    std::int64_t reduced_stride[1 + max_kernel_sources][max_kernel_rank] = {};
    std::int64_t kept_count = 1;     // product of kept extents (outputs)
    std::int64_t reduced_count = 1;  // product of reduced extents (terms per output)
    std::int64_t split = 1;          // reductions: chunks of the reduced range, one partial each
    std::int64_t chunk = 1;          // terms per chunk
    std::int64_t batch_count = 1;    // transpose: tiles' batch (the kept modes but the two it tiles)
};

struct Dim3 {
    std::uint32_t x = 1, y = 1, z = 1;
    friend bool operator==(const Dim3&, const Dim3&) = default;
};

// Which buffer a kernel pointer argument is: the step's destination, one of its sources, or the
// step's scratch memory that holds partial results.
enum class KernelArgument : std::uint8_t { destination, source0, source1, scratch };

struct KernelLaunch {
    KernelSignature signature;
    Dim3 grid, block;
    KernelParams params;
    std::vector<KernelArgument> arguments;  // after `params`, in order
};

}  // namespace einc
