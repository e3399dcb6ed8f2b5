// Reduce and Contract. Both fold source elements into an accumulator per output element:
//   1. order the modes as the source lies in memory (largest stride first), so it is read in order;
//   2. give every mode its stride in a dense accumulator array (0 for a reduced mode);
//   3. walk the nest: each run along the innermost mode is either a fold into one accumulator (the
//      innermost mode is reduced) or an elementwise update of a row of accumulators (it is kept) -
//      both loops the compiler vectorises;
//   4. write the accumulators to the destination in its dtype (mean divides first).
// Large reductions split the outermost mode across threads; when that mode is reduced, each thread
// folds into its own accumulators, combined at the end.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numeric>
#include <vector>

#include "runtime/cpu/element.hpp"
#include "runtime/cpu/isa.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/nest.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu::EINC_CPU_ISA {
namespace {

// What a reduction accumulates in: sums and products of f32 in double (cheap at memory speed, and
// accurate); of integers and bool in uint64, so that they wrap modulo 2^64 as numpy's int64 arithmetic
// does (signed overflow is undefined in C++); everything else in the element's compute type - float
// for the 16-bit floats - where max, min, any and all lose nothing.
template <Reduction Op, typename C>
using wrapping_t = std::conditional_t<std::is_integral_v<C> && (Op == Reduction::sum || Op == Reduction::prod), std::uint64_t, C>;
template <Reduction Op, DType D>
using accumulator_t = std::conditional_t<D == DType::f32 && (Op == Reduction::sum || Op == Reduction::mean || Op == Reduction::prod),
                                         double, wrapping_t<Op, compute_t<D>>>;

template <typename A>
A identity(Reduction op) {
    switch (op) {
    case Reduction::prod:
    case Reduction::all: return A{1};
    case Reduction::max:
        if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
        else return std::numeric_limits<A>::lowest();
    case Reduction::min:
        if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
        else return std::numeric_limits<A>::max();
    default: return A{0};
    }
}

// Folding x into acc. max/min propagate NaN, as PyTorch does: once acc is NaN it stays NaN. (GCC
// vectorises the short-circuit form twice as well as `(x > acc) | (x != x)`.)
template <Reduction Op, typename A>
inline A fold(A acc, A x) {
    if constexpr (Op == Reduction::sum || Op == Reduction::mean) return acc + x;
    else if constexpr (Op == Reduction::prod) return acc * x;
    else if constexpr (Op == Reduction::max) return (x > acc || x != x) ? x : acc;
    else if constexpr (Op == Reduction::min) return (x < acc || x != x) ? x : acc;
    else if constexpr (Op == Reduction::any) return (acc != 0 || x != 0) ? A{1} : A{0};
    else return (acc != 0 && x != 0) ? A{1} : A{0};  // all
}

// The modes of a loop nest ordered as `source` lies in memory, and the strides of a dense accumulator
// over the kept modes (destination stride != 0), row-major in the destination's own order.
struct Traversal {
    std::vector<std::size_t> order;        // modes, outermost first
    std::vector<std::int64_t> acc_stride;  // per original mode: 0 if reduced
    std::int64_t acc_size = 1;
};

Traversal plan_traversal(const Layout& source, const Layout& destination) {
    Traversal t;
    const std::size_t rank = source.rank();
    t.acc_stride.assign(rank, 0);
    for (std::size_t k = rank; k-- > 0;) {  // the destination's canonical order is outermost first
        if (destination.modes[k].stride == 0) continue;
        t.acc_stride[k] = t.acc_size;
        t.acc_size *= destination.modes[k].extent;
    }
    t.order.resize(rank);
    std::iota(t.order.begin(), t.order.end(), 0);
    std::stable_sort(t.order.begin(), t.order.end(), [&](std::size_t a, std::size_t b) {
        return std::llabs(source.modes[a].stride) > std::llabs(source.modes[b].stride);
    });
    return t;
}

Layout reordered(const Layout& layout, const std::vector<std::size_t>& order) { return permute(layout, order); }

Layout accumulator_layout(const Layout& source, const Traversal& t) {
    Layout acc;
    for (const std::size_t k : t.order) acc.modes.push_back(Mode{source.modes[k].extent, t.acc_stride[k]});
    return acc;
}

// Runs `fold_nest(nest, begin, end, acc)` over the nest of (accumulator, sources...), in parallel when
// large, and leaves the folded values in `acc`.
template <typename A, std::size_t N, typename FoldNest, typename Combine>
void fold_in_parallel(const Nest<N>& nest, std::vector<A>& acc, A init, std::int64_t bytes, FoldNest fold_nest, Combine combine) {
    const std::int64_t outer = nest.rank() == 0 ? 1 : nest.extents[0];
    if (bytes < parallel_threshold_bytes || outer < 2 || thread_count() < 2) {
        fold_nest(nest, 0, outer, acc.data());
        return;
    }
    if (nest.strides[0][0] != 0) {  // the outer mode is kept: threads update disjoint accumulators
        parallel_for(outer, [&](std::int64_t begin, std::int64_t end) { fold_nest(nest, begin, end, acc.data()); });
        return;
    }
    const int threads = thread_count();
    std::vector<std::vector<A>> partial(static_cast<std::size_t>(threads), std::vector<A>(acc.size(), init));
    parallel_for(threads, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t)
            fold_nest(nest, outer * t / threads, outer * (t + 1) / threads, partial[static_cast<std::size_t>(t)].data());
    });
    for (const std::vector<A>& p : partial)
        for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = combine(acc[i], p[i]);
}

