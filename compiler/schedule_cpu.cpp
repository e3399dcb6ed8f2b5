// The CPU rules of the schedule: for each step, the strategy the CPU kernels (runtime/cpu/) run, its loop
// nest in traversal order, the accumulator, how its work is split between threads, and its scratch.
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "compiler/canonicalize.hpp"
#include "compiler/checked.hpp"
#include "compiler/schedule_rules.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::detail {
namespace {

std::int64_t dense_bytes(const Layout& layout, DType dtype) {
    return saturating_mul(layout.size(), static_cast<std::int64_t>(size_of(dtype)));
}

// One more mode of extent 1 in front of each layout, until they have `rank` modes.
void pad_front(std::size_t rank, std::initializer_list<Layout*> layouts) {
    for (Layout* layout : layouts)
        while (layout->rank() < rank) layout->modes.insert(layout->modes.begin(), Mode{1, 0});
}

// How many tiles of `extents` cover the destination.
std::int64_t tile_count(const Layout& dst, const Shape& extents) {
    std::int64_t n = 1;
    for (std::size_t m = 0; m < dst.rank(); ++m) n *= ceil_div(dst.modes[m].extent, extents[m]);
    return n;
}

// The orders of a transpose's tiles: each side's tiled modes by stride, and the tiles walked nearest first,
// along the mode whose step moves least in both memories, so that consecutive tiles share pages and lines.
void order_tiles(TransposeTiles& tiles, const Layout& dst, const Layout& src, std::size_t p) {
    const std::size_t rank = dst.rank(), q = rank - 1;
    const auto by_stride = [](const Layout& side) {
        return [&side](std::size_t a, std::size_t b) {
            return std::abs(side.modes[a].stride) < std::abs(side.modes[b].stride);
        };
    };
    for (std::size_t m = 0; m < rank; ++m) {
        if (tiles.extents[m] > 1 && m != p) tiles.read_order.push_back(m);
        if (tiles.extents[m] > 1 && m != p && m != q) tiles.write_order.push_back(m);
        if (tiles.extents[m] < dst.modes[m].extent) tiles.tile_order.push_back(m);
    }
    std::sort(tiles.read_order.begin(), tiles.read_order.end(), by_stride(src));
    std::sort(tiles.write_order.begin(), tiles.write_order.end(), by_stride(dst));
    const auto jump = [&](std::size_t m) {
        return tiles.extents[m] * (std::abs(src.modes[m].stride) + std::abs(dst.modes[m].stride));
    };
    std::stable_sort(tiles.tile_order.begin(), tiles.tile_order.end(),
                     [&](std::size_t a, std::size_t b) { return jump(a) < jump(b); });
    tiles.count = tile_count(dst, tiles.extents);
}

// A transpose's tiles (TransposeTiles). Each side's runs reach 512 bytes where its contiguous modes allow
// (a run's cache lines are used up while in L1, and the prefetchers see streams), then the two tiled modes
// grow to fill half the buffer; a tile never exceeds the buffer.
TransposeTiles tile_transpose(const Layout& dst, const Layout& src, std::size_t p, std::int64_t element_bytes,
                              std::int64_t block) {
    constexpr std::int64_t run_bytes = 512;
    const std::size_t rank = dst.rank(), q = rank - 1;
    const std::int64_t run = std::max<std::int64_t>(run_bytes / element_bytes, 1),
                       budget = transpose_buffer_bytes / element_bytes;
    TransposeTiles tiles;
    tiles.extents.assign(rank, 1);
    const auto size = [&] {
        return std::accumulate(tiles.extents.begin(), tiles.extents.end(), std::int64_t{1},
                               std::multiplies<>());
    };
    // From a side's unit-stride mode along the modes contiguous after it, until the run is long enough.
    const auto follow = [&](const Layout& side, std::size_t first) {
        std::int64_t length = 1;
        for (std::size_t m = first;;) {
            const std::int64_t extent = side.modes[m].extent;
            std::int64_t want = ceil_div(run, length);
            if (m == p || m == q) want = ceil_div(want, block) * block;  // whole register blocks
            tiles.extents[m] = std::max(tiles.extents[m], std::min(extent, want));
            if (tiles.extents[m] < extent) return;
            length *= extent;
            if (length >= run) return;
            const auto next = std::find_if(side.modes.begin(), side.modes.end(), [&](const Mode& mode) {
                return mode.stride == length && mode.extent > 1;
            });
            if (next == side.modes.end()) return;
            m = static_cast<std::size_t>(next - side.modes.begin());
        }
    };
    follow(src, p);
    follow(dst, q);
    for (bool grew = true; grew;) {
        grew = false;
        for (const std::size_t m : {p, q})
            if (tiles.extents[m] < dst.modes[m].extent && size() * 2 <= budget / 2) {
                tiles.extents[m] = std::min(dst.modes[m].extent, tiles.extents[m] * 2);
                grew = true;
            }
    }
    while (size() > budget) {  // both sides' runs too long together: halve the longest tiled mode
        const auto longest = std::max_element(tiles.extents.begin(), tiles.extents.end());
        *longest = std::max<std::int64_t>(*longest / 2, 1);
    }
    order_tiles(tiles, dst, src, p);
    return tiles;
}

// Kind direct's tiles: strips a source line wide along p (its loads use up each line at once) and whole
// along the other modes, so that each of a strip's destination rows is written in order; cut along the
// outermost destination mode until every thread has a few strips. (The caches hold both sides: nothing to
// stage; a 128x128x64 `a b c -> c b a` went from 0.45 to 0.6 of a copy.)
TransposeTiles strip_transpose(const Layout& dst, const Layout& src, std::size_t p,
                               std::int64_t element_bytes, std::int64_t block, int threads) {
    constexpr std::int64_t line_bytes = 64, strips_per_thread = 4;
    TransposeTiles tiles;
    tiles.extents.resize(dst.rank());
    for (std::size_t m = 0; m < dst.rank(); ++m) tiles.extents[m] = dst.modes[m].extent;
    tiles.extents[p] = std::min(dst.modes[p].extent, std::max(line_bytes / element_bytes, block));
    std::size_t outer = dst.rank() - 1;  // the outermost destination mode but p
    for (std::size_t m = 0; m < dst.rank(); ++m)
        if (m != p && dst.modes[m].extent > 1 &&
            std::abs(dst.modes[m].stride) > std::abs(dst.modes[outer].stride))
            outer = m;
    const std::int64_t least = outer == dst.rank() - 1 ? block : 1;  // the last mode: whole register blocks
    while (tile_count(dst, tiles.extents) < strips_per_thread * threads && tiles.extents[outer] >= 2 * least)
        tiles.extents[outer] = (tiles.extents[outer] / 2 + least - 1) / least * least;
    order_tiles(tiles, dst, src, p);
    tiles.read_order.clear();  // (read as written)
    return tiles;
}

// Copies: by element size (move), with a conversion, or tiled between the source's and the destination's
// contiguous modes.
ScheduledStep schedule_copy(const Plan& plan, const Copy& copy, const Target& target, bool streams) {
    const DType from = plan.dtype_of(copy.src.buffer), to = plan.dtype_of(copy.dst.buffer);
    const DType accumulator = accumulator_dtype(Reduction::none, from, 1, Backend::cpu);
    const Layout &dst = copy.dst.layout, &src = copy.src.layout;
    const bool parallel = dense_bytes(dst, to) >= parallel_threshold_bytes && target.threads >= 2;
    const Split outer = parallel && dst.rank() > 0 && dst.modes[0].extent >= 2 ? Split::outer : Split::none;
    // An epilogue does arithmetic on every element: the converting loop, never a bit move or a transpose.
    const bool moves_bits = from == to && copy.epilogue.identity();
    if (!moves_bits) return scheduled(strategy::Convert{dst, src, outer}, accumulator);
    // Destination rows of 2 or 3 (NCHW -> NHWC of 3 channels) too: the short-side loop writes them in
    // order, where the element nest took a run of 3 at a time (64x3x224x224 f32: 16.4 -> 8.0 ms).
    const std::optional<std::size_t> p = transpose_mode(dst, src, 2);
    if (!p || dst.rank() > max_transpose_rank) return scheduled(strategy::Move{dst, src, outer}, accumulator);

    strategy::Transpose t{dst, src, *p};
    const std::size_t last = dst.rank() - 1;
    const std::int64_t rows = src.modes[*p].extent, cols = src.modes[last].extent;
    const std::int64_t block = target.vector_bytes / 4;  // register blocks hold 4-byte elements
    // Register blocks, straight from the source where the caches hold the copy, else through a buffer.
    if (size_of(from) == 4 && block > 0 && rows >= block && cols >= block)
        t.kind = streams ? TransposeKind::registers : TransposeKind::direct;
    else if (rows <= short_side || cols <= short_side)
        t.kind = TransposeKind::short_side;
    else
        t.kind = TransposeKind::tiles;
    if (t.kind == TransposeKind::short_side) {
        t.short_source_mode = rows <= short_side;
        const std::int64_t batch = dst.size() / (rows * cols);  // the other modes
        t.split = !parallel ? Split::none : batch >= 2 ? Split::outer : Split::tiles;
        return scheduled(std::move(t), accumulator);
    }
    const auto element_bytes = static_cast<std::int64_t>(size_of(from));
    t.tiles =
        t.kind == TransposeKind::direct
            ? strip_transpose(dst, src, *p, element_bytes, block, parallel ? target.threads : 1)
            : tile_transpose(dst, src, *p, element_bytes, t.kind == TransposeKind::registers ? block : 1);
    t.streaming_stores = streams && t.kind == TransposeKind::registers;
    t.split = parallel && t.tiles.count >= 2 ? Split::tiles : Split::none;
    return scheduled(std::move(t), accumulator);
}

// The order a reduction or contraction reads its first source in (memory order), and the strides of a
// dense accumulator over the kept modes - row-major in the destination's canonical order - per mode.
struct Traversal {
    std::vector<std::size_t> order;
    Layout acc;  // in the nest's own mode order
    std::int64_t size = 1;
};
Traversal traversal(const Layout& source, const Layout& destination) {
    Traversal t;
    t.acc = destination;
    Shape kept;
    for (const Mode& m : destination.modes)
        if (m.stride != 0) kept.push_back(m.extent);
    const Shape strides = row_major_strides(kept);
    for (std::size_t k = 0, j = 0; k < destination.rank(); ++k)
        if (t.acc.modes[k].stride != 0) t.acc.modes[k].stride = strides[j++];
    t.size = *checked_product(kept);  // the destination's size, which fits
    t.order = order_by_stride(std::span(&source, 1));
    return t;
}

// A reduction of few, very long rows (a full reduction is one row) would leave threads idle: a long
// reduced innermost mode is cut into rows of a few thousand elements, in every layout of the nest (src is
// the source's, acc marks the reduced modes; both are read before any layout changes).
void split_long_row(std::initializer_list<Layout*> nest, const Layout& src, const Layout& acc, int threads) {
    if (src.rank() == 0) return;
    const Mode inner = src.modes.back();
    if (acc.modes.back().stride != 0 || inner.extent < (1 << 16) || src.size() / inner.extent >= 4 * threads)
        return;
    std::int64_t chunk = 8192;
    while (chunk >= 256 && inner.extent % chunk != 0) chunk /= 2;
    if (chunk < 256) return;
    const std::int64_t rows = inner.extent / chunk;
    for (Layout* layout : nest) {
        const Mode m = layout->modes.back();
        layout->modes.back() = Mode{rows, m.stride * chunk};
        layout->modes.push_back(Mode{chunk, m.stride});
    }
}

// Whether each output's terms are all in one row of the nest's innermost block (`acc` marks the reduced
// modes with stride 0; at least two modes): rows can be folded straight into the destination.
bool terms_in_rows(const Layout& acc) {
    const std::size_t rank = acc.rank();
    const Mode rows = acc.modes[rank - 2], row = acc.modes[rank - 1];
    const bool outer_kept = std::all_of(acc.modes.begin(), acc.modes.end() - 2,
                                        [](Mode m) { return m.stride != 0 || m.extent == 1; });
    return row.stride == 0 && (rows.stride != 0 || rows.extent == 1) && outer_kept;
}

// An accumulator array of `count` elements of `accumulator`, and with partials one more per thread.
strategy::Accumulators accumulators(Layout layout, std::int64_t count, DType accumulator, Split split,
                                    const Target& target) {
    strategy::Accumulators acc{std::move(layout), count};
    acc.array_stride = saturating_mul(
        saturating_add(saturating_mul(count, static_cast<std::int64_t>(size_of(accumulator))), 127) / 128,
        128);  // 128-byte aligned
    if (split == Split::partials_outer || split == Split::partials_rows) acc.partial_arrays = target.threads;
    return acc;
}

// A step that folds into accumulator arrays: they are its scratch.
template <typename Folding>
ScheduledStep with_arrays(Folding folding, DType accumulator) {
    const std::int64_t scratch = saturating_mul(folding.acc.array_stride, 1 + folding.acc.partial_arrays);
    ScheduledStep step = scheduled(std::move(folding), accumulator);
    step.scratch_bytes = scratch;
    return step;
}

// Reductions: rows folded straight into the destination, windows of offsets, or an accumulator array.
ScheduledStep schedule_reduce(const Plan& plan, const Reduce& reduce, const Target& target) {
    const DType in = plan.dtype_of(reduce.src.buffer);
    const Traversal t = traversal(reduce.src.layout, reduce.dst.layout);
    const std::int64_t size = reduce.src.layout.size();
    const std::int64_t terms = t.size == 0 ? 0 : size / t.size;
    const DType accumulator = accumulator_dtype(reduce.op, in, terms, Backend::cpu);
    const std::int64_t bytes = dense_bytes(reduce.src.layout, in);
    const bool parallel = bytes >= parallel_threshold_bytes && target.threads >= 2;

    Layout src = permute(reduce.src.layout, t.order), acc = permute(t.acc, t.order),
           dst = permute(reduce.dst.layout, t.order);
    split_long_row({&dst, &src, &acc}, src, acc, target.threads);
    pad_front(2, {&src, &acc, &dst});
    const std::size_t rank = src.rank();
    const Mode rows = acc.modes[rank - 2], row = acc.modes[rank - 1];  // the block, in accumulator strides
    const std::int64_t nest_extent = rank > 2 ? src.modes[0].extent : 1;

    // Each output's terms all in one row of the block: fold rows straight into the destination. (With an
    // epilogue, always the accumulator array: its write-out is the one place the kernel applies it.)
    const bool plain = reduce.epilogue.identity();
    if (plain && terms_in_rows(acc) && size > 0) {
        const Split split = !parallel ? Split::none : nest_extent >= 2 ? Split::outer : Split::rows;
        return scheduled(strategy::ReduceRows{reduce.op, dst, src, acc, split}, accumulator);
    }
    // Few terms per output (pooling windows, tiny reduced dims): fold each output's window directly.
    if (plain && terms <= max_window && size > 0) {
        const auto kept = std::find_if(reduce.dst.layout.modes.begin(), reduce.dst.layout.modes.end(),
                                       [](Mode m) { return m.stride != 0; });
        const Split split = parallel && kept != reduce.dst.layout.modes.end() && kept->extent >= 2
                                ? Split::outer
                                : Split::none;
        return scheduled(
            strategy::ReduceWindows{reduce.op, reduce.dst.layout, reduce.src.layout, terms, split},
            accumulator);
    }
    // Otherwise an accumulator array. Threads must update disjoint accumulators: split a kept mode - the
    // nest's outermost, or the block's rows - and only where every mode that could split is reduced,
    // give each thread accumulators of its own.
    strategy::ReduceAccumulate r{reduce.op, dst, src};
    // Every contiguous row of a block into one row of accumulators (a middle or outer axis reduced): read
    // from memory, row after row, so that the source is read in order - four rows per pass, read as four
    // streams, ran at half the read bandwidth with rows of 2 KiB and more - while the accumulators stay in
    // L1 (16 KiB at most); from the caches, four rows per pass, which stores the accumulators a quarter as
    // often.
    const std::int64_t accumulator_row_bytes =
        saturating_mul(row.extent, static_cast<std::int64_t>(size_of(accumulator)));
    r.rows_in_order = rows.stride == 0 && row.stride == 1 && src.modes[rank - 1].stride == 1 &&
                      bytes >= beyond_caches_bytes && row.extent >= 16 && accumulator_row_bytes <= 16 << 10;
    if (!parallel || size == 0 || (nest_extent < 2 && rows.extent < 2))
        r.split = Split::none;
    else if (nest_extent >= 2 && acc.modes[0].stride != 0)
        r.split = Split::outer;
    else if (rows.extent >= 2 && rows.stride != 0)
        r.split = Split::rows;
    else
        r.split = nest_extent >= 2 ? Split::partials_outer : Split::partials_rows;
    r.acc = accumulators(std::move(acc), t.size, accumulator, r.split, target);
    return with_arrays(std::move(r), accumulator);
}

// Contractions that are not GEMMs (elementwise products, products summed over some modes): with no sum,
// each product written straight to its place, in the destination's order; where each output's terms are
// one row of the sources, read in their memory order, each row's products folded straight into the
// destination; otherwise products folded into an accumulator array.
ScheduledStep schedule_contract(const Plan& plan, const Contract& contract, const Target& target,
                                bool streams) {
    EINC_ASSERT(contract.srcs.size() == 2);
    const DType in = plan.dtype_of(contract.srcs[0].buffer);
    // Memory order over both sources: a mode one of them broadcasts (stride 0) is walked by the other's
    // stride.
    Layout sources = contract.srcs[0].layout;
    for (std::size_t k = 0; k < sources.rank(); ++k) {
        const std::int64_t s0 = std::llabs(sources.modes[k].stride),
                           s1 = std::llabs(contract.srcs[1].layout.modes[k].stride);
        sources.modes[k].stride = std::max(s0, s1);
    }
    const Traversal t = traversal(sources, contract.dst.layout);
    const std::int64_t size = contract.dst.layout.size();
    const std::int64_t terms = t.size == 0 ? 0 : size / t.size;
    const DType accumulator = accumulator_dtype(Reduction::sum, in, terms, Backend::cpu);
    const bool parallel =
        saturating_mul(dense_bytes(contract.dst.layout, in), 2) >= parallel_threshold_bytes &&
        target.threads >= 2;
    const bool plain =
        contract.epilogue.identity();       // else the accumulator array, whose write-out applies it
    if (plain && terms == 1 && size > 0) {  // every mode is kept (the canonical nest has no extent-1 mode)
        const Layout& dst = contract.dst.layout;
        const Split split =
            parallel && dst.rank() > 0 && dst.modes[0].extent >= 2 ? Split::outer : Split::none;
        return scheduled(strategy::ContractElementwise{dst, contract.srcs[0].layout, contract.srcs[1].layout,
                                                       split, streams && in == DType::f32},
                         accumulator);
    }
    Layout dst = permute(contract.dst.layout, t.order), src = permute(contract.srcs[0].layout, t.order),
           src1 = permute(contract.srcs[1].layout, t.order), acc = permute(t.acc, t.order);
    split_long_row({&dst, &src, &src1, &acc}, src, acc, target.threads);  // one long dot: in chunks
    if (size > 0) {
        pad_front(2, {&dst, &src, &src1, &acc});
        if (plain && terms_in_rows(acc)) {
            const std::size_t rank = src.rank();
            const std::int64_t nest_extent = rank > 2 ? src.modes[0].extent : 1,
                               rows = src.modes[rank - 2].extent;
            const Split split = !parallel          ? Split::none
                                : nest_extent >= 2 ? Split::outer
                                : rows >= 2        ? Split::rows
                                                   : Split::none;
            return scheduled(strategy::ContractRows{dst, src, src1, split}, accumulator);
        }
    }
    strategy::ContractAccumulate c{dst, src, src1};
    if (!parallel || size == 0 || src.modes[0].extent < 2)
        c.split = Split::none;
    else
        c.split = acc.modes[0].stride != 0 ? Split::outer : Split::partials_outer;
    c.acc = accumulators(std::move(acc), t.size, accumulator, c.split, target);
    return with_arrays(std::move(c), accumulator);
}

// GEMMs: dot products (one row and one column: a batch of them, or one long one) as contractions, whose
// kernels fold rows in vectors on every thread; f32 and f64 in CBLAS - matrix-vector products where a side
// is 1 (a GEMM with n = 1 costs more, and numpy's einsum calls gemv); other dtypes (and every dtype without
// a CBLAS, or with k = 0) packed, per batch, into row-major blocks of the accumulator.
//
// A CBLAS step of several GEMMs (outer x batch) shares them between threads where they divide evenly
// enough (a multiple of the threads, or at least twice as many), each GEMM on one thread of the library:
// OpenBLAS's threads within each of many small GEMMs are slower than whole GEMMs side by side
// (measured: docs/performance.md, "CPU: another machine ... (2026-11-26)").
ScheduledStep schedule_gemm(const Plan& plan, const Gemm& gemm, const Target& target) {
    const DType in = plan.dtype_of(gemm.a.buffer);
    if (gemm.m == 1 && gemm.n == 1 && gemm.k > 0 && is_floating(in)) {
        Contract dots = gemm_as_contraction(gemm);
        std::vector<Layout> layouts{dots.dst.layout, dots.srcs[0].layout, dots.srcs[1].layout};
        canonicalize(layouts);
        dots.dst.layout = layouts[0], dots.srcs[0].layout = layouts[1], dots.srcs[1].layout = layouts[2];
        return schedule_contract(plan, dots, target, false);
    }
    const DType acc = accumulator_dtype(Reduction::none, in, gemm.k, Backend::cpu);
    if (gemm_in_library(plan, gemm, target)) {
        const std::int64_t gemms = saturating_mul(gemm.outer, gemm.batch), threads = target.threads;
        const double flops = 2.0 * static_cast<double>(gemms) * static_cast<double>(gemm.m) *
                             static_cast<double>(gemm.n) * static_cast<double>(gemm.k);
        const bool even = gemms % threads == 0 || gemms >= 2 * threads;
        const Split split =
            threads >= 2 && even && flops >= parallel_threshold_flops ? Split::gemms : Split::none;
        if (gemm.m == 1 || gemm.n == 1) return scheduled(strategy::LibraryGemv{gemm, split}, acc);
        const auto compute = in == DType::f64 ? strategy::GemmCompute::f64 : strategy::GemmCompute::f32;
        return scheduled(strategy::LibraryGemm{gemm, compute, split}, acc);
    }
    ScheduledStep step = scheduled(strategy::PackedGemm{gemm, target.blas && acc == DType::f32}, acc);
    if (gemm.outer == 0 || gemm.batch == 0 || gemm.m == 0 || gemm.n == 0) return step;  // nothing to write
    const std::int64_t blocks =
        saturating_add(saturating_add(saturating_mul(gemm.m, gemm.k), saturating_mul(gemm.k, gemm.n)),
                       saturating_mul(gemm.m, gemm.n));
    step.scratch_bytes = saturating_mul(blocks, static_cast<std::int64_t>(size_of(acc)));
    return step;
}

// The gradient of a max, min or prod: threads take disjoint groups (the outermost kept mode).
ScheduledStep schedule_route(const Plan& plan, const Route& route, const Target& target) {
    const DType dtype = plan.dtype_of(route.src.buffer);
    std::int64_t terms = 1;  // per group: the reduced modes'
    for (std::size_t m = route.kept; m < route.src.layout.rank(); ++m)
        terms = saturating_mul(terms, route.src.layout.modes[m].extent);
    const bool parallel =
        dense_bytes(route.dst.layout, dtype) >= parallel_threshold_bytes && target.threads >= 2;
    const Split split =
        parallel && route.kept > 0 && route.dst.layout.modes[0].extent >= 2 ? Split::outer : Split::none;
    return scheduled(
        strategy::Route{route.op, route.kept, route.dst.layout, route.src.layout, route.grad.layout, split},
        accumulator_dtype(route.op, dtype, terms, Backend::cpu));
}

}  // namespace

