// The planner's table: for each call and each operand layout, the plan's shape (its step kinds, in
// order) and its cost, every figure computed by hand from the conventions of compiler/cost.hpp - in the
// spirit of opt_einsum's BLAS classification table.
//
//   GEMM         2*batch*M*N*K FLOPs; reads A and B (a batch of stride 0 once), writes C
//   reduction    one FLOP per element of its loop (mean: one more per output element);
//                reads the distinct input elements, writes the output
//   Contract     (operands - 1) FLOPs per element of its loop, one more if an axis is summed
//   Copy         0 FLOPs; reads the distinct source elements, writes the destination
//   View         0 FLOPs, 0 bytes
//   temporaries  their bytes are workspace; writing and reading them counts as bytes moved
//
// Byte counts are written as (element size) * (elements): f64 8, f32 4, f16/bf16 2, i8 1, i32 4, i64 8,
// bool 1. A sum of integers is an i64; any/all give bools.
//
// Operands are written as the CLI reads them: `8x64x32` is row-major, `(4,8):(1,4)` gives the strides
// (in elements), `scalar` is a 0-dim tensor.
#include <algorithm>
#include <charconv>
#include <doctest/doctest.h>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/bind.hpp"
#include "compiler/plan.hpp"
#include "compiler/schedule.hpp"
#include "grammar/diagnostic.hpp"

using namespace einc;

