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
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/nest.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu {
namespace {

// What a reduction accumulates in: double for f32/f64 (cheap at memory speed, and accurate), float for
// the 16- and 8-bit floats, int64 for integers and bool.
template <DType D>
using accumulator_t = std::conditional_t<D == DType::f32 || D == DType::f64, double, compute_t<D>>;

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

// Folding x into acc. max/min propagate NaN, as PyTorch does: once acc is NaN it stays NaN.
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

// Folds rows [begin, end) of a block into the accumulators at `a`.
template <Reduction Op, DType In, typename A>
void fold_block(A* a, const storage_t<In>* x, const Block& b, std::int64_t begin, std::int64_t end) {
    const auto load = [](storage_t<In> v) { return static_cast<A>(Element<In>::load(v)); };
    if (b.inner_acc == 0) {  // each row folds into one accumulator (or all rows into one, if outer_acc is 0 too)
        for (std::int64_t r = begin; r < end; ++r) {
            const storage_t<In>* row = x + r * b.outer_src;
            A& target = a[r * b.outer_acc];
            if (b.inner_src == 1 && b.inner >= 16) {
                // Four independent chains let the compiler vectorise without reassociating.
                A v0 = identity<A>(Op), v1 = v0, v2 = v0, v3 = v0;
                std::int64_t i = 0;
                for (; i + 4 <= b.inner; i += 4) {
                    v0 = fold<Op>(v0, load(row[i]));
                    v1 = fold<Op>(v1, load(row[i + 1]));
                    v2 = fold<Op>(v2, load(row[i + 2]));
                    v3 = fold<Op>(v3, load(row[i + 3]));
                }
                for (; i < b.inner; ++i) v0 = fold<Op>(v0, load(row[i]));
                target = fold<Op>(target, fold<Op>(fold<Op>(v0, v1), fold<Op>(v2, v3)));
            } else {
                A value = target;
                for (std::int64_t i = 0; i < b.inner; ++i) value = fold<Op>(value, load(row[i * b.inner_src]));
                target = value;
            }
        }
        return;
    }
    if (b.outer_acc == 0) {  // every row updates the same row of accumulators: four rows per pass over it
        std::int64_t r = begin;
        if (b.inner_acc == 1 && b.inner_src == 1)
            for (; r + 4 <= end; r += 4) {
                const storage_t<In>* x0 = x + r * b.outer_src;
                const storage_t<In>* x1 = x0 + b.outer_src;
                const storage_t<In>* x2 = x1 + b.outer_src;
                const storage_t<In>* x3 = x2 + b.outer_src;
                for (std::int64_t i = 0; i < b.inner; ++i)
                    a[i] = fold<Op>(fold<Op>(a[i], fold<Op>(load(x0[i]), load(x1[i]))), fold<Op>(load(x2[i]), load(x3[i])));
            }
        for (; r < end; ++r) {
            const storage_t<In>* row = x + r * b.outer_src;
            for (std::int64_t i = 0; i < b.inner; ++i) a[i * b.inner_acc] = fold<Op>(a[i * b.inner_acc], load(row[i * b.inner_src]));
        }
        return;
    }
    for (std::int64_t r = begin; r < end; ++r)  // one source element per accumulator here
        for (std::int64_t i = 0; i < b.inner; ++i) {
            A& target = a[r * b.outer_acc + i * b.inner_acc];
            target = fold<Op>(target, load(x[r * b.outer_src + i * b.inner_src]));
        }
}

template <Reduction Op, DType In, DType Out>
void reduce_typed(const Strided& src, const Strided& dst) {
    using S = storage_t<In>;
    using A = accumulator_t<In>;
    const Traversal t = plan_traversal(src.layout, dst.layout);
    Layout src_ordered = reordered(src.layout, t.order), acc_layout = accumulator_layout(src.layout, t);
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
    const A init = identity<A>(Op);
    std::vector<A> acc(static_cast<std::size_t>(t.acc_size), init);
    const Nest<2> nest = make_nest<2>({&acc_outer, &src_outer}, {nullptr, src.base}, {sizeof(A), sizeof(S)});
    const auto fold_range = [&](A* accumulators, std::int64_t begin, std::int64_t end, bool split_blocks) {
        Nest<2> local = nest;
        local.base[0] = reinterpret_cast<std::byte*>(accumulators);
        const std::int64_t outer_end = split_blocks ? 1 : end;
        for_each_run(local, split_blocks ? 0 : begin, outer_end, [&](std::array<std::byte*, 2> p, std::int64_t, const std::array<std::int64_t, 2>&) {
            fold_block<Op, In>(reinterpret_cast<A*>(p[0]), reinterpret_cast<const S*>(p[1]), block, split_blocks ? begin : 0,
                               split_blocks ? end : block.outer);
        });
    };
    if (src.layout.size() > 0) {
        // Large reductions are split across threads along the outermost mode of the nest, or along the
        // rows of the block when the nest has no mode of its own.
        const bool split_blocks = nest.rank() == 1;
        const std::int64_t range = split_blocks ? block.outer : nest.extents[0];
        const std::int64_t acc_stride_of_range = split_blocks ? block.outer_acc : nest.strides[0][0];
        const std::int64_t bytes = src.layout.size() * static_cast<std::int64_t>(sizeof(S));
        if (bytes < parallel_threshold_bytes || range < 2 || thread_count() < 2) {
            fold_range(acc.data(), 0, range, split_blocks);
        } else if (acc_stride_of_range != 0) {  // the range is kept: threads update disjoint accumulators
            parallel_for(range, [&](std::int64_t begin, std::int64_t end) { fold_range(acc.data(), begin, end, split_blocks); });
        } else {  // the range is reduced: each thread folds into its own accumulators, combined after
            const int threads = thread_count();
            std::vector<std::vector<A>> partial(static_cast<std::size_t>(threads), std::vector<A>(acc.size(), init));
            parallel_for(threads, [&](std::int64_t first, std::int64_t last) {
                for (std::int64_t th = first; th < last; ++th)
                    fold_range(partial[static_cast<std::size_t>(th)].data(), range * th / threads, range * (th + 1) / threads, split_blocks);
            });
            for (const std::vector<A>& part : partial)
                for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = fold<Op>(acc[i], part[i]);
        }
    }

    // Write out: mean divides by the number of elements folded into each accumulator.
    const std::int64_t count = t.acc_size == 0 ? 0 : src.layout.size() / std::max<std::int64_t>(t.acc_size, 1);
    std::vector<std::size_t> kept;
    for (std::size_t k = 0; k < dst.layout.rank(); ++k)
        if (dst.layout.modes[k].stride != 0) kept.push_back(k);
    Layout dst_kept, acc_kept;
    for (const std::size_t k : kept) {
        dst_kept.modes.push_back(dst.layout.modes[k]);
        acc_kept.modes.push_back(Mode{dst.layout.modes[k].extent, t.acc_stride[k]});
    }
    using D = storage_t<Out>;
    const Nest<2> out = make_nest<2>({&dst_kept, &acc_kept}, {dst.base, reinterpret_cast<std::byte*>(acc.data())}, {sizeof(D), sizeof(A)});
    for_each_run(out, 0, out.rank() == 0 ? 1 : out.extents[0], [&](std::array<std::byte*, 2> p, std::int64_t n, const std::array<std::int64_t, 2>& stride) {
        for (std::int64_t i = 0; i < n; ++i) {
            A value = load_at<A>(p[1] + i * stride[1]);
            if constexpr (Op == Reduction::mean) value = count == 0 ? A(NAN) : value / static_cast<A>(count);
            store_at<D>(p[0] + i * stride[0], Element<Out>::store(convert<compute_t<Out>>(value)));
        }
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
    using A = accumulator_t<In>;
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

}  // namespace einc::cpu
