// The loops of the CPU reductions and contractions, included into reduce.cpp and contract.cpp inside
// their instruction-set namespace (see isa.hpp): identities, folds, and the innermost loops that fold a
// 2-D block of the source, rows of it, or windows of offsets. Each loop is written so that the compiler
// vectorises it; which one runs, over which nest, is the schedule's choice.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#if defined(EINC_CPU_AVX2)
#include <immintrin.h>
#endif

#include "runtime/cpu/element.hpp"
#include "runtime/cpu/isa.hpp"

namespace einc::cpu::EINC_CPU_ISA {

// How op Op folds (its row of compiler/reduction.hpp's reduction_table), for the kernels' `if constexpr`s.
template <Reduction Op>
inline constexpr Combine combine_of = info_of(Op).combine;
template <Reduction Op>
inline constexpr bool extremum = combine_of<Op> == Combine::maximum || combine_of<Op> == Combine::minimum;

template <typename A>
A identity(Reduction op) {
    switch (info_of(op).identity) {
    case Identity::zero: return A{0};
    case Identity::one: return A{1};
    case Identity::lowest:
        if constexpr (std::is_floating_point_v<A>)
            return -std::numeric_limits<A>::infinity();
        else
            return std::numeric_limits<A>::lowest();
    case Identity::highest:
        if constexpr (std::is_floating_point_v<A>)
            return std::numeric_limits<A>::infinity();
        else
            return std::numeric_limits<A>::max();
    }
    return A{0};  // (unreachable: the switch is exhaustive)
}

// Folding x into acc. max/min propagate NaN, as PyTorch does: once acc is NaN it stays NaN. (GCC
// vectorises the short-circuit form twice as well as `(x > acc) | (x != x)`.)
template <Reduction Op, typename A>
inline A fold(A acc, A x) {
    constexpr Combine c = combine_of<Op>;
    if constexpr (c == Combine::add)
        return acc + x;
    else if constexpr (c == Combine::multiply)
        return acc * x;
    else if constexpr (c == Combine::maximum)
        return (x > acc || x != x) ? x : acc;
    else if constexpr (c == Combine::minimum)
        return (x < acc || x != x) ? x : acc;
    else if constexpr (c == Combine::logical_or)
        return (acc != 0 || x != 0) ? A{1} : A{0};
    else {
        static_assert(c == Combine::logical_and, "a new Combine: fold it here");
        return (acc != 0 && x != 0) ? A{1} : A{0};
    }
}

// The two innermost modes of a traversal, which each fold call walks as a 2-D block: `outer` rows of
// `inner` elements. Strides are in elements of the accumulator (acc) and of the source (src).
struct Block {
    std::int64_t outer = 1, inner = 1;
    std::int64_t outer_acc = 0, inner_acc = 0, outer_src = 0, inner_src = 0;
    bool rows_in_order = false;  // rows folded into one row of accumulators: one at a time (the schedule's)
};

// fold() on vectors, lane by lane: a NaN in x replaces the lane, and a NaN lane stays NaN. (By reference:
// a 32-byte vector passed or returned by value changes the ABI in the baseline build.)
template <Reduction Op, typename V>
inline void fold_vectors(V& acc, const V& x) {
    acc = ((combine_of<Op> == Combine::maximum ? x > acc : x < acc) | (x != x)) ? x : acc;
}

// max or min over a contiguous run of f32 or f64, folded into `value` in four 32-byte vectors (GCC's
// vector extensions: AVX2 registers where the kernels are compiled for it, pairs of SSE2 ones otherwise),
// so that four compares are in flight where one chain would wait on each one's latency; then the four
// vectors folded into one, and its halves into each other by shuffles. A NaN anywhere makes the result
// NaN, as PyTorch's: fold_vectors keeps it in its lane. (Folding the lanes one by one, with a test for
// NaN each, took 10 times as long as the loads for rows of 8-64 elements.)
template <Reduction Op, typename T>
inline T extreme_run(T value, const T* __restrict row, std::int64_t count) {
    using V [[gnu::vector_size(32)]] = T;
    constexpr std::int64_t lanes = 32 / sizeof(T);
    const V start = value - V{};
    V e[4] = {start, start, start, start};
    std::int64_t i = 0;
    for (; i + 4 * lanes <= count; i += 4 * lanes)
        for (int j = 0; j < 4; ++j) {
            V x;
            std::memcpy(&x, row + i + j * lanes, sizeof x);
            fold_vectors<Op>(e[j], x);
        }
    for (; i + lanes <= count; i += lanes) {
        V x;
        std::memcpy(&x, row + i, sizeof x);
        fold_vectors<Op>(e[0], x);
    }
    fold_vectors<Op>(e[0], e[1]);
    fold_vectors<Op>(e[2], e[3]);
    fold_vectors<Op>(e[0], e[2]);
    V half;
    if constexpr (lanes == 8) {  // f32
        half = __builtin_shufflevector(e[0], e[0], 4, 5, 6, 7, 0, 1, 2, 3);
        fold_vectors<Op>(e[0], half);
        half = __builtin_shufflevector(e[0], e[0], 2, 3, 0, 1, 6, 7, 4, 5);
        fold_vectors<Op>(e[0], half);
        half = __builtin_shufflevector(e[0], e[0], 1, 0, 3, 2, 5, 4, 7, 6);
    } else {  // f64
        half = __builtin_shufflevector(e[0], e[0], 2, 3, 0, 1);
        fold_vectors<Op>(e[0], half);
        half = __builtin_shufflevector(e[0], e[0], 1, 0, 3, 2);
    }
    fold_vectors<Op>(e[0], half);
    value = fold<Op>(value, e[0][0]);
    for (; i < count; ++i) value = fold<Op>(value, row[i]);
    return value;
}

// Four elements at x (f32 or f64) widened to f64 and added to `sum`.
using F64x4 [[gnu::vector_size(32)]] = double;
template <typename T>
inline void add_widened(F64x4& sum, const T* x) {
    using L [[gnu::vector_size(4 * sizeof(T))]] = T;
    L v;
    std::memcpy(&v, x, sizeof v);
    sum += __builtin_convertvector(v, F64x4);
}
#if defined(EINC_CPU_AVX2)
// f32 in one vcvtps2pd: GCC 12 widens a vector of four f32 in two-element pieces, even for AVX2, each
// loaded in two parts (64 MB of f32 summed in f64 on one thread: 2.2-3.0 ms, now 1.7-2.1).
__attribute__((target("avx2"))) inline void add_widened(F64x4& sum, const float* x) {
    sum += F64x4(_mm256_cvtps_pd(_mm_loadu_ps(x)));
}
#endif

// x added to `sum` with its rounding error added to `error` apart (Neumaier's step; on vectors lane by
// lane, or on scalars): sum + error is then the exact sum, up to the rounding of `error`. (By reference:
// see fold_vectors.)
template <typename V>
inline void add_compensated(V& sum, V& error, const V& x) {
    const V t = sum + x;
    const V sum_magnitude = sum < 0 ? -sum : sum, x_magnitude = x < 0 ? -x : x;
    error += sum_magnitude >= x_magnitude ? (sum - t) + x : (x - t) + sum;
    sum = t;
}

// sum + error, where sum is finite: an infinite or NaN sum's errors are NaN (inf - inf).
template <typename A>
inline A corrected(A sum, A error) {
    return sum - sum == 0 ? sum + error : sum;
}

// The sums of a contiguous run x[0, count) of f32 (in f32 or f64) or f64 by lane, in four vectors of
// accumulators: four vector additions in flight, where one chain of them would wait on each one's latency
// (about a quarter of the memory bandwidth for f32 summed in f64). Lane l of `total` sums the elements at
// l modulo the lanes, up to the whole vectors it returns the end of; the caller adds the rest.
// f64 summed in f64 goes a block of 128 elements at a time (8 terms to each lane), each block's sums added
// to the running ones by add_compensated, lane l's rounding errors kept in error[l]: lanes of 10^6 / 16
// terms summed plainly drifted by up to 4e-13 of the sum, where numpy's pairwise sum keeps within a few
// units of the last place; compensating every addition halved the speed. (f32 summed in f64 has 29 bits
// to spare: its errors are 0.)
template <typename T, typename A>
inline std::int64_t sum_lanes(const T* __restrict x, std::int64_t count, A (&total)[32 / sizeof(A)],
                              A (&error)[32 / sizeof(A)]) {
    using V [[gnu::vector_size(32)]] = A;
    constexpr std::int64_t lanes = 32 / sizeof(A);
    V sums[4] = {}, errors[4] = {};
    std::int64_t i = 0;
    if constexpr (std::is_same_v<T, double> && std::is_same_v<A, double>) {
        constexpr std::int64_t block = 8 * 4 * lanes;
        for (; i + block <= count; i += block) {
            V partial[4] = {};
            for (std::int64_t k = i; k < i + block; k += 4 * lanes)
                for (int j = 0; j < 4; ++j) {
                    V v;
                    std::memcpy(&v, x + k + j * lanes, sizeof v);
                    partial[j] += v;
                }
            for (int j = 0; j < 4; ++j) add_compensated(sums[j], errors[j], partial[j]);
        }
    }
    for (; i + 4 * lanes <= count; i += 4 * lanes)
        for (int j = 0; j < 4; ++j) {
            if constexpr (std::is_same_v<T, A>) {
                V v;
                std::memcpy(&v, x + i + j * lanes, sizeof v);
                sums[j] += v;
            } else {
                add_widened(sums[j], x + i + j * lanes);
            }
        }
    const V sum = (sums[0] + sums[1]) + (sums[2] + sums[3]),
            sum_error = (errors[0] + errors[1]) + (errors[2] + errors[3]);
    for (std::int64_t l = 0; l < lanes; ++l) {
        total[l] = sum[l];
        error[l] = sum_error[l];
    }
    return i;
}

// A sum over a contiguous run, folded into `value`.
template <typename T, typename A>
inline A sum_run(A value, const T* __restrict row, std::int64_t count) {
    A total[32 / sizeof(A)], error[32 / sizeof(A)];
    std::int64_t i = sum_lanes(row, count, total, error);
    A s = 0, e = 0;
    for (std::size_t l = 0; l < std::size(total); ++l) {
        s += total[l];
        e += error[l];
    }
    for (; i < count; ++i) s += static_cast<A>(row[i]);
    return value + corrected(s, e);
}

// Back-to-back rows of `period` elements summed into one row of accumulators, where `period` divides a
// vector's lanes: the rows are one contiguous run whose element k belongs to column k % period, so lane l
// of its sums belongs to column l % period (one row per pass would wait on each accumulator's store).
template <typename T, typename A>
inline void sum_periodic(A* __restrict a, const T* __restrict x, std::int64_t count, std::int64_t period) {
    A total[32 / sizeof(A)], error[32 / sizeof(A)];
    std::int64_t i = sum_lanes(x, count, total, error);
    for (std::int64_t l = 0; l < std::int64_t{32 / sizeof(A)}; ++l)
        a[l % period] += corrected(total[l], error[l]);
    for (; i < count; ++i) a[i % period] += static_cast<A>(x[i]);  // (x is the start of a row)
}

// One row of a block folded into `value`: four independent chains over a long contiguous row (the
// compiler vectorises them without reassociating), a plain loop otherwise; K > 0 fixes the length at
// compile time (pooling windows, tiny inner dims).
template <Reduction Op, DType In, typename A, int K = 0>
inline A fold_row(A value, const storage_t<In>* row, std::int64_t inner, std::int64_t inner_src) {
    const auto load = [](storage_t<In> v) { return static_cast<A>(Element<In>::load(v)); };
    if constexpr (K > 0) {
        for (int i = 0; i < K; ++i) value = fold<Op>(value, load(row[i * inner_src]));
        return value;
    } else {
        if constexpr (extremum<Op> && std::is_same_v<A, storage_t<In>> && std::is_floating_point_v<A>)
            if (inner_src == 1) return extreme_run<Op>(value, row, inner);
        if constexpr (combine_of<Op> == Combine::add && (In == DType::f32 || In == DType::f64) &&
                      std::is_floating_point_v<A> && sizeof(A) >= sizeof(storage_t<In>))
            if (inner_src == 1) return sum_run(value, row, inner);
        if (inner_src == 1 && inner >= 16) {
            A v0 = identity<A>(Op), v1 = v0, v2 = v0, v3 = v0;
            std::int64_t i = 0;
            for (; i + 4 <= inner; i += 4) {
                v0 = fold<Op>(v0, load(row[i]));
                v1 = fold<Op>(v1, load(row[i + 1]));
                v2 = fold<Op>(v2, load(row[i + 2]));
                v3 = fold<Op>(v3, load(row[i + 3]));
            }
            for (; i < inner; ++i) v0 = fold<Op>(v0, load(row[i]));
            return fold<Op>(value, fold<Op>(fold<Op>(v0, v1), fold<Op>(v2, v3)));
        }
        for (std::int64_t i = 0; i < inner; ++i) value = fold<Op>(value, load(row[i * inner_src]));
        return value;
    }
}

// Rows of K elements each folded into one accumulator.
template <Reduction Op, DType In, typename A, int K>
EINC_KERNEL void fold_short_rows(A* __restrict a, const storage_t<In>* __restrict x, const Block& b,
                                 std::int64_t begin, std::int64_t end) {
    const std::int64_t outer_src = b.outer_src, inner_src = b.inner_src, outer_acc = b.outer_acc;
    for (std::int64_t r = begin; r < end; ++r)
        a[r * outer_acc] = fold_row<Op, In, A, K>(a[r * outer_acc], x + r * outer_src, K, inner_src);
}

// A reduced value as the result dtype: mean divides by the number of elements folded into it.
template <Reduction Op, DType Out, typename A>
inline storage_t<Out> finish(A value, std::int64_t count) {
    if constexpr (info_of(Op).divides) value = count == 0 ? A(NAN) : value / static_cast<A>(count);
    return Element<Out>::store(convert<compute_t<Out>>(value));
}

// Rows [begin, end) of a block each reduced and stored straight into the destination (each output's
// elements all lie in its row): no accumulator array, no second pass.
template <Reduction Op, DType In, DType Out, typename A, int K>
EINC_KERNEL void reduce_rows_to(storage_t<Out>* __restrict d, const storage_t<In>* __restrict x,
                                const Block& b, std::int64_t dst_outer, std::int64_t begin,
                                std::int64_t end) {
    const std::int64_t inner = K > 0 ? K : b.inner, outer_src = b.outer_src, inner_src = b.inner_src;
    if constexpr (K > 0)
        if (inner_src == 1 && outer_src == K &&
            dst_outer == 1) {  // back-to-back rows: strides the compiler sees
            for (std::int64_t r = begin; r < end; ++r)
                d[r] = finish<Op, Out>(fold_row<Op, In, A, K>(identity<A>(Op), x + r * K, K, 1), K);
            return;
        }
    for (std::int64_t r = begin; r < end; ++r)
        store_at<storage_t<Out>>(
            reinterpret_cast<std::byte*>(d + r * dst_outer),
            finish<Op, Out>(fold_row<Op, In, A, K>(identity<A>(Op), x + r * outer_src, inner, inner_src),
                            inner));
}

// Contiguous rows [begin, end), `stride` apart, each folded into the one row of accumulators at `a`, row
// after row: the source read in order (the schedule's rows_in_order).
template <Reduction Op, DType In, typename A>
EINC_KERNEL void fold_rows_in_order(A* __restrict a, const storage_t<In>* __restrict x, std::int64_t inner,
                                    std::int64_t stride, std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
        const storage_t<In>* __restrict row = x + r * stride;
        for (std::int64_t i = 0; i < inner; ++i)
            a[i] = fold<Op>(a[i], static_cast<A>(Element<In>::load(row[i])));
        asm volatile(
            "" ::
                : "memory");  // a fence for the compiler only: it would otherwise fold two rows per pass
    }
}