namespace {

constexpr DType F64 = DType::f64, F32 = DType::f32, F16 = DType::f16, BF16 = DType::bf16, I8 = DType::i8,
                I32 = DType::i32, BOOL = DType::boolean;

struct Row {
    std::string_view op;  // "einsum", "rearrange", "repeat", "pack", "unpack", or "reduce <reduction>"
    std::string_view pattern;
    AxisSizes sizes;
    DType dtype = F32;
    std::vector<std::string_view> inputs;
    std::string_view steps = {};  // the step kinds in order
    double flops = 0, read = 0, written = 0, workspace = 0;
    std::vector<Shape> packed = {};  // unpack only
};

Shape numbers(std::string_view text) {
    Shape out;
    while (!text.empty()) {
        std::int64_t n = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        REQUIRE(ec == std::errc{});
        out.push_back(n);
        text.remove_prefix(static_cast<std::size_t>(end - text.data()));
        if (!text.empty()) text.remove_prefix(1);  // ',' or 'x'
    }
    return out;
}

// `8x64x32`, `(4,8):(1,4)` or `scalar`.
TensorSpec spec_of(std::string_view text, DType dtype) {
    if (text == "scalar") return TensorSpec{dtype, {}, {}};
    if (text.front() != '(') {
        const Shape shape = numbers(text);
        return TensorSpec{dtype, shape, row_major_strides(shape)};
    }
    const std::size_t colon = text.find("):(");
    REQUIRE(colon != std::string_view::npos);
    const std::string_view shape = text.substr(1, colon - 1);
    const std::string_view strides = text.substr(colon + 3, text.size() - colon - 4);
    return TensorSpec{dtype, numbers(shape), numbers(strides)};
}

Plan plan_of(const Row& row, const PlanOptions& options = {}) {
    Call call{Op::rearrange, std::string(row.pattern), Reduction::none, row.sizes, false, row.packed};
    const std::string_view op = row.op.substr(0, row.op.find(' '));
    REQUIRE(op_named(op).has_value());
    call.op = *op_named(op);
    if (op.size() < row.op.size()) {
        const auto reduction = reduction_named(row.op.substr(op.size() + 1));
        REQUIRE(reduction.has_value());
        call.reduction = *reduction;
    }
    std::vector<TensorSpec> specs;
    std::vector<Shape> shapes;
    for (const std::string_view input : row.inputs) {
        specs.push_back(spec_of(input, row.dtype));
        shapes.push_back(specs.back().shape);
    }
    return plan(bind(call, shapes), specs, options);
}

std::string step_kinds(const Plan& plan) {
    std::string out;
    for (const PlanStep& step : plan.steps) {
        if (!out.empty()) out += ' ';
        out += step_kind(step.step);
    }
    return out;
}

void check_row(const Row& row) {
    std::string operands;
    for (const std::string_view input : row.inputs) operands += std::string(input) + "  ";
    INFO(row.op, " \"", row.pattern, "\" ", name_of(row.dtype), "  ", operands);
    const Plan plan = plan_of(row);
    INFO(print_plan(plan, schedule(plan, Target::gpu(132)), *device_model_named("h100")));
    CHECK(step_kinds(plan) == row.steps);
    CHECK(plan.total.flops == row.flops);
    CHECK(plan.total.bytes_read == row.read);
    CHECK(plan.total.bytes_written == row.written);
    CHECK(plan.total.workspace_bytes == row.workspace);
}

// The linear model of the issue: x @ w with B=16384, D=32768, K=8192.
constexpr double B = 16384, D = 32768, K = 8192;
// The vector and matrix sizes of the intensity figures.
constexpr double N = 1 << 20, M = 4096;

// clang-format off
const std::vector<Row> table = {
    // ---- einsum: one GEMM, no copy -----------------------------------------------------------------
    // batch b, M i, N j, K d; B is read as col-major (d has stride 1)
    {"einsum", "b i d, b j d -> b i j", {}, F32, {"8x64x32", "8x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(8*64*32 + 8*128*32), 4.*8*64*128},
    // batch (b h) = 8 merged in every operand
    {"einsum", "b h s d, b h t d -> b h s t", {}, F32, {"2x4x64x32", "2x4x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(8*64*32 + 8*128*32), 4.*8*64*128},
    // the ellipsis only A has joins M: M = 3*5*16 = 240
    {"einsum", "... i k, k j -> ... i j", {}, F32, {"3x5x16x32", "32x24"},
     "gemm", 2.*240*24*32, 4.*(240*32 + 32*24), 4.*240*24},
    // batch h, M (b s) = 32, N e, K d: x's (h d) splits into strides 8 and 1
    {"einsum", "b s (h d), h d e -> b s h e", {{"h", 4}}, F32, {"2x16x32", "4x8x10"},
     "gemm", 2.*4*32*10*8, 4.*(2*16*32 + 4*8*10), 4.*2*16*4*10},
    // C written col-major (i has stride 1 in the output)
    {"einsum", "b i d, b j d -> b j i", {}, F32, {"8x64x32", "8x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(8*64*32 + 8*128*32), 4.*8*64*128},
    // batch b between i and j in the output: a batch stride of 128, C row-major with ld 8*128
    {"einsum", "b i d, b j d -> i b j", {}, F32, {"8x64x32", "8x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(8*64*32 + 8*128*32), 4.*8*64*128},
    // A transposed: col-major, ld 64
    {"einsum", "i k, k j -> i j", {}, F32, {"(64,32):(1,64)", "32x48"},
     "gemm", 2.*64*48*32, 4.*(64*32 + 32*48), 4.*64*48},
    // B transposed: col-major, ld 32
    {"einsum", "i k, k j -> i j", {}, F32, {"64x32", "(32,48):(1,32)"},
     "gemm", 2.*64*48*32, 4.*(64*32 + 32*48), 4.*64*48},
    // A sliced (ld 40 > 32): only the 64*32 elements of the slice are read
    {"einsum", "i k, k j -> i j", {}, F32, {"(64,32):(40,1)", "32x48"},
     "gemm", 2.*64*48*32, 4.*(64*32 + 32*48), 4.*64*48},
    // B sliced and transposed: col-major, ld 40
    {"einsum", "i k, k j -> i j", {}, F32, {"64x32", "(32,48):(1,40)"},
     "gemm", 2.*64*48*32, 4.*(64*32 + 32*48), 4.*64*48},
    // A transposed in every batch: col-major, ld 64, batch stride 2048
    {"einsum", "b i d, b j d -> b i j", {}, F32, {"(8,64,32):(2048,1,64)", "8x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(8*64*32 + 8*128*32), 4.*8*64*128},
    // every other batch of a 16-batch tensor: batch stride 4096
    {"einsum", "b i d, b j d -> b i j", {}, F32, {"(8,64,32):(4096,32,1)", "8x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(8*64*32 + 8*128*32), 4.*8*64*128},
    // A broadcast over the batch (stride 0): read once, 64*32
    {"einsum", "b i d, b j d -> b i j", {}, F32, {"(8,64,32):(0,32,1)", "8x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(64*32 + 8*128*32), 4.*8*64*128},
    // B broadcast over the batch (a shared weight): read once, 32*48
    {"einsum", "b i k, b k j -> b i j", {}, F32, {"8x64x32", "(8,32,48):(0,48,1)"},
     "gemm", 2.*8*64*48*32, 4.*(8*64*32 + 32*48), 4.*8*64*48},
    // f64, bf16, f16 and i32 GEMMs: the same shape at other element sizes
    {"einsum", "b i k, b k j -> b i j", {}, F64, {"4x16x32", "4x32x24"},
     "gemm", 2.*4*16*24*32, 8.*(4*16*32 + 4*32*24), 8.*4*16*24},
    {"einsum", "b i k, b k j -> b i j", {}, BF16, {"4x16x32", "4x32x24"},
     "gemm", 2.*4*16*24*32, 2.*(4*16*32 + 4*32*24), 2.*4*16*24},
    {"einsum", "i k, j k -> i j", {}, F16, {"64x32", "48x32"},
     "gemm", 2.*64*48*32, 2.*(64*32 + 48*32), 2.*64*48},
    {"einsum", "i k, k j -> i j", {}, I32, {"64x32", "32x48"},
     "gemm", 2.*64*48*32, 4.*(64*32 + 32*48), 4.*64*48},
    // the linear model x @ w: 2*B*D*K FLOPs
    {"einsum", "b d, d k -> b k", {}, BF16, {"16384x32768", "32768x8192"},
     "gemm", 2.*B*D*K, 2.*(B*D + D*K), 2.*B*K},
    // a diagonal operand: (i i) has stride 8*(4 + 1) = 40, a row-major A with ld 40
    {"einsum", "i i j, j k -> i k", {}, F32, {"4x4x8", "8x3"},
     "gemm", 2.*4*3*8, 4.*(4*8 + 8*3), 4.*4*3},
    // one dot product per j: batch j (stride 1), each A a 1x4 row with stride 5
    {"einsum", "i j, i j -> j", {}, F32, {"4x5", "4x5"},
     "gemm", 2.*5*4, 4.*(20 + 20), 4.*5},

    // ---- einsum: vectors ---------------------------------------------------------------------------
    // dot product: a 1x1 GEMM with K = 1000
    {"einsum", "i, i ->", {}, F32, {"1000", "1000"},
     "gemm", 2.*1000, 4.*(1000 + 1000), 4.},
    // a strided vector is a 1xK matrix with ld 3
    {"einsum", "i, i ->", {}, F32, {"(1000):(3)", "1000"},
     "gemm", 2.*1000, 4.*(1000 + 1000), 4.},
    // matrix-vector: M i, N 1, K j
    {"einsum", "i j, j -> i", {}, F32, {"64x32", "32"},
     "gemm", 2.*64*32, 4.*(64*32 + 32), 4.*64},
    // matrix-vector with the matrix transposed (col-major)
    {"einsum", "i j, j -> i", {}, F32, {"(64,32):(1,64)", "32"},
     "gemm", 2.*64*32, 4.*(64*32 + 32), 4.*64},
    // vector-matrix: M 1, N i, K j
    {"einsum", "j, j i -> i", {}, F32, {"32", "32x64"},
     "gemm", 2.*64*32, 4.*(32 + 32*64), 4.*64},
    // outer product: nothing summed, one multiplication per output element
    {"einsum", "i, j -> i j", {}, F32, {"64", "48"},
     "contract", 64.*48, 4.*(64 + 48), 4.*64*48},
    // Hadamard product
    {"einsum", "i j, i j -> i j", {}, F32, {"64x48", "64x48"},
     "contract", 64.*48, 4.*(64*48 + 64*48), 4.*64*48},
    // Hadamard product of a transposed matrix and a row broadcast over i (48 distinct elements)
    {"einsum", "i j, i j -> i j", {}, F32, {"(64,48):(1,64)", "(64,48):(0,1)"},
     "contract", 64.*48, 4.*(64*48 + 48), 4.*64*48},
    // Hadamard product with the output permuted
    {"einsum", "b i, b i -> i b", {}, I32, {"8x16", "8x16"},
     "contract", 8.*16, 4.*(8*16 + 8*16), 4.*8*16},
    // a diagonal times a vector: one multiplication per element
    {"einsum", "i i, i -> i", {}, F32, {"5x5", "5"},
     "contract", 5., 4.*(5 + 5), 4.*5},
    // scaling by a scalar operand: one multiplication per element, the scalar read once
    {"einsum", "i, -> i", {}, F32, {"1000", "scalar"},
     "contract", 1000., 4.*(1000 + 1), 4.*1000},
    // a summed axis of length 1: an outer product, nothing to add
    {"einsum", "i k, k j -> i j", {}, F32, {"64x1", "1x48"},
     "contract", 64.*48, 4.*(64 + 48), 4.*64*48},
    // the figures of the intensity test below (bf16)
    {"einsum", "i, -> i", {}, BF16, {"1048576", "scalar"},
     "contract", N, 2.*(N + 1), 2.*N},
    {"einsum", "i, i ->", {}, BF16, {"1048576", "1048576"},
     "gemm", 2.*N, 2.*(N + N), 2.},
    {"einsum", "i j, j -> i", {}, BF16, {"4096x4096", "4096"},
     "gemm", 2.*M*M, 2.*(M*M + M), 2.*M},
    {"einsum", "i k, k j -> i j", {}, BF16, {"4096x4096", "4096x4096"},
     "gemm", 2.*M*M*M, 2.*(M*M + M*M), 2.*M*M},

    // ---- einsum: operands BLAS cannot take as they are (TTGT) -------------------------------------
    // A has no unit stride: copied to a 64x32 temporary (read 64*32, write 64*32), then the GEMM
    {"einsum", "i k, k j -> i j", {}, F32, {"(64,32):(64,2)", "32x48"},
     "copy gemm", 2.*64*48*32, 4.*(64*32 + 64*32 + 32*48), 4.*(64*32 + 64*48), 4.*64*32},
    // B has no unit stride: B copied (32*48)
    {"einsum", "i k, k j -> i j", {}, F32, {"64x32", "(32,48):(100,2)"},
     "copy gemm", 2.*64*48*32, 4.*(32*48 + 64*32 + 32*48), 4.*(32*48 + 64*48), 4.*32*48},
    // A's M group (a b) is not one stride: k lies between a (512) and b (1). Batching a instead (B's
    // batch stride 0) leaves M = (b), col-major in A (ld 16): one GEMM of 4 batches, nothing copied
    {"einsum", "a b k, k n -> a b n", {}, F32, {"(4,16,32):(512,1,16)", "32x24"},
     "gemm", 2.*64*24*32, 4.*(2048 + 32*24), 4.*(64*24), 0},
    // batch dims of A in reversed order (h outer): batch (b h) merges in B and C, not in A; split in
    // two - a GEMM per b, each batched over h - it is read in place: nothing copied
    {"einsum", "b h i k, b h k j -> b h i j", {}, F32, {"(2,4,16,32):(512,1024,32,1)", "2x4x32x24"},
     "gemm", 2.*8*16*24*32, 4.*(4096 + 6144), 4.*(8*16*24), 0},

    // ---- einsum: an output the GEMM cannot write ---------------------------------------------------
    // output (i j b): the matrix (i, j) has strides (96, 4), no unit stride: GEMM into a temporary
    // [b i j] (4*16*24 = 1536), then copied out
    {"einsum", "b i k, b k j -> i j b", {}, F32, {"4x16x32", "4x32x24"},
     "gemm copy", 2.*4*16*24*32, 4.*(2048 + 3072 + 1536), 4.*(1536 + 1536), 4.*1536},
    // M (a i): A merges it as (a i), the output as (i a). Batching a instead (B's batch stride 0; A
    // 1024, C 8) leaves M = (i): one GEMM of 4 batches writes the output, nothing copied
    {"einsum", "a i k, k j -> i a j", {}, F32, {"4x16x64", "64x8"},
     "gemm", 2.*64*8*64, 4.*(4096 + 64*8), 4.*512, 0},
    // batch dims reversed in both inputs: a GEMM per b, each batched over h, writes the output in place
    {"einsum", "b h i k, b h k j -> b h i j", {}, F32,
     {"(2,4,16,32):(512,1024,32,1)", "(2,4,32,24):(768,1536,24,1)"},
     "gemm", 2.*8*16*24*32, 4.*(4096 + 6144), 4.*3072, 0},
    // broadcast ellipses: ...0 (7) only in A, ...1 (5) only in B. Batching ...1 (A's batch stride 0:
    // A read once, 14*3) keeps B a row-major 3x4 per batch; the output interleaves ...0 with ...1, so
    // M = (...0 i) is not one stride there: the GEMM writes a temporary (5*14*4 = 280), copied out
    {"einsum", "... i k, ... k j -> ... i j", {}, F32, {"7x1x2x3", "5x3x4"},
     "gemm copy", 2.*5*14*4*3, 4.*(14*3 + 60 + 280), 4.*(280 + 280), 4.*280},

    // ---- einsum: axes only one operand has are summed first ---------------------------------------
    // k only in A: sum it into a 16x32 temporary, then a matrix-vector GEMM
    {"einsum", "i j k, j -> i", {}, F32, {"16x32x8", "32"},
     "reduce gemm", 16.*32*8 + 2.*16*32, 4.*(16*32*8 + 16*32 + 32), 4.*(16*32 + 16), 4.*16*32},
    // j only in B: sum B's rows into a 32-vector, then a matrix-vector GEMM
    {"einsum", "i k, k j -> i", {}, F32, {"16x32", "32x24"},
     "reduce gemm", 32.*24 + 2.*16*32, 4.*(32*24 + 16*32 + 32), 4.*(32 + 16), 4.*32},

    // ---- einsum: one operand -----------------------------------------------------------------------
    {"einsum", "i j -> i j", {}, F32, {"(4,8):(1,4)"},
     "view", 0, 0, 0},
    {"einsum", "i j -> j i", {}, F32, {"4x8"},
     "view", 0, 0, 0},
    // the diagonal: stride 5 + 1
    {"einsum", "i i -> i", {}, F32, {"5x5"},
     "view", 0, 0, 0},
    {"einsum", "b i i -> b i", {}, F32, {"3x5x5"},
     "view", 0, 0, 0},
    {"einsum", "b i j -> b j i", {}, F32, {"(2,4,8):(64,16,1)"},
     "view", 0, 0, 0},
    // trace: 5 diagonal elements read and summed
    {"einsum", "i i ->", {}, F32, {"5x5"},
     "reduce", 5., 4.*5, 4.},
    // row sums
    {"einsum", "i j -> i", {}, F32, {"4x8"},
     "reduce", 32., 4.*32, 4.*4},
    // column sums of a transposed matrix
    {"einsum", "i j -> j", {}, F32, {"(4,8):(1,4)"},
     "reduce", 32., 4.*32, 4.*8},
    // everything summed; einsum keeps the dtype (numpy's rule): an i8 result
    {"einsum", "i j ->", {}, I8, {"4x8"},
     "reduce", 32., 1.*32, 1.},
    // the diagonal of each (i, i) block, summed over j
    {"einsum", "i i j -> j", {}, F32, {"4x4x8"},
     "reduce", 4.*8, 4.*4*8, 4.*8},

    // ---- einsum: three or more operands ------------------------------------------------------------
    // (A B) C: 2*8*64*4 + 2*8*4*64 = 8192; A (B C) would cost 2*64*4*64 + 2*8*64*64 = 98304
    {"einsum", "i j, j k, k l -> i l", {}, F32, {"8x64", "64x4", "4x64"},
     "gemm gemm", 2.*8*64*4 + 2.*8*4*64, 4.*(8*64 + 64*4) + 4.*(8*4 + 4*64), 4.*8*4 + 4.*8*64, 4.*8*4},
    // A (B C): 2*4*64*8 + 2*64*4*8 = 8192; (A B) C would cost 2*64*4*64 + 2*64*64*8 = 98304
    {"einsum", "i j, j k, k l -> i l", {}, F32, {"64x4", "4x64", "64x8"},
     "gemm gemm", 2.*4*64*8 + 2.*64*4*8, 4.*(4*64 + 64*8) + 4.*(64*4 + 4*8), 4.*4*8 + 4.*64*8, 4.*4*8},
    // the same as the first, batched
    {"einsum", "b i j, b j k, b k l -> b i l", {}, F32, {"2x8x64", "2x64x4", "2x4x64"},
     "gemm gemm", 2.*2*8*64*4 + 2.*2*8*4*64, 4.*(2*8*64 + 2*64*4) + 4.*(2*8*4 + 2*4*64),
     4.*2*8*4 + 4.*2*8*64, 4.*2*8*4},
    // three-way Hadamard: two elementwise products, the first into a temporary
    {"einsum", "i, i, i -> i", {}, F32, {"100", "100", "100"},
     "contract contract", 100. + 100., 4.*(100 + 100) + 4.*(100 + 100), 4.*100 + 4.*100, 4.*100},
    // bilinear form x M y: (x M) is a 1x32 row (2*64*32), then a dot product with y (2*32)
    {"einsum", "i, i j, j ->", {}, F32, {"64", "64x32", "32"},
     "gemm gemm", 2.*64*32 + 2.*32, 4.*(64 + 64*32) + 4.*(32 + 32), 4.*32 + 4., 4.*32},
    // (A B) (C D): 2*4*32*4 twice, then 2*4*4*4 = 2176; ((A B) C) D would cost 3072
    {"einsum", "a b, b c, c d, d e -> a e", {}, F32, {"4x32", "32x4", "4x32", "32x4"},
     "gemm gemm gemm", 2.*4*32*4 * 2 + 2.*4*4*4, 4.*(128 + 128) * 2 + 4.*(16 + 16), 4.*16 * 3, 4.*16 * 2},

    // ---- rearrange ---------------------------------------------------------------------------------
    {"rearrange", "b c h w -> b h w c", {}, F32, {"2x3x4x5"},
     "view", 0, 0, 0},
    {"rearrange", "b (h w) c -> b h w c", {{"h", 4}}, F32, {"2x32x3"},
     "view", 0, 0, 0},
    {"rearrange", "b h w c -> b (h w) c", {}, F32, {"2x4x8x3"},
     "view", 0, 0, 0},
    {"rearrange", "b h w c -> (b h w c)", {}, F32, {"2x4x8x3"},
     "view", 0, 0, 0},
    {"rearrange", "a 1 b -> a b", {}, F32, {"4x1x8"},
     "view", 0, 0, 0},
    {"rearrange", "a b -> a () b", {}, F32, {"4x8"},
     "view", 0, 0, 0},
    {"rearrange", "... c -> c ...", {}, F32, {"2x3x4"},
     "view", 0, 0, 0},
    {"rearrange", "b ... -> b (...)", {}, F32, {"2x3x4x5"},
     "view", 0, 0, 0},
    {"rearrange", "... -> ...", {}, F32, {"scalar"},
     "view", 0, 0, 0},
    // a transposed matrix: transposing it back is a view, and so is merging (b a), which is contiguous
    {"rearrange", "a b -> b a", {}, F32, {"(4,8):(1,4)"},
     "view", 0, 0, 0},
    {"rearrange", "a b -> (b a)", {}, F32, {"(4,8):(1,4)"},
     "view", 0, 0, 0},
    // splitting a transposed dim: (a b) with stride 1 gives b stride 1, a stride 4
    {"rearrange", "(a b) c -> a b c", {{"a", 2}}, F32, {"(8,4):(1,8)"},
     "view", 0, 0, 0},
    // sliced: (b c) is contiguous inside each row of 100
    {"rearrange", "a b c -> a (b c)", {}, F32, {"(2,4,8):(100,8,1)"},
     "view", 0, 0, 0},
    {"rearrange", "(h w) c -> h w c", {{"h", 3}}, F32, {"(12,3):(4,1)"},
     "view", 0, 0, 0},
    // broadcast input: a permutation keeps the stride 0
    {"rearrange", "a b -> b a", {}, F32, {"(4,8):(0,1)"},
     "view", 0, 0, 0},
    // reversed-order batch dims (h outer in memory): (h b) merges
    {"rearrange", "b h s d -> (h b) s d", {}, F32, {"(2,4,16,8):(128,256,8,1)"},
     "view", 0, 0, 0},
    {"rearrange", "a b c -> a (c b)", {}, BOOL, {"(2,3,4):(12,1,3)"},
     "view", 0, 0, 0},
    // merges of axes that are not adjacent in memory: copies of every element
    {"rearrange", "b c h w -> b (h w c)", {}, F32, {"2x3x4x5"},
     "copy", 0, 4.*120, 4.*120},
    {"rearrange", "b c h w -> b (h w c)", {}, BF16, {"2x3x4x5"},
     "copy", 0, 2.*120, 2.*120},
    {"rearrange", "a b -> (a b)", {}, F32, {"(4,8):(1,4)"},
     "copy", 0, 4.*32, 4.*32},
    {"rearrange", "a b -> (b a)", {}, F64, {"4x8"},
     "copy", 0, 8.*32, 8.*32},
    {"rearrange", "a b -> (a b)", {}, I8, {"(4,8):(16,1)"},
     "copy", 0, 1.*32, 1.*32},
    {"rearrange", "a b c -> a (b c)", {}, F32, {"(2,3,4):(12,1,3)"},
     "copy", 0, 4.*24, 4.*24},
    // reversed-order batch dims: (b h) does not merge
    {"rearrange", "b h s d -> (b h) s d", {}, F32, {"(2,4,16,8):(128,256,8,1)"},
     "copy", 0, 4.*1024, 4.*1024},
    // merging a broadcast axis: 8 distinct elements read, 32 written
    {"rearrange", "a b -> (a b)", {}, F32, {"(4,8):(0,1)"},
     "copy", 0, 4.*8, 4.*32},

    // ---- repeat ------------------------------------------------------------------------------------
    // a new axis is a stride 0
    {"repeat", "h w -> h w c", {{"c", 3}}, F32, {"4x8"},
     "view", 0, 0, 0},
    {"repeat", "h w -> c h w", {{"c", 2}}, F32, {"3x4"},
     "view", 0, 0, 0},
    {"repeat", "h -> h 2", {}, F32, {"5"},
     "view", 0, 0, 0},
    {"repeat", "h w -> h w c", {{"c", 3}}, F32, {"(4,8):(1,4)"},
     "view", 0, 0, 0},
    {"repeat", "h w -> h w c", {{"c", 3}}, F32, {"(4,8):(0,1)"},
     "view", 0, 0, 0},
    // a broadcast input: (c h) is stride 0 throughout
    {"repeat", "h w -> (c h) w", {{"c", 2}}, F32, {"(3,4):(0,1)"},
     "view", 0, 0, 0},
    // a new axis of length 1 inside a group changes nothing
    {"repeat", "h w -> h (w c)", {{"c", 1}}, F32, {"3x4"},
     "view", 0, 0, 0},
    // a new axis inside a group: 12 elements read, 24 written
    {"repeat", "h w -> h (w c)", {{"c", 2}}, F32, {"3x4"},
     "copy", 0, 4.*12, 4.*24},
    {"repeat", "h w -> (c h) w", {{"c", 2}}, F32, {"3x4"},
     "copy", 0, 4.*12, 4.*24},
    {"repeat", "h -> (2 h)", {}, F32, {"5"},
     "copy", 0, 4.*5, 4.*10},
    {"repeat", "h w -> h (w c)", {{"c", 4}}, I8, {"3x4"},
     "copy", 0, 1.*12, 1.*48},
    // nearest-neighbour upsampling: 24 read, 96 written
    {"repeat", "b h w -> b (h 2) (w 2)", {}, F32, {"2x3x4"},
     "copy", 0, 4.*24, 4.*96},

    // ---- reduce ------------------------------------------------------------------------------------
    // over the inner axis, the outer axis, all axes
    {"reduce sum", "b c -> b", {}, F32, {"4x8"},
     "reduce", 32., 4.*32, 4.*4},
    {"reduce sum", "b c -> c", {}, F32, {"4x8"},
     "reduce", 32., 4.*32, 4.*8},
    {"reduce sum", "b c ->", {}, F32, {"4x8"},
     "reduce", 32., 4.*32, 4.},
    {"reduce min", "a b -> a", {}, F32, {"4x8"},
     "reduce", 32., 4.*32, 4.*4},
    {"reduce prod", "a b -> b", {}, F64, {"4x8"},
     "reduce", 32., 8.*32, 8.*8},
    // mean: one more FLOP per output element
    {"reduce mean", "a b ->", {}, F32, {"4x8"},
     "reduce", 32. + 1, 4.*32, 4.},
    {"reduce mean", "b s d -> b d", {}, BF16, {"2x16x8"},
     "reduce", 256. + 16, 2.*256, 2.*16},
    // pooling: 2*3*8*8 = 384 in, 2*3*4*4 = 96 out
    {"reduce mean", "b c (h 2) (w 2) -> b c h w", {}, F32, {"2x3x8x8"},
     "reduce", 384. + 96, 4.*384, 4.*96},
    // max pooling of a slice (rows of 16, 8 used)
    {"reduce max", "b c (h 2) (w 2) -> b c h w", {}, F32, {"(2,3,8,8):(384,128,16,1)"},
     "reduce", 384., 4.*384, 4.*96},
    // integer sums and products give i64
    {"reduce sum", "a b -> a", {}, I8, {"4x8"},
     "reduce", 32., 1.*32, 8.*4},
    {"reduce sum", "a b -> b", {}, I32, {"4x8"},
     "reduce", 32., 4.*32, 8.*8},
    {"reduce prod", "a b ->", {}, I32, {"4x8"},
     "reduce", 32., 4.*32, 8.},
    // max of integers keeps the dtype
    {"reduce max", "a b -> a", {}, I8, {"4x8"},
     "reduce", 32., 1.*32, 1.*4},
    // any and all give bools
    {"reduce any", "a b -> a", {}, BOOL, {"4x8"},
     "reduce", 32., 1.*32, 1.*4},
    {"reduce all", "a b ->", {}, BOOL, {"4x8"},
     "reduce", 32., 1.*32, 1.},
    {"reduce any", "a b -> b", {}, F32, {"4x8"},
     "reduce", 32., 4.*32, 1.*8},
    // non-contiguous inputs: transposed, broadcast (8 distinct elements, a loop of 32), reversed batch
    {"reduce sum", "a b -> a", {}, F32, {"(4,8):(1,4)"},
     "reduce", 32., 4.*32, 4.*4},
    {"reduce sum", "a b -> b", {}, F32, {"(4,8):(0,1)"},
     "reduce", 32., 4.*8, 4.*8},
    {"reduce sum", "b h s -> s", {}, F32, {"(2,4,8):(8,16,1)"},
     "reduce", 64., 4.*64, 4.*8},
    // the output permuted
    {"reduce sum", "a b c -> c a", {}, F32, {"2x3x4"},
     "reduce", 24., 4.*24, 4.*8},
    {"reduce sum", "b ... -> b", {}, F32, {"2x3x4"},
     "reduce", 24., 4.*24, 4.*2},
    // over a length-1 axis, or none: a view
    {"reduce sum", "a 1 b -> a b", {}, F32, {"4x1x8"},
     "view", 0, 0, 0},
    {"reduce mean", "a b -> a", {}, F32, {"4x1"},
     "view", 0, 0, 0},
    {"reduce max", "a b -> b a", {}, F32, {"4x8"},
     "view", 0, 0, 0},
    // ... unless the dtype changes: an i8 sum over length 1 still writes i64
    {"reduce sum", "a b -> a", {}, I8, {"4x1"},
     "reduce", 4., 1.*4, 8.*4},

    // ---- pack and unpack ---------------------------------------------------------------------------
    // each input copied into its slice of the packed dim: 120 + 10 + 70 elements
    {"pack", "b * c", {}, F32, {"2x3x4x5", "2x5", "2x7x5"},
     "copy copy copy", 0, 4.*(120 + 10 + 70), 4.*(120 + 10 + 70)},
    {"pack", "b *", {}, F32, {"(4,8):(1,4)", "4x3"},
     "copy copy", 0, 4.*(32 + 12), 4.*(32 + 12)},
    {"pack", "* d", {}, BF16, {"2x3x8", "5x8"},
     "copy copy", 0, 2.*(48 + 40), 2.*(48 + 40)},
    // one tensor: the (3 4) merge is contiguous, a view; transposed, (3 4) has strides (1, 3): a copy
    {"pack", "* c", {}, F32, {"3x4x5"},
     "view", 0, 0, 0},
    {"pack", "* c", {}, F32, {"(3,4,5):(1,3,12)"},
     "copy", 0, 4.*60, 4.*60},
    // every part of an unpack is a slice: a view
    {"unpack", "b * c", {}, F32, {"2x20x5"},
     "view view view", 0, 0, 0, 0, {{3, 4}, {}, {-1}}},
    {"unpack", "* d", {}, F32, {"(10,8):(1,10)"},
     "view view", 0, 0, 0, 0, {{2, 3}, {4}}},
    {"unpack", "b *", {}, I8, {"3x10"},
     "view view", 0, 0, 0, 0, {{4}, {6}}},
    // A batch broadcast from a length-1 dim (numpy's rule) leaves b to B alone; batching it with A's
    // batch stride 0 lets one strided-batched GEMM write the output directly.
    {"einsum", "b i d, b j d -> b i j", {}, F32, {"1x64x32", "8x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(64*32 + 8*128*32), 4.*8*64*128},
    {"einsum", "... i d, ... j d -> ... i j", {}, F32, {"64x32", "8x128x32"},
     "gemm", 2.*8*64*128*32, 4.*(64*32 + 8*128*32), 4.*8*64*128},
    // b only in A: batching it (B's batch stride 0) with C col-major (i stride 1, j stride 64): one GEMM.
    {"einsum", "b i k, k j -> b j i", {}, F32, {"8x64x32", "32x24"},
     "gemm", 2.*8*64*24*32, 4.*(8*64*32 + 32*24), 4.*8*64*24},
    // A dot product over (i j) with one operand transposed: one Contract pass, 2*64*48 FLOPs, each
    // operand read once (a copy for a 1x1 GEMM would move more bytes than the product reads).
    {"einsum", "i j, i j ->", {}, F32, {"(64,48):(1,64)", "64x48"},
     "contract", 2.*64*48, 4.*(64*48 + 64*48), 4.},
    // Matrix-vector with a matrix of no unit stride: one Contract pass, not a copy and a GEMM.
    {"einsum", "i j, j -> i", {}, F32, {"(64,32):(64,2)", "32"},
     "contract", 2.*64*32, 4.*(64*32 + 32), 4.*64},
    // A reduction over an empty axis writes op's identity to each of the 4 outputs (mean: NaN, one
    // FLOP each).
    {"reduce sum", "a b -> a", {}, F32, {"4x0"},
     "reduce", 0, 0, 4.*4},
    {"reduce mean", "a b -> a", {}, F32, {"4x0"},
     "reduce", 4., 0, 4.*4},
};

// Rows where einc's plan differs from the hand-computed one and einc is wrong: each row holds the
// correct expectation; what einc does instead is in the comment.
// clang-format on

double intensity_of(const Row& row) {
    return plan_of(row).total.intensity();
}

// The plan of a call on operands of these dtypes, shapes and strides.
Plan planned(Op op, Reduction reduction, std::string pattern, std::vector<TensorSpec> specs) {
    std::vector<Shape> shapes;
    for (const TensorSpec& spec : specs) shapes.push_back(spec.shape);
    return plan(bind(Call{op, std::move(pattern), reduction, {}, false, {}}, shapes), specs);
}

TensorSpec row_major(DType dtype, Shape shape) {
    return TensorSpec{dtype, shape, row_major_strides(shape)};
}

}  // namespace

TEST_CASE("plan table: step kinds, FLOPs and bytes of each call") {
    CHECK(table.size() >= 85);
    for (const Row& row : table) check_row(row);
}

TEST_CASE("plan table: operands of mixed dtypes - a converting copy each, or none for pack") {
    // f32 with i64 gives f64 (numpy): both operands are converted, then one f64 GEMM.
    const Plan gemm = planned(Op::einsum, Reduction::none, "i k, k j -> i j",
                              {row_major(F32, {64, 32}), row_major(DType::i64, {32, 48})});
    CHECK(step_kinds(gemm) == "copy copy gemm");
    CHECK(gemm.outputs[0].dtype == F64);
    CHECK(gemm.steps[0].why == "convert f32 to f64: operand 0, for numpy's promotion of the operands");
    CHECK(gemm.steps[1].why == "convert i64 to f64: operand 1, for numpy's promotion of the operands");
    CHECK(gemm.total.flops == 2. * 64 * 48 * 32);
    CHECK(gemm.total.bytes_read == 4. * 64 * 32 + 8. * 32 * 48 + 8. * (64 * 32 + 32 * 48));
    CHECK(gemm.total.bytes_written == 8. * 64 * 32 + 8. * 32 * 48 + 8. * 64 * 48);
    CHECK(gemm.total.workspace_bytes == 8. * (64 * 32 + 32 * 48));
    // An operand already in the promoted dtype is read as it is: i8 with i32 converts only the i8.
    const Plan ints = planned(Op::einsum, Reduction::none, "i k, k j -> i j",
                              {row_major(I8, {64, 32}), row_major(I32, {32, 48})});
    CHECK(step_kinds(ints) == "copy gemm");
    CHECK(ints.outputs[0].dtype == I32);
    // pack converts as it copies: i32 and f32 parts into an f64 result, no temporary.
    const Plan pack =
        planned(Op::pack, Reduction::none, "a *", {row_major(I32, {4, 2}), row_major(F32, {4, 3})});
    CHECK(step_kinds(pack) == "copy copy");
    CHECK(pack.outputs[0].dtype == F64);
    CHECK(pack.total.bytes_read == 4. * 8 + 4. * 12);
    CHECK(pack.total.bytes_written == 8. * 20);
    CHECK(pack.total.workspace_bytes == 0);
    // mean of i32: converted to f64 first (numpy's), then an f64 mean - one FLOP a term, one an output.
    const Plan mean = planned(Op::reduce, Reduction::mean, "a b -> a", {row_major(I32, {8, 16})});
    CHECK(step_kinds(mean) == "copy reduce");
    CHECK(mean.outputs[0].dtype == F64);
    CHECK(mean.steps[0].why == "convert i32 to f64: numpy's mean of i32 values");
    CHECK(mean.total.flops == 128. + 8);
    CHECK(mean.total.bytes_read == 4. * 128 + 8. * 128);
    CHECK(mean.total.bytes_written == 8. * 128 + 8. * 8);
    CHECK(mean.total.workspace_bytes == 8. * 128);
    // fp8 mixes with nothing.
    CHECK_THROWS_WITH_AS(
        planned(Op::pack, Reduction::none, "a *", {row_major(DType::f8e4m3, {4, 2}), row_major(F32, {4, 3})}),
        doctest::Contains("fp8 mixes with no other dtype"), Error);
}

// Complex arithmetic runs on the parts (plan_complex.cpp): a complex multiply-add is 8 real FLOPs.
TEST_CASE("plan table: complex sums and products, on the real parts") {
    const DType C64 = DType::c64, C128 = DType::c128;
    // A c64 GEMM: B (k x n) into its real form (k x 2 x n x 2, f32) by three copies - (re, im) whole,
    // then -im (an epilogue: 2 FLOPs an element) and re - then one f32 GEMM of m x 2k x 2n: 8 m n k FLOPs.
    const std::int64_t m = 64, k = 32, n = 48;
    const Plan gemm = planned(Op::einsum, Reduction::none, "i k, k j -> i j",
                              {row_major(C64, {m, k}), row_major(C64, {k, n})});
    CHECK(step_kinds(gemm) == "copy copy copy gemm");
    CHECK(gemm.outputs[0].dtype == C64);
    const Gemm& real = std::get<Gemm>(gemm.steps[3].step);
    CHECK((real.m == m && real.k == 2 * k && real.n == 2 * n));
    CHECK((real.a.buffer.parts && real.c.buffer.parts && !real.b.buffer.parts));
    CHECK(gemm.steps[3].cost.flops == 8. * m * n * k);
    CHECK(gemm.total.flops == 8. * m * n * k + 2. * k * n);
    CHECK(gemm.total.bytes_read == 8. * k * n + 4. * k * n * 2 + (8. * m * k + 16. * k * n));
    CHECK(gemm.total.bytes_written == 16. * k * n + 8. * m * n);
    CHECK(gemm.total.workspace_bytes == 16. * k * n);
    // A column-major A is copied row-major first (its parts lie along K).
    const Plan transposed = planned(Op::einsum, Reduction::none, "k i, k j -> i j",
                                    {row_major(C128, {k, m}), row_major(C128, {k, n})});
    CHECK(step_kinds(transposed) == "copy copy copy copy gemm");
    CHECK(transposed.total.flops == 8. * m * n * k + 2. * k * n);
    // A c128 sum: a real sum keeping the two parts, one FLOP a part of each term.
    const Plan sum = planned(Op::reduce, Reduction::sum, "a b -> a", {row_major(C128, {8, 16})});
    CHECK(step_kinds(sum) == "reduce");
    CHECK(sum.total.flops == 2. * 128);
    CHECK(sum.total.bytes_read == 16. * 128);
    CHECK(sum.total.bytes_written == 16. * 8);
    // An elementwise product: the smaller factor (the vector) expanded, then a real contraction over
    // (p, r): 2 FLOPs for each of its 4 products of parts, 8 an element.
    const Plan scale = planned(Op::einsum, Reduction::none, "a b, b -> a b",
                               {row_major(C64, {8, 16}), row_major(C64, {16})});
    CHECK(step_kinds(scale) == "copy copy copy contract");
    CHECK(scale.steps[3].cost.flops == 8. * 128);
    CHECK(scale.total.workspace_bytes == 16. * 16);
    // Complex numbers have no order.
    CHECK_THROWS_WITH_AS(planned(Op::reduce, Reduction::max, "a b -> a", {row_major(C64, {8, 16})}),
                         doctest::Contains("max of c64 tensors is not defined"), Error);
    // A product: the 16 terms of each row halved four times by elementwise products (each its factor's
    // real form and a real contraction), after a copy of the terms as rows: 8 FLOPs a product, 8 * 15 a row.
    const Plan product = planned(Op::reduce, Reduction::prod, "a b -> a", {row_major(C64, {8, 16})});
    CHECK(step_kinds(product) ==
          "copy copy copy copy contract copy copy copy contract copy copy copy contract "
          "copy copy copy contract");
    CHECK(product.total.flops == 8. * 8 * 15 + 2. * (8 * 8 + 8 * 4 + 8 * 2 + 8 * 1));  // (+ the -im copies)
}

TEST_CASE("plan table: the cost model's standard figures") {
    // x @ w, B=16384 D=32768 K=8192
    const Plan linear = plan_of({"einsum", "b d, d k -> b k", {}, BF16, {"16384x32768", "32768x8192"}});
    CHECK(linear.total.flops == 2 * B * D * K);
    // in bf16: scaling ~1/4 (n / (2n + 2 + 2n)), dot ~1/2 (2n / (2n + 2n + 2)), matrix-vector ~1
    // (2n^2 / (2n^2 + 2n + 2n)), an n x n matmul ~n/3 (2n^3 / 6n^2)
    const auto within_1_percent = [](double value) { return doctest::Approx(value).epsilon(0.01); };
    CHECK(intensity_of({"einsum", "i, -> i", {}, BF16, {"1048576", "scalar"}}) == within_1_percent(0.25));
    CHECK(intensity_of({"einsum", "i, i ->", {}, BF16, {"1048576", "1048576"}}) == within_1_percent(0.5));
    CHECK(intensity_of({"einsum", "i j, j -> i", {}, BF16, {"4096x4096", "4096"}}) == within_1_percent(1));
    CHECK(intensity_of({"einsum", "i k, k j -> i j", {}, BF16, {"4096x4096", "4096x4096"}}) ==
          within_1_percent(4096.0 / 3));
}

TEST_CASE("plan table: the strides of viewed outputs") {
    const auto view_strides = [](const Row& row) {
        const Plan plan = plan_of(row);
        REQUIRE(step_kinds(plan) == "view");
        return plan.outputs[0].strides;
    };
    CHECK(view_strides({"rearrange", "b c h w -> b h w c", {}, F32, {"2x3x4x5"}}) == Shape{60, 5, 1, 20});
    CHECK(view_strides({"rearrange", "b (h w) c -> b h w c", {{"h", 4}}, F32, {"2x32x3"}}) ==
          Shape{96, 24, 3, 1});
    CHECK(view_strides({"rearrange", "(a b) c -> a b c", {{"a", 2}}, F32, {"(8,4):(1,8)"}}) ==
          Shape{4, 1, 8});
    CHECK(view_strides({"rearrange", "a b -> (b a)", {}, F32, {"(4,8):(1,4)"}}) == Shape{1});
    CHECK(view_strides({"rearrange", "a b c -> a (b c)", {}, F32, {"(2,4,8):(100,8,1)"}}) == Shape{100, 1});
    CHECK(view_strides({"rearrange", "b h s d -> (h b) s d", {}, F32, {"(2,4,16,8):(128,256,8,1)"}}) ==
          Shape{128, 8, 1});
    CHECK(view_strides({"repeat", "h w -> h w c", {{"c", 3}}, F32, {"4x8"}}) == Shape{8, 1, 0});
    CHECK(view_strides({"repeat", "h w -> c h w", {{"c", 2}}, F32, {"(3,4):(1,3)"}}) == Shape{0, 1, 3});
    CHECK(view_strides({"einsum", "i i -> i", {}, F32, {"5x5"}}) == Shape{6});
    CHECK(view_strides({"einsum", "b i i -> b i", {}, F32, {"3x5x5"}}) == Shape{25, 6});

    // pack of one tensor: the packed dim is the flattening of its part
    CHECK(view_strides({"pack", "* c", {}, F32, {"3x4x5"}}) == Shape{5, 1});
    CHECK(view_strides({"pack", "b * c", {}, F32, {"2x3x4"}}) == Shape{12, 4, 1});
    CHECK(view_strides({"pack", "* c", {}, F32, {"(3,4,5):(20,5,1)"}}) == Shape{5, 1});

    // unpack: part 2 of b * c starts at element 13 * 5 of the packed dim
    Row unpack{"unpack", "b * c", {}, F32, {"2x20x5"}};
    unpack.packed = {{3, 4}, {}, {-1}};
    const Plan unpacked = plan_of(unpack);
    REQUIRE(unpacked.steps.size() == 3);
    CHECK(unpacked.outputs[0].strides == Shape{100, 20, 5, 1});
    CHECK(unpacked.outputs[1].strides == Shape{100, 1});
    CHECK(unpacked.outputs[2].strides == Shape{100, 5, 1});
    CHECK(std::get<View>(unpacked.steps[2].step).source.offset == 65);
}

TEST_CASE("plan table: require_view names what blocks a view") {
    PlanOptions options;
    options.require_view = true;
    const auto help_of = [&](const Row& row) -> std::string {
        try {
            plan_of(row, options);
        } catch (const Error& e) {
            CHECK(e.kind() == ErrorKind::pattern);
            return e.diagnostic().help;
        }
        return "(no error)";
    };
    // b c h w row-major: h has stride 5, w 1, c 20
    const std::string merge = help_of({"rearrange", "b c h w -> b (h w c)", {}, F32, {"2x3x4x5"}});
    CHECK(merge.find("(h w c)") != std::string::npos);
    CHECK(merge.find("h:5, w:1, c:20") != std::string::npos);
    // transposed: a has stride 1, b stride 4
    const std::string transposed = help_of({"rearrange", "a b -> (a b)", {}, F32, {"(4,8):(1,4)"}});
    CHECK(transposed.find("a:1, b:4") != std::string::npos);
    // a new axis inside a group: c has stride 0
    const std::string repeated = help_of({"repeat", "h w -> h (w c)", {{"c", 2}}, F32, {"3x4"}});
    CHECK(repeated.find("w:1, c:0") != std::string::npos);
    CHECK(help_of({"reduce sum", "a b -> a", {}, F32, {"4x8"}}) != "(no error)");
    CHECK(help_of({"einsum", "i k, k j -> i j", {}, F32, {"4x8", "8x3"}}) != "(no error)");
    // what can be a view still is
    const Row permutation{"rearrange", "b c h w -> b h w c", {}, F32, {"2x3x4x5"}};
    CHECK(step_kinds(plan_of(permutation, options)) == "view");
    CHECK(step_kinds(plan_of({"einsum", "i i -> i", {}, F32, {"5x5"}}, options)) == "view");
}

TEST_CASE("plan table: contraction order of the chains") {
    // opt_einsum's count: a pairwise contraction over the axes U costs |U| * 2 when it sums an axis
    const Plan left = plan_of({"einsum", "i j, j k, k l -> i l", {}, F32, {"8x64", "64x4", "4x64"}});
    REQUIRE(left.path.has_value());
    CHECK(left.path->pairs == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {0, 1}});
    CHECK(left.path->optimized_flops == 8. * 64 * 4 * 2 + 8. * 4 * 64 * 2);
    CHECK(left.path->naive_flops == 8. * 64 * 4 * 64 * 3);  // (3 operands - 1) + 1 for the sum
    const Plan right = plan_of({"einsum", "i j, j k, k l -> i l", {}, F32, {"64x4", "4x64", "64x8"}});
    REQUIRE(right.path.has_value());
    CHECK(right.path->pairs == std::vector<std::pair<std::size_t, std::size_t>>{{1, 2}, {0, 1}});
    CHECK(right.path->optimized_flops == 4. * 64 * 8 * 2 + 64. * 4 * 8 * 2);
    const Row chain{"einsum", "a b, b c, c d, d e -> a e", {}, F32, {"4x32", "32x4", "4x32", "32x4"}};
    const Plan four = plan_of(chain);
    REQUIRE(four.path.has_value());
    CHECK(four.path->pairs == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {0, 1}, {0, 1}});
    CHECK(four.path->optimized_flops == 4. * 32 * 4 * 2 * 2 + 4. * 4 * 4 * 2);
}

TEST_CASE("plan table: PlanChoices walks every contraction order and every GEMM copy sizes could choose") {
    using Pairs = std::vector<std::pair<std::size_t, std::size_t>>;
    const auto walk = [](const Row& row, const auto& what) {
        std::vector<decltype(what(Plan{}))> walked;
        PlanChoices choices;
        do {
            PlanOptions options;
            options.choices = &choices;
            walked.push_back(what(plan_of(row, options)));
        } while (choices.next());
        std::sort(walked.begin(), walked.end());
        return walked;
    };
    // Three operands: every first pair, the searched order among them (with the GEMMs' choices, some
    // more than once).
    const auto orders = [&](const Row& row) {
        std::vector<Pairs> walked = walk(row, [](const Plan& p) { return p.path->pairs; });
        walked.erase(std::unique(walked.begin(), walked.end()), walked.end());
        return walked;
    };
    const Row chain{"einsum", "i j, j k, k l -> i l", {}, F32, {"64x4", "4x64", "64x8"}};
    CHECK(orders(chain) == std::vector<Pairs>{{{0, 1}, {0, 1}}, {{0, 2}, {0, 1}}, {{1, 2}, {0, 1}}});
    CHECK(plan_of(chain).path->pairs == Pairs{{1, 2}, {0, 1}});
    CHECK(orders({"einsum", "a b, b c, c d, d e -> a e", {}, F32, {"4x32", "32x4", "4x32", "32x4"}}).size() ==
          6 * 3);
    // (j l) is one stride in one order in operand 0 and in the other in operand 1: the GEMM copies the
    // smaller of them, operand 0 where i < k, operand 1 where i > k. The walk takes both.
    const auto copied = [](const Plan& p) {
        std::vector<std::uint32_t> read;
        for (const PlanStep& step : p.steps)
            if (const auto* copy = std::get_if<Copy>(&step.step)) read.push_back(copy->src.buffer.index);
        return read;
    };
    CHECK(copied(plan_of({"einsum", "i j l, l j k -> i k", {}, F32, {"2x3x5", "5x3x8"}})) ==
          std::vector<std::uint32_t>{0});
    CHECK(copied(plan_of({"einsum", "i j l, l j k -> i k", {}, F32, {"8x3x5", "5x3x2"}})) ==
          std::vector<std::uint32_t>{1});
    CHECK(walk({"einsum", "i j l, l j k -> i k", {}, F32, {"2x3x5", "5x3x8"}}, copied) ==
          std::vector<std::vector<std::uint32_t>>{{0}, {1}});
    // A GEMM that needs no copy in its first order has no other choice.
    CHECK(walk({"einsum", "i j, j k -> i k", {}, F32, {"2x3", "3x4"}}, copied).size() == 1);
}

// Reported, not yet fixed: doctest prints these failures without failing the run.

TEST_CASE("schedule: a GPU GEMM's compute type, TF32 only where the target allows it") {
    const auto compute = [](DType dtype, bool allow_tf32) {
        const std::vector<TensorSpec> inputs{{dtype, {64, 32}, {32, 1}}, {dtype, {32, 16}, {16, 1}}};
        const std::vector<Shape> shapes{inputs[0].shape, inputs[1].shape};
        const Plan p =
            plan(bind(Call{Op::einsum, "i k, k j -> i j", Reduction::none, {}, false, {}}, shapes), inputs);
        const Schedule s = schedule(p, Target::gpu(132, allow_tf32));
        REQUIRE(s.steps.size() == 1);
        const auto* gemm = std::get_if<strategy::LibraryGemm>(&s.steps[0].strategy);
        REQUIRE(gemm != nullptr);
        const bool printed = print_schedule(p, s).find("compute tf32") != std::string::npos;
        CHECK(printed == (gemm->compute == strategy::GemmCompute::tf32));
        return gemm->compute;
    };
    using strategy::GemmCompute;
    CHECK(compute(DType::f32, false) == GemmCompute::f32);
    CHECK(compute(DType::f32, true) == GemmCompute::tf32);
    CHECK(compute(DType::f64, true) == GemmCompute::f64);
    CHECK(compute(DType::bf16, true) == GemmCompute::f32);  // (accumulated in f32, as cuBLAS does)
    CHECK(compute(DType::f16, false) == GemmCompute::f32);
}
