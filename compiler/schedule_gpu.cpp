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
    const std::int64_t blocks = ceil_div(work, per_block);
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

// What the copy rule reads of a step: its nest (the plan's canonical one: modes by destination stride,
// outermost first), its dtypes, and where the two sides are contiguous.
struct CopyShape {
    KernelNest nest;
    DType from, to;
    // A transposition: the destination is unit-stride along its last mode, the source along this other one
    // (transpose_mode(); its last mode is neither unit-stride nor broadcast).
    std::optional<std::size_t> source_unit;
    bool unit_inner = false;  // the innermost mode is unit-stride on both sides
    Epilogue epilogue;        // the step's: arithmetic on every element, so never moved as bits

    std::size_t rank() const { return nest.kept_rank(); }
    const Layout& dst() const { return nest.kept[0]; }
    const Layout& src() const { return nest.kept[1]; }
    std::int64_t element_bytes() const { return static_cast<std::int64_t>(size_of(to)); }
    bool moves_bits() const { return from == to && epilogue.identity(); }
};

// A short side of a transposition that registers take (design C): S elements, C positions of the long
// side a thread. The short mode is the destination's unit-stride one, the long mode beside it there (the
// destination dense over the two), or the mirror: the source's.
struct ShortSide {
    int extent = 0, vector = 0;
    bool source = false;
};

// A run of a tile (designs D and E): modes contiguous on one side, innermost first (each one's stride the
// product of the extents before it), the last possibly split between tiles into chunks.
struct Run {
    std::vector<std::size_t> modes;
    std::int64_t inner = 1;   // elements of the modes but the last
    std::int64_t chunk = 1;   // elements of the last mode in a tile
    std::int64_t extent = 1;  // of the last mode
    std::int64_t tile() const { return inner * chunk; }
    std::int64_t length() const { return inner * extent; }
};
struct TileRuns {
    int vector = 1;  // elements per word of a global access
    Run runs[2];     // 0 the source-contiguous run, from the source's unit-stride mode; 1 the destination's
};

// What of the tiles reaches the kernel's source: its words and the runs' ranks.
struct TileFacts {
    int vector = 1, runs[2] = {1, 1};
};

// The size-dependent facts: a short side the registers take; runs of at least tiles_min_run elements on
// both sides; rows that split into whole aligned 16-byte words (vector_copy); the buffers aligned as the
// kernel needs (the executor checks at run time: false gives unaligned_launches); a count or an offset
// needs 64 bits.
struct CopyFacts {
    std::optional<ShortSide> short_side;
    std::optional<TileFacts> tiles;
    bool whole_words = false, aligned = true, wide = false;
};

// Tiles from runs of this many elements on both sides; shorter, the element-wise kernel moves less memory
// per useful byte (a 64-element tile row holding 4 is 16 KB of shared memory for 1 KB).
constexpr std::int64_t tiles_min_run = 8;

// The rule: bits move in registers across a short side, else in tiles, else (a mode contiguous on both
// sides) in 16-byte words; conversions and epilogues, and whatever those do not take, element by element.
KernelKind copy_kind(const CopyShape& shape, const CopyFacts& facts) {
    if (!shape.moves_bits()) return KernelKind::permute;
    if (shape.source_unit) {
        // (Copies beyond 32-bit indices: no short-side kernel, which keeps their variants half as many.)
        if (facts.short_side && facts.aligned && !facts.wide) return KernelKind::short_side;
        if (facts.tiles) return KernelKind::tiles;
        return KernelKind::permute;
    }
    if (shape.unit_inner && facts.whole_words && facts.aligned) return KernelKind::vector_copy;
    return KernelKind::permute;
}

KernelSignature copy_signature(const CopyShape& shape, KernelKind kind, const CopyFacts& facts) {
    KernelSignature s;
    s.kind = kind;
    s.sources = {shape.from};
    s.destination = shape.to;
    s.accumulator = accumulator_dtype(Reduction::none, shape.from, 1, Backend::cuda);
    s.kept_rank = static_cast<int>(shape.rank());
    s.wide_index = facts.wide;
    s.epilogue = shape.epilogue;
    if (kind == KernelKind::short_side) {  // kept modes: the batch, then the long side's chunks
        s.kept_rank -= 1;
        s.vector = facts.short_side->vector;
        s.short_extent = facts.short_side->extent;
        s.short_source = facts.short_side->source;
    } else if (kind == KernelKind::tiles) {  // kept modes: the batch, then each run's chunks
        // (Unaligned buffers: the runs of unpacked tiles, whose ranks the facts give as for any vector.)
        s.vector = facts.aligned ? facts.tiles->vector : 1;
        s.runs[0] = facts.tiles->runs[0];
        s.runs[1] = facts.tiles->runs[1];
        s.kept_rank += 2 - s.runs[0] - s.runs[1];
    }
    return s;
}

CopyShape copy_shape(const Plan& plan, const Copy& copy) {
    CopyShape shape{split_modes({&copy.dst.layout, &copy.src.layout}),
                    plan.dtype_of(copy.src.buffer),
                    plan.dtype_of(copy.dst.buffer),
                    transpose_mode(copy.dst.layout, copy.src.layout, 1),
                    false,
                    copy.epilogue};
    const std::size_t rank = shape.rank();
    shape.unit_inner =
        rank >= 1 && shape.dst().modes[rank - 1].stride == 1 && shape.src().modes[rank - 1].stride == 1;
    return shape;
}