// The two innermost modes of a traversal, which each fold call walks as a 2-D block: `outer` rows of
// `inner` elements. Strides are in elements of the accumulator (acc) and of the source (src).
struct Block {
    std::int64_t outer = 1, inner = 1;
    std::int64_t outer_acc = 0, inner_acc = 0, outer_src = 0, inner_src = 0;
};

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
EINC_KERNEL void fold_short_rows(A* __restrict a, const storage_t<In>* __restrict x, const Block& b, std::int64_t begin, std::int64_t end) {
    const std::int64_t outer_src = b.outer_src, inner_src = b.inner_src, outer_acc = b.outer_acc;
    for (std::int64_t r = begin; r < end; ++r)
        a[r * outer_acc] = fold_row<Op, In, A, K>(a[r * outer_acc], x + r * outer_src, K, inner_src);
}

// A reduced value as the result dtype: mean divides by the number of elements folded into it.
template <Reduction Op, DType Out, typename A>
inline storage_t<Out> finish(A value, std::int64_t count) {
    if constexpr (Op == Reduction::mean) value = count == 0 ? A(NAN) : value / static_cast<A>(count);
    return Element<Out>::store(convert<compute_t<Out>>(value));
}

// Rows [begin, end) of a block each reduced and stored straight into the destination (each output's
// elements all lie in its row): no accumulator array, no second pass.
template <Reduction Op, DType In, DType Out, typename A, int K>
EINC_KERNEL void reduce_rows_to(storage_t<Out>* __restrict d, const storage_t<In>* __restrict x, const Block& b, std::int64_t dst_outer,
                                std::int64_t begin, std::int64_t end) {
    const std::int64_t inner = K > 0 ? K : b.inner, outer_src = b.outer_src, inner_src = b.inner_src;
    for (std::int64_t r = begin; r < end; ++r)
        store_at<storage_t<Out>>(reinterpret_cast<std::byte*>(d + r * dst_outer),
                                 finish<Op, Out>(fold_row<Op, In, A, K>(identity<A>(Op), x + r * outer_src, inner, inner_src), inner));
}