// Folds rows [begin, end) of a block into the accumulators at `a`, where each row folds into one
// accumulator (inner_acc == 0): rows of 2-4 terms, every row into the one accumulator, or each into its own.
template <Reduction Op, DType In, typename A>
EINC_KERNEL void fold_rows_of_block(A* __restrict a, const storage_t<In>* __restrict x, const Block& b,
                                    std::int64_t begin, std::int64_t end) {
    const std::int64_t inner = b.inner, outer_src = b.outer_src, inner_src = b.inner_src,
                       outer_acc = b.outer_acc;
    if constexpr (tuned_reduction(In, Op)) {
        if (outer_acc != 0) {
            switch (inner) {
            case 2: return fold_short_rows<Op, In, A, 2>(a, x, b, begin, end);
            case 3: return fold_short_rows<Op, In, A, 3>(a, x, b, begin, end);
            case 4: return fold_short_rows<Op, In, A, 4>(a, x, b, begin, end);
            default: break;
            }
        }
    }
    if (outer_acc == 0) {  // every row folds into the one accumulator: keep it in a register
        A value = a[0];
        for (std::int64_t r = begin; r < end; ++r)
            value = fold_row<Op, In, A>(value, x + r * outer_src, inner, inner_src);
        a[0] = value;
        return;
    }
    for (std::int64_t r = begin; r < end; ++r)  // each row folds into its own accumulator
        a[r * outer_acc] = fold_row<Op, In, A>(a[r * outer_acc], x + r * outer_src, inner, inner_src);
}

