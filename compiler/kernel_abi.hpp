// The contract between the GPU schedule (which chooses kernels and their launches), codegen (which
// writes their source) and the CUDA backend (which loads and launches them): what identifies a kernel,
// and what every kernel receives at launch. Plain data, no CUDA.
//
// A kernel's source depends only on its signature - what it does, the dtypes, the ranks, the index width -
// never on extents or strides: those arrive at launch in KernelParams. One compiled kernel serves every
// shape of its family (the JIT compiles each family once; einc aot compiles them ahead of time).
//
//   elementwise     one thread per destination element; loops over reduced modes, if any
//                   (elementwise products, small reductions)
//   permute         a copy, element by element: 4 elements a thread, indices split by multiply-shift
//                   division; every copy that converts, scales or broadcasts, and those no faster kind takes
//   vector_copy     16-byte loads and stores along a mode contiguous on both sides
//   short_side      a transpose with a side of at most 16 elements, in registers: each thread loads S vectors
//                   of C elements along the long side and stores C rows of S as contiguous 16-byte vectors
//                   (or the mirror: the short side contiguous in the source)
//   tiles           shared-memory tiles between a source-contiguous run and a destination-contiguous
//                   run, each of one mode (a 2-D transpose) or of several merged (cuTT's packed tiles);
//                   256 threads move 16 words each (8 for 8-byte elements); full tiles unchecked, one
//                   barrier a tile
//   reduce_rows     a warp per output, along a source-contiguous reduced mode; rows of 1- and 2-byte
//                   elements that are dense read as 16-byte vectors, whatever their alignment (the
//                   elements before the first 16-byte boundary and after the last one by one)
//   reduce_columns  a thread per output, along a source-contiguous kept mode; with 1- and 2-byte elements
//                   whose terms are aligned 16-byte vectors of V = 16 / size outputs, V outputs a thread,
//                   a vector a term (element-wise loads left the H200's HBM at 0.7 of a read: a warp's
//                   load was 64 bytes; 16-byte vectors measured 0.9 - kernel-designs.md)
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
//   reduce_packed_rows rows of 2, 4 or 8 bytes packed back to back (the source one dense run): a lane
//                   loads P = 16 / row bytes rows as one 16-byte vector and folds each, its warp stores
//                   them through shared memory as 32 consecutive rows an instruction; where the source
//                   is not 16-byte aligned, and for the rows after the last whole vector, a row a thread
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "call.hpp"
#include "dtype.hpp"
#include "epilogue.hpp"