// Folds rows [begin, end) of a block into the accumulators at `a`. The block's fields are copied into
// locals first: the compiler cannot otherwise tell that stores to `a` leave them unchanged, and will
// not vectorise.
template <Reduction Op, DType In, typename A>
EINC_KERNEL void fold_block(A* __restrict a, const storage_t<In>* __restrict x, const Block& b, std::int64_t begin, std::int64_t end) {
    const std::int64_t inner = b.inner, outer_src = b.outer_src, inner_src = b.inner_src;
    const std::int64_t outer_acc = b.outer_acc, inner_acc = b.inner_acc;
    const auto value = [](storage_t<In> v) { return Element<In>::load(v); };
    const auto load = [](storage_t<In> v) { return static_cast<A>(Element<In>::load(v)); };
    if (inner_acc == 0 && outer_acc != 0 && inner <= 4) {
        switch (inner) {
        case 2: return fold_short_rows<Op, In, A, 2>(a, x, b, begin, end);
        case 3: return fold_short_rows<Op, In, A, 3>(a, x, b, begin, end);
        case 4: return fold_short_rows<Op, In, A, 4>(a, x, b, begin, end);
        default: break;
        }
    }
    if (inner_acc == 0 && outer_acc == 0) {  // every row folds into the one accumulator: keep it in a register
        A value = a[0];
        for (std::int64_t r = begin; r < end; ++r) value = fold_row<Op, In, A>(value, x + r * outer_src, inner, inner_src);
        a[0] = value;
        return;
    }
    if (inner_acc == 0) {  // each row folds into its own accumulator
        for (std::int64_t r = begin; r < end; ++r) a[r * outer_acc] = fold_row<Op, In, A>(a[r * outer_acc], x + r * outer_src, inner, inner_src);
        return;
    }
    if (outer_acc == 0) {  // every row updates the same row of accumulators: four rows per pass over it,
                           // combined in the element's compute type before the one conversion
        std::int64_t r = begin;
        if (inner_acc == 1 && inner_src == 1)
            for (; r + 4 <= end; r += 4) {
                const storage_t<In>* __restrict x0 = x + r * outer_src;
                const storage_t<In>* __restrict x1 = x0 + outer_src;
                const storage_t<In>* __restrict x2 = x1 + outer_src;
                const storage_t<In>* __restrict x3 = x2 + outer_src;
                for (std::int64_t i = 0; i < inner; ++i)
                    a[i] = fold<Op>(a[i], static_cast<A>(fold<Op>(fold<Op>(value(x0[i]), value(x1[i])), fold<Op>(value(x2[i]), value(x3[i])))));
            }
        for (; r < end; ++r) {
            const storage_t<In>* row = x + r * outer_src;
            for (std::int64_t i = 0; i < inner; ++i) a[i * inner_acc] = fold<Op>(a[i * inner_acc], load(row[i * inner_src]));
        }
        return;
    }
    for (std::int64_t r = begin; r < end; ++r)  // one source element per accumulator here
        for (std::int64_t i = 0; i < inner; ++i) {
            A& target = a[r * outer_acc + i * inner_acc];
            target = fold<Op>(target, load(x[r * outer_src + i * inner_src]));
        }
}

// A reduction of few, very long rows (a full reduction canonicalizes to one row) would leave threads
// idle: cut a long reduced innermost mode into rows of a few thousand elements.
void split_long_row(Layout& src, Layout& acc) {
    if (src.rank() == 0) return;
    const Mode inner = src.modes.back();
    if (acc.modes.back().stride != 0 || inner.extent < (1 << 16) || src.size() / inner.extent >= 4 * thread_count()) return;
    std::int64_t chunk = 8192;
    while (chunk >= 256 && inner.extent % chunk != 0) chunk /= 2;
    if (chunk < 256) return;
    src.modes.back() = Mode{inner.extent / chunk, inner.stride * chunk};
    src.modes.push_back(Mode{chunk, inner.stride});
    acc.modes.back() = Mode{inner.extent / chunk, 0};
    acc.modes.push_back(Mode{chunk, 0});
}

// The largest reduced set the window path handles.
constexpr std::int64_t max_window = 16;

// Runs of outputs, each folding its window (offsets in source elements) and storing the result.
// (K > 0: the window's size, known at compile time, so the loop over it unrolls.)
template <Reduction Op, DType In, DType Out, typename A, int K>
EINC_KERNEL void fold_windows(storage_t<Out>* __restrict d, const storage_t<In>* __restrict x, std::int64_t count, std::int64_t dst_stride,
                              std::int64_t src_stride, const std::int64_t* offsets, std::int64_t window) {
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
        for (std::int64_t i = 0; i < n; ++i) store_at(reinterpret_cast<std::byte*>(d + (i0 + i) * dst_stride), finish<Op, Out>(acc[i], size));
    }
}