// Folds rows [begin, end) of a block into the accumulators at `a`, where each term has an accumulator of
// its own in the row (inner_acc != 0). The block's fields are copied into locals first: the compiler
// cannot otherwise tell that stores to `a` leave them unchanged, and will not vectorise.
template <Reduction Op, DType In, typename A>
EINC_KERNEL void fold_columns_of_block(A* __restrict a, const storage_t<In>* __restrict x, const Block& b,
                                       std::int64_t begin, std::int64_t end) {
    const std::int64_t inner = b.inner, outer_src = b.outer_src, inner_src = b.inner_src;
    const std::int64_t outer_acc = b.outer_acc, inner_acc = b.inner_acc;
    const auto value = [](storage_t<In> v) { return Element<In>::load(v); };
    const auto load = [](storage_t<In> v) { return static_cast<A>(Element<In>::load(v)); };
    if (outer_acc == 0) {  // every row updates the same row of accumulators
        std::int64_t r = begin;
        if (inner_acc == 1 && inner_src == 1) {
            if (b.rows_in_order) return fold_rows_in_order<Op, In, A>(a, x, inner, outer_src, begin, end);
            if constexpr (combine_of<Op> == Combine::add && (In == DType::f32 || In == DType::f64) &&
                          std::is_floating_point_v<A> && sizeof(A) >= sizeof(storage_t<In>))
                if (outer_src == inner && (32 / static_cast<std::int64_t>(sizeof(A))) % inner == 0)
                    return sum_periodic(a, x + begin * inner, (end - begin) * inner, inner);
            // Eight rows per pass: two groups of four, each folded in the element's compute type before its
            // conversion, so the accumulators are loaded and stored once per eight rows. (Four rows per
            // pass, storing twice as often: 2.85 ms for 4096^2 f32 column sums on one thread, against 2.2.)
            const auto group = [&](const storage_t<In>* __restrict x0, std::int64_t i) {
                const storage_t<In>* __restrict x1 = x0 + outer_src;
                const storage_t<In>* __restrict x2 = x1 + outer_src;
                const storage_t<In>* __restrict x3 = x2 + outer_src;
                return static_cast<A>(
                    fold<Op>(fold<Op>(value(x0[i]), value(x1[i])), fold<Op>(value(x2[i]), value(x3[i]))));
            };
            for (; r + 8 <= end; r += 8) {
                const storage_t<In>* __restrict x0 = x + r * outer_src;
                const storage_t<In>* __restrict x4 = x0 + 4 * outer_src;
                for (std::int64_t i = 0; i < inner; ++i)
                    a[i] = fold<Op>(a[i], fold<Op>(group(x0, i), group(x4, i)));
            }
        }
        for (; r < end; ++r) {
            const storage_t<In>* row = x + r * outer_src;
            for (std::int64_t i = 0; i < inner; ++i)
                a[i * inner_acc] = fold<Op>(a[i * inner_acc], load(row[i * inner_src]));
        }
        return;
    }
    for (std::int64_t r = begin; r < end; ++r)  // one source element per accumulator here
        for (std::int64_t i = 0; i < inner; ++i) {
            A& target = a[r * outer_acc + i * inner_acc];
            target = fold<Op>(target, load(x[r * outer_src + i * inner_src]));
        }
}

