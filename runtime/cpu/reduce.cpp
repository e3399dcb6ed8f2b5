// Reductions, as the schedule decided them (compiler/schedule_cpu.cpp): the nest is in the source's
// memory order, its innermost two modes a 2-D block of the source; then
//   reduce_rows        each output's terms are one row of the block: folded straight into the destination;
//   reduce_windows     few terms per output: each output folds its window, a short list of offsets;
//   reduce_accumulate  every block folded into an accumulator array in the scratch (rows into their own
//                      accumulator, or row by row into a row of accumulators), then written out in the
//                      destination's dtype (mean divides first).
// The split the schedule chose shares the work between threads; with partials, each thread folds into an
// accumulator array of its own, combined at the end.
#include <fmt/format.h>

#include "runtime/cpu/accumulator.hpp"
#include "runtime/cpu/epilogue.hpp"
#include "runtime/cpu/fold.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/nest.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu::EINC_CPU_ISA {
namespace {

template <Reduction Op, DType In, DType Out, typename A>
void reduce_rows(const strategy::ReduceRows& nest, const Data& dst, const Data& src) {
    using S = storage_t<In>;
    using D = storage_t<Out>;
    const std::size_t rank = nest.src.rank();
    const Block block = block_of(nest.src, nest.acc);
    const Layout src_outer = outer_of(nest.src), dst_outer = outer_of(nest.dst);
    const std::int64_t dst_row = nest.dst.modes[rank - 2].stride,
                       nest_extent = rank > 2 ? nest.src.modes[0].extent : 1;
    const Nest<2> direct =
        make_nest<2>({&dst_outer, &src_outer}, {dst.base, src.base}, {sizeof(D), sizeof(S)});
    const auto rows = [&](std::byte* d, const std::byte* x, std::int64_t begin, std::int64_t end) {
        D* out = reinterpret_cast<D*>(d);
        const S* in = reinterpret_cast<const S*>(x);
        reduce_block_rows<Op, In, Out, A>(out, in, block, dst_row, begin, end);
    };
    // Blocks [nest_begin, nest_end) of the nest, and of each, rows [row_begin, row_end).
    const auto run = [&](std::int64_t nest_begin, std::int64_t nest_end, std::int64_t row_begin,
                         std::int64_t row_end) {
        for_each_run(direct, nest_begin, nest_end,
                     [&](std::array<std::byte*, 2> p, std::int64_t, const std::array<std::int64_t, 2>&) {
                         rows(p[0], p[1], row_begin, row_end);
                     });
    };
    switch (nest.split) {
    case Split::outer:
        return parallel_for(nest_extent,
                            [&](std::int64_t b0, std::int64_t b1) { run(b0, b1, 0, block.outer); });
    case Split::rows:
        return parallel_for(block.outer, [&](std::int64_t r0, std::int64_t r1) { run(0, 1, r0, r1); });
    default: return run(0, nest_extent, 0, block.outer);
    }
}

template <Reduction Op, DType In, DType Out, typename A>
void reduce_windows(const strategy::ReduceWindows& windows, const Data& dst, const Data& src) {
    const Layout& dst_layout = windows.dst;
    const Layout& src_layout = windows.src;
    const std::int64_t window = windows.window;
    // The reduced modes give the window's offsets; the kept ones form the nest of outputs.
    Layout reduced, kept_src, kept_dst;
    for (std::size_t k = 0; k < dst_layout.rank(); ++k) {
        if (dst_layout.modes[k].stride == 0)
            reduced.modes.push_back(src_layout.modes[k]);
        else {
            kept_src.modes.push_back(src_layout.modes[k]);
            kept_dst.modes.push_back(dst_layout.modes[k]);
        }
    }
    EINC_ASSERT(window <= max_window);
    std::int64_t offsets[max_window];
    for (std::int64_t w = 0; w < window; ++w) {
        std::int64_t flat = w, offset = 0;
        for (std::size_t k = reduced.rank(); k-- > 0;) {
            offset += flat % reduced.modes[k].extent * reduced.modes[k].stride;
            flat /= reduced.modes[k].extent;
        }
        offsets[w] = offset;
    }
    if (kept_dst.modes.empty()) {
        kept_src.modes.push_back(Mode{1, 0});
        kept_dst.modes.push_back(Mode{1, 0});
    }
    // Windows whose innermost reduced mode is 2 or 3 adjacent elements (pooling along the rows of a
    // row-major image) go a window row at a time, where a run steps that many elements along them;
    // `rows` holds each window row's first offset.
    const std::int64_t adjacent =
        !reduced.modes.empty() && reduced.modes.back().stride == 1 ? reduced.modes.back().extent : 0;
    std::int64_t rows[max_window];
    for (std::int64_t g = 0; adjacent > 0 && g < window / adjacent; ++g) rows[g] = offsets[g * adjacent];
    using S = storage_t<In>;
    using D = storage_t<Out>;
    const Nest<2> nest = make_nest<2>({&kept_dst, &kept_src}, {dst.base, src.base}, {sizeof(D), sizeof(S)});
    const auto run = [&](std::int64_t begin, std::int64_t end) {
        for_each_run(
            nest, begin, end,
            [&](std::array<std::byte*, 2> p, std::int64_t count, const std::array<std::int64_t, 2>& stride) {
                D* out = reinterpret_cast<D*>(p[0]);
                const S* in = reinterpret_cast<const S*>(p[1]);
                const std::int64_t ds = stride[0] / static_cast<std::int64_t>(sizeof(D)),
                                   ss = stride[1] / static_cast<std::int64_t>(sizeof(S));
                if constexpr (tuned_reduction(In, Op)) {
                    if ((adjacent == 2 || adjacent == 3) && ds == 1 && ss == adjacent && count >= 16) {
                        if (adjacent == 2)
                            return fold_adjacent_windows<Op, In, Out, A, 2>(out, in, count, rows, window / 2);
                        return fold_adjacent_windows<Op, In, Out, A, 3>(out, in, count, rows, window / 3);
                    }
                    switch (window) {
                    case 2: return fold_windows<Op, In, Out, A, 2>(out, in, count, ds, ss, offsets, window);
                    case 4: return fold_windows<Op, In, Out, A, 4>(out, in, count, ds, ss, offsets, window);
                    case 8: return fold_windows<Op, In, Out, A, 8>(out, in, count, ds, ss, offsets, window);
                    }
                }
                fold_windows<Op, In, Out, A, 0>(out, in, count, ds, ss, offsets, window);
            });
    };
    if (windows.split == Split::outer)
        parallel_for(nest.extents[0], run);
    else
        run(0, nest.extents[0]);
}

// The accumulators (A) written out as Out along `out` (destination, accumulators): each divided by
// `count` first where the op divides (mean), then scaled by the epilogue. One copy per (Divides, Out, A),
// not per op: their loops are the same.
template <bool Divides, DType Out, typename A>
__attribute__((noinline)) void write_accumulators(const Nest<2>& out, std::int64_t count,
                                                  const Epilogue& epilogue) {
    using D = storage_t<Out>;
    const std::int64_t outer = out.rank() == 0 ? 1 : out.extents[0];
    const auto finished = [&](A value) {
        if constexpr (Divides) value = count == 0 ? A(NAN) : value / static_cast<A>(count);
        return value;
    };
    if (epilogue.identity()) {
        for_each_run(
            out, 0, outer,
            [&](std::array<std::byte*, 2> p, std::int64_t n, const std::array<std::int64_t, 2>& stride) {
                for (std::int64_t i = 0; i < n; ++i)
                    store_at<D>(p[0] + i * stride[0], Element<Out>::store(convert<compute_t<Out>>(
                                                          finished(load_at<A>(p[1] + i * stride[1])))));
            });
        return;
    }
    // The epilogue after the reduction (and after mean's division), in the accumulator.
    const Scale<A> scale(epilogue);
    with_reads(scale, [&](auto reads) {
        for_each_run(
            out, 0, outer,
            [&](std::array<std::byte*, 2> p, std::int64_t n, const std::array<std::int64_t, 2>& stride) {
                for (std::int64_t i = 0; i < n; ++i)
                    store_scaled<Out, decltype(reads)::value>(
                        p[0] + i * stride[0], finished(load_at<A>(p[1] + i * stride[1])), scale);
            });
    });
}

template <Reduction Op, DType In, DType Out, typename A>
void reduce_accumulate(const strategy::ReduceAccumulate& nest, const Epilogue& epilogue, const Data& dst,
                       const Data& src, std::byte* scratch) {
    using S = storage_t<In>;
    using D = storage_t<Out>;
    const strategy::Accumulators& arrays = nest.acc;
    const std::size_t rank = nest.src.rank();
    Block block = block_of(nest.src, arrays.layout);
    block.rows_in_order = nest.rows_in_order;
    const Layout src_outer = outer_of(nest.src), acc_outer = outer_of(arrays.layout);
    const std::int64_t nest_extent = rank > 2 ? nest.src.modes[0].extent : 1;
    const auto array = [&](int k) {
        return reinterpret_cast<A*>(scratch + k * arrays.array_stride);
    };  // 0: the result
    const A init = identity<A>(Op);
    std::fill(array(0), array(0) + arrays.count, init);

    const Nest<2> blocks =
        make_nest<2>({&acc_outer, &src_outer}, {nullptr, src.base}, {sizeof(A), sizeof(S)});
    // Folds blocks [nest_begin, nest_end) and, of each, rows [row_begin, row_end), into `accumulators`.
    const auto fold_range = [&](A* accumulators, std::int64_t nest_begin, std::int64_t nest_end,
                                std::int64_t row_begin, std::int64_t row_end) {
        Nest<2> local = blocks;
        local.base[0] = reinterpret_cast<std::byte*>(accumulators);
        for_each_run(local, nest_begin, nest_end,
                     [&](std::array<std::byte*, 2> p, std::int64_t, const std::array<std::int64_t, 2>&) {
                         A* accumulators = reinterpret_cast<A*>(p[0]);
                         const S* block_source = reinterpret_cast<const S*>(p[1]);
                         // (mean folds as sum does, and divides as it writes out: one copy of the loops)
                         constexpr Reduction folds = Op == Reduction::mean ? Reduction::sum : Op;
                         if constexpr (reduced_as_f32(In))
                             fold_widened_block<folds, In>(accumulators, block_source, block, row_begin,
                                                           row_end);
                         else
                             fold_block<folds, In>(accumulators, block_source, block, row_begin, row_end);
                     });
    };
    switch (nest.split) {
    case Split::outer:
        parallel_for(nest_extent,
                     [&](std::int64_t b0, std::int64_t b1) { fold_range(array(0), b0, b1, 0, block.outer); });
        break;
    case Split::rows:
        parallel_for(block.outer,
                     [&](std::int64_t r0, std::int64_t r1) { fold_range(array(0), 0, nest_extent, r0, r1); });
        break;
    case Split::partials_outer:
    case Split::partials_rows: {
        const int threads = arrays.partial_arrays;
        const bool by_outer = nest.split == Split::partials_outer;
        const std::int64_t range = by_outer ? nest_extent : block.outer;
        parallel_for(threads, [&](std::int64_t first, std::int64_t last) {
            for (std::int64_t th = first; th < last; ++th) {
                A* partial = array(static_cast<int>(th) + 1);
                std::fill(partial, partial + arrays.count, init);
                const std::int64_t b0 = range * th / threads, b1 = range * (th + 1) / threads;
                if (by_outer)
                    fold_range(partial, b0, b1, 0, block.outer);
                else
                    fold_range(partial, 0, nest_extent, b0, b1);
            }
        });
        for (int th = 1; th <= threads; ++th)
            for (std::int64_t i = 0; i < arrays.count; ++i) array(0)[i] = fold<Op>(array(0)[i], array(th)[i]);
        break;
    }
    default:
        if (nest.src.size() > 0) fold_range(array(0), 0, nest_extent, 0, block.outer);
    }

    // Write out: mean divides by the number of terms folded into each accumulator.
    const std::int64_t count = arrays.count == 0 ? 0 : nest.src.size() / arrays.count;
    const auto [dst_kept, acc_kept] = kept_modes(nest.dst, arrays.layout);
    const Nest<2> out = make_nest<2>(
        {&dst_kept, &acc_kept}, {dst.base, reinterpret_cast<std::byte*>(array(0))}, {sizeof(D), sizeof(A)});
    write_accumulators<info_of(Op).divides, Out, A>(out, count, epilogue);
}

// The kernel of each strategy, with what it needs of the step.
template <Reduction Op, DType In, DType Out, typename A>
void reduce_typed(const strategy::ReduceRows& rows, const Epilogue&, const Data& dst, const Data& src,
                  std::byte*) {
    reduce_rows<Op, In, Out, A>(rows, dst, src);
}
template <Reduction Op, DType In, DType Out, typename A>
void reduce_typed(const strategy::ReduceWindows& windows, const Epilogue&, const Data& dst, const Data& src,
                  std::byte*) {
    reduce_windows<Op, In, Out, A>(windows, dst, src);
}
template <Reduction Op, DType In, DType Out, typename A>
void reduce_typed(const strategy::ReduceAccumulate& folding, const Epilogue& epilogue, const Data& dst,
                  const Data& src, std::byte* scratch) {
    reduce_accumulate<Op, In, Out, A>(folding, epilogue, dst, src, scratch);
}

#if defined(EINC_CPU_AVX2)
constexpr bool avx2_build = true;
#else
constexpr bool avx2_build = false;
#endif

template <Reduction Op, typename Strategy>
void reduce_op(const Strategy& strategy, DType accumulator, const Epilogue& epilogue, const Data& dst,
               const Data& src, std::byte* scratch) {
    dispatch(src.dtype, [&](auto in) {
        constexpr DType I = decltype(in)::value;
        // (The plan refuses what the op does not take - fp8 arithmetic: result_dtype - and converts the
        // integers this file has no kernels for, and those a mean takes, first: plan_reduce.)
        if constexpr ((info_of(Op).result == ResultRule::floating && !is_floating(I)) || I == DType::f8e4m3 ||
                      I == DType::f8e5m2 || !computed_natively<I>) {
            EINC_ASSERT(false);
        } else if constexpr (avx2_build && !tuned_reduction(I, Op)) {
            EINC_ASSERT(false);  // the baseline's kernels run these (dispatch.cpp)
        } else {
            with_accumulator<Op, I>(accumulator, [&](auto a) {
                using A = decltype(a);
                // The op's result dtype, or the input's where nothing is reduced (a rearrange, as einops
                // runs it). Only these are compiled: every result dtype for every op tripled this file's
                // build time.
                constexpr DType R = reduced_dtype(Op, I);
                if (dst.dtype == I) return reduce_typed<Op, I, I, A>(strategy, epilogue, dst, src, scratch);
                if constexpr (R != I)
                    if (dst.dtype == R)
                        return reduce_typed<Op, I, R, A>(strategy, epilogue, dst, src, scratch);
                EINC_ASSERT(false);
            });
        }
    });
}

template <typename Strategy>
void reduce_any(const Strategy& s, DType accumulator, const Epilogue& epilogue, const Data& dst,
                const Data& src, std::byte* scratch) {
    switch (s.op) {
    case Reduction::sum: return reduce_op<Reduction::sum>(s, accumulator, epilogue, dst, src, scratch);
    case Reduction::mean: return reduce_op<Reduction::mean>(s, accumulator, epilogue, dst, src, scratch);
    case Reduction::max: return reduce_op<Reduction::max>(s, accumulator, epilogue, dst, src, scratch);
    case Reduction::min: return reduce_op<Reduction::min>(s, accumulator, epilogue, dst, src, scratch);
    case Reduction::prod: return reduce_op<Reduction::prod>(s, accumulator, epilogue, dst, src, scratch);
    case Reduction::any: return reduce_op<Reduction::any>(s, accumulator, epilogue, dst, src, scratch);
    case Reduction::all: return reduce_op<Reduction::all>(s, accumulator, epilogue, dst, src, scratch);
    case Reduction::none: break;
    }
    EINC_ASSERT(false);
}

}  // namespace

void reduce(const strategy::ReduceRows& rows, DType accumulator, const Data& dst, const Data& src) {
    reduce_any(rows, accumulator, Epilogue{}, dst, src, nullptr);
}
void reduce(const strategy::ReduceWindows& windows, DType accumulator, const Data& dst, const Data& src) {
    reduce_any(windows, accumulator, Epilogue{}, dst, src, nullptr);
}
void reduce(const strategy::ReduceAccumulate& folding, DType accumulator, const Epilogue& epilogue,
            const Data& dst, const Data& src, std::byte* scratch) {
    reduce_any(folding, accumulator, epilogue, dst, src, scratch);
}

}  // namespace einc::cpu::EINC_CPU_ISA