template <Reduction Op, DType In, DType Out, typename A>
void reduce_windows(const Strided& src, const Strided& dst, std::int64_t window) {
    // The reduced modes give the window's offsets; the kept ones form the nest of outputs.
    Layout reduced, kept_src, kept_dst;
    for (std::size_t k = 0; k < dst.layout.rank(); ++k) {
        if (dst.layout.modes[k].stride == 0) reduced.modes.push_back(src.layout.modes[k]);
        else {
            kept_src.modes.push_back(src.layout.modes[k]);
            kept_dst.modes.push_back(dst.layout.modes[k]);
        }
    }
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
    using S = storage_t<In>;
    using D = storage_t<Out>;
    const Nest<2> nest = make_nest<2>({&kept_dst, &kept_src}, {dst.base, src.base}, {sizeof(D), sizeof(S)});
    const auto run = [&](std::int64_t begin, std::int64_t end) {
        for_each_run(nest, begin, end, [&](std::array<std::byte*, 2> p, std::int64_t count, const std::array<std::int64_t, 2>& stride) {
            D* out = reinterpret_cast<D*>(p[0]);
            const S* in = reinterpret_cast<const S*>(p[1]);
            const std::int64_t ds = stride[0] / static_cast<std::int64_t>(sizeof(D)), ss = stride[1] / static_cast<std::int64_t>(sizeof(S));
            switch (window) {
            case 2: return fold_windows<Op, In, Out, A, 2>(out, in, count, ds, ss, offsets, window);
            case 4: return fold_windows<Op, In, Out, A, 4>(out, in, count, ds, ss, offsets, window);
            case 8: return fold_windows<Op, In, Out, A, 8>(out, in, count, ds, ss, offsets, window);
            default: return fold_windows<Op, In, Out, A, 0>(out, in, count, ds, ss, offsets, window);
            }
        });
    };
    const std::int64_t outer = nest.extents[0];
    if (src.layout.size() * static_cast<std::int64_t>(sizeof(S)) < parallel_threshold_bytes || outer < 2) run(0, outer);
    else parallel_for(outer, run);
}