// Folds rows [begin, end) of a block into the accumulators at `a`.
template <Reduction Op, DType In, typename A>
__attribute__((noinline)) EINC_KERNEL void fold_block(A* __restrict a, const storage_t<In>* __restrict x,
                                                      const Block& b, std::int64_t begin, std::int64_t end) {
    if (b.inner_acc == 0) return fold_rows_of_block<Op, In, A>(a, x, b, begin, end);
    fold_columns_of_block<Op, In, A>(a, x, b, begin, end);
}

// f16 and bf16 rows that each fold into one accumulator are folded through f32: a tile of the source at
// a time widened into a buffer L1 holds, then folded by the f32 loops (fold_block, reduce_block_rows:
// called, not inlined). The widening loop vectorises (f16_to_f32 is branch-free) and the f32 loops are the
// tuned ones: rows of f16 or bf16 summed or maxed in 0.7 of the time, and their own copies of those loops,
// converting each element where it was loaded, no longer built (reduce.cpp and reduce_avx2.cpp: 225 ->
// 191 CPU-s). Rows of 2-4 terms, rows folded into a row of accumulators, and windows stay direct: their
// fold costs as much as their loads, or reads many rows at once, and a second pass added to the time
// there rather than overlapping it (1.2-1.9 times as long through a tile).
constexpr bool reduced_as_f32(DType in) {
    return in == DType::f16 || in == DType::bf16;
}
inline constexpr std::int64_t widening_tile = 4096;  // f32 elements: 16 KiB