// 1- and 2-byte elements move through tiles as 4-byte words.
int packed_vector(std::int64_t element_bytes) {
    return element_bytes < 4 ? static_cast<int>(4 / element_bytes) : 1;
}

// The modes of a short side: the destination's last (rows of S contiguous there) and the long side the
// source's unit-stride mode, or the mirror.
struct ShortModes {
    std::size_t short_mode, long_mode;
};
ShortModes short_modes(const CopyShape& shape, bool source) {
    const std::size_t l = shape.rank() - 1, p = *shape.source_unit;
    return source ? ShortModes{p, l} : ShortModes{l, p};
}

// Whether the short side can be `source`'s: the long mode beside the short one where that is contiguous,
// so that the S x long block is (for dense layouts, a matter of their structure, not of the extents).
bool short_side_dense(const CopyShape& shape, bool source) {
    const auto [short_mode, long_mode] = short_modes(shape, source);
    const Layout& contiguous = source ? shape.src() : shape.dst();
    return contiguous.modes[long_mode].stride == contiguous.modes[short_mode].extent;
}

// The C a short side of S elements takes: the preferred (short_side_vector()), else, where that does not
// divide the long side or align, the smallest the rules allow.
std::vector<int> short_side_vectors(int s, int element_bytes) {
    std::vector<int> vectors{short_side_vector(s, element_bytes)};
    for (int c = 1; c < vectors[0]; c *= 2)
        if (short_side_vector_valid(s, c, element_bytes)) {
            vectors.push_back(c);
            break;
        }
    return vectors;
}

// The short side registers can take, if any: S <= short_side_max on a dense side, the long side a
// multiple of C, and every stride keeping the vectors aligned - C elements on the strided side, 16 bytes
// on the contiguous one. Of two, the shorter.
std::optional<ShortSide> short_side_of(const CopyShape& shape) {
    const std::int64_t size = shape.element_bytes();
    std::optional<ShortSide> best;
    for (const bool source : {false, true}) {
        const auto [short_mode, long_mode] = short_modes(shape, source);
        const Layout& contiguous = source ? shape.src() : shape.dst();
        const Layout& strided = source ? shape.dst() : shape.src();
        const std::int64_t extent = contiguous.modes[short_mode].extent;
        if (extent > short_side_max || !short_side_dense(shape, source)) continue;
        const int s = static_cast<int>(extent);
        for (const int c : short_side_vectors(s, static_cast<int>(size))) {
            bool aligned = contiguous.modes[long_mode].extent % c == 0;
            for (std::size_t k = 0; k < shape.rank(); ++k) {
                if (k != long_mode && strided.modes[k].stride % c != 0) aligned = false;
                if (k != long_mode && k != short_mode &&
                    contiguous.modes[k].stride * size % kernel_vector_bytes)
                    aligned = false;
            }
            if (!aligned) continue;
            if (!best || s < best->extent) best = ShortSide{s, c, source};
            break;
        }
    }
    return best;
}

// The run of `side` from mode `first`: the modes that follow it in memory on that side (each one's stride
// the product of the extents before it), none `taken`, until a tile's `tile` elements; the last split so
// that a tile holds as much of it as fits, its bytes a multiple of 32 where some such chunk exists.
Run contiguous_run(const Layout& side, std::size_t first, std::int64_t tile, std::int64_t element_bytes,
                   const std::vector<bool>& taken) {
    Run run;
    run.modes = {first};
    std::size_t m = first;
    std::int64_t inner = 1;
    for (;;) {
        const std::int64_t extent = side.modes[m].extent;
        run.inner = inner;
        run.extent = extent;
        if (inner * extent >= tile) {
            std::int64_t chunk = tile / inner, sectors = chunk;
            while (sectors > 1 && inner * sectors * element_bytes % 32 != 0) --sectors;
            if (inner * sectors * element_bytes % 32 == 0) chunk = sectors;
            run.chunk = std::min(chunk, extent);
            return run;
        }
        std::optional<std::size_t> next;
        for (std::size_t k = 0; k < side.rank(); ++k)
            if (!taken[k] && std::find(run.modes.begin(), run.modes.end(), k) == run.modes.end() &&
                side.modes[k].stride == inner * extent)
                next = k;
        if (!next) {
            run.chunk = extent;
            return run;
        }
        inner *= extent;
        m = *next;
        run.modes.push_back(m);
    }
}

// The runs of a tile of `vector`-element words: the source's from its unit-stride mode, the destination's
// from its last. A mode that could extend either goes to the one taken first: both orders are tried, and
// the one whose shorter run is longer (then whose tile holds more) kept.
TileRuns tile_runs(const CopyShape& shape, int vector) {
    const TileShape tile = tile_shape(static_cast<int>(shape.element_bytes()), vector);
    const std::size_t last = shape.rank() - 1;
    const auto runs = [&](bool source_first) {
        TileRuns t{vector, {}};
        std::vector<bool> taken(shape.rank(), false);
        const auto take = [&](int r) {
            t.runs[r] =
                r == 0 ? contiguous_run(shape.src(), *shape.source_unit, tile.a, shape.element_bytes(), taken)
                       : contiguous_run(shape.dst(), last, tile.b, shape.element_bytes(), taken);
            for (const std::size_t m : t.runs[r].modes) taken[m] = true;
        };
        taken[source_first ? last : *shape.source_unit] = true;  // the other run's first mode
        take(source_first ? 0 : 1);
        taken[source_first ? last : *shape.source_unit] = false;
        take(source_first ? 1 : 0);
        return t;
    };
    const TileRuns a = runs(true), b = runs(false);
    const auto key = [](const TileRuns& t) {
        return std::pair{std::min(t.runs[0].tile(), t.runs[1].tile()), t.runs[0].tile() * t.runs[1].tile()};
    };
    return key(b) > key(a) ? b : a;
}

