// The GPU rules of the schedule: which kernels (compiler/kernel_abi.hpp) a Copy, Reduce, Contract or Route
// launches, with what grid and parameters, and the scratch they share. Each size-dependent choice is a
// named fact, decided by the step's extents in schedule_gpu_step() and taken every way in
// possible_gpu_kernels(), so that both go through the same rule.
#include <algorithm>
#include <fmt/format.h>
#include <limits>

#include "compiler/checked.hpp"
#include "compiler/schedule_rules.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::detail {
namespace {

constexpr std::int64_t int_limit = std::numeric_limits<std::int32_t>::max();

std::uint32_t blocks_for(std::int64_t work, std::int64_t per_block, const Target& target) {
    const std::int64_t blocks = (work + per_block - 1) / per_block;
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>(blocks, 1, target.max_blocks()));
}

// A step's loop nest as a kernel walks it: per access (0 the destination, 1.. the sources) the kept modes
// (the destination steps along them) and the reduced ones (destination stride 0).
struct KernelNest {
    std::vector<Layout> kept, reduced;

    std::size_t kept_rank() const { return kept[0].rank(); }
    std::size_t reduced_rank() const { return reduced[0].rank(); }
    std::int64_t outputs() const { return kept[0].size(); }
    std::int64_t terms() const { return reduced[0].size(); }
    void reorder_kept(const std::vector<std::size_t>& order) {
        for (Layout& layout : kept) layout = permute(layout, order);
    }
    void reorder_reduced(const std::vector<std::size_t>& order) {
        for (Layout& layout : reduced) layout = permute(layout, order);
    }
};

// @pre accesses[0] is the destination; every access has the same extents
KernelNest split_modes(const std::vector<const Layout*>& accesses) {
    KernelNest nest{std::vector<Layout>(accesses.size()), std::vector<Layout>(accesses.size())};
    for (std::size_t k = 0; k < accesses[0]->rank(); ++k) {
        const bool reduced = accesses[0]->modes[k].stride == 0;
        for (std::size_t a = 0; a < accesses.size(); ++a)
            (reduced ? nest.reduced : nest.kept)[a].modes.push_back(accesses[a]->modes[k]);
    }
    return nest;
}

void check_ranks(const KernelNest& nest) {
    if (nest.kept_rank() > max_kernel_rank || nest.reduced_rank() > max_kernel_rank ||
        nest.kept.size() > 1 + max_kernel_sources)
        throw Error(
            ErrorKind::unsupported,
            fmt::format(
                "a GPU kernel over {} kept and {} reduced modes: einc's kernels take at most {} of each",
                nest.kept_rank(), nest.reduced_rank(), max_kernel_rank));
}

KernelParams params_of(const KernelNest& nest) {
    check_ranks(nest);
    KernelParams p;
    for (std::size_t a = 0; a < nest.kept.size(); ++a) {
        for (std::size_t k = 0; k < nest.kept_rank(); ++k) p.kept_stride[a][k] = nest.kept[a].modes[k].stride;
        for (std::size_t k = 0; k < nest.reduced_rank(); ++k)
            p.reduced_stride[a][k] = nest.reduced[a].modes[k].stride;
    }
    for (std::size_t k = 0; k < nest.kept_rank(); ++k) p.kept_extent[k] = nest.kept[0].modes[k].extent;
    for (std::size_t k = 0; k < nest.reduced_rank(); ++k)
        p.reduced_extent[k] = nest.reduced[0].modes[k].extent;
    p.kept_count = nest.outputs();
    p.reduced_count = nest.terms();
    return p;
}

// Whether some count a kernel indexes with exceeds 32 bits (offsets are always 64-bit).
bool needs_wide_index(const KernelParams& p, std::int64_t items) {
    return p.kept_count > int_limit || p.reduced_count > int_limit || items > int_limit;
}

void check_arithmetic(const std::vector<DType>& sources) {
    for (const DType d : sources)
        if (d == DType::f8e4m3 || d == DType::f8e5m2)
            throw Error(ErrorKind::unsupported,
                        fmt::format("{} arithmetic on a GPU is not supported", name_of(d)));
}