// `rows` rows of `columns` elements at x (strides in elements) widened into stage[rows][columns].
template <DType In>
__attribute__((noinline)) EINC_KERNEL void
widen_tile(float* __restrict stage, const storage_t<In>* __restrict x, std::int64_t rows,
           std::int64_t columns, std::int64_t outer_src, std::int64_t inner_src) {
    if (inner_src == 1 && (rows == 1 || outer_src == columns)) {  // one contiguous run
        for (std::int64_t i = 0; i < rows * columns; ++i) stage[i] = Element<In>::load(x[i]);
        return;
    }
    for (std::int64_t r = 0; r < rows; ++r) {
        const storage_t<In>* __restrict row = x + r * outer_src;
        float* __restrict out = stage + r * columns;
        for (std::int64_t c = 0; c < columns; ++c) out[c] = Element<In>::load(row[c * inner_src]);
    }
}

// f32 results stored into the destination as Out, `stride` elements apart.
template <DType Out>
__attribute__((noinline)) EINC_KERNEL void store_results(storage_t<Out>* __restrict d, std::int64_t stride,
                                                         const float* __restrict results,
                                                         std::int64_t count) {
    const auto narrowed = [](float value) { return Element<Out>::store(convert<compute_t<Out>>(value)); };
    if (stride == 1) {  // (a loop that vectorises)
        for (std::int64_t i = 0; i < count; ++i) d[i] = narrowed(results[i]);
        return;
    }
    for (std::int64_t i = 0; i < count; ++i)
        store_at(reinterpret_cast<std::byte*>(d + i * stride), narrowed(results[i]));
}

