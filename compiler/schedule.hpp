// Pass 4: schedule. For a plan and a target - the CPU, or a kind of GPU - decides once, when a program is
// bound, how every step runs, and records all of it, so that the executors (runtime/ on the CPU, cuda/ on
// a GPU) only interpret:
//   the strategy, or on a GPU the kernels and their launches; the loop nests as Layouts; the dtype values
//   are folded in (one policy: accumulator_dtype); whether a GEMM goes to BLAS / cuBLAS; how the work is
//   split across threads or blocks; and every scratch buffer, so that the workspace of a run is known
//   before it runs.
// `einc explain --print schedule` prints it, `einc emit` prints its kernels, and `einc aot` asks its rules
// for every kernel they can choose (possible_kernels).
//
//   strategy             backend  what runs
//   view                 both     nothing: the output is an input's memory (pointer arithmetic)
//   move                 cpu      elements moved by size along the nest (bit-exact, any dtype)
//   convert              cpu      elements converted between dtypes along the nest
//   transpose            cpu      tiles between the source- and the destination-contiguous mode
//   reduce_rows          cpu      each output's terms are one row of the innermost block: folded in place
//   reduce_windows       cpu      few terms per output (pooling): each output folds its window of offsets
//   reduce_accumulate    cpu      the source, read in memory order, folded into an accumulator array
//   contract_elementwise cpu      products of the sources, no sum: each written straight to its place
//   contract_rows        cpu      each output's terms are one row: its products folded straight into it
//   contract_accumulate  cpu      products of the sources folded into an accumulator array
//   library_gemm         both     one strided-batched GEMM in CBLAS (CPU) or cuBLAS (GPU)
//   library_gemv         cpu      a GEMM with one row or one column: matrix-vector products (cblas_?gemv)
//   packed_gemm          cpu      each batch packed into row-major blocks of the accumulator, multiplied
//   route                cpu      a max/min/prod gradient: each group of terms walked twice (find, share out)
//   kernels              cuda     generated kernels (compiler/codegen.hpp), launched in order
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_abi.hpp"
#include "plan.hpp"

namespace einc {

enum class Backend : std::uint8_t { cpu, cuda };
std::string_view name_of(Backend backend);

// The multiprocessors a GPU schedule is made for where no GPU is named: an H100 SXM's.
inline constexpr int default_multiprocessors = 132;

// What scheduling needs to know of where a plan runs.
struct Target {
    Backend backend = Backend::cpu;
    int threads = 1;       // cpu: the threads a step may use
    int vector_bytes = 0;  // cpu: the register width of in-register transposes (32 AVX2, 16 SSE2, 0 none)
    bool blas = false;     // cpu: a CBLAS is linked, for f32 and f64 GEMMs
    int multiprocessors =
        default_multiprocessors;  // cuda: 32 blocks of 256 threads per multiprocessor keep it busy

