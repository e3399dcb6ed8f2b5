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

std::int64_t bytes_of(const Layout& layout, DType dtype) {
    return saturating_mul(layout.size(), static_cast<std::int64_t>(size_of(dtype)));
}

// One more mode of extent 1 in front of each layout, until they have `rank` modes.
void pad_front(std::size_t rank, std::initializer_list<Layout*> layouts) {
    for (Layout* layout : layouts)
        while (layout->rank() < rank) layout->modes.insert(layout->modes.begin(), Mode{1, 0});
}

// A transpose's tiles (TransposeTiles). Each side's runs reach 512 bytes where its contiguous modes allow
// (a run's cache lines are used up while in L1, and the prefetchers see streams), then the two tiled modes
// grow to fill half the buffer; a tile never exceeds the buffer. Tiles are walked nearest first: along the
// mode whose step moves least in both memories, so that consecutive tiles share pages and lines.
TransposeTiles tile_transpose(const Layout& dst, const Layout& src, std::size_t p, std::int64_t element_bytes,
                              std::int64_t block) {
    constexpr std::int64_t run_bytes = 512;
    const std::size_t rank = dst.rank(), q = rank - 1;
    const std::int64_t run = std::max<std::int64_t>(run_bytes / element_bytes, 1),
                       budget = transpose_buffer_bytes / element_bytes;
    const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
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
    tiles.count = 1;
    for (std::size_t m = 0; m < rank; ++m) tiles.count *= ceil_div(dst.modes[m].extent, tiles.extents[m]);
    return tiles;
}

