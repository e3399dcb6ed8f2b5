// Differential tests of the CPU executor: random calls of every operation and dtype, on random
// non-contiguous layouts (slices, transposes, broadcasts, reversed strides), against the reference
// interpreter. Fixed seeds: every run checks the same cases.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <doctest/doctest.h>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <set>

#include "einc_build_info.hpp"
#if EINC_HAS_BLAS
#include <cblas.h>
#endif

#include "compiler/bind.hpp"
#include "compiler/plan.hpp"
#include "compiler/schedule_rules.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/api.hpp"
#include "runtime/cpu/isa.hpp"
#include "runtime/execute.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"
#include "tests/sanitized.hpp"

using namespace einc;

namespace {

// `dtype`: the inputs' dtype; none: each input's drawn from numeric_dtypes and bool.
void check_executor(Op op, std::optional<DType> dtype, int cases, unsigned seed) {
    static constexpr DType mixed[] = {DType::f64, DType::f32, DType::f16, DType::bf16,
                                      DType::i8,  DType::i16, DType::i32, DType::i64,
                                      DType::u8,  DType::u32, DType::u64, DType::boolean};
    std::mt19937 rng(seed);
    for (int i = 0; i < cases; ++i) {
        const testing::RandomCase c =
            dtype ? testing::random_case(rng, op, *dtype) : testing::random_mixed_case(rng, op, mixed);
        CAPTURE(c.describe());
        REQUIRE(c.storage.size() == c.inputs.size());  // input k lives in storage k (gpu_test copies it so)
        for (std::size_t k = 0; k < c.inputs.size(); ++k) {
            const auto* base = static_cast<const std::byte*>(c.storage[k].data());
            const auto* data = static_cast<const std::byte*>(c.inputs[k].data);
            CHECK((data >= base && data < base + c.storage[k].nbytes()));
        }
        try {
            const auto [bound, planned] = testing::bind_and_plan(c.call, c.inputs);
            const std::vector<Tensor> expected = reference::evaluate(bound, c.inputs);
            std::vector<Tensor> storage;
            std::vector<TensorView> outputs(planned.outputs.size());
            for (std::size_t k = 0; k < planned.outputs.size(); ++k) {
                if (planned.view_source(k)) continue;
                storage.push_back(Tensor::empty(planned.outputs[k].dtype, planned.outputs[k].shape));
                outputs[k] = storage.back().view();
            }
            execute_on_cpu(planned, schedule(planned, cpu_target()), c.inputs, outputs);
            REQUIRE(outputs.size() == expected.size());
            for (std::size_t k = 0; k < expected.size(); ++k) {
                std::string difference;
                CHECK_MESSAGE(testing::same_values(outputs[k], expected[k].view(), &difference), difference);
            }
        } catch (const Error& e) {
            FAIL_CHECK(e.what());
        }
    }
}

// Each instruction set's copy kernels, with the register width to schedule them for (and the baseline's
// without register blocks too, so that 4-byte tiles are also written element by element).
struct CopyKernels {
    const char* name;
    void (*transpose)(const strategy::Transpose&, const cpu::Data&, const cpu::Data&);
    int vector_bytes;
};
std::vector<CopyKernels> copy_kernels() {
    std::vector<CopyKernels> isas{{"baseline", cpu::baseline::transpose, 16},
                                  {"baseline, no register blocks", cpu::baseline::transpose, 0}};
#if EINC_HAS_AVX2_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        isas.push_back({"avx2", cpu::avx2::transpose, 32});
#endif
    return isas;
}

// Schedules a copy between two layouts of one index space for `isa` and runs that kernel on bytes that
// differ everywhere; returns the elements of dst that differ from an index loop's. `declared_large`: the
// plan step says it moves enough to be streamed, whatever its size.
std::int64_t wrong_after_copy(const CopyKernels& isa, DType dtype, const Layout& dst_layout,
                              const Layout& src_layout, std::set<TransposeKind>* kinds = nullptr,
                              bool* streamed = nullptr, bool declared_large = false) {
    const auto size = static_cast<std::int64_t>(size_of(dtype));
    const auto span_of = [](const Layout& layout) {
        std::int64_t last = 0;
        for (const Mode& m : layout.modes) last += (m.extent - 1) * m.stride;
        return last + 1;
    };
    Tensor src = Tensor::empty(dtype, {span_of(src_layout)}),
           dst = Tensor::zeros(dtype, {span_of(dst_layout)});
    auto* in = static_cast<std::uint8_t*>(src.data());
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(src.nbytes()); ++i)
        in[i] = static_cast<std::uint8_t>(i * 131 + i / 253);
    Plan plan;
    plan.inputs = {TensorSpec{dtype, {span_of(src_layout)}, {1}}};
    plan.outputs = {TensorSpec{dtype, {span_of(dst_layout)}, {1}}};
    // read, and written: the cost streaming depends on
    const double bytes = declared_large ? static_cast<double>(detail::streaming_bytes)
                                        : static_cast<double>(dst_layout.size() * size);
    plan.steps.push_back(PlanStep{Copy{Access{Buffer{Buffer::Kind::input, 0}, 0, src_layout},
                                       Access{Buffer{Buffer::Kind::output, 0}, 0, dst_layout},
                                       {}},
                                  Cost{0, bytes, bytes, 0}, ""});
    const ScheduledStep step = schedule(plan, Target::cpu(2, isa.vector_bytes, false)).steps[0];
    const auto* transpose = std::get_if<strategy::Transpose>(&step.strategy);
    REQUIRE(transpose != nullptr);
    if (kinds != nullptr) kinds->insert(transpose->kind);
    if (streamed != nullptr) *streamed |= transpose->streaming_stores;
    isa.transpose(*transpose, cpu::Data{static_cast<std::byte*>(dst.data()), dtype},
                  cpu::Data{static_cast<std::byte*>(src.data()), dtype});
    const auto* out = static_cast<const std::uint8_t*>(dst.data());
    std::int64_t wrong = 0;
    const std::size_t rank = dst_layout.rank();
    std::vector<std::int64_t> index(rank, 0);
    for (std::int64_t n = 0; n < dst_layout.size(); ++n) {
        std::int64_t d = 0, s_ = 0;
        for (std::size_t m = 0; m < rank; ++m) {
            d += index[m] * dst_layout.modes[m].stride;
            s_ += index[m] * src_layout.modes[m].stride;
        }
        wrong += std::memcmp(out + d * size, in + s_ * size, static_cast<std::size_t>(size)) != 0;
        for (std::size_t m = rank; m-- > 0;) {
            if (++index[m] < dst_layout.modes[m].extent) break;
            index[m] = 0;
        }
    }
    return wrong;
}

const DType movement_dtypes[] = {DType::f64,    DType::f32,    DType::f16,  DType::bf16,
                                 DType::f8e4m3, DType::f8e5m2, DType::i8,   DType::i32,
                                 DType::i64,    DType::c64,    DType::c128, DType::boolean};
const DType numeric_dtypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,
                                DType::i8,  DType::i32, DType::i64};

}  // namespace

TEST_CASE("cpu executor: rearrange, every dtype") {
    unsigned seed = 100;
    for (const DType dtype : movement_dtypes) check_executor(Op::rearrange, dtype, 150, seed++);
}

TEST_CASE("cpu executor: repeat, every dtype") {
    unsigned seed = 200;
    for (const DType dtype : movement_dtypes) check_executor(Op::repeat, dtype, 100, seed++);
}