// ---- copies -----------------------------------------------------------------------------------------

// What the copy rule reads of a step: its nest and dtypes, and where it could tile or vectorise.
struct CopyShape {
    KernelNest nest;
    DType from, to;
    std::optional<std::size_t>
        tile_mode;            // transpose_mode(): tiled from 8 elements, or from 1 for any extents
    bool unit_inner = false;  // the innermost mode is unit-stride on both sides
    Epilogue epilogue;        // the step's: arithmetic on every element, so never moved as bits
};
// The size-dependent facts: the tiled modes are long enough; the rows split into whole aligned 16-byte
// words (the buffers' own alignment is checked at run time: unaligned_launches); a count needs 64 bits.
struct CopyFacts {
    bool long_enough = false, whole_words = false, wide = false;
};

KernelKind copy_kind(const CopyShape& shape, const CopyFacts& facts) {
    if (!shape.epilogue.identity()) return KernelKind::elementwise;
    if (shape.from == shape.to && shape.tile_mode && facts.long_enough) return KernelKind::transpose;
    if (shape.from == shape.to && shape.unit_inner && facts.whole_words) return KernelKind::vector_copy;
    return KernelKind::elementwise;
}

KernelSignature copy_signature(const CopyShape& shape, KernelKind kind, bool wide) {
    KernelSignature s;
    s.kind = kind;
    s.sources = {shape.from};
    s.destination = shape.to;
    s.accumulator = accumulator_dtype(Reduction::none, shape.from, 1, Backend::cuda);
    s.kept_rank = static_cast<int>(shape.nest.kept_rank());
    s.wide_index = wide;
    s.epilogue = shape.epilogue;
    return s;
}

CopyShape copy_shape(const Plan& plan, const Copy& copy, std::int64_t min_tile_extent) {
    CopyShape shape{split_modes({&copy.dst.layout, &copy.src.layout}),
                    plan.spec(copy.src.buffer).dtype,
                    plan.spec(copy.dst.buffer).dtype,
                    transpose_mode(copy.dst.layout, copy.src.layout, min_tile_extent),
                    false,
                    copy.epilogue};
    const std::size_t rank = shape.nest.kept_rank();
    shape.unit_inner = rank >= 1 && shape.nest.kept[0].modes[rank - 1].stride == 1 &&
                       shape.nest.kept[1].modes[rank - 1].stride == 1;
    return shape;
}

KernelLaunch copy_launch(const CopyShape& shape, KernelKind kind, const Target& target) {
    KernelNest nest = shape.nest;
    const std::size_t rank = nest.kept_rank();
    KernelLaunch launch{
        {}, {}, {kernel_block_threads}, {}, {KernelArgument::destination, KernelArgument::source0}};
    std::int64_t items = nest.outputs(), per_block = kernel_block_threads;
    if (kind ==
        KernelKind::transpose) {  // the tiled modes last: mode p, then the destination's unit-stride mode
        std::vector<std::size_t> order;
        for (std::size_t k = 0; k + 1 < rank; ++k)
            if (k != *shape.tile_mode) order.push_back(k);
        order.push_back(*shape.tile_mode);
        order.push_back(rank - 1);
        nest.reorder_kept(order);
        launch.block = {transpose_tile, transpose_block_rows};
        const std::int64_t last = nest.kept[0].modes[rank - 1].extent,
                           before = nest.kept[0].modes[rank - 2].extent;
        launch.params = params_of(nest);
        launch.params.batch_count = launch.params.kept_count / (last * before);
        constexpr std::int64_t tile = transpose_tile;
        items = (last + tile - 1) / tile * ((before + tile - 1) / tile) *
                launch.params.batch_count;  // a block each
        per_block = 1;
    } else {
        launch.params = params_of(nest);
        if (kind == KernelKind::vector_copy)
            items /= kernel_vector_bytes / static_cast<std::int64_t>(size_of(shape.to));
    }
    launch.signature = copy_signature(shape, kind, needs_wide_index(launch.params, items));
    launch.grid.x = blocks_for(items, per_block, target);
    return launch;
}