// Copies: by element size (move), with a conversion, or tiled between the source's and the destination's
// contiguous modes.
ScheduledStep schedule_copy(const Plan& plan, const Copy& copy, const Target& target) {
    const DType from = plan.spec(copy.src.buffer).dtype, to = plan.spec(copy.dst.buffer).dtype;
    ScheduledStep step = scheduled(from == to ? Strategy::move : Strategy::convert,
                                   accumulator_dtype(Reduction::none, from, 1, Backend::cpu));
    step.nest.dst = copy.dst.layout;
    step.nest.src = copy.src.layout;
    // An epilogue does arithmetic on every element: the converting loop, never a bit move or a transpose.
    if (!copy.epilogue.identity()) step.strategy = Strategy::convert;
    const std::int64_t bytes = bytes_of(copy.dst.layout, to);
    const bool parallel = bytes >= parallel_threshold_bytes && target.threads >= 2;
    const std::optional<std::size_t> p = from == to && copy.epilogue.identity()
                                             ? transpose_mode(copy.dst.layout, copy.src.layout, 4)
                                             : std::nullopt;
    if (!p || copy.dst.layout.rank() > max_transpose_rank) {
        step.split = parallel && copy.dst.layout.rank() > 0 && copy.dst.layout.modes[0].extent >= 2
                         ? Split::outer
                         : Split::none;
        return step;
    }
    step.strategy = Strategy::transpose;
    step.transpose_mode = *p;
    const std::size_t last = copy.dst.layout.rank() - 1;
    const std::int64_t rows = copy.src.layout.modes[*p].extent, cols = copy.src.layout.modes[last].extent;
    const std::int64_t block = target.vector_bytes / 4;  // register blocks hold 4-byte elements
    if (size_of(from) == 4 && block > 0 && rows >= block && cols >= block)
        step.transpose_kind = TransposeKind::registers;
    else if (rows <= 8 || cols <= 8)
        step.transpose_kind = TransposeKind::short_side;
    else
        step.transpose_kind = TransposeKind::tiles;
    if (step.transpose_kind == TransposeKind::short_side) {
        const std::int64_t batch = copy.dst.layout.size() / (rows * cols);  // the other modes
        step.split = !parallel ? Split::none : batch >= 2 ? Split::outer : Split::tiles;
        return step;
    }
    const std::int64_t element_bytes = static_cast<std::int64_t>(size_of(from));
    step.tiles = tile_transpose(copy.dst.layout, copy.src.layout, *p, element_bytes,
                                step.transpose_kind == TransposeKind::registers ? block : 1);
    step.split = parallel && step.tiles.count >= 2 ? Split::tiles : Split::none;
    return step;
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
// reduced innermost mode is cut into rows of a few thousand elements.
void split_long_row(CpuNest& nest, int threads) {
    if (nest.src.rank() == 0) return;
    const Mode inner = nest.src.modes.back();
    if (nest.acc.modes.back().stride != 0 || inner.extent < (1 << 16) ||
        nest.src.size() / inner.extent >= 4 * threads)
        return;
    std::int64_t chunk = 8192;
    while (chunk >= 256 && inner.extent % chunk != 0) chunk /= 2;
    if (chunk < 256) return;
    for (Layout* layout : {&nest.src, &nest.src1, &nest.acc, &nest.dst}) {
        if (layout->rank() == 0) continue;  // (a reduction has no second source)
        const Mode m = layout->modes.back();
        layout->modes.back() = Mode{m.extent / chunk, m.stride * chunk};
        layout->modes.push_back(Mode{chunk, m.stride});
    }
}

// Reductions: rows folded straight into the destination, windows of offsets, or an accumulator array.
ScheduledStep schedule_reduce(const Plan& plan, const Reduce& reduce, const Target& target) {
    const DType in = plan.spec(reduce.src.buffer).dtype;
    const Traversal t = traversal(reduce.src.layout, reduce.dst.layout);
    const std::int64_t size = reduce.src.layout.size();
    const std::int64_t terms = t.size == 0 ? 0 : size / t.size;
    ScheduledStep step =
        scheduled(Strategy::reduce_accumulate, accumulator_dtype(reduce.op, in, terms, Backend::cpu));
    const std::int64_t bytes = bytes_of(reduce.src.layout, in);
    const bool parallel = bytes >= parallel_threshold_bytes && target.threads >= 2;

    CpuNest& nest = step.nest;
    nest.src = permute(reduce.src.layout, t.order);
    nest.acc = permute(t.acc, t.order);
    nest.dst = permute(reduce.dst.layout, t.order);
    split_long_row(nest, target.threads);
    pad_front(2, {&nest.src, &nest.acc, &nest.dst});
    const std::size_t rank = nest.src.rank();
    const Mode rows = nest.acc.modes[rank - 2],
               row = nest.acc.modes[rank - 1];  // the block, in accumulator strides
    const std::int64_t nest_extent = rank > 2 ? nest.src.modes[0].extent : 1;
    const bool outer_kept = std::all_of(nest.acc.modes.begin(), nest.acc.modes.end() - 2,
                                        [](Mode m) { return m.stride != 0 || m.extent == 1; });

    // Each output's terms all in one row of the block: fold rows straight into the destination. (With an
    // epilogue, always the accumulator array: its write-out is the one place the kernel applies it.)
    const bool plain = reduce.epilogue.identity();
    if (plain && row.stride == 0 && (rows.stride != 0 || rows.extent == 1) && outer_kept && size > 0) {
        step.strategy = Strategy::reduce_rows;
        step.split = !parallel ? Split::none : nest_extent >= 2 ? Split::outer : Split::rows;
        return step;
    }
    // Few terms per output (pooling windows, tiny reduced dims): fold each output's window directly.
    if (plain && terms <= max_window && size > 0) {
        step.strategy = Strategy::reduce_windows;
        step.window = terms;
        step.nest = CpuNest{reduce.dst.layout, reduce.src.layout, {}, {}};
        const auto kept = std::find_if(reduce.dst.layout.modes.begin(), reduce.dst.layout.modes.end(),
                                       [](Mode m) { return m.stride != 0; });
        step.split =
            bytes >= parallel_threshold_bytes && kept != reduce.dst.layout.modes.end() && kept->extent >= 2
                ? Split::outer
                : Split::none;
        return step;
    }
    // Otherwise an accumulator array. Threads must update disjoint accumulators: split a kept mode - the
    // nest's outermost, or the block's rows - and only where every mode that could split is reduced,
    // give each thread accumulators of its own.
    step.accumulators = t.size;
    // Every contiguous row of a block into one row of accumulators (a middle or outer axis reduced): read
    // from memory, row after row, so that the source is read in order - four rows per pass, read as four
    // streams, ran at half the read bandwidth with rows of 2 KiB and more - while the accumulators stay in
    // L1 (16 KiB at most); from the caches, four rows per pass, which stores the accumulators a quarter as
    // often.
    const std::int64_t accumulator_row_bytes =
        saturating_mul(row.extent, static_cast<std::int64_t>(size_of(step.accumulator)));
    step.rows_in_order = rows.stride == 0 && row.stride == 1 && nest.src.modes[rank - 1].stride == 1 &&
                         bytes >= beyond_caches_bytes && row.extent >= 16 &&
                         accumulator_row_bytes <= 16 << 10;
    if (!parallel || size == 0 || (nest_extent < 2 && rows.extent < 2))
        step.split = Split::none;
    else if (nest_extent >= 2 && nest.acc.modes[0].stride != 0)
        step.split = Split::outer;
    else if (rows.extent >= 2 && rows.stride != 0)
        step.split = Split::rows;
    else
        step.split = nest_extent >= 2 ? Split::partials_outer : Split::partials_rows;
    return step;
}

// Contractions that are not GEMMs (elementwise products, products summed over some modes): with no sum,
// each product written straight to its place, in the destination's order; where each output's terms are
// one row of the sources, read in their memory order, each row's products folded straight into the
// destination; otherwise products folded into an accumulator array.
ScheduledStep schedule_contract(const Plan& plan, const Contract& contract, const Target& target) {
    EINC_ASSERT(contract.srcs.size() == 2);
    const DType in = plan.spec(contract.srcs[0].buffer).dtype;
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
    ScheduledStep step =
        scheduled(Strategy::contract_accumulate, accumulator_dtype(Reduction::sum, in, terms, Backend::cpu));
    const bool parallel = saturating_mul(bytes_of(contract.dst.layout, in), 2) >= parallel_threshold_bytes &&
                          target.threads >= 2;
    const bool plain =
        contract.epilogue.identity();       // else the accumulator array, whose write-out applies it
    if (plain && terms == 1 && size > 0) {  // every mode is kept (the canonical nest has no extent-1 mode)
        step.strategy = Strategy::contract_elementwise;
        step.nest = CpuNest{contract.dst.layout, contract.srcs[0].layout, contract.srcs[1].layout, {}};
        step.split = parallel && step.nest.dst.rank() > 0 && step.nest.dst.modes[0].extent >= 2 ? Split::outer
                                                                                                : Split::none;
        return step;
    }
    step.nest = CpuNest{permute(contract.dst.layout, t.order), permute(contract.srcs[0].layout, t.order),
                        permute(contract.srcs[1].layout, t.order), permute(t.acc, t.order)};
    CpuNest& nest = step.nest;
    split_long_row(nest, target.threads);  // one long dot product: threads fold chunks of it
    if (size > 0) {
        pad_front(2, {&nest.dst, &nest.src, &nest.src1, &nest.acc});
        const std::size_t rank = nest.src.rank();
        const Mode rows = nest.acc.modes[rank - 2], row = nest.acc.modes[rank - 1];
        const bool outer_kept = std::all_of(nest.acc.modes.begin(), nest.acc.modes.end() - 2,
                                            [](Mode m) { return m.stride != 0 || m.extent == 1; });
        if (plain && row.stride == 0 && (rows.stride != 0 || rows.extent == 1) && outer_kept) {
            step.strategy = Strategy::contract_rows;
            const std::int64_t nest_extent = rank > 2 ? nest.src.modes[0].extent : 1;
            step.split = !parallel          ? Split::none
                         : nest_extent >= 2 ? Split::outer
                         : rows.extent >= 2 ? Split::rows
                                            : Split::none;
            return step;
        }
    }
    step.accumulators = t.size;
    if (!parallel || size == 0 || nest.src.modes[0].extent < 2)
        step.split = Split::none;
    else
        step.split = nest.acc.modes[0].stride != 0 ? Split::outer : Split::partials_outer;
    return step;
}

// GEMMs: dot products (one row and one column: a batch of them, or one long one) as contractions, whose
// kernels fold rows in vectors on every thread; f32 and f64 in CBLAS - matrix-vector products where a side
// is 1 (a GEMM with n = 1 costs more, and numpy's einsum calls gemv); other dtypes (and every dtype without
// a CBLAS, or with k = 0) packed, per batch, into row-major blocks of the accumulator.
//
// A CBLAS step of several GEMMs (outer x batch) shares them between threads where they divide evenly
// enough (a multiple of the threads, or at least twice as many), each GEMM on one thread of the library:
// OpenBLAS's threads within each of many small GEMMs are slower than whole GEMMs side by side. Measured
// on a 2-core EPYC (Zen 3), OpenBLAS 0.3.21, GFLOP/s, both threads of OpenBLAS -> one GEMM per thread:
// 32 x 512x512x64 49-68 -> 84-94, 64 x 197x197x64 36 -> 73, 8 x 512^3 93 -> 121, 8 x 1024x1024x256 79 ->
// 127, 4 x 1024^3 113 -> 117 (numpy, whose newer OpenBLAS threads better: 52-91 on the first).
ScheduledStep schedule_gemm(const Plan& plan, const Gemm& gemm, const Target& target) {
    const DType in = plan.spec(gemm.a.buffer).dtype;
    if (gemm.m == 1 && gemm.n == 1 && gemm.k > 0 && is_floating(in)) {
        Contract dots = gemm_as_contraction(gemm);
        std::vector<Layout> layouts{dots.dst.layout, dots.srcs[0].layout, dots.srcs[1].layout};
        canonicalize(layouts);
        dots.dst.layout = layouts[0], dots.srcs[0].layout = layouts[1], dots.srcs[1].layout = layouts[2];
        return schedule_contract(plan, dots, target);
    }
    const DType acc = accumulator_dtype(Reduction::none, in, gemm.k, Backend::cpu);
    if (gemm_in_library(plan, gemm, target)) {
        ScheduledStep step =
            scheduled(gemm.m == 1 || gemm.n == 1 ? Strategy::library_gemv : Strategy::library_gemm, acc);
        const std::int64_t gemms = saturating_mul(gemm.outer, gemm.batch), threads = target.threads;
        const double flops = 2.0 * static_cast<double>(gemms) * static_cast<double>(gemm.m) *
                             static_cast<double>(gemm.n) * static_cast<double>(gemm.k);
        const bool even = gemms % threads == 0 || gemms >= 2 * threads;
        if (threads >= 2 && even && flops >= parallel_threshold_flops) step.split = Split::gemms;
        return step;
    }
    ScheduledStep step = scheduled(Strategy::packed_gemm, acc);
    if (gemm.outer == 0 || gemm.batch == 0 || gemm.m == 0 || gemm.n == 0) return step;  // nothing to write
    const std::int64_t blocks =
        saturating_add(saturating_add(saturating_mul(gemm.m, gemm.k), saturating_mul(gemm.k, gemm.n)),
                       saturating_mul(gemm.m, gemm.n));
    step.scratch_bytes = saturating_mul(blocks, static_cast<std::int64_t>(size_of(acc)));
    return step;
}

// The gradient of a max, min or prod: threads take disjoint groups (the outermost kept mode).
ScheduledStep schedule_route(const Plan& plan, const Route& route, const Target& target) {
    const DType dtype = plan.spec(route.src.buffer).dtype;
    std::int64_t terms = 1;  // per group: the reduced modes'
    for (std::size_t m = route.kept; m < route.src.layout.rank(); ++m)
        terms = saturating_mul(terms, route.src.layout.modes[m].extent);
    ScheduledStep step = scheduled(Strategy::route, accumulator_dtype(route.op, dtype, terms, Backend::cpu));
    step.nest.dst = route.dst.layout;
    step.nest.src = route.src.layout;
    step.nest.src1 = route.grad.layout;
    const bool parallel =
        bytes_of(route.dst.layout, dtype) >= parallel_threshold_bytes && target.threads >= 2;
    step.split =
        parallel && route.kept > 0 && route.dst.layout.modes[0].extent >= 2 ? Split::outer : Split::none;
    return step;
}

}  // namespace