TEST_CASE("cpu executor: reduce, numeric dtypes and bool") {
    unsigned seed = 300;
    for (const DType dtype : numeric_dtypes) check_executor(Op::reduce, dtype, 200, seed++);
    check_executor(Op::reduce, DType::boolean, 200, seed++);
}

TEST_CASE("cpu executor: einsum, numeric dtypes and bool") {
    unsigned seed = 400;
    for (const DType dtype : numeric_dtypes) check_executor(Op::einsum, dtype, 250, seed++);
    check_executor(Op::einsum, DType::boolean, 250, seed++);  // an or of ands, as numpy
}

// i16 u8 u16 u32 are converted to a wider integer for arithmetic (arithmetic_dtype) and back; u64 has
// kernels of its own (it compares unsigned). Random values -3..3 stored wrap to large unsigned ones.
TEST_CASE("cpu executor: the 16-bit and unsigned integers, every op") {
    unsigned seed = 600;
    for (const DType dtype : {DType::i16, DType::u8, DType::u16, DType::u32, DType::u64}) {
        check_executor(Op::rearrange, dtype, 40, seed++);
        check_executor(Op::repeat, dtype, 30, seed++);
        check_executor(Op::reduce, dtype, 120, seed++);
        check_executor(Op::einsum, dtype, 120, seed++);
        check_executor(Op::pack, dtype, 20, seed++);
        check_executor(Op::unpack, dtype, 20, seed++);
    }
}

// Complex sums and products run as real ones on the parts (plan_complex.cpp): the reference computes in
// std::complex<double>, the plan interpreter on the parts as the plan says.
TEST_CASE("cpu executor: reduce and einsum of complex tensors") {
    unsigned seed = 700;
    for (const DType dtype : {DType::c64, DType::c128}) {
        check_executor(Op::reduce, dtype, 150, seed++);
        check_executor(Op::einsum, dtype, 250, seed++);
    }
}

TEST_CASE("cpu executor: pack and einsum of complex with real operands, promoted as numpy") {
    static constexpr DType with_complex[] = {DType::c64, DType::c128, DType::f32, DType::f64,
                                             DType::i8,  DType::i32,  DType::u16, DType::boolean};
    std::mt19937 rng(453);
    int complex_results = 0;
    for (int i = 0; i < 200; ++i) {
        const Op op = i % 2 == 0 ? Op::pack : Op::einsum;
        const testing::RandomCase c = testing::random_mixed_case(rng, op, with_complex);
        CAPTURE(c.describe());
        const auto [bound, planned] = testing::bind_and_plan(c.call, c.inputs);
        const std::vector<Tensor> expected = reference::evaluate(bound, c.inputs);
        Tensor result = Tensor::empty(planned.outputs[0].dtype, planned.outputs[0].shape);
        TensorView output = result.view();
        execute_on_cpu(planned, schedule(planned, cpu_target()), c.inputs, std::span(&output, 1));
        std::string difference;
        CHECK_MESSAGE(testing::same_values(output, expected[0].view(), &difference), difference);
        complex_results += is_complex(output.dtype);
    }
    CHECK(complex_results > 60);
}

TEST_CASE("cpu executor: einsum and pack of operands of mixed dtypes, promoted as numpy") {
    check_executor(Op::einsum, std::nullopt, 300, 450);
    check_executor(Op::pack, std::nullopt, 150, 451);
    check_executor(Op::rearrange, std::nullopt, 50, 452);  // one operand: nothing to promote
}

TEST_CASE("cpu executor: pack and unpack, every dtype") {
    unsigned seed = 500;
    for (const DType dtype : movement_dtypes) {
        check_executor(Op::pack, dtype, 60, seed++);
        check_executor(Op::unpack, dtype, 60, seed++);
    }
}

namespace {

// Runs a call through the planner and the CPU executor, materialising every result.
std::vector<Tensor> run_call(const Call& call, std::span<const TensorView> inputs) {
    PlanOptions options;
    options.contiguous = true;
    const Plan planned = testing::bind_and_plan(call, inputs, options).plan;
    std::vector<Tensor> results;
    std::vector<TensorView> outputs(planned.outputs.size());
    for (std::size_t k = 0; k < planned.outputs.size(); ++k) {
        REQUIRE_FALSE(planned.view_source(k));  // these cases all compute
        results.push_back(Tensor::empty(planned.outputs[k].dtype, planned.outputs[k].shape));
        outputs[k] = results.back().view();
    }
    execute_on_cpu(planned, schedule(planned, cpu_target()), inputs, outputs);
    return results;
}

}  // namespace

TEST_CASE("cpu executor: tensors large enough to be split across threads") {
    constexpr std::int64_t rows = 1024, cols = 1536;  // 6 MiB of f32
    Tensor x = Tensor::empty(DType::f32, {rows, cols});
    float* data = x.data_as<float>();
    for (std::int64_t i = 0; i < rows * cols; ++i) data[i] = static_cast<float>((i * 7919) % 13) - 6.0f;
    const std::vector<TensorView> inputs{x.view()};

    SUBCASE("transpose") {
        const Tensor t =
            run_call(Call{Op::rearrange, "r c -> c r", Reduction::none, {}, false, {}}, inputs)[0];
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j)
                REQUIRE(t.data_as<float>()[j * rows + i] == data[i * cols + j]);
    }
    SUBCASE("merge through a transpose: (c r) blocks of 2") {
        const Tensor t = run_call(
            Call{Op::rearrange, "r (c k) -> (c r) k", Reduction::none, {{"k", 2}}, false, {}}, inputs)[0];
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j)
                REQUIRE(t.data_as<float>()[((j / 2) * rows + i) * 2 + j % 2] == data[i * cols + j]);
    }
    SUBCASE("sum over rows (outer axis), over columns (inner axis), and over everything") {
        const Tensor outer = run_call(Call{Op::reduce, "r c -> c", Reduction::sum, {}, false, {}}, inputs)[0];
        const Tensor inner = run_call(Call{Op::reduce, "r c -> r", Reduction::max, {}, false, {}}, inputs)[0];
        const Tensor all = run_call(Call{Op::reduce, "r c ->", Reduction::sum, {}, false, {}}, inputs)[0];
        double total = 0;
        for (std::int64_t j = 0; j < cols; ++j) {
            double column = 0;
            for (std::int64_t i = 0; i < rows; ++i) column += data[i * cols + j];
            REQUIRE(outer.data_as<float>()[j] == static_cast<float>(column));
            total += column;
        }
        for (std::int64_t i = 0; i < rows; ++i)
            REQUIRE(inner.data_as<float>()[i] == *std::max_element(data + i * cols, data + (i + 1) * cols));
        CHECK(all.data_as<float>()[0] == static_cast<float>(total));
    }
    SUBCASE("a middle axis, runs of 4, and 2x2 pooling windows") {
        const Tensor mid =
            run_call(Call{Op::reduce, "a (b c) -> a c", Reduction::max, {{"c", 48}}, false, {}}, inputs)[0];
        for (std::int64_t a = 0; a < rows; ++a)
            for (std::int64_t c = 0; c < 48; ++c) {
                float best = data[a * cols + c];
                for (std::int64_t b = 0; b < cols / 48; ++b)
                    best = std::max(best, data[a * cols + b * 48 + c]);
                REQUIRE(mid.data_as<float>()[a * 48 + c] == best);
            }
        const Tensor fours =
            run_call(Call{Op::reduce, "a (b k) -> a b", Reduction::sum, {{"k", 4}}, false, {}}, inputs)[0];
        for (std::int64_t i = 0; i < rows * cols / 4; ++i)
            REQUIRE(fours.data_as<float>()[i] ==
                    data[4 * i] + data[4 * i + 1] + data[4 * i + 2] + data[4 * i + 3]);
        const Tensor pooled =
            run_call(Call{Op::reduce, "(h 2) (w 2) -> h w", Reduction::mean, {}, false, {}}, inputs)[0];
        for (std::int64_t h = 0; h < rows / 2; ++h)
            for (std::int64_t w = 0; w < cols / 2; ++w) {
                const float* x = data + 2 * h * cols + 2 * w;
                REQUIRE(pooled.data_as<float>()[h * cols / 2 + w] ==
                        doctest::Approx((x[0] + x[1] + x[cols] + x[cols + 1]) / 4.0));
            }
    }
    SUBCASE("repeat materialised") {
        const Tensor t =
            run_call(Call{Op::repeat, "r c -> r (c 2)", Reduction::none, {}, false, {}}, inputs)[0];
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < 2 * cols; ++j)
                REQUIRE(t.data_as<float>()[i * 2 * cols + j] == data[i * cols + j / 2]);
    }
}

