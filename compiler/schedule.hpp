// Pass 4: schedule. For a plan and a target - the CPU, or a kind of GPU - decides once, when a program is
// bound, how every step runs, and records all of it, so that the executors (runtime/ on the CPU, cuda/ on
// a GPU) only interpret:
//   the strategy, or on a GPU the kernels and their launches; the loop nests as Layouts; the dtype values
//   are folded in (one policy: accumulator_dtype); whether a GEMM goes to BLAS / cuBLAS, and in which
//   precision; how the work is split across threads or blocks; and every scratch buffer, so that the
//   workspace of a run is known before it runs.
// Each step's strategy is one alternative of a std::variant holding only its own fields; every executor
// and printer visits it exhaustively, so that a new strategy fails to compile until each handles it
// (tests/compile_fail checks this).
// `einc explain --print schedule` prints it, `einc emit` prints its kernels, and `einc aot` asks its rules
// for every kernel they can choose (possible_kernels).
//
//   strategy             backend  what runs (an alternative of StepStrategy, strategy::View ... Kernels)
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
#include <type_traits>
#include <variant>
#include <vector>

#include "kernel_abi.hpp"
#include "plan.hpp"
#include "reduction.hpp"

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
    bool allow_tf32 = false;      // cuda: f32 GEMMs may run in TF32 (Options::allow_tf32)

    static Target cpu(int threads, int vector_bytes, bool blas);
    static Target gpu(int multiprocessors, bool allow_tf32 = false);
    int max_blocks() const { return multiprocessors * 32; }
    friend bool operator==(const Target&, const Target&) = default;
};

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
// blocks of 4-byte elements, or element by element; register blocks straight from the source, no buffer
// (direct: a transpose the caches hold); or, when one side has 8 elements or fewer, with no tiles,
// streaming along the other side.
enum class TransposeKind : std::uint8_t { registers, tiles, direct, short_side };
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
// Kind direct has no buffer: its tiles are strips a source line wide along p, whole along the other modes
// (cut along the outermost where the threads need more tiles), and it reads as it writes.
struct TransposeTiles {
    Shape extents;                        // per mode: the tile's extent (1: the mode is walked between tiles)
    std::vector<std::size_t> read_order;  // the tile's modes but p, innermost first (source stride ascending)
    std::vector<std::size_t>
        write_order;  // the tile's modes but p and the last, innermost first (destination's)
    std::vector<std::size_t>
        tile_order;          // the modes tiles are walked along, innermost first (nearest in memory)
    std::int64_t count = 0;  // tiles in all
};

// Pooling windows and tiny reduced dims: up to this many terms per output, a CPU reduction folds each
// output's window directly (its kernel keeps the window's offsets on the stack).
inline constexpr std::int64_t max_window = 16;