ScheduledStep schedule_cpu_step(const Plan& plan, const PlanStep& planned, const Target& target) {
    const Step& step = planned.step;
    ScheduledStep result = std::visit(
        [&](const auto& s) -> ScheduledStep {
            using S = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<S, View>)
                return scheduled(
                    Strategy::view,
                    accumulator_dtype(Reduction::none, plan.spec(s.source.buffer).dtype, 1, Backend::cpu));
            else if constexpr (std::is_same_v<S, Copy>)
                return schedule_copy(plan, s, target);
            else if constexpr (std::is_same_v<S, Reduce>)
                return schedule_reduce(plan, s, target);
            else if constexpr (std::is_same_v<S, Contract>)
                return schedule_contract(plan, s, target);
            else if constexpr (std::is_same_v<S, Route>)
                return schedule_route(plan, s, target);
            else
                return schedule_gemm(plan, s, target);
        },
        step);
    if (result.accumulators >
        0) {  // the accumulator array, then one per thread for partials, 128-byte aligned
        const std::int64_t bytes =
            saturating_mul(result.accumulators, static_cast<std::int64_t>(size_of(result.accumulator)));
        result.array_stride = saturating_mul(saturating_add(bytes, 127) / 128, 128);
        if (result.split == Split::partials_outer || result.split == Split::partials_rows)
            result.partial_arrays = target.threads;
        result.scratch_bytes = saturating_mul(result.array_stride, 1 + result.partial_arrays);
    }
    // Streaming (non-temporal) stores where the step moves at least half the last-level cache (its cost's
    // bytes read and written): its destination would not stay cached for long beside the source, and would
    // evict what this step has still to read; stored around the caches, it also skips reading each line
    // before writing it. Measured on a 2-core EPYC VM, by turns (transposes streamed through their staging
    // area): 12-32 MB moved, as fast or faster streamed - 1024x2048 f32 transposes 1.0-2.5 ms
    // against 1.5-3.1, 'i j, i j -> i j' 1024x2048 0.8-1.2 ms against 1.0-1.4; 8-12 MB, alike. Where the
    // kernels have them: register transposes (of 4-byte elements), products of f32.
    const auto* contract = std::get_if<Contract>(&step);
    const bool can_stream =
        (result.strategy == Strategy::transpose && result.transpose_kind == TransposeKind::registers) ||
        (result.strategy == Strategy::contract_elementwise && contract != nullptr &&
         plan.spec(contract->dst.buffer).dtype == DType::f32);
    result.streaming_stores = can_stream && planned.cost.bytes() >= static_cast<double>(streaming_bytes);
    return result;
}

}  // namespace einc::detail