// fold_block of f16 or bf16: rows that each fold into one accumulator (but rows of 2-4 terms) a tile of
// them, or of a long row's pieces, at a time as f32; the others direct.
template <Reduction Op, DType In, typename A>
EINC_KERNEL void fold_widened_block(A* __restrict a, const storage_t<In>* __restrict x, const Block& b,
                                    std::int64_t begin, std::int64_t end) {
    if (b.inner_acc != 0) return fold_columns_of_block<Op, In, A>(a, x, b, begin, end);
    if constexpr (tuned_reduction(In, Op)) {
        if (b.outer_acc != 0) {
            switch (b.inner) {
            case 2: return fold_short_rows<Op, In, A, 2>(a, x, b, begin, end);
            case 3: return fold_short_rows<Op, In, A, 3>(a, x, b, begin, end);
            case 4: return fold_short_rows<Op, In, A, 4>(a, x, b, begin, end);
            default: break;
            }
        }
    }
    float stage[widening_tile];
    const std::int64_t columns = std::clamp<std::int64_t>(b.inner, 1, widening_tile),
                       rows = widening_tile / columns;
    for (std::int64_t r = begin; r < end; r += rows) {
        const std::int64_t n = std::min(rows, end - r);
        for (std::int64_t c = 0; c < b.inner; c += columns) {
            const std::int64_t m = std::min(columns, b.inner - c);
            widen_tile<In>(stage, x + r * b.outer_src + c * b.inner_src, n, m, b.outer_src, b.inner_src);
            fold_block<Op, DType::f32, A>(a + r * b.outer_acc, stage, Block{n, m, b.outer_acc, 0, m, 1}, 0,
                                          n);
        }
    }
}

template <Reduction Op, DType In, DType Out, typename A>
EINC_KERNEL void reduce_widened_rows(storage_t<Out>* __restrict d, const storage_t<In>* __restrict x,
                                     const Block& b, std::int64_t dst_outer, std::int64_t begin,
                                     std::int64_t end);

// Rows [begin, end) of a block each reduced into the destination, by the loop for their length.
template <Reduction Op, DType In, DType Out, typename A>
__attribute__((noinline)) void reduce_block_rows(storage_t<Out>* d, const storage_t<In>* x, const Block& b,
                                                 std::int64_t dst_outer, std::int64_t begin,
                                                 std::int64_t end) {
    if constexpr (tuned_reduction(In, Op)) {
        switch (b.inner) {
        case 2: return reduce_rows_to<Op, In, Out, A, 2>(d, x, b, dst_outer, begin, end);
        case 3: return reduce_rows_to<Op, In, Out, A, 3>(d, x, b, dst_outer, begin, end);
        case 4: return reduce_rows_to<Op, In, Out, A, 4>(d, x, b, dst_outer, begin, end);
        }
    }
    if constexpr (reduced_as_f32(In))
        reduce_widened_rows<Op, In, Out, A>(d, x, b, dst_outer, begin, end);
    else
        reduce_rows_to<Op, In, Out, A, 0>(d, x, b, dst_outer, begin, end);
}