// The transposes of runtime/cpu/copy.cpp: tiles through a buffer, written out through 8x8 (AVX2) or 4x4
// (SSE2) register blocks for 4-byte elements and element by element for the others (and at the edges);
// register blocks straight from the source where the caches hold the copy (direct, in strips of 16 rows:
// 24 and 131 leave 8 and 3); with a side of 8 or fewer, no tiles. Each instruction set's kernel is called
// directly, on sizes around every edge, against index loops; f32 also declared large, so streamed
// (register blocks through the staging area: rows off vector alignment, 8 x 3000 with runs longer than a
// staged row).
TEST_CASE("cpu kernels: tiled transposes at every edge width, every element size, each instruction set") {
    const std::pair<std::int64_t, std::int64_t> sizes[] = {{4, 4},   {8, 8},    {9, 7},       {16, 12},
                                                           {64, 64}, {67, 130}, {131, 65},    {5, 300},
                                                           {300, 5}, {8, 3000}, {1030, 1400}, {24, 40}};
    std::set<TransposeKind> kinds;
    bool streamed = false;
    // (No structured bindings: CAPTURE's lambdas take them, which Clang 14 refuses.)
    for (const CopyKernels& isa : copy_kernels())
        for (const DType dtype : {DType::i8, DType::f16, DType::f32, DType::f64})
            for (const auto& size_pair : sizes)
                for (const std::int64_t batch : {1, 3}) {
                    const std::int64_t rows = size_pair.first, cols = size_pair.second;
                    // (under the sanitizers the largest size only as the f32 batch that streams)
                    if (testing::sanitized && rows * cols > 1'000'000 && (batch == 1 || dtype != DType::f32))
                        continue;
                    const std::string kernels_for = isa.name;
                    CAPTURE(kernels_for);
                    CAPTURE(name_of(dtype));
                    CAPTURE(rows);
                    CAPTURE(cols);
                    CAPTURE(batch);
                    // dst[b][r][c] = src[b][c][r], both row-major: the source is contiguous along r.
                    const Shape extents{batch, rows, cols};
                    const Layout dst = row_major(extents),
                                 src = make_layout(extents, Shape{rows * cols, 1, rows});
                    CHECK(wrong_after_copy(isa, dtype, dst, src, &kinds, &streamed) == 0);
                    if (dtype == DType::f32) {  // streamed, whatever the size: runs through the staging area
                        bool streamed_here = false;
                        CHECK(wrong_after_copy(isa, dtype, dst, src, &kinds, &streamed_here, true) == 0);
                        const std::int64_t block = isa.vector_bytes / 4;  // register transposes stream
                        CHECK(streamed_here == (block > 0 && rows >= block && cols >= block));
                    }
                }
    CHECK(kinds == std::set<TransposeKind>{TransposeKind::registers, TransposeKind::tiles,
                                           TransposeKind::direct, TransposeKind::short_side});
    CHECK(
        streamed);  // 3 x 1030 x 1400 4-byte elements: 17 MB, twice that beyond the caches: streaming stores
}

// Permutations of rank 3 to 6 whose tiles span several modes (each side's contiguous modes, whole or in
// part), with partial tiles at every edge, every element size, against index loops.
TEST_CASE(
    "cpu kernels: tiled transposes of higher rank, across modes and partial tiles, each instruction set") {
    struct Case {
        Shape shape;                   // the source, row-major
        std::vector<std::size_t> dst;  // the destination's dims: source dims, row-major
    };
    const Case cases[] = {
        {{8, 8, 16, 16, 8, 32}, {5, 3, 1, 4, 2, 0}},  // cpu_bench's 6-D permutation
        {{9, 5, 7, 3, 11, 13}, {5, 3, 1, 4, 2, 0}},   // odd extents: every tile partial
        {{16, 3, 32, 10, 33}, {4, 2, 1, 3, 0}},
        {{40, 41, 42}, {2, 1, 0}},
        {{9, 70, 6, 12}, {0, 2, 3, 1}},
        {{2, 3, 4, 5, 6, 7}, {1, 5, 3, 0, 4, 2}},
        {{12, 18, 2, 20}, {3, 1, 2, 0}},
    };
    bool tiled_across_modes = false;
    for (const CopyKernels& isa : copy_kernels())
        for (const DType dtype : {DType::i8, DType::f16, DType::f32, DType::f64})
            for (const Case& c : cases) {
                // (under the sanitizers the 6-D case of cpu_bench's size in f32 only; the odd one has its
                // permutation)
                std::int64_t count = 1;
                for (const std::int64_t e : c.shape) count *= e;
                if (testing::sanitized && count > 1'000'000 && dtype != DType::f32) continue;
                const std::string kernels_for = isa.name;
                CAPTURE(kernels_for);
                CAPTURE(name_of(dtype));
                CAPTURE(format_shape(c.shape));
                const Shape src_strides = row_major_strides(c.shape);
                Shape extents, strides;
                for (const std::size_t d : c.dst) {
                    extents.push_back(c.shape[d]);
                    strides.push_back(src_strides[d]);
                }
                const Layout dst = row_major(extents), src = make_layout(extents, strides);
                CHECK(wrong_after_copy(isa, dtype, dst, src) == 0);
                if (dtype == DType::f32)
                    CHECK(wrong_after_copy(isa, dtype, dst, src, nullptr, nullptr, true) == 0);  // streamed
                Plan plan;  // the tile, for the check below that some span more than the two transposed modes
                plan.inputs = {TensorSpec{dtype, c.shape, src_strides}};
                plan.outputs = {TensorSpec{dtype, extents, row_major_strides(extents)}};
                const auto large =
                    static_cast<double>(detail::streaming_bytes);  // buffered tiles (not direct)
                plan.steps.push_back(PlanStep{Copy{Access{Buffer{Buffer::Kind::input, 0}, 0, src},
                                                   Access{Buffer{Buffer::Kind::output, 0}, 0, dst},
                                                   {}},
                                              Cost{0, large, large, 0}, ""});
                const Schedule scheduled = schedule(plan, Target::cpu(2, isa.vector_bytes, false));
                const TransposeTiles& tiles =
                    std::get<strategy::Transpose>(scheduled.steps[0].strategy).tiles;
                tiled_across_modes |= std::count_if(tiles.extents.begin(), tiles.extents.end(),
                                                    [](std::int64_t e) { return e > 1; }) > 2;
            }
    CHECK(tiled_across_modes);
}