ScheduledStep schedule_copy(const Plan& plan, const Copy& copy, const Target& target) {
    ScheduledStep step = scheduled(strategy::Kernels{}, DType::f32);
    auto& kernels = std::get<strategy::Kernels>(step.strategy);
    const CopyShape shape = copy_shape(plan, copy, 8);
    step.accumulator = copy_signature(shape, KernelKind::elementwise, false).accumulator;
    if (shape.nest.outputs() == 0) return step;
    const std::size_t rank = shape.nest.kept_rank();
    const std::int64_t lanes = kernel_vector_bytes / static_cast<std::int64_t>(size_of(shape.to));
    const auto words = [&](std::int64_t stride) { return stride % lanes == 0; };
    CopyFacts facts;
    facts.long_enough = shape.tile_mode.has_value();
    facts.whole_words = shape.unit_inner && shape.nest.kept[0].modes[rank - 1].extent % lanes == 0 &&
                        std::all_of(shape.nest.kept[0].modes.begin(), shape.nest.kept[0].modes.end() - 1,
                                    [&](Mode m) { return words(m.stride); }) &&
                        std::all_of(shape.nest.kept[1].modes.begin(), shape.nest.kept[1].modes.end() - 1,
                                    [&](Mode m) { return words(m.stride); }) &&
                        words(copy.src.offset) && words(copy.dst.offset);
    const KernelKind kind = copy_kind(shape, facts);
    kernels.launches.push_back(copy_launch(shape, kind, target));
    if (kind == KernelKind::vector_copy)
        kernels.unaligned_launches.push_back(copy_launch(shape, KernelKind::elementwise, target));
    return step;
}

// ---- reductions and contractions ---------------------------------------------------------------------

// What the reduction rule reads of a step: its nest (the reduced modes in the first source's memory
// order), its dtypes, and whether the first source is unit-stride along a reduced mode.
struct ReduceShape {
    KernelNest nest;
    Reduction op;  // a contraction sums
    std::vector<DType> sources;
    DType to;
    bool unit_reduced = false;
    Epilogue epilogue;  // the step's: applied by the kernel that stores the results (not by partials)
};
// The size-dependent facts: enough terms per output to give them a warp or a thread's loop; few enough
// outputs that the terms are split across blocks (partial results, then a finalize); a count needs 64 bits.
struct ReduceFacts {
    bool many_terms = false, split = false, wide = false;
};

KernelKind reduce_kind(const ReduceShape& shape, const ReduceFacts& facts) {
    if (shape.sources.size() > 1 || !facts.many_terms) return KernelKind::elementwise;
    return shape.unit_reduced ? KernelKind::reduce_rows : KernelKind::reduce_columns;
}

KernelSignature reduce_signature(const ReduceShape& shape, KernelKind kind, bool partials, bool wide) {
    KernelSignature s;
    s.kind = kind;
    s.op = shape.sources.size() > 1 && shape.nest.reduced_rank() == 0 ? Reduction::none
                                                                      : shape.op;  // a plain product
    s.sources = shape.sources;
    s.destination = shape.to;
    s.accumulator = accumulator_dtype(shape.op, shape.sources.front(), 2, Backend::cuda);
    s.kept_rank = static_cast<int>(shape.nest.kept_rank());
    s.reduced_rank = static_cast<int>(shape.nest.reduced_rank());
    s.partials = partials;
    s.wide_index = wide;
    if (!partials) s.epilogue = shape.epilogue;
    return s;
}

// The finalize kernel that folds a split reduction's partial results.
KernelSignature finalize_signature(const KernelSignature& partial, const Epilogue& epilogue) {
    KernelSignature s = partial;
    s.epilogue = epilogue;
    s.kind = KernelKind::finalize;
    s.sources.clear();
    s.reduced_rank = 0;
    s.partials = false;
    return s;
}