// Whether tiles can move `t.vector`-element words: each run's tile and length whole words, and every
// other stride on each side a multiple of the word (so each word's offset is).
bool words_fit(const CopyShape& shape, const TileRuns& t) {
    const int v = t.vector;
    for (int side = 0; side < 2; ++side) {
        const Run& run = t.runs[side];
        if (run.tile() % v != 0 || run.length() % v != 0) return false;
        const Layout& layout = side == 0 ? shape.src() : shape.dst();
        for (std::size_t k = 0; k < shape.rank(); ++k)
            if (std::find(run.modes.begin(), run.modes.end(), k) == run.modes.end() &&
                layout.modes[k].stride % v != 0)
                return false;
    }
    return true;
}

// The runs the tiles of a copy take: 4-byte words of small elements where they fit, else element by
// element; none where a run is shorter than tiles_min_run.
std::optional<TileRuns> copy_tiles(const CopyShape& shape, bool aligned) {
    const int packed = packed_vector(shape.element_bytes());
    TileRuns t = tile_runs(shape, aligned ? packed : 1);
    if (t.vector > 1 && !words_fit(shape, t)) t = tile_runs(shape, 1);
    if (t.runs[0].tile() < tiles_min_run || t.runs[1].tile() < tiles_min_run) return std::nullopt;
    return t;
}

TileFacts tile_facts(const TileRuns& t) {
    return TileFacts{t.vector,
                     {static_cast<int>(t.runs[0].modes.size()), static_cast<int>(t.runs[1].modes.size())}};
}

// The magic numbers of the divisions a 32-bit copy kernel makes (a 64-bit one divides).
void add_division_magic(KernelParams& p, std::size_t kept_rank, const int (&run_ranks)[2]) {
    for (std::size_t k = 0; k < kept_rank; ++k) {
        const DivisionMagic d = division_magic(p.kept_extent[k]);
        p.kept_magic[k] = d.magic;
        p.kept_shift[k] = d.shift;
    }
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < run_ranks[r]; ++k) {
            const DivisionMagic d = division_magic(p.run_extent[r][k]);
            p.run_magic[r][k] = d.magic;
            p.run_shift[r][k] = d.shift;
        }
}

// Whether a copy needs 64-bit indices: its element count, or the distance between the offsets one of its
// accesses reaches (the sums a kernel forms on the way stay within it), exceeds 32 bits.
bool copy_needs_wide(const CopyShape& shape) {
    const auto span = [](const Layout& layout) {
        std::int64_t total = 0;
        for (const Mode& m : layout.modes)
            total = saturating_add(total, saturating_mul(m.extent - 1, m.stride < 0 ? -m.stride : m.stride));
        return total;
    };
    return shape.nest.outputs() > int_limit || span(shape.dst()) > int_limit || span(shape.src()) > int_limit;
}

// The kept modes but `runs`' and `excluded`, in nest order: a batch.
KernelNest batch_of(const CopyShape& shape, const std::vector<std::size_t>& excluded) {
    KernelNest batch{std::vector<Layout>(2), std::vector<Layout>(2)};
    for (std::size_t k = 0; k < shape.rank(); ++k)
        if (std::find(excluded.begin(), excluded.end(), k) == excluded.end())
            for (std::size_t a = 0; a < 2; ++a) batch.kept[a].modes.push_back(shape.nest.kept[a].modes[k]);
    return batch;
}