namespace einc {

enum class KernelKind : std::uint8_t {
    elementwise,
    permute,
    vector_copy,
    short_side,
    tiles,
    reduce_rows,
    reduce_columns,
    finalize,
    route,
    reduce_one_pass,
    reduce_short_rows,
    reduce_packed_rows
};
std::string_view name_of(KernelKind kind);

// The launch geometry of the generated kernels, decided here once: the schedule sizes its grids by it,
// codegen writes it into the kernels' source, and the executor checks buffers against it.
inline constexpr int kernel_block_threads = 256;  // threads of a block (every kind)
inline constexpr int kernel_warp = 32;            // reduce_rows: a warp per output
inline constexpr int kernel_vector_bytes = 16;    // vector_copy: 16-byte words, on buffers aligned to them

// permute: each thread moves this many elements of a block's 1024, a block's width apart (their loads
// issued together).
inline constexpr int permute_per_thread = 4;

// short_side: the longest short side S; each thread moves C consecutive positions of the long side, S*C
// elements. C is a power of two with C*size >= 4 bytes and C*size <= 16 (one load or store a short row),
// S*C*size a multiple of 16 (the contiguous side moves as 16-byte vectors) and, where those allow, at
// least 64 bytes (bytes in flight): short_side_vector(). Smaller C that keep the first three rules serve
// long sides the preferred one does not divide.
inline constexpr int short_side_max = 16;
// short_side with the short rows in the destination stages each warp's blocks in shared memory, so that
// a store instruction writes whole 32-byte sectors: a thread's own block, stored by itself, is 16-byte
// vectors a block apart - half sectors, which a lent H200 measured at 0.55 of a copy. The threads of a
// warp put their blocks into its stage (all 32 at once where blocks are up to 8 vectors, else 16 at a
// time: 48 KB of shared memory), each at a stride of an odd number of vectors (no bank conflicts on the
// way in); then lane l of the warp's j-th store takes the (32 j + l)-th vector of the staged blocks.
constexpr int short_side_stage_threads(int block_vectors) {
    return block_vectors <= 8 ? 32 : 16;
}
constexpr int short_side_stage_stride(int block_vectors) {
    return block_vectors | 1;
}
constexpr int short_side_stage_bytes(int block_vectors) {
    return kernel_block_threads / 32 * short_side_stage_threads(block_vectors) *
           short_side_stage_stride(block_vectors) * kernel_vector_bytes;
}
constexpr bool short_side_vector_valid(int short_extent, int vector, int element_bytes) {
    return vector * element_bytes >= 4 && vector * element_bytes <= kernel_vector_bytes &&
           short_extent * vector * element_bytes % kernel_vector_bytes == 0;
}
constexpr int short_side_vector(int short_extent, int element_bytes) {
    int c = element_bytes >= 4 ? 1 : 4 / element_bytes;
    while (
        (!short_side_vector_valid(short_extent, c, element_bytes) || short_extent * c * element_bytes < 64) &&
        2 * c * element_bytes <= kernel_vector_bytes)
        c *= 2;
    return c;
}

// tiles: a tile is `a` elements of the source-contiguous run by `b` of the destination-contiguous one,
// double-buffered in shared memory as b rows of a + tile_pad() elements.
// Elements of 1 and 2 bytes move as 4-byte words of `vector` = 4/size elements along each run (loads
// along a, stores along b) where the runs and strides allow, else one by one. A warp moves 32 consecutive
// words of a row; each thread moves 16 words a tile (8 for 8-byte elements and 4 for 16-byte ones - c128 -,
// which would otherwise overflow 48 KB of shared memory).
struct TileShape {
    int a = 0, b = 0;
};
constexpr TileShape tile_shape(int element_bytes, int vector) {
    if (element_bytes == 16) return {32, 32};
    if (element_bytes == 8) return {64, 32};
    if (vector == 4) return {128, 128};
    if (vector == 2) return {128, 64};
    return {64, 64};
}
// The pad of a shared row, so that the 32 lanes reading a column (a word of `vector` elements from as many
// rows each) hit 32 banks: one element where rows are read a word at a time, else as many as make a row an
// odd number of 4-byte words.
constexpr int tile_pad(int element_bytes, int vector) {
    return vector == 1 && element_bytes < 4 ? 4 / element_bytes : 1;
}
// Its shared memory: two such buffers, so that one barrier a tile suffices (about 33 KB for every size).
constexpr int tiles_shared_bytes(int element_bytes, int vector) {
    const TileShape t = tile_shape(element_bytes, vector);
    return 2 * t.b * (t.a + tile_pad(element_bytes, vector)) * element_bytes;
}
inline constexpr int tile_warps = kernel_block_threads / kernel_warp;
// The most blocks a tiles launch has per multiprocessor: the kernel walks its tiles in a grid-stride loop,
// so each block finds its rows' offsets once for many tiles (4 blocks of 256 threads are resident at 64
// registers a thread).
inline constexpr int tiles_blocks_per_multiprocessor = 8;

// reduce_one_pass: blocks of 512 threads, at most 2 per multiprocessor (its __launch_bounds__, which caps
// registers at 64), each thread with 4 independent 16-byte loads in flight (64 KB per multiprocessor), and
// at least 16 vectors a thread, so that a block's fold and the last block's are small beside its loads.
inline constexpr int one_pass_block_threads = 512;
inline constexpr int one_pass_blocks_per_multiprocessor = 2;
inline constexpr int one_pass_batch = 4;
inline constexpr int one_pass_min_vectors = 16;
inline constexpr int one_pass_max_columns = 32;  // K, the kept outputs: a warp's lanes hold them
// Its scratch (with more than one block): the arrival counter, a 64-bit word that the executor zeroes
// before each launch (ScheduledStep::zeroed_scratch_bytes; a memset beside a 66 us launch costs ~0.3 us on
// the H200), then a partial result per block and column. Each block adds one to the counter; the one that
// reads blocks - 1 is the last and folds the partials (codegen.cpp, one_pass()).
// (A counter kept between runs instead, tagged so that a block could tell garbage from rest, recounted by
// compare-and-swap whenever the workspace was new: every run without a caller's workspace, since the
// stream-ordered pool unmaps freed memory at each synchronisation - 142 us against 66 us, H200.)
inline constexpr std::int64_t one_pass_counter_bytes = 16;  // the partials after it stay 16-byte aligned

// reduce_short_rows: blocks of 256 threads; rows of at most a warp of 16-byte chunks, so that a lane loads
// at most one chunk of a row; 4 groups of rows a warp loads before folding (64 bytes a lane in flight).
inline constexpr int short_rows_block_threads = 256;
inline constexpr int short_rows_batch = 4;
inline constexpr int short_rows_max_bytes = kernel_warp * kernel_vector_bytes;
// ... and of at least one 16-byte chunk: shorter rows, loaded element by element, ran at 0.6x the
// element-wise kernel on the H200 (`sum a b -> a` bf16 67108864x2: 333 us against 199 us, 9024dc6).
inline constexpr int short_rows_min_bytes = kernel_vector_bytes;

// reduce_packed_rows: rows of fewer bytes than a vector that divide it, packed back to back - P = 16 /
// row bytes rows a 16-byte vector (the element-wise kernel read them a row a thread, 4 bytes a lane for
// bf16 pairs: 0.28 of the H200's HBM, 9024dc6). A thread's loop over vectors is unrolled, 4 in flight.
constexpr bool packed_rows(std::int64_t row_bytes) {
    return row_bytes == 2 || row_bytes == 4 || row_bytes == 8;
}
// Each warp loads packed_rows_batch vectors a lane before folding any; the 32 P results of each vector
// batch go through the warp's stage in shared memory, lane l's at l * (P | 1) (an odd stride: few bank
// conflicts), so that each store instruction writes 32 consecutive rows, not every P-th.
inline constexpr int packed_rows_batch = 4;
constexpr int packed_rows_stage_stride(int rows_a_vector) {
    return rows_a_vector | 1;
}
constexpr int packed_rows_shared_bytes(int rows_a_vector, int accumulator_bytes) {
    return kernel_block_threads * packed_rows_stage_stride(rows_a_vector) * accumulator_bytes;
}

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
    // The geometry of the copy kinds that compile it in (0 for the others):
    //   tiles       vector: elements per word of a global access (1, or 4/size: packed); runs: the modes of
    //               the source-contiguous run and of the destination-contiguous one
    //   short_side  vector: C; short_extent: S; short_source: the short side is the source-contiguous one
    //               (else the destination's)
    // and of the reductions that read 16-byte vectors (reduce_rows, reduce_columns): vector, V = 16 / size;
    // reduce_packed_rows: vector, P = the rows a 16-byte vector holds.
    int vector = 0;
    int runs[2] = {0, 0};
    int short_extent = 0;
    bool short_source = false;
    friend bool operator==(const KernelSignature&, const KernelSignature&) = default;