    static Target cpu(int threads, int vector_bytes, bool blas);
    static Target gpu(int multiprocessors);
    int max_blocks() const { return multiprocessors * 32; }
    friend bool operator==(const Target&, const Target&) = default;
};

enum class Strategy : std::uint8_t {
    view,
    move,
    convert,
    transpose,
    reduce_rows,
    reduce_windows,
    reduce_accumulate,
    contract_elementwise,
    contract_rows,
    contract_accumulate,
    library_gemm,
    library_gemv,
    packed_gemm,
    route,
    kernels,
};
std::string_view name_of(Strategy strategy);

// How a CPU step shares its work between threads.
enum class Split : std::uint8_t {
    none,            // on the calling thread: the work is below the threshold, or nothing splits
    outer,           // the outermost mode of the nest: threads write disjoint outputs
    rows,            // the rows of the innermost block: threads write disjoint outputs
    tiles,           // a transpose: its tiles (a short-sided one: bands along its long side)
    partials_outer,  // the outermost mode, which is reduced: each thread folds into accumulators of its own
    partials_rows,   // the block's rows, which are reduced: likewise; the arrays are combined after
    gemms,           // a library GEMM step's GEMMs (outer x batch): each thread runs whole ones, the library
                     // on one thread for them
};
std::string_view name_of(Split split);

// How a CPU transpose moves a tile from its buffer to the destination: 8x8 (AVX2) or 4x4 (SSE2) register
// blocks of 4-byte elements, or element by element; or, when one side has 8 elements or fewer, with no
// tiles, streaming along the other side.
enum class TransposeKind : std::uint8_t { registers, tiles, short_side };
std::string_view name_of(TransposeKind kind);

// The largest tile of a CPU transpose, in bytes: its buffer, on the stack of each thread that moves tiles.
inline constexpr std::int64_t transpose_buffer_bytes = 64 << 10;
// The most modes a CPU transpose has (its kernel keeps its loop state on the stack); a copy of more is a
// move.
inline constexpr std::size_t max_transpose_rank = 12;

// The tiles of a CPU transpose (kinds registers and tiles), as HPTT cuts a permutation: the index space in
// tiles of at most transpose_buffer_bytes, each read from the source into a buffer along source-contiguous
// runs, then written out along destination-contiguous runs, so that both sides move whole cache lines
// (modes are positions in the nest; p is the source's unit-stride mode, the last the destination's).
struct TransposeTiles {
    Shape extents;                        // per mode: the tile's extent (1: the mode is walked between tiles)
    std::vector<std::size_t> read_order;  // the tile's modes but p, innermost first (source stride ascending)
    std::vector<std::size_t>
        write_order;  // the tile's modes but p and the last, innermost first (destination's)
    std::vector<std::size_t>
        tile_order;          // the modes tiles are walked along, innermost first (nearest in memory)
    std::int64_t count = 0;  // tiles in all
};

// The loop nest of a CPU step, every access over one index space in traversal order (outermost first).
//   move, convert, transpose: dst, src (the plan's canonical layouts)
//   reduce_rows:              dst, src; at least two modes, the last two the block (rows, terms of a row)
//   reduce_windows:           dst, src as planned; dst stride 0 marks the window's modes
//   reduce_accumulate:        dst, src, acc; at least two modes, the last two the block; acc's strides are
//                             in accumulator elements (0 for a reduced mode)
//   contract_elementwise:     dst, src, src1 as planned
//   contract_rows:            dst, src, src1, acc, as reduce_rows
//   contract_accumulate:      dst, src, src1, acc
//   route:                    dst, src, src1 (the output's gradient) as planned; the Route's `kept` modes
//   first (a Gemm scheduled as a contraction - dot products - has the nest of gemm_as_contraction(),
//   canonical)
struct CpuNest {
    Layout dst, src, src1, acc;
};

struct ScheduledStep {
    Strategy strategy = Strategy::view;
    DType accumulator = DType::f32;  // what values are carried in: folds, products, conversions
    std::int64_t scratch_bytes = 0;  // this step's scratch, at Schedule::scratch_offset of the workspace
    Epilogue epilogue;  // the plan step's: what the CPU kernels apply as they store into an output

    // CPU
    CpuNest nest;
    Split split = Split::none;
    std::size_t transpose_mode = 0;  // transpose: the mode unit-stride in the source
    TransposeKind transpose_kind = TransposeKind::tiles;
    TransposeTiles tiles;           // transpose of kind registers or tiles
    std::int64_t window = 0;        // reduce_windows: terms per output
    std::int64_t accumulators = 0;  // reduce/contract_accumulate: elements of the accumulator array
    bool rows_in_order = false;     // reduce_accumulate, every row of a block into one row of accumulators:
                                    // row after row (else four rows per pass over the accumulators)
    bool streaming_stores = false;  // transpose (registers), contract_elementwise (f32): the destination is
                                    // written around the caches (non-temporal stores)
    int partial_arrays = 0;         // Split::partials_*: one more accumulator array per thread
    std::int64_t array_stride =
        0;  // bytes from one accumulator array to the next in the scratch (128-byte multiples)