// Runs a call on small integer values (exact in every dtype) through the CPU schedule, contiguous, against
// the reference interpreter; notes which strategies the schedule chose (and how the steps split).
// With nan_every > 0, every nan_every-th value of the first operand is NaN.
void check_scheduled(const Call& call, const std::vector<Shape>& shapes, DType dtype,
                     std::set<std::string_view>& strategies, const Target& target = cpu_target(),
                     std::set<Split>* splits = nullptr, std::int64_t nan_every = 0) {
    CAPTURE(call.pattern);
    CAPTURE(name_of(dtype));
    CAPTURE(name_of(call.reduction));
    std::vector<Tensor> storage;
    std::vector<TensorView> inputs;
    unsigned seed = 1;
    for (const Shape& shape : shapes) {
        CAPTURE(format_shape(shape));
        std::int64_t n = 1;
        for (const std::int64_t e : shape) n *= e;
        std::vector<double> values(static_cast<std::size_t>(n));
        for (double& v : values) v = static_cast<double>((seed = seed * 1103515245u + 12345u) >> 16 & 7) - 3;
        for (std::size_t i = 0; nan_every > 0 && storage.empty() && i < values.size();
             i += static_cast<std::size_t>(nan_every))
            values[i] = NAN;
        storage.push_back(reference::make_tensor(dtype, shape, values));
        inputs.push_back(storage.back().view());
    }
    PlanOptions options;
    options.contiguous = true;
    const auto [bound, planned] = testing::bind_and_plan(call, inputs, options);
    const Schedule scheduled = schedule(planned, target);
    for (const ScheduledStep& step : scheduled.steps) {
        strategies.insert(name_of(step.strategy));
        if (splits != nullptr) splits->insert(split_of(step.strategy));
    }
    std::vector<Tensor> results;
    std::vector<TensorView> outputs;
    for (const TensorSpec& spec : planned.outputs) {
        results.push_back(Tensor::empty(spec.dtype, spec.shape));
        outputs.push_back(results.back().view());
    }
    execute_on_cpu(planned, scheduled, inputs, outputs);
    const std::vector<Tensor> expected = reference::evaluate(bound, inputs);
    std::string difference;
    CHECK_MESSAGE(testing::same_values(outputs[0], expected[0].view(), &difference), difference);
}

// f16 and bf16 rows that fold into one accumulator go through f32 tiles of 4096 elements (fold.hpp,
// reduce_widened_rows and fold_widened_block): rows of every length to 70; rows filling a tile and
// crossing into the next; rows longer than half a tile (folded a piece at a time); one accumulator for
// every row; max and min with NaN among the terms; rows of 2-4 terms, which fold direct - through both
// strategies, against the reference.
TEST_CASE("cpu executor: f16 and bf16 rows folded through f32 tiles, against the reference") {
    std::set<std::string_view> strategies;
    const auto reduce = [](const char* pattern, Reduction op) {
        return Call{Op::reduce, pattern, op, {}, false, {}};
    };
    for (const DType dtype : {DType::f16, DType::bf16}) {
        for (const Reduction op : {Reduction::sum, Reduction::mean, Reduction::max, Reduction::min}) {
            for (std::int64_t length = 1; length <= 70; ++length)
                check_scheduled(reduce("a b -> a", op), {{3, length}}, dtype, strategies);
            for (const Shape& shape : std::vector<Shape>{{300, 37}, {129, 64}, {2, 2049}, {3, 9000}})
                check_scheduled(reduce("a b -> a", op), {shape}, dtype, strategies);
            check_scheduled(reduce("a b ->", op), {{300, 37}}, dtype, strategies);
            check_scheduled(reduce("a b c -> b", op), {{6, 5, 1000}}, dtype, strategies);
            check_scheduled(reduce("a b c -> a", op), {{2, 70, 3}}, dtype, strategies);
        }
        for (const Reduction op : {Reduction::max, Reduction::min})
            for (const std::int64_t nan_every : {97, 1000}) {
                check_scheduled(reduce("a b -> a", op), {{300, 37}}, dtype, strategies, cpu_target(), nullptr,
                                nan_every);
                check_scheduled(reduce("a b c -> b", op), {{6, 5, 1000}}, dtype, strategies, cpu_target(),
                                nullptr, nan_every);
            }
        for (const std::int64_t length : {2, 3, 4, 7})
            check_scheduled(reduce("a b -> a", Reduction::prod), {{300, length}}, dtype, strategies);
    }
    CHECK(strategies.contains("reduce_rows"));
    CHECK(strategies.contains("reduce_accumulate"));
}

// Channels-last of 2 or 3 channels: short destination rows, a short-side transpose (schedule_cpu.cpp), alone
// and split between threads (the larger shape moves over 1 MiB), every element size.
TEST_CASE("cpu executor: NCHW -> NHWC of 2 and 3 channels is a short-side transpose, against the reference") {
    for (const DType dtype : {DType::i8, DType::bf16, DType::f32, DType::f64})
        for (const std::int64_t channels : {2, 3})
            for (const Shape& shape : {Shape{2, channels, 5, 7}, Shape{4, channels, 160, 160}}) {
                std::set<std::string_view> strategies;
                check_scheduled(Call{Op::rearrange, "b c h w -> b h w c", Reduction::none, {}, false, {}},
                                {shape}, dtype, strategies);
                CHECK(strategies == std::set<std::string_view>{"transpose"});
            }
}