KernelLaunch copy_launch(const CopyShape& shape, KernelKind kind, const CopyFacts& facts,
                         const std::optional<TileRuns>& tiles, const Target& target) {
    KernelLaunch launch{
        {}, {}, {kernel_block_threads}, {}, {KernelArgument::destination, KernelArgument::source0}};
    launch.signature = copy_signature(shape, kind, facts);
    const bool wide = facts.wide;
    const Layout &dst = shape.dst(), &src = shape.src();
    int run_ranks[2] = {0, 0};
    std::int64_t blocks = 1;
    switch (kind) {
    case KernelKind::permute:
        launch.params = params_of(shape.nest);
        blocks =
            blocks_for(shape.nest.outputs(), std::int64_t{kernel_block_threads} * permute_per_thread, target);
        break;
    case KernelKind::vector_copy:
        launch.params = params_of(shape.nest);
        blocks = blocks_for(shape.nest.outputs() / (kernel_vector_bytes / shape.element_bytes()),
                            kernel_block_threads, target);
        launch.signature.wide_index = needs_wide_index(launch.params, shape.nest.outputs());
        break;
    case KernelKind::short_side: {
        const ShortSide& side = *facts.short_side;
        const std::size_t l = shape.rank() - 1, p = *shape.source_unit;
        const std::size_t short_mode = side.source ? p : l, long_mode = side.source ? l : p;
        KernelNest grid = batch_of(shape, {short_mode, long_mode});
        const std::int64_t c = side.vector;
        grid.kept[0].modes.push_back(Mode{dst.modes[long_mode].extent / c, dst.modes[long_mode].stride * c});
        grid.kept[1].modes.push_back(Mode{src.modes[long_mode].extent / c, src.modes[long_mode].stride * c});
        launch.params = params_of(grid);
        launch.params.run_extent[0][0] = side.extent;
        launch.params.run_stride[0][0] = (side.source ? dst : src).modes[short_mode].stride;
        run_ranks[0] = 1;
        blocks = blocks_for(launch.params.kept_count, kernel_block_threads, target);
        break;
    }
    case KernelKind::tiles: {
        const TileRuns& t = *tiles;
        std::vector<std::size_t> in_runs = t.runs[0].modes;
        in_runs.insert(in_runs.end(), t.runs[1].modes.begin(), t.runs[1].modes.end());
        KernelNest grid = batch_of(shape, in_runs);
        for (int r = 0; r < 2; ++r) {  // each run's chunks: the source's, then the destination's
            const Run& run = t.runs[r];
            const std::size_t last = run.modes.back();
            const std::int64_t chunks = ceil_div(run.extent, run.chunk);
            // Along its own side a run is contiguous: its chunks are a tile's worth apart.
            grid.kept[0].modes.push_back(
                Mode{chunks, r == 1 ? run.tile() : dst.modes[last].stride * run.chunk});
            grid.kept[1].modes.push_back(
                Mode{chunks, r == 0 ? run.tile() : src.modes[last].stride * run.chunk});
            run_ranks[r] = static_cast<int>(run.modes.size());
        }
        launch.params = params_of(grid);
        for (int r = 0; r < 2; ++r) {
            const Run& run = t.runs[r];
            const Layout& other = r == 0 ? dst : src;
            for (std::size_t k = 0; k < run.modes.size(); ++k) {
                const Mode m = other.modes[run.modes[k]];
                launch.params.run_extent[r][k] = k + 1 == run.modes.size() ? run.chunk : m.extent;
                launch.params.run_stride[r][k] = m.stride;
            }
            launch.params.run_tile[r] = run.tile();
            launch.params.run_length[r] = run.length();
        }
        blocks = std::min<std::int64_t>(launch.params.kept_count, std::int64_t{target.multiprocessors} *
                                                                      tiles_blocks_per_multiprocessor);
        blocks = blocks_for(blocks, 1, target);
        break;
    }
    case KernelKind::elementwise:
    case KernelKind::reduce_rows:
    case KernelKind::reduce_columns:
    case KernelKind::finalize:
    case KernelKind::route:
    case KernelKind::reduce_one_pass:
    case KernelKind::reduce_short_rows:
    case KernelKind::reduce_packed_rows: EINC_ASSERT(false);
    }
    // (Rows of a tile split by multiply-shift even with 64-bit indices: a tile's extents are small.)
    if (kind != KernelKind::vector_copy)
        add_division_magic(
            launch.params,
            launch.params.kept_count > 0 && !wide ? static_cast<std::size_t>(launch.signature.kept_rank) : 0,
            run_ranks);
    launch.grid.x = static_cast<std::uint32_t>(blocks);
    return launch;
}

ScheduledStep schedule_copy(const Plan& plan, const Copy& copy, const Target& target) {
    ScheduledStep step = scheduled(strategy::Kernels{}, DType::f32);
    auto& kernels = std::get<strategy::Kernels>(step.strategy);
    const CopyShape shape = copy_shape(plan, copy);
    step.accumulator = copy_signature(shape, KernelKind::permute, {}).accumulator;
    if (shape.nest.outputs() == 0) return step;
    const std::size_t rank = shape.rank();
    const std::int64_t lanes = kernel_vector_bytes / shape.element_bytes();
    const auto words = [&](std::int64_t stride) { return stride % lanes == 0; };
    CopyFacts facts;
    facts.wide = copy_needs_wide(shape);
    facts.whole_words = shape.unit_inner && shape.dst().modes[rank - 1].extent % lanes == 0 &&
                        std::all_of(shape.dst().modes.begin(), shape.dst().modes.end() - 1,
                                    [&](Mode m) { return words(m.stride); }) &&
                        std::all_of(shape.src().modes.begin(), shape.src().modes.end() - 1,
                                    [&](Mode m) { return words(m.stride); }) &&
                        words(copy.src.offset) && words(copy.dst.offset);
    std::optional<TileRuns> tiles;
    if (shape.source_unit && shape.moves_bits()) {
        facts.short_side = short_side_of(shape);
        tiles = copy_tiles(shape, true);
        if (tiles) facts.tiles = tile_facts(*tiles);
    }
    const KernelKind kind = copy_kind(shape, facts);
    kernels.launches.push_back(copy_launch(shape, kind, facts, tiles, target));
    // Where the buffers turn out not to be aligned as the kernel's vectors need: the rule without them.
    if (kernel_alignment(kernels.launches[0].signature, KernelArgument::destination) >
            shape.element_bytes() ||
        kernel_alignment(kernels.launches[0].signature, KernelArgument::source0) > shape.element_bytes()) {
        facts.aligned = false;
        if (shape.source_unit && shape.moves_bits()) {
            tiles = copy_tiles(shape, false);
            facts.tiles = tiles ? std::optional(tile_facts(*tiles)) : std::nullopt;
        }
        kernels.unaligned_launches.push_back(
            copy_launch(shape, copy_kind(shape, facts), facts, tiles, target));
    }
    return step;
}

// ---- reductions and contractions ---------------------------------------------------------------------