// The schedule's alternatives, one per strategy: each holds what its strategy needs to run and nothing
// else, so that an executor, a printer or a cost that visits a StepStrategy without handling one of them
// fails to compile. Every Layout is a loop nest over the step's index space, in traversal order (outermost
// first); `name` is what `einc explain --print schedule` prints.
namespace strategy {

// Nothing runs: the output is an input's memory (pointer arithmetic).
struct View {
    static constexpr std::string_view name = "view";
    einc::View view;  // the plan's: which output, and where in which input
};

// Elements moved by size along the nest: bit-exact, any dtype (the plan's canonical layouts).
struct Move {
    static constexpr std::string_view name = "move";
    Layout dst, src;
    Split split = Split::none;  // none or outer
};

// Elements converted between dtypes along the nest, with the step's epilogue where it has one.
struct Convert {
    static constexpr std::string_view name = "convert";
    Layout dst, src;
    Split split = Split::none;  // none or outer
};

// Tiles between the source-contiguous mode and the destination-contiguous (last) one.
struct Transpose {
    static constexpr std::string_view name = "transpose";
    Layout dst, src;
    std::size_t source_mode = 0;  // the mode unit-stride in the source
    TransposeKind kind = TransposeKind::tiles;
    TransposeTiles tiles{};  // kinds registers, tiles and direct
    // Kind short_side: whether the source-contiguous mode is the short one (each run of the long side read
    // in order and written to a few destination rows), or else the destination's (written in order).
    bool short_source_mode = false;
    Split split = Split::none;  // none, outer (short_side) or tiles (bands of the long side for short_side)
    bool streaming_stores = false;  // kind registers: the destination written around the caches
};

// Each output's terms are one row of the innermost block: folded in place. At least two modes, the last
// two the block (rows, terms of a row); acc marks the reduced modes with stride 0.
struct ReduceRows {
    static constexpr std::string_view name = "reduce_rows";
    Reduction op = Reduction::sum;
    Layout dst, src, acc;
    Split split = Split::none;  // none, outer or rows
};

// Few terms per output (pooling): each output folds its window of offsets. dst stride 0 marks the window's
// modes (the plan's layouts).
struct ReduceWindows {
    static constexpr std::string_view name = "reduce_windows";
    Reduction op = Reduction::sum;
    Layout dst, src;
    std::int64_t window = 0;    // terms per output, at most max_window
    Split split = Split::none;  // none or outer
};

// The array of accumulators a step folds into, in its scratch: dense over the kept modes, in the step's
// accumulator dtype; with partials, one more array per thread, combined at the end.
struct Accumulators {
    Layout layout;                  // over the nest, in accumulator elements: stride 0 along reduced modes
    std::int64_t count = 0;         // elements of an array
    int partial_arrays = 0;         // Split::partials_*: one per thread
    std::int64_t array_stride = 0;  // bytes from one array to the next (128-byte multiples)
};

// The source, read in memory order, folded into an accumulator array. At least two modes, the last two the
// block.
struct ReduceAccumulate {
    static constexpr std::string_view name = "reduce_accumulate";
    Reduction op = Reduction::sum;
    Layout dst, src;
    Accumulators acc{};
    // Every row of a block into one row of accumulators: row after row (else four rows per pass).
    bool rows_in_order = false;
    Split split = Split::none;  // none, outer, rows, partials_outer or partials_rows
};

// Products of the sources, no sum: each written straight to its place (the plan's layouts).
struct ContractElementwise {
    static constexpr std::string_view name = "contract_elementwise";
    Layout dst, src, src1;
    Split split = Split::none;      // none or outer
    bool streaming_stores = false;  // f32: the destination written around the caches
};

// Each output's terms are one row: its products folded straight into it (the block as ReduceRows').
struct ContractRows {
    static constexpr std::string_view name = "contract_rows";
    Layout dst, src, src1;
    Split split = Split::none;  // none, outer or rows
};

// Products of the sources folded into an accumulator array.
struct ContractAccumulate {
    static constexpr std::string_view name = "contract_accumulate";
    Layout dst, src, src1;
    Accumulators acc{};
    Split split = Split::none;  // none, outer or partials_outer
};

// The precision a library GEMM computes its products in (cuBLAS's compute type; CBLAS: the dtype's own).
enum class GemmCompute : std::uint8_t {
    f64,
    f32,   // f32, and f16/bf16 inputs on a GPU (accumulated in f32)
    tf32,  // f32 inputs on tensor cores (Options::allow_tf32): faster, about 1e-3 relative error
};
std::string_view name_of(GemmCompute compute);

// One strided-batched GEMM in CBLAS (CPU) or cuBLAS (GPU), reading every operand in place.
struct LibraryGemm {
    static constexpr std::string_view name = "library_gemm";
    Gemm gemm;
    GemmCompute compute = GemmCompute::f32;
    Split split = Split::none;  // none or gemms
};

// A GEMM with one row or one column: matrix-vector products (cblas_?gemv).
struct LibraryGemv {
    static constexpr std::string_view name = "library_gemv";
    Gemm gemm;
    Split split = Split::none;  // none or gemms
};

// Each batch packed into row-major blocks of the accumulator (the step's scratch), multiplied, unpacked.
struct PackedGemm {
    static constexpr std::string_view name = "packed_gemm";
    Gemm gemm;
    bool library_blocks = false;  // f32 blocks multiplied by the CBLAS the target has (else einc's loop)
};

// A max/min/prod gradient: each group of terms walked twice (find, share out). Layouts as planned, the
// first `kept` modes the groups'.
struct Route {
    static constexpr std::string_view name = "route";
    Reduction op = Reduction::max;
    std::uint32_t kept = 0;
    Layout dst, src, grad;
    Split split = Split::none;  // none or outer
};

// Generated kernels (compiler/codegen.hpp), launched in order.
struct Kernels {
    static constexpr std::string_view name = "kernels";
    std::vector<KernelLaunch> launches;
    std::vector<KernelLaunch> unaligned_launches;  // used instead where a buffer is not vector-aligned
};

}  // namespace strategy