TEST_CASE("cpu executor: every CPU strategy of the schedule, small and split between threads, against the "
          "reference") {
    struct Case {
        Call call;
        std::vector<Shape> shapes;
        DType dtype;
    };
    const auto call = [](Op op, std::string pattern, Reduction reduction = Reduction::none) {
        return Call{op, std::move(pattern), reduction, {}, false, {}};
    };
    std::vector<Case> cases;
    for (const std::int64_t n :
         {std::int64_t{24}, std::int64_t{600}}) {  // 600: over the threshold where threads split the work
        cases.push_back({call(Op::rearrange, "a b c -> c (a b)"), {{n, 7, 6}}, DType::f32});      // transpose
        cases.push_back({call(Op::rearrange, "a b c -> b (a c)"), {{n, 7, 6}}, DType::i8});       // move
        cases.push_back({call(Op::reduce, "a b -> a", Reduction::sum), {{n, 300}}, DType::f32});  // rows
        cases.push_back(
            {call(Op::reduce, "(a 2) (b 2) -> a b", Reduction::max), {{n, 40}}, DType::f32});  // windows
        cases.push_back(
            {call(Op::reduce, "a b -> b", Reduction::mean), {{n * 8, 30}}, DType::f32});  // accumulator
        cases.push_back(
            {call(Op::einsum, "i j, i j -> i j"), {{n, 300}, {n, 300}}, DType::f32});  // elementwise
        cases.push_back({call(Op::einsum, "b s e, e -> b s e"),
                         {{n, 3, 100}, {100}},
                         DType::bf16});  // elementwise, broadcast
        cases.push_back(
            {call(Op::einsum, "b h d, b j h d -> b h j"), {{n, 3, 64}, {n, 5, 3, 64}}, DType::f32});  // rows
        cases.push_back({call(Op::einsum, "b h d, b j h d -> b h j"),
                         {{n, 3, 4}, {n, 5, 3, 4}},
                         DType::i32});  // rows, few terms
        cases.push_back({call(Op::einsum, "i k, k j -> i j"), {{n, 30}, {30, 20}}, DType::f32});  // gemm
        cases.push_back({call(Op::einsum, "i j, j -> i"), {{n, 50}, {50}}, DType::f64});          // gemv
        cases.push_back({call(Op::einsum, "j, i j -> i"), {{50}, {n, 50}}, DType::f32});  // gemv, one row
        cases.push_back({call(Op::einsum, "b i, b i -> b"), {{n, 70}, {n, 70}}, DType::f32});     // dot
        cases.push_back({call(Op::einsum, "i k, k j -> i j"), {{n, 30}, {30, 20}}, DType::i32});  // packed
    }
    std::set<std::string_view> strategies;
    for (const Case& c : cases) check_scheduled(c.call, c.shapes, c.dtype, strategies);
    // A conversion: no call plans one today (results keep their dtype, or are reduced into another), but a
    // Copy step between dtypes is part of the plan's language.
    for (const std::int64_t n : {std::int64_t{24}, std::int64_t{600000}}) {
        CAPTURE(n);
        std::vector<double> values(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < values.size(); ++i)
            values[i] = static_cast<double>(i % 256) - 128;  // exact in bf16
        const Tensor in = reference::make_tensor(DType::i32, {n}, values);
        Tensor out = Tensor::empty(DType::bf16, {n});
        Plan plan;
        plan.inputs = {TensorSpec{DType::i32, {n}, {1}}};
        plan.outputs = {TensorSpec{DType::bf16, {n}, {1}}};
        plan.steps.push_back(PlanStep{Copy{Access{Buffer{Buffer::Kind::input, 0}, 0, row_major(Shape{n})},
                                           Access{Buffer{Buffer::Kind::output, 0}, 0, row_major(Shape{n})},
                                           {}},
                                      {},
                                      ""});
        const Schedule scheduled = schedule(plan, cpu_target());
        strategies.insert(name_of(scheduled.steps[0].strategy));
        std::vector<TensorView> outputs{out.view()};
        execute_on_cpu(plan, scheduled, std::span(&in.view(), 1), outputs);
        CHECK(reference::values_of(out.view()) == values);
    }
    for (const std::string_view s :
         {"move", "convert", "transpose", "reduce_rows", "reduce_windows", "reduce_accumulate",
          "contract_elementwise", "contract_rows", "library_gemv", "packed_gemm"})
        CHECK_MESSAGE(strategies.contains(s), "no case was scheduled as ", s);
#if EINC_HAS_BLAS
    CHECK(strategies.contains("library_gemm"));
#endif
}

#if EINC_HAS_BLAS
// CBLAS steps of several GEMMs share them between threads, each GEMM whole on one thread of OpenBLAS
// (gemm.cpp, Split::gemms), where they divide evenly enough and are work enough: batched, batched under an
// outer loop (attention in its natural layout), matrix-vector products, each just over the work where the
// split starts, scheduled for two threads whatever this machine has, against index loops (the reference
// interpreter would take seconds for these sizes); OpenBLAS's thread count is what it was afterwards.
TEST_CASE("cpu executor: library GEMMs shared between threads whole, against index loops") {
    const auto einsum_call = [](std::string pattern) {
        return Call{Op::einsum, std::move(pattern), Reduction::none, {}, false, {}};
    };
    const Target two_threads = Target::cpu(2, cpu::kernel_vector_bytes(), true);
    // Plans a call on operands of `shapes`, holding `values`, and schedules it for two threads.
    const auto scheduled = [&](const std::string& pattern, const std::vector<Shape>& shapes, DType dtype,
                               const std::vector<std::vector<double>>& values, std::vector<Tensor>& storage) {
        std::vector<TensorView> views;
        for (std::size_t k = 0; k < shapes.size(); ++k) {
            storage.push_back(values.empty() ? Tensor::empty(dtype, shapes[k])
                                             : reference::make_tensor(dtype, shapes[k], values[k]));
            views.push_back(storage.back().view());
        }
        PlanOptions options;
        options.contiguous = true;
        Plan planned = testing::bind_and_plan(einsum_call(pattern), views, options).plan;
        Schedule schedule_ = schedule(planned, two_threads);
        return std::pair{std::move(planned), std::move(schedule_)};
    };
    // Small integers: every product and sum exact in f32.
    const auto operand = [](std::int64_t n, unsigned seed) {
        std::vector<double> v(static_cast<std::size_t>(n));
        for (double& x : v) x = static_cast<double>((seed = seed * 1103515245u + 12345u) >> 16 & 7) - 3;
        return v;
    };
    using Values = std::vector<double>;
    struct Case {
        std::string pattern;
        std::vector<Shape> shapes;
        DType dtype;
        std::function<Values(const Values&, const Values&)> expected;
    };
    const auto scores = [](std::int64_t batch, std::int64_t m, std::int64_t n,
                           std::int64_t k) {  // b i d, b j d -> b i j
        return [=](const Values& a, const Values& b) {
            Values c(static_cast<std::size_t>(batch * m * n));
            for (std::int64_t g = 0; g < batch; ++g)
                for (std::int64_t i = 0; i < m; ++i)
                    for (std::int64_t j = 0; j < n; ++j)
                        for (std::int64_t d = 0; d < k; ++d)
                            c[static_cast<std::size_t>((g * m + i) * n + j)] +=
                                a[static_cast<std::size_t>((g * m + i) * k + d)] *
                                b[static_cast<std::size_t>((g * n + j) * k + d)];
            return c;
        };
    };
    const Case split[] = {
        {"b i d, b j d -> b i j",
         {{4, 64, 128}, {4, 64, 128}},
         DType::f32,
         scores(4, 64, 64, 128)},  // 4 MFLOP: where it starts
        {"b i d, b j d -> b i j",
         {{5, 64, 128}, {5, 56, 128}},
         DType::f64,
         scores(5, 64, 56, 128)},  // at least twice the threads
        {"b i h d, b j h d -> b h i j",
         {{3, 32, 4, 128}, {3, 44, 4, 128}},
         DType::f32,  // 3 outer x 4 batched
         [](const Values& a, const Values& b) {
             Values c(3 * 4 * 32 * 44);
             for (std::size_t n = 0; n < c.size(); ++n) {
                 const std::size_t j = n % 44, i = n / 44 % 32, h = n / (44 * 32) % 4, g = n / (44 * 32 * 4);
                 for (std::size_t d = 0; d < 128; ++d)
                     c[n] += a[((g * 32 + i) * 4 + h) * 128 + d] * b[((g * 44 + j) * 4 + h) * 128 + d];
             }
             return c;
         }},
        {"b i j, b j -> b i",
         {{8, 512, 512}, {8, 512}},
         DType::f64,  // matrix-vector products
         [](const Values& a, const Values& x) {
             Values c(8 * 512);
             for (std::size_t n = 0; n < c.size(); ++n)
                 for (std::size_t j = 0; j < 512; ++j) c[n] += a[n * 512 + j] * x[n / 512 * 512 + j];
             return c;
         }},
    };
    const int library_threads = openblas_get_num_threads();
    unsigned seed = 1;
    for (const Case& c : split) {
        CAPTURE(c.pattern);
        std::vector<Values> values;
        for (const Shape& shape : c.shapes) values.push_back(operand(row_major(shape).size(), seed++));
        std::vector<Tensor> storage;
        const auto [planned, schedule_] = scheduled(c.pattern, c.shapes, c.dtype, values, storage);
        REQUIRE(schedule_.steps.size() == 1);
        CHECK(split_of(schedule_.steps[0].strategy) == Split::gemms);
        Tensor out = Tensor::empty(c.dtype, planned.outputs[0].shape);
        std::vector<TensorView> inputs{storage[0].view(), storage[1].view()}, outputs{out.view()};
        execute_on_cpu(planned, schedule_, inputs, outputs);
        CHECK(reference::values_of(out.view()) == c.expected(values[0], values[1]));
    }
    CHECK(openblas_get_num_threads() == library_threads);
    // Not split (scheduled only): 3 GEMMs, of which one thread would run two; too little work.
    const auto split_for = [&](const std::string& pattern, const std::vector<Shape>& shapes) {
        std::vector<Tensor> storage;
        return split_of(scheduled(pattern, shapes, DType::f32, {}, storage).second.steps.at(0).strategy);
    };
    CHECK(split_for("b i d, b j d -> b i j", {{3, 256, 128}, {3, 256, 128}}) == Split::none);
    CHECK(split_for("b i d, b j d -> b i j", {{4, 32, 128}, {4, 64, 128}}) == Split::none);
}
#endif