// reduce_block_rows of f16 or bf16 (rows not of 2-4 terms): rows that fit a tile twice or more a tile of
// them at a time, their f32 results stored as Out; longer ones a piece at a time into one accumulator.
template <Reduction Op, DType In, DType Out, typename A>
EINC_KERNEL void reduce_widened_rows(storage_t<Out>* __restrict d, const storage_t<In>* __restrict x,
                                     const Block& b, std::int64_t dst_outer, std::int64_t begin,
                                     std::int64_t end) {
    float stage[widening_tile];
    if (2 * b.inner <= widening_tile) {
        float results[widening_tile];
        const std::int64_t rows = widening_tile / std::max<std::int64_t>(b.inner, 1);
        for (std::int64_t r = begin; r < end; r += rows) {
            const std::int64_t n = std::min(rows, end - r);
            widen_tile<In>(stage, x + r * b.outer_src, n, b.inner, b.outer_src, b.inner_src);
            const Block tile{n, b.inner, 0, 0, b.inner, 1};
            reduce_block_rows<Op, DType::f32, DType::f32, A>(results, stage, tile, 1, 0, n);
            store_results<Out>(d + r * dst_outer, dst_outer, results, n);
        }
        return;
    }
    for (std::int64_t r = begin; r < end; ++r) {
        A value = identity<A>(Op);
        for (std::int64_t c = 0; c < b.inner; c += widening_tile) {
            const std::int64_t m = std::min(widening_tile, b.inner - c);
            widen_tile<In>(stage, x + r * b.outer_src + c * b.inner_src, 1, m, m, b.inner_src);
            fold_block<Op, DType::f32, A>(&value, stage, Block{1, m, 0, 0, m, 1}, 0, 1);
        }
        const float result = finish<Op, DType::f32>(value, b.inner);
        store_results<Out>(d + r * dst_outer, dst_outer, &result, 1);
    }
}

// Runs of outputs, each folding its window (offsets in source elements) and storing the result.
// (K > 0: the window's size, known at compile time, so the loop over it unrolls.)
template <Reduction Op, DType In, DType Out, typename A, int K>
EINC_KERNEL void fold_windows(storage_t<Out>* __restrict d, const storage_t<In>* __restrict x,
                              std::int64_t count, std::int64_t dst_stride, std::int64_t src_stride,
                              const std::int64_t* offsets, std::int64_t window) {
    const std::int64_t size = K > 0 ? K : window;
    const auto load = [](storage_t<In> v) { return static_cast<A>(Element<In>::load(v)); };
    if (count < 16) {  // short runs: one window at a time
        for (std::int64_t i = 0; i < count; ++i) {
            const storage_t<In>* base = x + i * src_stride;
            A value = identity<A>(Op);
            for (std::int64_t k = 0; k < size; ++k) value = fold<Op>(value, load(base[offsets[k]]));
            store_at(reinterpret_cast<std::byte*>(d + i * dst_stride), finish<Op, Out>(value, size));
        }
        return;
    }
    // Long runs (pooling along a row): one pass per window element over a chunk of accumulators. Each
    // pass loads a strided row, which vectorises; gathering one window at a time does not.
    constexpr std::int64_t chunk = 256;
    A acc[chunk];
    for (std::int64_t i0 = 0; i0 < count; i0 += chunk) {
        const std::int64_t n = std::min(chunk, count - i0);
        const storage_t<In>* row = x + i0 * src_stride;
        for (std::int64_t i = 0; i < n; ++i) acc[i] = identity<A>(Op);
        for (std::int64_t k = 0; k < size; ++k) {
            const storage_t<In>* element = row + offsets[k];
            for (std::int64_t i = 0; i < n; ++i) acc[i] = fold<Op>(acc[i], load(element[i * src_stride]));
        }
        for (std::int64_t i = 0; i < n; ++i)
            store_at(reinterpret_cast<std::byte*>(d + (i0 + i) * dst_stride), finish<Op, Out>(acc[i], size));
    }
}

#if defined(EINC_CPU_AVX2)
// fold<Op> on eight f32 lanes, NaN included: max_ps(x, acc) is `x > acc ? x : acc`, which keeps acc where
// either is NaN; a NaN x then takes its place.
template <Reduction Op>
__attribute__((target("avx2"))) inline __m256 fold_lanes(__m256 acc, __m256 x) {
    if constexpr (extremum<Op>) {
        const __m256 folded =
            combine_of<Op> == Combine::maximum ? _mm256_max_ps(x, acc) : _mm256_min_ps(x, acc);
        return _mm256_blendv_ps(folded, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    } else {
        static_assert(combine_of<Op> == Combine::add);
        return _mm256_add_ps(acc, x);
    }
}

// 16 f32 elements folded in pairs (even lanes with odd ones): the lanes hold pairs 0 1 4 5 | 2 3 6 7.
// (Not a lambda: lambdas do not inherit the target attribute the intrinsics need.)
template <Reduction Op>
__attribute__((target("avx2"))) inline __m256 fold_row_pairs(const float* p) {
    const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    return fold_lanes<Op>(_mm256_shuffle_ps(a, b, 0x88), _mm256_shuffle_ps(a, b, 0xDD));
}

// f32 windows of R rows of 2 adjacent elements (2x2 pooling), folded in f32 eight outputs at a time: each
// window row's 16 elements split into even and odd lanes, folded in the order the loop below folds them
// (so to the same bits). GCC's code for that loop, with S = 2, ran at 17 GB/s from L2. Returns how many
// outputs it wrote: the whole vectors of `count`.
template <Reduction Op>
__attribute__((target("avx2"))) inline std::int64_t
fold_pair_windows(float* d, const float* x, std::int64_t count, const std::int64_t* rows,
                  std::int64_t row_count) {
    std::int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        const float* run = x + 2 * i;
        __m256 acc = fold_row_pairs<Op>(run + rows[0]);
        for (std::int64_t g = 1; g < row_count; ++g)
            acc = fold_lanes<Op>(acc, fold_row_pairs<Op>(run + rows[g]));
        if constexpr (info_of(Op).divides)
            acc = _mm256_div_ps(acc, _mm256_set1_ps(static_cast<float>(2 * row_count)));
        _mm256_storeu_ps(
            d + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc), 0xD8)));  // outputs in order
    }
    return i;
}
#endif