ReduceShape reduce_shape(const Plan& plan, Reduction op, const std::vector<const Access*>& sources,
                         const Access& destination, const Epilogue& epilogue) {
    std::vector<const Layout*> layouts{&destination.layout};
    ReduceShape shape{{},    op == Reduction::none ? Reduction::sum : op,
                      {},    plan.spec(destination.buffer).dtype,
                      false, epilogue};
    for (const Access* s : sources) {
        layouts.push_back(&s->layout);
        shape.sources.push_back(plan.spec(s->buffer).dtype);
    }
    check_arithmetic(shape.sources);
    shape.nest = split_modes(layouts);
    // The reduced modes in the first source's memory order, so that a loop over terms reads it in order.
    shape.nest.reorder_reduced(order_by_stride(std::span(&shape.nest.reduced[1], 1)));
    shape.unit_reduced = std::any_of(shape.nest.reduced[1].modes.begin(), shape.nest.reduced[1].modes.end(),
                                     [](Mode m) { return m.stride == 1 || m.stride == -1; });
    return shape;
}

// ---- one-pass reductions (kernel-designs.md section 3, designs A and B) -------------------------------
//
// Two classes of single-source reductions that the split + finalize above serves badly (a serial finalize,
// scalar loads, a warp per short row), each read once by one launch:
//   reduce_one_pass    the source is one dense run whose innermost K <= 32 elements are the kept ones
//                      (K = 1: a full reduction), so that element i of the run belongs to output i mod K
//   reduce_short_rows  each output's terms are one contiguous row of at most short_rows_max_bytes
// Both read any alignment: reduce_one_pass peels the partial 16-byte vectors at either end of the run, and
// reduce_short_rows loads rows element by element where they are not all 16-byte aligned - so neither has
// unaligned launches. What is not in either class keeps the kernels above.

// The structure of the two classes (independent of extents, given the modes): the nest each kernel walks,
// where the step is of that class.
struct OnePassShape {
    std::optional<KernelNest> run;   // reduce_one_pass: kept modes outermost first, as a column decomposes
    std::optional<KernelNest> rows;  // reduce_short_rows: the reduced modes as one unit-stride mode
};
// The size-dependent facts: at most one_pass_max_columns kept outputs; rows of at most
// short_rows_max_bytes; a count needs 64 bits.
struct OnePassFacts {
    bool few_columns = false, short_rows = false, wide = false;
};

// Whether `modes`, innermost last, walk memory densely upwards from `stride` (then the next stride above).
bool dense_from(const Layout& layout, std::int64_t& stride) {
    for (std::size_t k = layout.rank(); k-- > 0;) {
        if (layout.modes[k].stride != stride) return false;
        stride = saturating_mul(stride, layout.modes[k].extent);
    }
    return true;
}

// @pre shape.nest.reduced is in the first source's memory order (reduce_shape)
OnePassShape one_pass_shape(const ReduceShape& shape) {
    OnePassShape out;
    if (shape.sources.size() != 1) return out;  // a contraction keeps the kernels above
    KernelNest run = shape.nest;
    run.reorder_kept(order_by_stride(std::span(&run.kept[1], 1)));
    std::int64_t stride = 1;
    if (dense_from(run.kept[1], stride) && dense_from(run.reduced[1], stride)) out.run = std::move(run);
    stride = 1;
    if (shape.nest.reduced_rank() > 0 && dense_from(shape.nest.reduced[1], stride)) {
        KernelNest rows = shape.nest;
        rows.reorder_kept(order_by_stride(std::span(&rows.kept[1], 1)));  // neighbouring rows in memory
        const std::int64_t terms = shape.nest.terms();
        rows.reduced = {Layout{{Mode{terms, 0}}}, Layout{{Mode{terms, 1}}}};
        out.rows = std::move(rows);
    }
    return out;
}

// Which one-pass kernel, if any: reduce_one_pass first (a full reduction of a short run is both).
std::optional<KernelKind> one_pass_kind(const OnePassShape& shape, const OnePassFacts& facts) {
    if (shape.run && facts.few_columns) return KernelKind::reduce_one_pass;
    if (shape.rows && facts.short_rows) return KernelKind::reduce_short_rows;
    return std::nullopt;
}

KernelSignature one_pass_signature(const ReduceShape& shape, KernelKind kind, const KernelNest& nest,
                                   bool wide) {
    KernelSignature s = reduce_signature(shape, kind, false, wide);
    s.kept_rank = static_cast<int>(nest.kept_rank());
    // reduce_one_pass reads the run as a whole, not along the reduced modes; reduce_short_rows one mode.
    s.reduced_rank = kind == KernelKind::reduce_one_pass ? 0 : 1;
    return s;
}