// Whether `modes`, innermost last, walk memory densely upwards from `stride` (then the next stride above).
bool dense_from(const Layout& layout, std::int64_t& stride) {
    for (std::size_t k = layout.rank(); k-- > 0;) {
        if (layout.modes[k].stride != stride) return false;
        stride = saturating_mul(stride, layout.modes[k].extent);
    }
    return true;
}

// What the reduction rule reads of a step: its nest (the reduced modes in the first source's memory
// order), its dtypes, and whether the first source is unit-stride along a reduced mode.
struct ReduceShape {
    KernelNest nest;
    Reduction op;  // a contraction sums
    std::vector<DType> sources;
    DType to;
    bool unit_reduced = false;
    Epilogue epilogue;  // the step's: applied by the kernel that stores the results (not by partials)
    std::int64_t source_offset;  // the first source's, in elements

    // One source of 1- or 2-byte elements: read element by element, a warp's load is 32 or 64 bytes, too
    // few in flight for HBM (kernel_abi.hpp, reduce_rows and reduce_columns: 16-byte vectors instead).
    bool narrow() const { return sources.size() == 1 && size_of(sources[0]) <= 2; }
    std::int64_t vector_lanes() const {
        return kernel_vector_bytes / static_cast<std::int64_t>(size_of(sources[0]));
    }
};
// The size-dependent facts: enough terms per output to give them a warp or a thread's loop; few enough
// outputs that the terms are split across blocks (partial results, then a finalize); a count needs 64 bits;
// a columns kernel's outputs in groups of V whose terms are aligned 16-byte vectors (vector_columns()).
struct ReduceFacts {
    bool many_terms = false, split = false, wide = false, vector_columns = false;
};

KernelKind reduce_kind(const ReduceShape& shape, const ReduceFacts& facts) {
    if (shape.sources.size() > 1 || !facts.many_terms) return KernelKind::elementwise;
    return shape.unit_reduced ? KernelKind::reduce_rows : KernelKind::reduce_columns;
}

// Whether each output's terms are one dense row (the reduced modes walk the source upwards from stride 1).
// @pre shape.nest.reduced is in the first source's memory order (reduce_shape)
bool dense_rows(const ReduceShape& shape) {
    std::int64_t stride = 1;
    return shape.nest.reduced_rank() > 0 && dense_from(shape.nest.reduced[1], stride);
}

// A rows kernel reads narrow dense rows as 16-byte vectors, whatever their alignment (it peels the elements
// before a row's first 16-byte boundary and after its last): structure alone decides it.
bool vector_rows(const ReduceShape& shape, KernelKind kind) {
    return kind == KernelKind::reduce_rows && shape.narrow() && dense_rows(shape);
}

// A columns kernel folds V = 16 / size neighbouring outputs a thread, a 16-byte vector a term, where the
// innermost kept mode (in the source's memory order) is unit-stride there and splits into groups of V, and
// every other stride and the offset keep those vectors 16-byte aligned - given an aligned buffer, which the
// executor checks (the launches without vectors run where it is not).
// @pre shape.nest.kept is in the first source's memory order (schedule_reduction, for reduce_columns)
bool vector_columns(const ReduceShape& shape) {
    if (!shape.narrow() || shape.nest.kept_rank() == 0) return false;
    const std::int64_t lanes = shape.vector_lanes();
    const auto& kept = shape.nest.kept[1].modes;
    const auto aligned = [&](Mode m) { return m.extent == 1 || m.stride % lanes == 0; };
    return kept.back().stride == 1 && kept.back().extent % lanes == 0 &&
           std::all_of(kept.begin(), kept.end() - 1, aligned) &&
           std::all_of(shape.nest.reduced[1].modes.begin(), shape.nest.reduced[1].modes.end(), aligned) &&
           shape.source_offset % lanes == 0;
}

KernelSignature reduce_signature(const ReduceShape& shape, KernelKind kind, bool partials, bool wide,
                                 bool vector_columns = false) {
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
    if (vector_rows(shape, kind)) {
        s.vector = static_cast<int>(shape.vector_lanes());
        s.reduced_rank = 1;  // the row, as one unit-stride mode (rows_nest())
    }
    if (kind == KernelKind::reduce_columns && vector_columns)
        s.vector = static_cast<int>(shape.vector_lanes());
    return s;
}

// The nest of a kernel that reads each output's terms as one dense row: the reduced modes as one unit-stride
// mode.
KernelNest rows_nest(const ReduceShape& shape) {
    KernelNest rows = shape.nest;
    const std::int64_t terms = shape.nest.terms();
    rows.reduced = {Layout{{Mode{terms, 0}}}, Layout{{Mode{terms, 1}}}};
    return rows;
}

// The finalize kernel that folds a split reduction's partial results.
KernelSignature finalize_signature(const KernelSignature& partial, const Epilogue& epilogue) {
    KernelSignature s = partial;
    s.epilogue = epilogue;
    s.kind = KernelKind::finalize;
    s.sources.clear();
    s.reduced_rank = 0;
    s.partials = false;
    s.vector = 0;
    return s;
}