// Long runs of outputs whose windows are R rows of S adjacent elements, the run stepping S along them
// (pooling along the innermost axis of a row-major image: `(h 2) (w 2) -> h w`), into a contiguous
// destination: each pass folds S adjacent elements of one window row per output, which vectorises as
// contiguous loads and a shuffle where the gathering loop above does not. `rows` holds each window row's
// offset.
template <Reduction Op, DType In, DType Out, typename A, int S>
EINC_KERNEL void fold_adjacent_windows(storage_t<Out>* __restrict d, const storage_t<In>* __restrict x,
                                       std::int64_t count, const std::int64_t* rows, std::int64_t row_count) {
#if defined(EINC_CPU_AVX2)
    constexpr bool folds_lanes = combine_of<Op> == Combine::add || extremum<Op>;
    if constexpr (S == 2 && In == DType::f32 && Out == DType::f32 && std::is_same_v<A, float> &&
                  folds_lanes) {
        const std::int64_t done = fold_pair_windows<Op>(d, x, count, rows, row_count);
        d += done, x += 2 * done, count -= done;
    }
#endif
    const auto load = [](storage_t<In> v) { return static_cast<A>(Element<In>::load(v)); };
    const auto window_row = [&](const storage_t<In>* element) {
        A value = load(element[0]);
        for (int t = 1; t < S; ++t) value = fold<Op>(value, load(element[t]));
        return value;
    };
    constexpr std::int64_t chunk = 256;
    A acc[chunk];
    for (std::int64_t i0 = 0; i0 < count; i0 += chunk) {
        const std::int64_t n = std::min(chunk, count - i0);
        const storage_t<In>* run = x + i0 * S;
        const storage_t<In>* first = run + rows[0];
        for (std::int64_t i = 0; i < n; ++i) acc[i] = window_row(first + i * S);
        for (std::int64_t g = 1; g < row_count; ++g) {
            const storage_t<In>* row = run + rows[g];
            for (std::int64_t i = 0; i < n; ++i) acc[i] = fold<Op>(acc[i], window_row(row + i * S));
        }
        for (std::int64_t i = 0; i < n; ++i) d[i0 + i] = finish<Op, Out>(acc[i], S * row_count);
    }
}

// The innermost two modes of a nest as a 2-D block: `outer` rows of `inner` elements. Strides are in
// elements of the accumulator (acc) and of the source (src).
inline Block block_of(const Layout& src, const Layout& acc) {
    const std::size_t r = src.rank();
    return Block{src.modes[r - 2].extent, src.modes[r - 1].extent, acc.modes[r - 2].stride,
                 acc.modes[r - 1].stride, src.modes[r - 2].stride, src.modes[r - 1].stride};
}

// The modes of a nest but its innermost two, and one of extent 1: the nest of blocks, each run one block.
inline Layout outer_of(const Layout& layout) {
    Layout outer{{layout.modes.begin(), layout.modes.end() - 2}};
    outer.modes.push_back(Mode{1, 0});
    return outer;
}

// The modes the destination steps along (stride != 0), of `dst` and of a layout over the same nest.
inline std::pair<Layout, Layout> kept_modes(const Layout& dst, const Layout& other) {
    std::pair<Layout, Layout> kept;
    for (std::size_t k = 0; k < dst.rank(); ++k)
        if (dst.modes[k].stride != 0) {
            kept.first.modes.push_back(dst.modes[k]);
            kept.second.modes.push_back(other.modes[k]);
        }
    return kept;
}

}  // namespace einc::cpu::EINC_CPU_ISA