// reduce_one_pass's grid: G = min(2 * SMs, N / (16 vectors of 512 threads)) blocks. Its scratch, where
// G > 1: the counter, then G x K partials in the accumulator's dtype.
KernelLaunch one_pass_launch(const ReduceShape& shape, const KernelNest& nest, const Target& target,
                             std::int64_t& scratch_bytes) {
    KernelLaunch launch{{},
                        {},
                        {one_pass_block_threads},
                        params_of(nest),
                        {KernelArgument::destination, KernelArgument::source0, KernelArgument::scratch}};
    const std::int64_t n = saturating_mul(nest.outputs(), nest.terms());
    const auto lanes = static_cast<std::int64_t>(kernel_vector_bytes / size_of(shape.sources[0]));
    const std::int64_t per_block = lanes * one_pass_min_vectors * one_pass_block_threads;
    const std::int64_t most = std::min<std::int64_t>(
        std::int64_t{target.multiprocessors} * one_pass_blocks_per_multiprocessor, one_pass_max_blocks);
    const std::int64_t blocks = std::clamp<std::int64_t>((n + per_block - 1) / per_block, 1, most);
    launch.grid.x = static_cast<std::uint32_t>(blocks);
    // (positions in the run reach n + lanes: the first vector begins up to lanes - 1 before it)
    launch.signature = one_pass_signature(shape, KernelKind::reduce_one_pass, nest,
                                          needs_wide_index(launch.params, saturating_add(n, lanes)));
    scratch_bytes =
        blocks == 1 ? 0
                    : one_pass_counter_bytes +
                          saturating_mul(blocks * nest.outputs(),
                                         static_cast<std::int64_t>(size_of(launch.signature.accumulator)));
    return launch;
}

// reduce_short_rows's grid: g = the power of two >= the row's 16-byte chunks lanes a row, 32 / g rows a
// warp's group, short_rows_batch groups a warp's batch - a batch for every warp of the grid. (Not one
// wave: how many blocks are resident depends on the registers, 38-47 (ptxas, sm_90): with a grid of one
// batch a warp, a partial last wave is a small part of many.)
KernelLaunch short_rows_launch(const ReduceShape& shape, const KernelNest& nest) {
    KernelLaunch launch{{},
                        {},
                        {short_rows_block_threads},
                        params_of(nest),
                        {KernelArgument::destination, KernelArgument::source0}};
    const auto lanes = static_cast<std::int64_t>(kernel_vector_bytes / size_of(shape.sources[0]));
    const std::int64_t chunks = (nest.terms() + lanes - 1) / lanes;
    std::int64_t row_lanes = 1;
    while (row_lanes < chunks) row_lanes *= 2;
    const std::int64_t rows_per_warp = short_rows_batch * (kernel_warp / row_lanes);
    const std::int64_t warps = (nest.outputs() + rows_per_warp - 1) / rows_per_warp;
    const std::int64_t warps_per_block = short_rows_block_threads / kernel_warp;
    launch.grid.x = static_cast<std::uint32_t>(std::clamp<std::int64_t>(
        (warps + warps_per_block - 1) / warps_per_block, 1, std::numeric_limits<std::int32_t>::max()));
    launch.signature = one_pass_signature(shape, KernelKind::reduce_short_rows, nest,
                                          needs_wide_index(launch.params, nest.outputs()));
    return launch;
}

// The one-pass launch of a reduction, where it is of either class; its scratch bytes in `scratch_bytes`.
std::optional<KernelLaunch> schedule_one_pass(const ReduceShape& shape, const Target& target,
                                              std::int64_t& scratch_bytes) {
    const OnePassShape one_pass = one_pass_shape(shape);
    OnePassFacts facts;
    facts.few_columns = shape.nest.outputs() <= one_pass_max_columns;
    facts.short_rows =
        saturating_mul(shape.nest.terms(), static_cast<std::int64_t>(size_of(shape.sources.front()))) <=
        short_rows_max_bytes;
    const std::optional<KernelKind> kind = one_pass_kind(one_pass, facts);
    scratch_bytes = 0;
    if (!kind) return std::nullopt;
    if (*kind == KernelKind::reduce_one_pass)
        return one_pass_launch(shape, *one_pass.run, target, scratch_bytes);
    return short_rows_launch(shape, *one_pass.rows);
}