ReduceShape reduce_shape(const Plan& plan, Reduction op, const std::vector<const Access*>& sources,
                         const Access& destination, const Epilogue& epilogue) {
    std::vector<const Layout*> layouts{&destination.layout};
    ReduceShape shape{{},
                      op == Reduction::none ? Reduction::sum : op,
                      {},
                      plan.dtype_of(destination.buffer),
                      false,
                      epilogue,
                      sources.front()->offset};
    for (const Access* s : sources) {
        layouts.push_back(&s->layout);
        shape.sources.push_back(plan.dtype_of(s->buffer));
    }
    check_arithmetic(shape.sources);
    shape.nest = split_modes(layouts);
    // The reduced modes in the first source's memory order, so that a loop over terms reads it in order.
    shape.nest.reorder_reduced(order_by_stride(std::span(&shape.nest.reduced[1], 1)));
    shape.unit_reduced = std::any_of(shape.nest.reduced[1].modes.begin(), shape.nest.reduced[1].modes.end(),
                                     [](Mode m) { return m.stride == 1 || m.stride == -1; });
    return shape;
}

// ---- one-pass reductions (kernel-designs.md section 3, designs A and B, and packed rows) ---------------
//
// Three classes of single-source reductions that the split + finalize above serves badly (a serial
// finalize, scalar loads, a warp per short row, a thread per tiny row), each read once by one launch:
//   reduce_one_pass    the source is one dense run whose innermost K <= 32 elements are the kept ones
//                      (K = 1: a full reduction), so that element i of the run belongs to output i mod K
//   reduce_short_rows  each output's terms are one contiguous row of at most short_rows_max_bytes
//   reduce_packed_rows the source is one dense run of rows of 2, 4 or 8 bytes (packed_rows())
// All read any alignment: reduce_one_pass peels the partial 16-byte vectors at either end of the run, and
// the rows kernels load element by element where the rows are not 16-byte aligned - so none has
// unaligned launches. What is not in these classes keeps the kernels above.

// The structure of the classes (independent of extents, given the modes): the nest each kernel walks,
// where the step is of that class.
struct OnePassShape {
    std::optional<KernelNest> run;     // reduce_one_pass: kept modes outermost first, as a column decomposes
    std::optional<KernelNest> rows;    // reduce_short_rows: the reduced modes as one unit-stride mode
    std::optional<KernelNest> packed;  // reduce_packed_rows: as rows, the rows dense above it too
};
// The size-dependent facts: at most one_pass_max_columns kept outputs; rows of short_rows_min_bytes to
// short_rows_max_bytes, or of packed_rows() bytes; a count needs 64 bits.
struct OnePassFacts {
    bool few_columns = false, short_rows = false, wide = false, tiny_rows = false;
};

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
        KernelNest rows = rows_nest(shape);
        rows.reorder_kept(order_by_stride(std::span(&rows.kept[1], 1)));  // neighbouring rows in memory
        std::int64_t above = shape.nest.terms();
        if (dense_from(rows.kept[1], above)) out.packed = rows;
        out.rows = std::move(rows);
    }
    return out;
}

// Which one-pass kernel, if any: reduce_one_pass first (a full reduction of a short run is both).
std::optional<KernelKind> one_pass_kind(const OnePassShape& shape, const OnePassFacts& facts) {
    if (shape.run && facts.few_columns) return KernelKind::reduce_one_pass;
    if (shape.packed && facts.tiny_rows) return KernelKind::reduce_packed_rows;
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
    const std::int64_t most = std::int64_t{target.multiprocessors} * one_pass_blocks_per_multiprocessor;
    const std::int64_t blocks = std::clamp<std::int64_t>(ceil_div(n, per_block), 1, most);
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
    const std::int64_t chunks = ceil_div(nest.terms(), lanes);
    std::int64_t row_lanes = 1;
    while (row_lanes < chunks) row_lanes *= 2;
    const std::int64_t rows_per_warp = short_rows_batch * (kernel_warp / row_lanes);
    const std::int64_t warps = ceil_div(nest.outputs(), rows_per_warp);
    const std::int64_t warps_per_block = short_rows_block_threads / kernel_warp;
    launch.grid.x = static_cast<std::uint32_t>(std::clamp<std::int64_t>(
        ceil_div(warps, warps_per_block), 1, std::numeric_limits<std::int32_t>::max()));
    launch.signature = one_pass_signature(shape, KernelKind::reduce_short_rows, nest,
                                          needs_wide_index(launch.params, nest.outputs()));
    return launch;
}

// reduce_packed_rows's grid: a thread per 16-byte vector of P rows, at most target.max_blocks() blocks (the
// threads stride over the rest); P in the signature (its `vector`), the rows' length at launch.
KernelLaunch packed_rows_launch(const ReduceShape& shape, const KernelNest& nest, const Target& target) {
    KernelLaunch launch{{},
                        {},
                        {kernel_block_threads},
                        params_of(nest),
                        {KernelArgument::destination, KernelArgument::source0}};
    const std::int64_t row_bytes = nest.terms() * static_cast<std::int64_t>(size_of(shape.sources[0]));
    const std::int64_t rows_a_vector = kernel_vector_bytes / row_bytes;
    launch.grid.x = blocks_for(ceil_div(nest.outputs(), rows_a_vector), kernel_block_threads, target);
    // (offsets are 64-bit; a warp's rows reach past the last by up to the grid's threads' batches of P)
    const std::int64_t past =
        std::int64_t{launch.grid.x} * kernel_block_threads * packed_rows_batch * rows_a_vector;
    launch.signature =
        one_pass_signature(shape, KernelKind::reduce_packed_rows, nest,
                           needs_wide_index(launch.params, saturating_add(nest.outputs(), past)));
    launch.signature.vector = static_cast<int>(rows_a_vector);
    return launch;
}