// Sums down the columns of back-to-back short rows fold the block as one contiguous run (fold.hpp,
// sum_periodic) where the row length divides a vector's lanes: every such length and one that does not,
// row counts around the four-vector body, and enough rows to split between threads.
TEST_CASE("cpu executor: sums and means down short columns, against the reference") {
    std::set<std::string_view> strategies;
    for (const std::int64_t columns : {2, 3, 4})
        for (const std::int64_t rows : {17, 18, 23, 33, 300001})
            for (const Reduction op : {Reduction::sum, Reduction::mean})
                for (const DType dtype : {DType::f32, DType::f64}) {
                    CAPTURE(rows);
                    check_scheduled(Call{Op::reduce, "a b -> b", op, {}, false, {}}, {{rows, columns}}, dtype,
                                    strategies);
                }
    CHECK(strategies.contains("reduce_accumulate"));
}

// Pooling windows whose rows are 2 or 3 adjacent elements run a window row at a time (reduce.cpp,
// fold_adjacent_windows): each reduction and dtype, runs of outputs around the 16 where that path starts and
// the 256 of its chunks, against the reference.
TEST_CASE(
    "cpu executor: pooling windows of adjacent elements, every reduction, run lengths around each path") {
    std::set<std::string_view> strategies;
    for (const char* pattern : {"b (h 2) (w 2) -> b h w", "b (h 3) (w 3) -> b h w", "b (h 2) (w 3) -> b h w",
                                "b h (w 2) -> b h w", "b (h 3) (w 2) -> b h w"})
        for (const std::int64_t width : {5, 16, 17, 256, 300})
            for (const Reduction op : {Reduction::sum, Reduction::mean, Reduction::max, Reduction::min})
                for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::i32}) {
                    if (op == Reduction::mean && dtype == DType::i32) continue;
                    CAPTURE(width);
                    check_scheduled(Call{Op::reduce, pattern, op, {}, false, {}}, {{2, 6, 6 * width}}, dtype,
                                    strategies);
                }
    CHECK(strategies.contains("reduce_windows"));
}

TEST_CASE("cpu executor: 2x2 max and min pooling of f32 propagate a NaN from any place of a window, in the "
          "vector body or the tail") {
    // Under AVX2 eight windows at a time (fold_pair_windows), the rest one at a time.
    for (const std::int64_t width : {8, 11, 24}) {  // windows per row
        const std::int64_t columns = 2 * width, n = 2 * columns;
        std::vector<double> values(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i)
            values[static_cast<std::size_t>(i)] = static_cast<double>((i * 29) % 13) - 6.5;
        for (const Reduction op : {Reduction::max, Reduction::min})
            for (std::int64_t at = 0; at < n; ++at) {
                CAPTURE(width);
                CAPTURE(name_of(op));
                CAPTURE(at);
                std::vector<double> with_nan = values;
                with_nan[static_cast<std::size_t>(at)] = std::nan("");
                const Tensor x = reference::make_tensor(DType::f32, {2, columns}, with_nan);
                const std::vector<double> got =
                    reference::values_of(einc::reduce(x, "(h 2) (w 2) -> h w", op).view());
                REQUIRE(got.size() == static_cast<std::size_t>(width));
                for (std::int64_t w = 0; w < width; ++w) {
                    if (at % columns / 2 == w) {
                        CHECK(std::isnan(got[static_cast<std::size_t>(w)]));
                        continue;
                    }
                    double expected = values[static_cast<std::size_t>(2 * w)];
                    for (const std::int64_t k : {2 * w + 1, columns + 2 * w, columns + 2 * w + 1}) {
                        const double v = values[static_cast<std::size_t>(k)];
                        expected = op == Reduction::max ? std::max(expected, v) : std::min(expected, v);
                    }
                    CHECK(got[static_cast<std::size_t>(w)] == expected);
                }
            }
    }
}

TEST_CASE("cpu executor: max and min of floating rows of 1 to 70 propagate NaN wherever it is, in the vector "
          "body, the fold of its lanes or the tail") {
    for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16})
        for (std::int64_t length = 1; length <= 70; ++length) {
            std::vector<double> values(static_cast<std::size_t>(length));
            for (std::int64_t i = 0; i < length; ++i)
                values[static_cast<std::size_t>(i)] = static_cast<double>((i * 37) % 23) - 11.5;
            values[static_cast<std::size_t>(length / 2)] = std::numeric_limits<double>::infinity();
            const double largest = *std::max_element(values.begin(), values.end()),
                         smallest = *std::min_element(values.begin(), values.end());
            for (const Reduction op : {Reduction::max, Reduction::min}) {
                CAPTURE(name_of(dtype));
                CAPTURE(length);
                CAPTURE(name_of(op));
                const Tensor x = reference::make_tensor(dtype, {2, length}, [&] {
                    std::vector<double> both = values;
                    both.insert(both.end(), values.begin(), values.end());
                    return both;
                }());
                std::vector<double> got = reference::values_of(einc::reduce(x, "r c -> r", op).view());
                CHECK(got == std::vector<double>(2, op == Reduction::max ? largest : smallest));
                for (std::int64_t at = 0; at < length; ++at) {  // a NaN at every position of the second row
                    Tensor y = reference::make_tensor(dtype, {2, length}, [&] {
                        std::vector<double> both = values;
                        both.insert(both.end(), values.begin(), values.end());
                        both[static_cast<std::size_t>(length + at)] = std::nan("");
                        return both;
                    }());
                    got = reference::values_of(einc::reduce(y, "r c -> r", op).view());
                    CHECK(got[0] == (op == Reduction::max ? largest : smallest));
                    CHECK(std::isnan(got[1]));
                }
            }
        }
}