ScheduledStep schedule_reduction(const Plan& plan, Reduction op, const std::vector<const Access*>& sources,
                                 const Access& destination, const Epilogue& epilogue, const Target& target) {
    ReduceShape shape = reduce_shape(plan, op, sources, destination, epilogue);
    ScheduledStep step = scheduled(
        strategy::Kernels{}, reduce_signature(shape, KernelKind::elementwise, false, false).accumulator);
    auto& kernels = std::get<strategy::Kernels>(step.strategy);
    const std::int64_t outputs = shape.nest.outputs(), terms = shape.nest.terms();
    if (outputs == 0) return step;
    if (std::optional<KernelLaunch> one_pass = schedule_one_pass(shape, target, step.scratch_bytes)) {
        kernels.launches.push_back(std::move(*one_pass));
        return step;
    }
    ReduceFacts facts;
    facts.many_terms = terms > 16;
    const KernelKind kind_unsplit = reduce_kind(shape, facts);
    // Few outputs: split each one's terms into chunks, one partial result each, so that the GPU fills up.
    const std::int64_t per_item_threads = kind_unsplit == KernelKind::reduce_rows ? kernel_warp : 1;
    const std::int64_t busy =
        static_cast<std::int64_t>(target.multiprocessors) * 2048 / per_item_threads;  // items that fill it
    const std::int64_t min_chunk = kind_unsplit == KernelKind::reduce_rows ? 1024 : 64;
    std::int64_t split = 1;
    if (kind_unsplit != KernelKind::elementwise && outputs < busy)
        split = std::clamp<std::int64_t>(busy / outputs, 1, std::max<std::int64_t>(terms / min_chunk, 1));
    facts.split = split > 1;
    const KernelKind kind = reduce_kind(shape, facts);
    // Neighbouring threads read neighbouring outputs' terms.
    if (kind == KernelKind::reduce_columns)
        shape.nest.reorder_kept(order_by_stride(std::span(&shape.nest.kept[1], 1)));

    KernelLaunch launch{{},
                        {},
                        {kernel_block_threads},
                        params_of(shape.nest),
                        {KernelArgument::destination, KernelArgument::source0}};
    if (sources.size() > 1) launch.arguments.push_back(KernelArgument::source1);
    launch.params.split = split;
    launch.params.chunk = (terms + split - 1) / split;
    const std::int64_t items = outputs * split;
    facts.wide = needs_wide_index(launch.params, items);
    launch.signature = reduce_signature(shape, kind, facts.split, facts.wide);
    launch.grid.x = blocks_for(items * per_item_threads, kernel_block_threads, target);
    if (facts.split) launch.arguments.push_back(KernelArgument::scratch);
    kernels.launches.push_back(launch);
    if (facts.split) {
        KernelLaunch final_launch{finalize_signature(launch.signature, shape.epilogue),
                                  {},
                                  {kernel_block_threads},
                                  launch.params,
                                  {KernelArgument::destination, KernelArgument::scratch}};
        final_launch.grid.x = blocks_for(outputs, kernel_block_threads, target);
        kernels.launches.push_back(final_launch);
        step.scratch_bytes =
            saturating_mul(items, static_cast<std::int64_t>(size_of(launch.signature.accumulator)));
    }
    return step;
}

// ---- the gradients of max, min and prod ----------------------------------------------------------------

// What the route rule reads of a step: its nest - accesses dst, x, the gradient; the Route's first `kept`
// modes kept, the rest reduced - with the kept modes in x's memory order (neighbouring threads take
// neighbouring groups) and the reduced ones too (a thread walks its group in order); its dtypes.
struct RouteShape {
    KernelNest nest;
    Reduction op;
    DType from, to;  // x's and the gradient's (plan_route makes them one), the destination's
    Epilogue epilogue;
};