// The one-pass launch of a reduction, where it is of one of the classes; its scratch bytes in
// `scratch_bytes`.
std::optional<KernelLaunch> schedule_one_pass(const ReduceShape& shape, const Target& target,
                                              std::int64_t& scratch_bytes) {
    const OnePassShape one_pass = one_pass_shape(shape);
    OnePassFacts facts;
    facts.few_columns = shape.nest.outputs() <= one_pass_max_columns;
    const std::int64_t row_bytes =
        saturating_mul(shape.nest.terms(), static_cast<std::int64_t>(size_of(shape.sources.front())));
    facts.short_rows = row_bytes >= short_rows_min_bytes && row_bytes <= short_rows_max_bytes;
    facts.tiny_rows = shape.nest.terms() > 1 && packed_rows(row_bytes);  // (one term: a copy)
    const std::optional<KernelKind> kind = one_pass_kind(one_pass, facts);
    scratch_bytes = 0;
    if (!kind) return std::nullopt;
    if (*kind == KernelKind::reduce_one_pass)
        return one_pass_launch(shape, *one_pass.run, target, scratch_bytes);
    if (*kind == KernelKind::reduce_packed_rows) return packed_rows_launch(shape, *one_pass.packed, target);
    return short_rows_launch(shape, *one_pass.rows);
}

// The launches of a reduction that no one-pass kernel takes: rows, columns or elementwise, its terms split
// across blocks where outputs are few (then a finalize); their scratch bytes in `scratch_bytes`.
std::vector<KernelLaunch> reduction_launches(ReduceShape shape, ReduceFacts facts, const Target& target,
                                             std::int64_t& scratch_bytes) {
    const std::int64_t outputs = shape.nest.outputs(), terms = shape.nest.terms();
    const KernelKind kind_unsplit = reduce_kind(shape, facts);
    // Outputs a warp (rows), a thread (columns: V of them with vectors, else one) or a thread (elementwise).
    const std::int64_t per_item_threads = kind_unsplit == KernelKind::reduce_rows ? kernel_warp : 1;
    const std::int64_t per_item_outputs =
        kind_unsplit == KernelKind::reduce_columns && facts.vector_columns ? shape.vector_lanes() : 1;
    const std::int64_t items_unsplit = outputs / per_item_outputs;
    // Few outputs: split each one's terms into chunks, one partial result each, so that the GPU fills up.
    const std::int64_t busy =
        static_cast<std::int64_t>(target.multiprocessors) * 2048 / per_item_threads;  // items that fill it
    const std::int64_t min_chunk = kind_unsplit == KernelKind::reduce_rows ? 1024 : 64;
    std::int64_t split = 1;
    if (kind_unsplit != KernelKind::elementwise && items_unsplit < busy)
        split =
            std::clamp<std::int64_t>(busy / items_unsplit, 1, std::max<std::int64_t>(terms / min_chunk, 1));
    facts.split = split > 1;
    const KernelKind kind = reduce_kind(shape, facts);
    if (vector_rows(shape, kind)) shape.nest = rows_nest(shape);

    KernelLaunch launch{{},
                        {},
                        {kernel_block_threads},
                        params_of(shape.nest),
                        {KernelArgument::destination, KernelArgument::source0}};
    if (shape.sources.size() > 1) launch.arguments.push_back(KernelArgument::source1);
    launch.params.split = split;
    launch.params.chunk = ceil_div(terms, split);
    const std::int64_t items = items_unsplit * split;
    // (a vector rows loop steps past a row's end by up to a warp of vectors)
    facts.wide = needs_wide_index(launch.params, items) ||
                 (vector_rows(shape, kind) && terms > int_limit - kernel_warp * kernel_vector_bytes);
    launch.signature = reduce_signature(shape, kind, facts.split, facts.wide, facts.vector_columns);
    launch.grid.x = blocks_for(saturating_mul(items, per_item_threads), kernel_block_threads, target);
    if (facts.split) launch.arguments.push_back(KernelArgument::scratch);
    std::vector<KernelLaunch> launches{launch};
    scratch_bytes = 0;
    if (facts.split) {
        KernelLaunch final_launch{finalize_signature(launch.signature, shape.epilogue),
                                  {},
                                  {kernel_block_threads},
                                  launch.params,
                                  {KernelArgument::destination, KernelArgument::scratch}};
        final_launch.grid.x = blocks_for(outputs, kernel_block_threads, target);
        launches.push_back(final_launch);
        scratch_bytes = saturating_mul(saturating_mul(outputs, split),
                                       static_cast<std::int64_t>(size_of(launch.signature.accumulator)));
    }
    return launches;
}