// A reduction through the CPU schedule, with the schedule's rows_in_order as given (it is set only for
// sources beyond the caches, too large for these tests: the kernel just follows it).
std::vector<double> reduce_rows_in_order(const Tensor& x, const std::string& pattern, Reduction op,
                                         bool rows_in_order) {
    const std::vector<TensorView> inputs{x.view()};
    const auto [bound, planned] =
        testing::bind_and_plan(Call{Op::reduce, pattern, op, {}, false, {}}, inputs);
    Schedule scheduled = schedule(planned, cpu_target());
    REQUIRE(scheduled.steps.size() == 1);
    auto* folding = std::get_if<strategy::ReduceAccumulate>(&scheduled.steps[0].strategy);
    REQUIRE(folding != nullptr);
    folding->rows_in_order = rows_in_order;
    Tensor out = Tensor::empty(planned.outputs[0].dtype, planned.outputs[0].shape);
    std::vector<TensorView> outputs{out.view()};
    execute_on_cpu(planned, scheduled, inputs, outputs);
    return reference::values_of(out.view());
}

// max/min down columns fold rows into one row of accumulators (fold.hpp, fold_block), four rows per pass
// or row after row, in vectors: every row count around the four-row pass, every column count around the
// vector body and its tail, a NaN at each (row, column) in turn, and infinities beside it.
TEST_CASE("cpu executor: max and min down columns propagate NaN from any row and any column") {
    for (const DType dtype : {DType::f32, DType::f64})
        for (const std::int64_t rows : {17, 19, 20})  // more than max_window terms: an accumulator array
            for (const std::int64_t columns : {3, 9, 17}) {
                std::vector<double> values(static_cast<std::size_t>(rows * columns));
                for (std::size_t i = 0; i < values.size(); ++i)
                    values[i] = static_cast<double>((i * 37) % 23) - 11.5;
                values[0] = -std::numeric_limits<double>::infinity();
                values.back() = std::numeric_limits<double>::infinity();
                for (const Reduction op : {Reduction::max, Reduction::min}) {
                    CAPTURE(name_of(dtype));
                    CAPTURE(rows);
                    CAPTURE(columns);
                    CAPTURE(name_of(op));
                    const auto expected = [&](const std::vector<double>& v) {
                        std::vector<double> e(static_cast<std::size_t>(columns));
                        for (std::int64_t c = 0; c < columns; ++c) {
                            double m = v[static_cast<std::size_t>(c)];
                            for (std::int64_t r = 1; r < rows; ++r) {
                                const double x = v[static_cast<std::size_t>(r * columns + c)];
                                m = (std::isnan(m) || std::isnan(x)) ? std::nan("")
                                    : op == Reduction::max           ? std::max(m, x)
                                                                     : std::min(m, x);
                            }
                            e[static_cast<std::size_t>(c)] = m;
                        }
                        return e;
                    };
                    const auto same = [](const std::vector<double>& got, const std::vector<double>& want) {
                        if (got.size() != want.size()) return false;
                        for (std::size_t i = 0; i < got.size(); ++i)
                            if (std::isnan(want[i]) ? !std::isnan(got[i]) : got[i] != want[i]) return false;
                        return true;
                    };
                    const Tensor x = reference::make_tensor(dtype, {rows, columns}, values);
                    CHECK(
                        same(reference::values_of(einc::reduce(x, "r c -> c", op).view()), expected(values)));
                    for (std::size_t at = 0; at < values.size(); ++at) {
                        std::vector<double> with_nan = values;
                        with_nan[at] = std::nan("");
                        const Tensor y = reference::make_tensor(dtype, {2, rows, columns}, [&] {
                            std::vector<double> both = values;  // a batch of two: the NaN in the second only
                            both.insert(both.end(), with_nan.begin(), with_nan.end());
                            return both;
                        }());
                        std::vector<double> want = expected(values);
                        const std::vector<double> second = expected(with_nan);
                        want.insert(want.end(), second.begin(), second.end());
                        CHECK(same(reduce_rows_in_order(y, "a r c -> a c", op, false), want));
                        CHECK(same(reduce_rows_in_order(y, "a r c -> a c", op, true), want));
                    }
                }
            }
}

// Row sums of contiguous f32 and f64 rows run in vectors of accumulators (fold.hpp, sum_run): every length
// around the vector body and its tail, exact on integer values (f32 sums in f64 on the CPU), and the mean.
TEST_CASE("cpu executor: sums and means of contiguous rows of every length, in the vector body or the tail") {
    for (const DType dtype : {DType::f32, DType::f64})
        for (std::int64_t length = 0; length <= 70; ++length) {
            CAPTURE(name_of(dtype));
            CAPTURE(length);
            std::vector<double> values(static_cast<std::size_t>(3 * length));
            double row_sums[3] = {0, 0, 0};
            for (std::int64_t i = 0; i < 3 * length; ++i) {
                values[static_cast<std::size_t>(i)] = static_cast<double>((i * 7919) % 2001) - 1000;
                row_sums[i / length] += values[static_cast<std::size_t>(i)];
            }
            const Tensor x = reference::make_tensor(dtype, {3, length}, values);
            CHECK(reference::values_of(einc::reduce(x, "r c -> r", Reduction::sum).view()) ==
                  std::vector<double>(std::begin(row_sums), std::end(row_sums)));
            if (length == 0) continue;
            const std::vector<double> means =
                reference::values_of(einc::reduce(x, "r c -> r", Reduction::mean).view());
            for (int r = 0; r < 3; ++r)
                CHECK(means[static_cast<std::size_t>(r)] ==
                      doctest::Approx(row_sums[r] / static_cast<double>(length)));
        }
}

// f64 sums of f64 rows add blocks of 128 terms compensated (fold.hpp, sum_lanes). numpy's
// test_einsum_chunking_precision: 10^6 copies of 1 + 8196 eps summed, divided by 10^6, to 15 decimals
// (plain sums in 16 lanes were 3.9e-13 off); 10^6 random terms within 4 units of the last place of their
// sum, compensated term by term here; an infinity or NaN among the terms is the sum (the compensation,
// inf - inf, is not added to it).
TEST_CASE(
    "cpu executor: long f64 sums are compensated: numpy's chunking precision, random terms, inf and NaN") {
    const double eps = std::numeric_limits<double>::epsilon();
    const Tensor many =
        reference::make_tensor(DType::f64, {1000000}, std::vector<double>(1000000, 1 + 8196 * eps));
    for (const Tensor& sum : {einc::einsum("i ->", many), einc::reduce(many, "i ->", Reduction::sum)})
        CHECK(std::abs(reference::values_of(sum.view())[0] / 1e6 - (1 + 8196 * eps)) < 1.5e-15);
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> uniform(0, 1);
    std::vector<double> terms(1000000);
    double exact = 0, error = 0;  // Neumaier's sum, term by term
    for (double& t : terms) {
        t = uniform(rng);
        const double next = exact + t;
        error += std::abs(exact) >= std::abs(t) ? (exact - next) + t : (t - next) + exact;
        exact = next;
    }
    exact += error;
    const double sum = reference::values_of(
        einc::reduce(reference::make_tensor(DType::f64, {1000000}, terms), "i ->", Reduction::sum).view())[0];
    CHECK(std::abs(sum - exact) <= 4 * eps * exact);
    for (const std::int64_t length : {16, 17, 200, 1000}) {
        CAPTURE(length);
        std::vector<double> values(static_cast<std::size_t>(length), 1.0);
        values[1] = std::numeric_limits<double>::infinity();
        CHECK(reference::values_of(
                  einc::reduce(reference::make_tensor(DType::f64, {length}, values), "i ->", Reduction::sum)
                      .view())[0] == std::numeric_limits<double>::infinity());
        values[length - 1] = std::nan("");
        CHECK(std::isnan(reference::values_of(
            einc::reduce(reference::make_tensor(DType::f64, {length}, values), "i ->", Reduction::sum)
                .view())[0]));
    }
}