RouteShape route_shape(const Plan& plan, const Route& route) {
    RouteShape shape{{std::vector<Layout>(3), std::vector<Layout>(3)},
                     route.op,
                     plan.spec(route.src.buffer).dtype,
                     plan.spec(route.dst.buffer).dtype,
                     route.epilogue};
    EINC_ASSERT(route.op == Reduction::max || route.op == Reduction::min || route.op == Reduction::prod);
    EINC_ASSERT(plan.spec(route.grad.buffer).dtype == shape.from);
    check_arithmetic({shape.from});
    if (!is_floating(shape.from))
        throw Error(ErrorKind::unsupported, fmt::format("the gradient of reduce {} of {} tensors",
                                                        name_of(route.op), name_of(shape.from)))
            .help("gradients are defined for floating dtypes");
    const Layout* layouts[] = {&route.dst.layout, &route.src.layout, &route.grad.layout};
    for (std::size_t a = 0; a < 3; ++a)
        for (std::size_t k = 0; k < layouts[a]->rank(); ++k)
            (k < route.kept ? shape.nest.kept : shape.nest.reduced)[a].modes.push_back(layouts[a]->modes[k]);
    shape.nest.reorder_kept(order_by_stride(std::span(&shape.nest.kept[1], 1)));
    shape.nest.reorder_reduced(order_by_stride(std::span(&shape.nest.reduced[1], 1)));
    return shape;
}

KernelSignature route_signature(const RouteShape& shape, bool wide) {
    KernelSignature s;
    s.kind = KernelKind::route;
    s.op = shape.op;
    s.sources = {shape.from, shape.from};
    s.destination = shape.to;
    s.accumulator = accumulator_dtype(shape.op, shape.from, shape.nest.terms(), Backend::cuda);
    s.kept_rank = static_cast<int>(shape.nest.kept_rank());
    s.reduced_rank = static_cast<int>(shape.nest.reduced_rank());
    s.wide_index = wide;
    s.epilogue = shape.epilogue;
    return s;
}

ScheduledStep schedule_route(const Plan& plan, const Route& route, const Target& target) {
    const RouteShape shape = route_shape(plan, route);
    ScheduledStep step = scheduled(strategy::Kernels{}, route_signature(shape, false).accumulator);
    const std::int64_t groups = shape.nest.outputs();
    if (groups == 0 || shape.nest.terms() == 0) return step;
    KernelLaunch launch{{},
                        {},
                        {kernel_block_threads},
                        params_of(shape.nest),
                        {KernelArgument::destination, KernelArgument::source0, KernelArgument::source1}};
    launch.signature = route_signature(shape, needs_wide_index(launch.params, groups));
    launch.grid.x = blocks_for(groups, kernel_block_threads, target);  // a thread per group
    std::get<strategy::Kernels>(step.strategy).launches.push_back(launch);
    return step;
}

std::vector<const Access*> sources_of(const Contract& contract) {
    std::vector<const Access*> sources;
    for (const Access& src : contract.srcs) sources.push_back(&src);
    return sources;
}

}  // namespace

ScheduledStep schedule_gpu_step(const Plan& plan, const Step& step, const Target& target) {
    return std::visit(
        Overloaded{
            [&](const View& view) {
                return scheduled(strategy::View{view},
                                 accumulator_dtype(Reduction::none, plan.spec(view.source.buffer).dtype, 1,
                                                   Backend::cuda));
            },
            [&](const Copy& copy) { return schedule_copy(plan, copy, target); },
            [&](const Reduce& reduce) {
                return schedule_reduction(plan, reduce.op, {&reduce.src}, reduce.dst, reduce.epilogue,
                                          target);
            },
            [&](const Contract& contract) {
                return schedule_reduction(plan, Reduction::none, sources_of(contract), contract.dst,
                                          contract.epilogue, target);
            },
            [&](const Route& route) { return schedule_route(plan, route, target); },
            [&](const Gemm& gemm) {
                const DType dtype = plan.spec(gemm.a.buffer).dtype;
                if (gemm_in_library(plan, gemm, target)) {
                    // cuBLAS's compute type: f64 for f64; f32 for the others (f16 and bf16 accumulate in
                    // f32), on tensor cores in TF32 where the target allows it.
                    using strategy::GemmCompute;
                    const GemmCompute compute = dtype == DType::f64                        ? GemmCompute::f64
                                                : dtype == DType::f32 && target.allow_tf32 ? GemmCompute::tf32
                                                                                           : GemmCompute::f32;
                    ScheduledStep library =
                        scheduled(strategy::LibraryGemm{gemm, compute},
                                  accumulator_dtype(Reduction::none, dtype, 1, Backend::cuda));
                    library.scratch_bytes = cublas_workspace_bytes;
                    return library;
                }
                const Contract contraction = gemm_as_contraction(gemm);  // integers: the contraction kernel
                return schedule_reduction(plan, Reduction::none, sources_of(contraction), contraction.dst,
                                          contraction.epilogue, target);
            },
        },
        step);
}