template <Reduction Op, DType In, DType Out>
void reduce_typed(const Strided& src, const Strided& dst) {
    using S = storage_t<In>;
    using A = accumulator_t<Op, In>;
    const Traversal t = plan_traversal(src.layout, dst.layout);
    Layout src_ordered = reordered(src.layout, t.order), acc_layout = accumulator_layout(src.layout, t);
    split_long_row(src_ordered, acc_layout);
    while (src_ordered.rank() < 2) {  // a block needs two modes
        src_ordered.modes.insert(src_ordered.modes.begin(), Mode{1, 0});
        acc_layout.modes.insert(acc_layout.modes.begin(), Mode{1, 0});
    }
    const std::size_t rank = src_ordered.rank();
    const Block block{src_ordered.modes[rank - 2].extent, src_ordered.modes[rank - 1].extent,
                      acc_layout.modes[rank - 2].stride,  acc_layout.modes[rank - 1].stride,
                      src_ordered.modes[rank - 2].stride, src_ordered.modes[rank - 1].stride};
    // The outer nest walks every mode but the two innermost; each of its runs is one block.
    Layout src_outer{{src_ordered.modes.begin(), src_ordered.modes.end() - 2}}, acc_outer{{acc_layout.modes.begin(), acc_layout.modes.end() - 2}};
    src_outer.modes.push_back(Mode{1, 0});
    acc_outer.modes.push_back(Mode{1, 0});
    using D = storage_t<Out>;
    const std::int64_t bytes = src.layout.size() * static_cast<std::int64_t>(sizeof(S));
    const bool parallel = bytes >= parallel_threshold_bytes && thread_count() >= 2;
    const std::int64_t nest_extent = src_outer.rank() > 1 ? src_outer.modes[0].extent : 1;
    const bool nest_kept = std::all_of(acc_outer.modes.begin(), acc_outer.modes.end() - 1, [](const Mode& m) { return m.stride != 0 || m.extent == 1; });

    // Each output's elements all in one row of one block: reduce rows straight into the destination.
    if (block.inner_acc == 0 && (block.outer_acc != 0 || block.outer == 1) && nest_kept && src.layout.size() > 0) {
        Layout dst_ordered = reordered(dst.layout, t.order);
        while (dst_ordered.rank() < rank) dst_ordered.modes.insert(dst_ordered.modes.begin(), Mode{1, 0});
        Layout dst_outer{{dst_ordered.modes.begin(), dst_ordered.modes.end() - 2}};
        dst_outer.modes.push_back(Mode{1, 0});
        const std::int64_t dst_row = dst_ordered.modes[rank - 2].stride;
        const Nest<2> direct = make_nest<2>({&dst_outer, &src_outer}, {dst.base, src.base}, {sizeof(D), sizeof(S)});
        const auto rows = [&](std::byte* d, const std::byte* x, std::int64_t begin, std::int64_t end) {
            D* out = reinterpret_cast<D*>(d);
            const S* in = reinterpret_cast<const S*>(x);
            switch (block.inner) {
            case 2: return reduce_rows_to<Op, In, Out, A, 2>(out, in, block, dst_row, begin, end);
            case 3: return reduce_rows_to<Op, In, Out, A, 3>(out, in, block, dst_row, begin, end);
            case 4: return reduce_rows_to<Op, In, Out, A, 4>(out, in, block, dst_row, begin, end);
            default: return reduce_rows_to<Op, In, Out, A, 0>(out, in, block, dst_row, begin, end);
            }
        };
        const auto run = [&](std::int64_t nest_begin, std::int64_t nest_end, std::int64_t row_begin, std::int64_t row_end) {
            for_each_run(direct, nest_begin, nest_end, [&](std::array<std::byte*, 2> p, std::int64_t, const std::array<std::int64_t, 2>&) {
                rows(p[0], p[1], row_begin, row_end);
            });
        };
        if (!parallel) run(0, nest_extent, 0, block.outer);
        else if (nest_extent >= 2) parallel_for(nest_extent, [&](std::int64_t b0, std::int64_t b1) { run(b0, b1, 0, block.outer); });
        else parallel_for(block.outer, [&](std::int64_t r0, std::int64_t r1) { run(0, 1, r0, r1); });
        return;
    }

    // Few elements per output (pooling windows, tiny reduced dims): walk the outputs, and fold each one's
    // window - a short list of offsets into the source - straight into the destination.
    const std::int64_t window_size = t.acc_size == 0 ? 0 : src.layout.size() / t.acc_size;
    if (window_size <= max_window && src.layout.size() > 0) {
        reduce_windows<Op, In, Out, wrapping_t<Op, compute_t<In>>>(src, dst, window_size);  // 16 or fewer terms: no need for double
        return;
    }

    const A init = identity<A>(Op);
    std::vector<A> acc(static_cast<std::size_t>(t.acc_size), init);
    const Nest<2> nest = make_nest<2>({&acc_outer, &src_outer}, {nullptr, src.base}, {sizeof(A), sizeof(S)});
    // Folds nest runs [nest_begin, nest_end) and, of each block, rows [row_begin, row_end).
    const auto fold_range = [&](A* accumulators, std::int64_t nest_begin, std::int64_t nest_end, std::int64_t row_begin, std::int64_t row_end) {
        Nest<2> local = nest;
        local.base[0] = reinterpret_cast<std::byte*>(accumulators);
        for_each_run(local, nest_begin, nest_end, [&](std::array<std::byte*, 2> p, std::int64_t, const std::array<std::int64_t, 2>&) {
            fold_block<Op, In>(reinterpret_cast<A*>(p[0]), reinterpret_cast<const S*>(p[1]), block, row_begin, row_end);
        });
    };
    if (src.layout.size() > 0) {
        // Threads must update disjoint accumulators: split a kept mode - the nest's outermost, or the
        // block's rows - and only when every mode that could be split is reduced, give each thread its
        // own accumulators, combined after.
        const bool nest_splits = nest_extent >= 2 && acc_outer.modes[0].stride != 0;
        const bool rows_split = block.outer >= 2 && block.outer_acc != 0;
        if (!parallel || (nest_extent < 2 && block.outer < 2)) {
            fold_range(acc.data(), 0, nest_extent, 0, block.outer);
        } else if (nest_splits) {
            parallel_for(nest_extent, [&](std::int64_t b0, std::int64_t b1) { fold_range(acc.data(), b0, b1, 0, block.outer); });
        } else if (rows_split) {
            parallel_for(block.outer, [&](std::int64_t r0, std::int64_t r1) { fold_range(acc.data(), 0, nest_extent, r0, r1); });
        } else {
            const int threads = thread_count();
            const bool by_nest = nest_extent >= 2;
            const std::int64_t range = by_nest ? nest_extent : block.outer;
            // Each thread's accumulators start on a cache line of their own (no false sharing).
            const std::size_t padded = (acc.size() * sizeof(A) + 127) / sizeof(A);
            std::vector<std::vector<A>> partial(static_cast<std::size_t>(threads), std::vector<A>(padded, init));
            parallel_for(threads, [&](std::int64_t first, std::int64_t last) {
                for (std::int64_t th = first; th < last; ++th) {
                    const std::int64_t b0 = range * th / threads, b1 = range * (th + 1) / threads;
                    if (by_nest) fold_range(partial[static_cast<std::size_t>(th)].data(), b0, b1, 0, block.outer);
                    else fold_range(partial[static_cast<std::size_t>(th)].data(), 0, nest_extent, b0, b1);
                }
            });
            for (const std::vector<A>& part : partial)
                for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = fold<Op>(acc[i], part[i]);
        }
    }

    // Write out: mean divides by the number of elements folded into each accumulator.
    const std::int64_t count = t.acc_size == 0 ? 0 : src.layout.size() / std::max<std::int64_t>(t.acc_size, 1);
    Layout dst_kept, acc_kept;
    for (std::size_t k = 0; k < dst.layout.rank(); ++k)
        if (dst.layout.modes[k].stride != 0) {
            dst_kept.modes.push_back(dst.layout.modes[k]);
            acc_kept.modes.push_back(Mode{dst.layout.modes[k].extent, t.acc_stride[k]});
        }
    const Nest<2> out = make_nest<2>({&dst_kept, &acc_kept}, {dst.base, reinterpret_cast<std::byte*>(acc.data())}, {sizeof(D), sizeof(A)});
    for_each_run(out, 0, out.rank() == 0 ? 1 : out.extents[0], [&](std::array<std::byte*, 2> p, std::int64_t n, const std::array<std::int64_t, 2>& stride) {
        for (std::int64_t i = 0; i < n; ++i) store_at<D>(p[0] + i * stride[0], finish<Op, Out>(load_at<A>(p[1] + i * stride[1]), count));
    });
}