// f32 dot products of more than 16 terms sum their products in f64 (contract.cpp: dot_f32_in_f64 under AVX2,
// each product and its rounding error apart): the result is the exact sum rounded once to f32, for row
// lengths around the vector body and its tail, in rows (contract_rows) and in one long row split between
// threads (contract_accumulate). Factors 1 + k/4096 have products of up to 25 significant bits, which f32
// rounds and f64 holds; summed in f32, these rows would be off in their last bits. Products past f32's
// range are what exact products make them: 1e60 - 1e60 is 0, 1e60 + 1e60 an f32 infinity.
TEST_CASE("cpu executor: f32 dot products are their exact sums rounded once, every row length, and past "
          "f32's range") {
    const auto factor = [](std::int64_t i, std::int64_t salt) {
        return 1.0 + static_cast<double>((i * salt) % 4001) / 4096.0;
    };
    for (const std::int64_t length : {17, 31, 32, 33, 47, 64, 70, 1000, 300000}) {
        CAPTURE(length);
        const std::int64_t rows = length > 1000 ? 1 : 3;
        std::vector<double> xs(static_cast<std::size_t>(rows * length)), ys(xs.size());
        std::vector<double> exact(static_cast<std::size_t>(rows), 0.0);
        for (std::int64_t i = 0; i < rows * length; ++i) {
            xs[static_cast<std::size_t>(i)] = factor(i, 7919);
            ys[static_cast<std::size_t>(i)] = factor(i, 104729);
            exact[static_cast<std::size_t>(i / length)] +=
                xs[static_cast<std::size_t>(i)] * ys[static_cast<std::size_t>(i)];  // exact in f64
        }
        const Tensor x = reference::make_tensor(DType::f32, {rows, length}, xs),
                     y = reference::make_tensor(DType::f32, {rows, length}, ys);
        std::vector<double> want;
        for (const double sum : exact) want.push_back(static_cast<double>(static_cast<float>(sum)));
        CHECK(reference::values_of(einc::einsum("r c, r c -> r", {x, y}).view()) == want);
        const Tensor u = reference::make_tensor(DType::f32, {rows * length}, xs),
                     v = reference::make_tensor(DType::f32, {rows * length}, ys);
        double total = 0;
        for (const double sum : exact) total += sum;
        CHECK(reference::values_of(einc::einsum("i, i ->", {u, v}).view()) ==
              std::vector<double>{static_cast<double>(static_cast<float>(total))});
    }
    for (const std::int64_t at : {0, 36}) {  // the large products in the vector body, or in the tail
        CAPTURE(at);
        std::vector<double> xs(40, 0.0), ys(40, 0.25);
        xs[static_cast<std::size_t>(at)] = 1e30, ys[static_cast<std::size_t>(at)] = 1e30;
        xs[static_cast<std::size_t>(at) + 1] = -1e30, ys[static_cast<std::size_t>(at) + 1] = 1e30;
        const Tensor x = reference::make_tensor(DType::f32, {2, 20}, xs),
                     y = reference::make_tensor(DType::f32, {2, 20}, ys);
        const Tensor u = reference::make_tensor(DType::f32, {40}, xs),
                     v = reference::make_tensor(DType::f32, {40}, ys);
        CHECK(reference::values_of(einc::einsum("r c, r c -> r", {x, y}).view()) ==
              std::vector<double>{0.0, 0.0});
        CHECK(reference::values_of(einc::einsum("i, i ->", {u, v}).view()) == std::vector<double>{0.0});
        xs[static_cast<std::size_t>(at) + 1] = 1e30;
        const Tensor z = reference::make_tensor(DType::f32, {2, 20}, xs),
                     w = reference::make_tensor(DType::f32, {40}, xs);
        const double inf = std::numeric_limits<double>::infinity();
        CHECK(reference::values_of(einc::einsum("r c, r c -> r", {z, y}).view()) ==
              (at == 0 ? std::vector<double>{inf, 0.0} : std::vector<double>{0.0, inf}));
        CHECK(reference::values_of(einc::einsum("i, i ->", {w, v}).view()) == std::vector<double>{inf});
    }
}

// f32 products moving half the last-level cache or more are stored around it (the schedule's
// streaming_stores; contract.cpp, multiply_streaming): every element right under each instruction set, with
// rows that start off the vectors' alignment (2053 floats a row), a side broadcast or both contiguous.
TEST_CASE("cpu kernels: f32 products written with streaming stores, each instruction set") {
    using Contraction = void (*)(const strategy::ContractElementwise&, DType, const cpu::Data&,
                                 const cpu::Data&, const cpu::Data&);
    std::vector<std::pair<const char*, Contraction>> isas{{"baseline", cpu::baseline::contract}};
#if EINC_HAS_AVX2_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        isas.push_back({"avx2", cpu::avx2::contract});
#endif
    const std::int64_t rows = 2051,
                       cols = 2053;  // 16.8 MB an operand: 50 MB moved, or 34 MB with a row broadcast
    Tensor x = Tensor::empty(DType::f32, {rows, cols}), y = Tensor::empty(DType::f32, {rows, cols}),
           w = Tensor::empty(DType::f32, {cols});
    for (std::int64_t i = 0; i < rows * cols; ++i) {
        x.data_as<float>()[i] = static_cast<float>(i % 1009) * 0.37f - 100;
        y.data_as<float>()[i] = static_cast<float>(i % 997) * -0.11f + 3;
    }
    for (std::int64_t j = 0; j < cols; ++j) w.data_as<float>()[j] = static_cast<float>(j % 13) - 6.5f;
    for (const bool broadcast : {false, true}) {
        CAPTURE(broadcast);
        const Tensor& other = broadcast ? w : y;
        const Program program = compile(Op::einsum, broadcast ? "r c, c -> r c" : "r c, r c -> r c")
                                    .bind({x.view(), other.view()});
        const ScheduledStep& scheduled = program.schedule().steps.at(0);
        const auto* step = std::get_if<strategy::ContractElementwise>(&scheduled.strategy);
        REQUIRE(step != nullptr);
        CHECK(step->streaming_stores);
        for (const auto& isa :
             isas) {  // (no structured bindings: CAPTURE's lambdas take them, which Clang 14 refuses)
            const char* kernels_for = isa.first;
            CAPTURE(kernels_for);
            Tensor out = Tensor::zeros(DType::f32, {rows, cols});
            isa.second(*step, scheduled.accumulator,
                       cpu::Data{static_cast<std::byte*>(out.data()), DType::f32},
                       cpu::Data{static_cast<std::byte*>(x.data()), DType::f32},
                       cpu::Data{static_cast<std::byte*>(const_cast<void*>(other.data())), DType::f32});
            std::int64_t wrong = 0;
            for (std::int64_t i = 0; i < rows * cols; ++i)
                wrong += out.data_as<float>()[i] !=
                         x.data_as<float>()[i] * other.data_as<float>()[broadcast ? i % cols : i];
            CHECK(wrong == 0);
        }
    }
    const Program small =
        compile(Op::einsum, "r c, c -> r c").bind({Tensor::empty(DType::f32, {512, cols}).view(), w.view()});
    CHECK_FALSE(std::get<strategy::ContractElementwise>(small.schedule().steps.at(0).strategy)
                    .streaming_stores);  // 8 MB moved: it stays in the caches
}