    // A readable, unique C identifier: "einc_reduce_rows_sum_f32_to_f32_k1_r1_i32", with an epilogue
    // "..._i32_alpha0p5_betam2" (alpha 0.5, beta -2), with a copy geometry "..._i32_w2_a1b2" (tiles) or
    // "..._i32_s3dst_c4" (short_side), with vectors "..._i32_v8" (reduce_rows, reduce_columns), rows a
    // vector "..._i32_p4" (reduce_packed_rows).
    std::string name() const;
};

// Prints name(): what a user's log shows of a kernel (`std::cout << signature`).
std::ostream& operator<<(std::ostream& out, const KernelSignature& signature);

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
    // tiles: the runs of a tile, 0 the source-contiguous one and 1 the destination-contiguous one: their
    // modes innermost first, the last of each possibly a chunk of a mode split between tiles, with the other
    // side's strides (run 0's in the destination, run 1's in the source); each run's elements in a tile,
    // and its length over its split mode (a tile at the end holds the rest). The kept modes are the tiles':
    // the batch, then the chunks of run 0's split mode, then run 1's.
    // short_side: run 0 is the short mode, with its stride on the side where it is not contiguous; the
    // kept modes are the batch, then the long side's chunks of C positions.
    std::int64_t run_extent[2][max_kernel_rank] = {};
    std::int64_t run_stride[2][max_kernel_rank] = {};
    std::int64_t run_tile[2] = {};
    std::int64_t run_length[2] = {};
    // The copy kinds with 32-bit indices divide by kept_extent[k] and run_extent[r][k] as
    // (mulhi(n, magic) + n) >> shift (division_magic()).
    std::uint32_t kept_magic[max_kernel_rank] = {};
    std::uint32_t kept_shift[max_kernel_rank] = {};
    std::uint32_t run_magic[2][max_kernel_rank] = {};
    std::uint32_t run_shift[2][max_kernel_rank] = {};
};

// The multiply-shift pair that divides 32-bit unsigned numbers by `divisor` (1 <= divisor < 2^31):
// n / divisor == (((n * magic) >> 32) + n) >> shift for every n < 2^32, the product in 64 bits
// (Granlund and Montgomery; PyTorch's IntegerDivider).
struct DivisionMagic {
    std::uint32_t magic = 0, shift = 0;
};
DivisionMagic division_magic(std::int64_t divisor);

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

// The alignment in bytes a kernel needs of the buffer `argument` points to, beyond its elements' own (1:
// none): what its vector accesses assume. The schedule keeps the strides and offsets to multiples of it;
// the executor checks the pointers, and runs a step's unaligned launches where one falls short.
int kernel_alignment(const KernelSignature& signature, KernelArgument argument);

}  // namespace einc