ScheduledStep schedule_reduction(const Plan& plan, Reduction op, const std::vector<const Access*>& sources,
                                 const Access& destination, const Epilogue& epilogue, const Target& target) {
    ReduceShape shape = reduce_shape(plan, op, sources, destination, epilogue);
    ScheduledStep step = scheduled(
        strategy::Kernels{}, reduce_signature(shape, KernelKind::elementwise, false, false).accumulator);
    auto& kernels = std::get<strategy::Kernels>(step.strategy);
    if (shape.nest.outputs() == 0) return step;
    if (std::optional<KernelLaunch> one_pass = schedule_one_pass(shape, target, step.scratch_bytes)) {
        kernels.launches.push_back(std::move(*one_pass));
        if (step.scratch_bytes > 0) step.zeroed_scratch_bytes = one_pass_counter_bytes;
        return step;
    }
    ReduceFacts facts;
    facts.many_terms = shape.nest.terms() > 16;
    // Neighbouring threads read neighbouring outputs' terms.
    if (reduce_kind(shape, facts) == KernelKind::reduce_columns) {
        shape.nest.reorder_kept(order_by_stride(std::span(&shape.nest.kept[1], 1)));
        facts.vector_columns = vector_columns(shape);
    }
    kernels.launches = reduction_launches(shape, facts, target, step.scratch_bytes);
    // Where the source turns out not to be 16-byte aligned as the columns' vectors need: the launches
    // without them.
    if (facts.vector_columns) {
        facts.vector_columns = false;
        std::int64_t unaligned_scratch = 0;
        kernels.unaligned_launches = reduction_launches(shape, facts, target, unaligned_scratch);
        step.scratch_bytes = std::max(step.scratch_bytes, unaligned_scratch);
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
                     plan.dtype_of(route.src.buffer),
                     plan.dtype_of(route.dst.buffer),
                     route.epilogue};
    EINC_ASSERT(route.op == Reduction::max || route.op == Reduction::min || route.op == Reduction::prod);
    EINC_ASSERT(plan.dtype_of(route.grad.buffer) == shape.from);
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
                return scheduled(
                    strategy::View{view},
                    accumulator_dtype(Reduction::none, plan.dtype_of(view.source.buffer), 1, Backend::cuda));
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
                const DType dtype = plan.dtype_of(gemm.a.buffer);
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
                    for (const bool tiny_rows : {false, true}) {
                        const auto kind = one_pass_kind(one_pass, {few_columns, short_rows, wide, tiny_rows});
                        if (!kind) continue;
                        if (*kind != KernelKind::reduce_packed_rows) {
                            add(one_pass_signature(
                                shape, *kind,
                                *kind == KernelKind::reduce_one_pass ? *one_pass.run : *one_pass.rows, wide));
                            continue;
                        }
                        // (P: the rows of each length a vector holds, 2, 4 or 8 bytes)
                        const auto size = static_cast<int>(size_of(shape.sources[0]));
                        for (int row = 2 * size; packed_rows(row); row *= 2) {
                            KernelSignature s = one_pass_signature(shape, *kind, *one_pass.packed, wide);
                            s.vector = kernel_vector_bytes / row;
                            add(s);
                        }
                    }
        }
        if (one_pass.run && shape.nest.kept_rank() == 0) return;  // a full reduction of a dense run: always A
        for (const bool many_terms : {false, true})
            for (const bool split : {false, true})
                for (const bool wide : {false, true})
                    for (const bool vector : {false, true}) {
                        const ReduceFacts facts{many_terms, split, wide, vector};
                        const KernelKind kind = reduce_kind(shape, facts);
                        // (vector columns: where the innermost kept mode is the source's unit-stride one
                        // and the extents split it into groups of V)
                        if (vector &&
                            (kind != KernelKind::reduce_columns || !shape.narrow() ||
                             std::none_of(shape.nest.kept[1].modes.begin(), shape.nest.kept[1].modes.end(),
                                          [](Mode m) { return m.stride == 1; })))
                            continue;
                        const bool partials = split && kind != KernelKind::elementwise;
                        const KernelSignature s = reduce_signature(shape, kind, partials, wide, vector);
                        add(s);
                        if (partials) add(finalize_signature(s, epilogue));
                    }
    };
    std::visit(
        Overloaded{
            [](const View&) {},  // no kernel
            [&](const Copy& copy) {
                const CopyShape shape = copy_shape(plan, copy);
                check_ranks(shape.nest);
                if (shape.nest.outputs() == 0) return;
                // Each kind's signature depends on its own facts only, so each is taken every way with the
                // others absent: every short side (S, C and each side the layouts' structure allows), every
                // pair of run ranks and word, with and without whole words, aligned buffers and 64-bit
                // indices.
                std::vector<std::optional<ShortSide>> short_sides{std::nullopt};
                std::vector<std::optional<TileFacts>> tiles{std::nullopt};
                const int size = static_cast<int>(shape.element_bytes()),
                          rank = static_cast<int>(shape.rank());
                if (shape.source_unit && shape.moves_bits()) {
                    for (const bool source : {false, true})
                        if (short_side_dense(shape, source))
                            for (int s = 2; s <= short_side_max; ++s)
                                for (const int c : short_side_vectors(s, size))
                                    short_sides.push_back(ShortSide{s, c, source});
                    for (const int vector : {1, packed_vector(size)})
                        for (int a = 1; a < rank; ++a)
                            for (int b = 1; a + b <= rank; ++b) tiles.push_back(TileFacts{vector, {a, b}});
                }
                for (const bool wide : {false, true})
                    for (const bool aligned : {false, true}) {
                        const auto add_kind = [&](const CopyFacts& facts) {
                            add(copy_signature(shape, copy_kind(shape, facts), facts));
                        };
                        for (const bool whole_words : {false, true})
                            add_kind(CopyFacts{std::nullopt, std::nullopt, whole_words, aligned, wide});
                        for (const auto& short_side : short_sides)
                            add_kind(CopyFacts{short_side, std::nullopt, false, aligned, wide});
                        for (const auto& tile : tiles)
                            add_kind(CopyFacts{std::nullopt, tile, false, aligned, wide});
                    }
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