template <Reduction Op>
void reduce_op(const Strided& src, const Strided& dst) {
    dispatch(src.dtype, [&](auto in) {
        constexpr DType I = decltype(in)::value;
        if constexpr ((Op == Reduction::mean && !(I == DType::f64 || I == DType::f32 || I == DType::f16 || I == DType::bf16)) ||
                      I == DType::f8e4m3 || I == DType::f8e5m2) {
            throw Error(ErrorKind::unsupported, fmt::format("{} of {} is not supported", name_of(Op), name_of(I)));
        } else {
            // The result keeps the dtype, or is i64 (integer sum/prod) or bool (any/all): see result_dtype().
            if (dst.dtype == I) reduce_typed<Op, I, I>(src, dst);
            else if (dst.dtype == DType::i64) reduce_typed<Op, I, DType::i64>(src, dst);
            else if (dst.dtype == DType::boolean) reduce_typed<Op, I, DType::boolean>(src, dst);
            else EINC_ASSERT(false);
        }
    });
}

template <DType In, DType Out>
void contract_typed(std::span<const Strided> srcs, const Strided& dst) {
    using S = storage_t<In>;
    using A = accumulator_t<Reduction::sum, In>;
    EINC_ASSERT(srcs.size() == 2);
    const Traversal t = plan_traversal(srcs[0].layout, dst.layout);
    const Layout a_layout = reordered(srcs[0].layout, t.order), b_layout = reordered(srcs[1].layout, t.order);
    const Layout acc_layout = accumulator_layout(srcs[0].layout, t);
    std::vector<A> acc(static_cast<std::size_t>(t.acc_size), A{0});
    const Nest<3> nest = make_nest<3>({&acc_layout, &a_layout, &b_layout}, {nullptr, srcs[0].base, srcs[1].base},
                                      {sizeof(A), sizeof(S), sizeof(S)});
    const auto fold_nest = [](const Nest<3>& n, std::int64_t begin, std::int64_t end, A* accumulators) {
        Nest<3> local = n;
        local.base[0] = reinterpret_cast<std::byte*>(accumulators);
        for_each_run(local, begin, end, [](std::array<std::byte*, 3> p, std::int64_t count, const std::array<std::int64_t, 3>& stride) {
            A* a = reinterpret_cast<A*>(p[0]);
            const std::int64_t acc_step = stride[0] / static_cast<std::int64_t>(sizeof(A));
            for (std::int64_t i = 0; i < count; ++i) {
                const A x = static_cast<A>(Element<In>::load(load_at<S>(p[1] + i * stride[1])));
                const A y = static_cast<A>(Element<In>::load(load_at<S>(p[2] + i * stride[2])));
                a[i * acc_step] += x * y;
            }
        });
    };
    const std::int64_t bytes = dst.layout.size() * static_cast<std::int64_t>(2 * sizeof(S));
    if (dst.layout.size() > 0) fold_in_parallel(nest, acc, A{0}, bytes, fold_nest, [](A x, A y) { return x + y; });
    using D = storage_t<Out>;
    Layout dst_kept, acc_kept;
    for (std::size_t k = 0; k < dst.layout.rank(); ++k)
        if (dst.layout.modes[k].stride != 0) {
            dst_kept.modes.push_back(dst.layout.modes[k]);
            acc_kept.modes.push_back(Mode{dst.layout.modes[k].extent, t.acc_stride[k]});
        }
    const Nest<2> out = make_nest<2>({&dst_kept, &acc_kept}, {dst.base, reinterpret_cast<std::byte*>(acc.data())}, {sizeof(D), sizeof(A)});
    for_each_run(out, 0, out.rank() == 0 ? 1 : out.extents[0], [](std::array<std::byte*, 2> p, std::int64_t n, const std::array<std::int64_t, 2>& stride) {
        for (std::int64_t i = 0; i < n; ++i)
            store_at<D>(p[0] + i * stride[0], Element<Out>::store(convert<compute_t<Out>>(load_at<A>(p[1] + i * stride[1]))));
    });
}

}  // namespace