// The strategies only the CPU runs, and those only a GPU runs: each backend's executor handles its own and
// those of both, and treats the other's as unreachable - so that a new strategy fails to compile until
// every executor has said how it runs it, or that it never does.
template <typename S, typename... Of>
inline constexpr bool one_of = (std::is_same_v<S, Of> || ...);
template <typename S>
concept CpuOnly = one_of<S, strategy::Move, strategy::Convert, strategy::Transpose, strategy::ReduceRows,
                         strategy::ReduceWindows, strategy::ReduceAccumulate, strategy::ContractElementwise,
                         strategy::ContractRows, strategy::ContractAccumulate, strategy::LibraryGemv,
                         strategy::PackedGemm, strategy::Route>;
template <typename S>
concept GpuOnly = one_of<S, strategy::Kernels>;

using StepStrategy =
    std::variant<strategy::View, strategy::Move, strategy::Convert, strategy::Transpose, strategy::ReduceRows,
                 strategy::ReduceWindows, strategy::ReduceAccumulate, strategy::ContractElementwise,
                 strategy::ContractRows, strategy::ContractAccumulate, strategy::LibraryGemm,
                 strategy::LibraryGemv, strategy::PackedGemm, strategy::Route, strategy::Kernels>;

// "view", "move", ...: the alternative's name.
std::string_view name_of(const StepStrategy& strategy);
// How the strategy shares its work between threads (Split::none for those that do not say).
Split split_of(const StepStrategy& strategy);

struct ScheduledStep {
    StepStrategy strategy;
    DType accumulator = DType::f32;  // what values are carried in: folds, products, conversions
    std::int64_t scratch_bytes = 0;  // this step's scratch, at scratch_offset of the workspace
    // The first bytes of its scratch that the executor zeroes before its launches (reduce_one_pass's
    // arrival counter).
    std::int64_t zeroed_scratch_bytes = 0;
    std::int64_t scratch_offset = 0;  // set by schedule()
    Epilogue epilogue;                // the plan step's: what the kernels apply as they store into an output
};

struct Schedule {
    Target target;
    std::vector<ScheduledStep> steps;  // one per plan step
    std::vector<std::int64_t>
        temporary_offsets;             // where each of the plan's temporaries lies in the workspace
    std::int64_t workspace_bytes = 0;  // temporaries + the scratch: the caller's Workspace
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
//   integers and bool   i64 (sums and products wrap modulo 2^64, as numpy's int64 arithmetic), but u64
//                       in u64 (its comparisons are unsigned; its sums wrap as i64's do)
//   c64, c128           themselves (only moved and converted yet)
//   f64                 f64
//   other floats        f32, except on the CPU folds of f32 that widen (reduction_table: sums, means and
//                       products) over more than max_window terms, in f64 (free at memory speed there;
//                       GPUs run f64 at 1/2 to 1/64 of the f32 rate)
// `terms` is the number of values folded into one result (1 for steps that only move or convert); op is
// Reduction::none for steps that only move, convert or multiply. (constexpr: the CPU kernels instantiate
// exactly the accumulators it can give.)
constexpr DType accumulator_dtype(Reduction op, DType input, std::int64_t terms, Backend backend) {
    if (input == DType::u64 || is_complex(input)) return input;  // (complex: only moved and converted)
    if (!is_floating(input)) return DType::i64;
    if (input == DType::f64) return DType::f64;
    const bool widens = op != Reduction::none && info_of(op).widens_f32;
    if (backend == Backend::cpu && input == DType::f32 && widens && terms > max_window) return DType::f64;
    return DType::f32;
}

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