std::vector<KernelSignature> possible_gpu_kernels(const Plan& plan, const Step& step) {
    std::vector<KernelSignature> kernels;
    const auto add = [&](const KernelSignature& s) {
        if (std::find(kernels.begin(), kernels.end(), s) == kernels.end()) kernels.push_back(s);
    };
    const auto reduction = [&](Reduction op, const std::vector<const Access*>& sources,
                               const Access& destination, const Epilogue& epilogue) {
        const ReduceShape shape = reduce_shape(plan, op, sources, destination, epilogue);
        check_ranks(shape.nest);
        if (shape.nest.outputs() == 0) return;
        const OnePassShape one_pass = one_pass_shape(shape);
        for (const bool few_columns : {false, true}) {
            if (!few_columns && shape.nest.kept_rank() == 0) continue;  // (one output, whatever the extents)
            for (const bool short_rows : {false, true})
                for (const bool wide : {false, true})
                    if (const auto kind = one_pass_kind(one_pass, {few_columns, short_rows, wide}))
                        add(one_pass_signature(
                            shape, *kind,
                            *kind == KernelKind::reduce_one_pass ? *one_pass.run : *one_pass.rows, wide));
        }
        if (one_pass.run && shape.nest.kept_rank() == 0) return;  // a full reduction of a dense run: always A
        for (const bool many_terms : {false, true})
            for (const bool split : {false, true})
                for (const bool wide : {false, true}) {
                    const KernelKind kind = reduce_kind(shape, ReduceFacts{many_terms, split, wide});
                    const bool partials = split && kind != KernelKind::elementwise;
                    const KernelSignature s = reduce_signature(shape, kind, partials, wide);
                    add(s);
                    if (partials) add(finalize_signature(s, epilogue));
                }
    };
    std::visit(
        Overloaded{
            [](const View&) {},  // no kernel
            [&](const Copy& copy) {
                const CopyShape shape = copy_shape(plan, copy, 1);
                check_ranks(shape.nest);
                if (shape.nest.outputs() == 0) return;
                for (const bool long_enough : {false, true})
                    for (const bool whole_words : {false, true})
                        for (const bool wide : {false, true})
                            add(copy_signature(shape, copy_kind(shape, {long_enough, whole_words, wide}),
                                               wide));
            },
            [&](const Reduce& reduce) { reduction(reduce.op, {&reduce.src}, reduce.dst, reduce.epilogue); },
            [&](const Contract& contract) {
                reduction(Reduction::none, sources_of(contract), contract.dst, contract.epilogue);
            },
            [&](const Route& route) {
                const RouteShape shape = route_shape(plan, route);
                check_ranks(shape.nest);
                if (shape.nest.outputs() == 0 || shape.nest.terms() == 0) return;
                for (const bool wide : {false, true}) add(route_signature(shape, wide));
            },
            [&](const Gemm& gemm) {
                if (gemm_in_library(plan, gemm, Target::gpu(1))) return;  // cuBLAS
                const Contract contraction = gemm_as_contraction(gemm);
                reduction(Reduction::none, sources_of(contraction), contraction.dst, contraction.epilogue);
            },
        },
        step);
    return kernels;
}

}  // namespace einc::detail