void reduce(Reduction op, const Strided& src, const Strided& dst) {
    switch (op) {
    case Reduction::sum: return reduce_op<Reduction::sum>(src, dst);
    case Reduction::mean: return reduce_op<Reduction::mean>(src, dst);
    case Reduction::max: return reduce_op<Reduction::max>(src, dst);
    case Reduction::min: return reduce_op<Reduction::min>(src, dst);
    case Reduction::prod: return reduce_op<Reduction::prod>(src, dst);
    case Reduction::any: return reduce_op<Reduction::any>(src, dst);
    case Reduction::all: return reduce_op<Reduction::all>(src, dst);
    case Reduction::none: break;
    }
    EINC_ASSERT(false);
}

void contract(std::span<const Strided> srcs, const Strided& dst) {
    EINC_ASSERT(srcs.size() == 2 && srcs[0].dtype == srcs[1].dtype);
    EINC_ASSERT(dst.dtype == srcs[0].dtype);
    dispatch(srcs[0].dtype, [&](auto in) {
        constexpr DType I = decltype(in)::value;
        if constexpr (I == DType::f8e4m3 || I == DType::f8e5m2 || I == DType::boolean)
            throw Error(ErrorKind::unsupported, fmt::format("einsum of {} is not supported", name_of(I)));
        else contract_typed<I, I>(srcs, dst);
    });
}

}  // namespace einc::cpu::EINC_CPU_ISA