ScheduledStep schedule_cpu_step(const Plan& plan, const PlanStep& planned, const Target& target) {
    // Streaming (non-temporal) stores where the step moves at least half the last-level cache (its cost's
    // bytes read and written): its destination would not stay cached for long beside the source, and would
    // evict what this step has still to read; stored around the caches, it also skips reading each line
    // before writing it (measured: docs/performance.md, "CPU: another machine ... (2026-11-26)"). Where the
    // kernels have them: register transposes (of 4-byte elements), products of f32.
    const bool streams = planned.cost.bytes() >= static_cast<double>(streaming_bytes);
    return std::visit(
        Overloaded{
            [&](const View& view) {
                return scheduled(
                    strategy::View{view},
                    accumulator_dtype(Reduction::none, plan.dtype_of(view.source.buffer), 1, Backend::cpu));
            },
            [&](const Copy& copy) { return schedule_copy(plan, copy, target, streams); },
            [&](const Reduce& reduce) { return schedule_reduce(plan, reduce, target); },
            [&](const Contract& contract) { return schedule_contract(plan, contract, target, streams); },
            [&](const Route& route) { return schedule_route(plan, route, target); },
            [&](const Gemm& gemm) { return schedule_gemm(plan, gemm, target); },
        },
        planned.step);
}

}  // namespace einc::detail