    // GPU
    std::vector<KernelLaunch> launches;  // kernels: in order
    std::vector<KernelLaunch>
        unaligned_launches;  // used instead where a buffer is not 16-byte aligned (vector copies)
};

struct Schedule {
    Target target;
    std::vector<ScheduledStep> steps;  // one per plan step
    std::vector<std::int64_t>
        temporary_offsets;             // where each of the plan's temporaries lies in the workspace
    std::int64_t scratch_offset = 0;   // where each step's scratch begins (steps run one at a time)
    std::int64_t workspace_bytes = 0;  // temporaries + the largest scratch: the caller's Workspace
    // What a run given no workspace allocates itself: the same, less the library GEMMs' scratch (cuBLAS then
    // uses its own pool rather than 32 MiB mapped per run).
    std::int64_t own_workspace_bytes = 0;
};

// @pre plan is a plan of compiler/plan.hpp, its extents and strides as bound
// Throws einc::Error (unsupported) for a step the target cannot run (a GPU kernel of too high a rank,
// fp8 arithmetic on a GPU).
Schedule schedule(const Plan& plan, const Target& target);

// The cost of the scheduled plan: the plan's FLOPs and bytes, and the workspace a run allocates
// (temporaries and scratch); of step `step`, the plan's with the step's scratch. (Counted in cost.cpp.)
Cost scheduled_cost(const Plan& plan, const Schedule& schedule);
Cost scheduled_step_cost(const Plan& plan, const Schedule& schedule, std::size_t step);

// The schedule as `einc explain --print schedule` prints it (stable for goldens).
std::string print_schedule(const Plan& plan, const Schedule& schedule);

// The dtype a step folds (or multiplies, or converts) values in - einc's one accumulator policy, the same
// rule for every backend, written down in docs/cost-model.md:
//   integers and bool   i64 (sums and products wrap modulo 2^64, as numpy's int64 arithmetic)
//   f64                 f64
//   other floats        f32, except on the CPU sums, means and products of f32 over more than 16 terms,
//                       in f64 (free at memory speed there; GPUs run f64 at 1/2 to 1/64 of the f32 rate)
// `terms` is the number of values folded into one result (1 for steps that only move or convert).
DType accumulator_dtype(Reduction op, DType input, std::int64_t terms, Backend backend);

// Whether a Gemm step runs in the vendor library (CBLAS, cuBLAS) rather than as packed blocks or kernels.
bool gemm_in_library(const Plan& plan, const Gemm& gemm, const Target& target);

// The scratch of a cuBLAS GEMM step (cublasSetWorkspace): the size NVIDIA recommends for Hopper (4 MiB
// elsewhere), so that with a caller's workspace cuBLAS allocates nothing - as a captured CUDA graph needs.
inline constexpr std::int64_t cublas_workspace_bytes = std::int64_t{32} << 20;

// A Gemm as a contraction over (batch, m, n, k): what runs where no library takes the dtype.
Contract gemm_as_contraction(const Gemm& gemm);

// The distinct kernels a GPU schedule launches (aligned and unaligned variants).
std::vector<KernelSignature> kernels_of(const Schedule& schedule);

// Every kernel the GPU rules can choose for `plan`'s steps on any GPU: what `einc aot` compiles.
// With `any_extents`, for any extents of the same structure too (ranks, dtypes, unit strides): every
// branch of each size-dependent choice taken (transpose or not, vector copy or not, a warp or a loop per
// output, split or not, 32- or 64-bit indices). Otherwise for the plan's own extents, exactly: the rules'
// only GPU-dependent choice, the split, grows with the multiprocessors, so the smallest and the largest
// GPU give every outcome.
std::vector<KernelSignature> possible_kernels(const Plan& plan, bool any_extents);

}  // namespace einc
