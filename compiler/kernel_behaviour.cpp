#include "compiler/kernel_behaviour.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "compiler/checked.hpp"
#include "compiler/reduction.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {

// ---- statistics: shared by the lane programs and the emulator's trace ---------------------------------

namespace {

constexpr std::uint64_t sector_size = 32;

double ratio(double part, double whole, double otherwise) {
    return whole > 0 ? part / whole : otherwise;
}

}  // namespace

double TraceStatistics::load_sector_efficiency() const {
    return ratio(load_used_bytes, load_sectors * sector_size, 1);
}
double TraceStatistics::store_sector_efficiency() const {
    return ratio(store_used_bytes, store_sectors * sector_size, 1);
}
double TraceStatistics::sector_efficiency() const {
    return ratio(load_used_bytes + store_used_bytes, (load_sectors + store_sectors) * sector_size, 1);
}
double TraceStatistics::whole_sector_share() const {
    return ratio(load_whole_sectors + store_whole_sectors, load_sectors + store_sectors, 1);
}
double TraceStatistics::batch_bytes() const {
    return ratio(batch_sectors * sector_size, warp_batches, 0);
}
double TraceStatistics::bank_ways() const {
    return ratio(shared_wavefronts, shared_instructions, 1);
}
double TraceStatistics::active_lane_share() const {
    return ratio(load_lanes + store_lanes, 32 * (load_instructions + store_instructions), 1);
}

void TraceStatistics::add(const TraceStatistics& o, double w) {
    load_instructions += w * o.load_instructions;
    load_lanes += w * o.load_lanes;
    load_bytes += w * o.load_bytes;
    load_used_bytes += w * o.load_used_bytes;
    load_sectors += w * o.load_sectors;
    load_whole_sectors += w * o.load_whole_sectors;
    store_instructions += w * o.store_instructions;
    store_lanes += w * o.store_lanes;
    store_bytes += w * o.store_bytes;
    store_used_bytes += w * o.store_used_bytes;
    store_sectors += w * o.store_sectors;
    store_whole_sectors += w * o.store_whole_sectors;
    shared_instructions += w * o.shared_instructions;
    shared_wavefronts += w * o.shared_wavefronts;
    warp_batches += w * o.warp_batches;
    batch_sectors += w * o.batch_sectors;
    threads += w * o.threads;
    issued += w * o.issued;
    longest_chain = std::max(longest_chain, o.longest_chain);
}

namespace {

// The lanes of one warp instruction: which bytes of which sectors they touch.
struct Instruction {
    LaneEvent::Kind kind = LaneEvent::Kind::load;
    double lanes = 0, bytes = 0;
    std::map<std::uint64_t, std::uint32_t> sector_bytes;               // global: sector -> bytes used (mask)
    std::map<std::uint32_t, std::unordered_set<std::uint64_t>> banks;  // shared: bank -> 4-byte words
};

void touch(Instruction& in, const LaneEvent& e) {
    in.lanes += 1;
    in.bytes += e.size;
    if (e.kind == LaneEvent::Kind::load || e.kind == LaneEvent::Kind::store) {
        for (std::uint64_t b = e.address; b < e.address + e.size; ++b)
            in.sector_bytes[b / sector_size] |= 1u << (b % sector_size);
    } else {
        for (std::uint64_t word = e.address / 4; word <= (e.address + e.size - 1) / 4; ++word)
            in.banks[static_cast<std::uint32_t>(word % 32)].insert(word);
    }
}

}  // namespace

TraceStatistics warp_statistics(std::span<const std::vector<LaneEvent>> lanes) {
    TraceStatistics stats;
    // (site, n-th execution) -> the instruction; batch index -> the sectors its loads touch
    std::map<std::pair<std::uint32_t, std::uint64_t>, Instruction> instructions;
    std::map<std::uint64_t, std::unordered_set<std::uint64_t>> batches;
    for (const std::vector<LaneEvent>& events : lanes) {
        if (events.empty()) continue;
        stats.threads += 1;
        std::unordered_map<std::uint32_t, std::uint64_t> executions;
        std::uint64_t batch = 0;  // this lane's batches so far (the open one included)
        bool open = false;
        std::uint32_t mark_site = 0, marks = 0;  // marks of `mark_site` since the batch began
        const auto close = [&] {
            open = false;
            marks = 0;
        };
        for (const LaneEvent& e : events) {
            switch (e.kind) {
            case LaneEvent::Kind::load:
            case LaneEvent::Kind::store:
            case LaneEvent::Kind::shared_load:
            case LaneEvent::Kind::shared_store: {
                Instruction& in = instructions[{e.site, executions[e.site]++}];
                in.kind = e.kind;
                touch(in, e);
                if (e.kind == LaneEvent::Kind::load) {
                    if (!open) {
                        open = true;
                        ++batch;
                    }
                    auto& sectors = batches[batch - 1];
                    for (std::uint64_t s = e.address / sector_size;
                         s <= (e.address + e.size - 1) / sector_size; ++s)
                        sectors.insert(s);
                }
                break;
            }
            case LaneEvent::Kind::batch_mark:
                if (e.site != mark_site) {  // another loop's iterations: counted afresh
                    marks = 0;
                    mark_site = e.site;
                }
                if (++marks >= e.size) close();
                break;
            case LaneEvent::Kind::barrier:
            case LaneEvent::Kind::shuffle: close(); break;
            }
        }
        stats.longest_chain = std::max(stats.longest_chain, static_cast<double>(batch));
    }
    for (const auto& [key, in] : instructions) {
        switch (in.kind) {
        case LaneEvent::Kind::load:
        case LaneEvent::Kind::store: {
            double whole = 0, used = 0;
            for (const auto& [sector, mask] : in.sector_bytes) {
                whole += mask == 0xffffffffu ? 1 : 0;
                used += std::popcount(mask);
            }
            const bool load = in.kind == LaneEvent::Kind::load;
            (load ? stats.load_instructions : stats.store_instructions) += 1;
            (load ? stats.load_lanes : stats.store_lanes) += in.lanes;
            (load ? stats.load_bytes : stats.store_bytes) += in.bytes;
            (load ? stats.load_used_bytes : stats.store_used_bytes) += used;
            (load ? stats.load_sectors : stats.store_sectors) += static_cast<double>(in.sector_bytes.size());
            (load ? stats.load_whole_sectors : stats.store_whole_sectors) += whole;
            break;
        }
        case LaneEvent::Kind::shared_load:
        case LaneEvent::Kind::shared_store: {
            std::size_t ways = 1;
            for (const auto& [bank, words] : in.banks) ways = std::max(ways, words.size());
            stats.shared_instructions += 1;
            stats.shared_wavefronts += static_cast<double>(ways);
            break;
        }
        case LaneEvent::Kind::batch_mark:
        case LaneEvent::Kind::barrier:
        case LaneEvent::Kind::shuffle: break;
        }
    }
    stats.warp_batches = static_cast<double>(batches.size());
    for (const auto& [index, sectors] : batches) stats.batch_sectors += static_cast<double>(sectors.size());
    return stats;
}

// 16 for a loop from 0 over one strided mode (elementwise reductions, finalize), 4 for the others.
int term_loop_unroll(const KernelSignature& s) {
    switch (s.kind) {
    case KernelKind::elementwise: return s.reduced_rank == 1 ? 16 : 4;
    case KernelKind::finalize: return 16;
    case KernelKind::permute:
    case KernelKind::vector_copy:
    case KernelKind::short_side:
    case KernelKind::tiles:
    case KernelKind::reduce_rows:
    case KernelKind::reduce_columns:
    case KernelKind::route:
    case KernelKind::reduce_one_pass:  // its last block's loop over the blocks' partial results
    case KernelKind::reduce_short_rows:
    case KernelKind::reduce_packed_rows: return 4;
    }
    EINC_ASSERT(false);
}

// ---- footprints ----------------------------------------------------------------------------------------

double sector_footprint(const Layout& layout, std::size_t element_bytes) {
    std::vector<Mode> modes;
    for (const Mode m : layout.modes) {
        if (m.extent == 0) return 0;
        if (m.extent > 1 && m.stride != 0) modes.push_back({m.extent, m.stride < 0 ? -m.stride : m.stride});
    }
    std::sort(modes.begin(), modes.end(), [](Mode a, Mode b) { return a.stride < b.stride; });
    const double bytes = static_cast<double>(element_bytes);
    if (modes.empty()) return std::ceil(bytes / sector_size);
    // The contiguous run: the innermost modes that walk memory as one.
    double run = 1, outer = 1;
    std::size_t k = 0;
    if (modes[0].stride == 1)
        for (; k < modes.size() && modes[k].stride == static_cast<std::int64_t>(run); ++k)
            run *= static_cast<double>(modes[k].extent);
    for (std::size_t m = k; m < modes.size(); ++m) outer *= static_cast<double>(modes[m].extent);
    if (k == 0) {  // no unit stride: elements `stride` apart share a sector when that is under 32 bytes
        const double gap = static_cast<double>(modes[0].stride) * bytes;
        return outer * std::min(1.0, gap / sector_size);
    }
    const double run_sectors = std::ceil(run * bytes / sector_size);
    if (k == modes.size()) return run_sectors;
    // Runs further apart than their sectors each have their own; closer ones share them.
    const double gap = static_cast<double>(modes[k].stride) * bytes;
    return gap >= run_sectors * sector_size
               ? outer * run_sectors
               : std::ceil(outer / static_cast<double>(modes[k].extent)) *
                     std::ceil(gap * static_cast<double>(modes[k].extent) / sector_size);
}

// ---- lane programs -------------------------------------------------------------------------------------

namespace {

// The sites of the kernels' text (any numbering will do: a site groups the lanes of an instruction).
enum Site : std::uint32_t {
    term0 = 1,   // a source's term (or element)
    term1,       // the second source's
    old_output,  // the destination read by an epilogue with beta != 0
    output,      // the destination written
    partial,     // a reduction's partial result, written
    partial_in,  // a partial result, read by finalize
    tile_in,     // tiles: the tile written to shared memory (element j of a word: tile_in_part + j)
    tile_out,    // tiles: the tile read from shared memory (likewise tile_out_part + j)
    edge_term,   // tiles: a source word of an edge tile
    gradient,    // route: the group's gradient
    first_term,  // route max/min: the first term, the extremum's start
    walk_term,   // route: a term in the second walk
    fold_end = 100,
    item_end,
    walk_end,  // route: the end of the second walk's iteration (the first is fold_end)
    tile_in_part = 200,
    tile_out_part = 300,
    vector_in = 400,   // short_side: its v-th load (a statement of its own)
    vector_out = 500,  // short_side: its v-th store
    stage_in = 520,    // short_side: + 16 round + v, its v-th vector into the warp's stage;
    stage_out = 560,   // + 8 round + j, the warp's j-th vector out of it
    // reduce_one_pass and reduce_short_rows: a text's site per vector or element of a batch
    batch_vector = 600,      // + b: the b-th 16-byte load of a batch
    remainder_vector = 610,  // the remainder loop's
    edge_element = 620,      // + k: element k of a partial vector, or of a row's chunk (+ 32 q)
    warp_identity = 800,     // one_pass: the warp's row of columns set to the identity
    warp_column_in = 810,    // + k: accumulator k folded into its column (read)
    warp_column_out = 850,   // + k: (written)
    warp_row_in = 890,       // a warp's row read by the block's fold
    last_flag_out,           // the last-block flag, written by thread 0
    last_flag_in,            // read by every thread
    block_row_out,           // the last block's row of partial results
    tree_in_high,            // the last block's tree: the upper row,
    tree_in_low,             // the lower row,
    tree_out,                // and the result
    row_result_in,           // the final row, read by the threads that store
    one_pass_end,            // the end of a main loop iteration
    remainder_end,           // of a remainder loop iteration
    partials_end,            // of an iteration over the blocks' partials
    // reduce_packed_rows: + 8 b + k, vector batch b's row k into the warp's stage; + 8 b + j, its j-th row
    // out of it, that row stored, its old value read (an epilogue with beta)
    packed_stage_in = 1100,
    packed_stage_out = 1140,
    packed_output = 1180,
    packed_old_output = 1220,
};

// Issue slots a lane takes for each piece of a kernel's text, from the SASS of the generated kernels
// (`einc emit --ptx`, `ptxas -arch=sm_90`, `nvdisasm`: docs/gpu-model.md has the counts per kernel). A
// 32-bit division is 18 instructions, three of which (I2F, MUFU.RCP, F2I) run at 16 lanes per clock per
// SM, an eighth of the issue rate: 18 + 3 * 7 slots.
struct IssueCosts {
    double item = 4;            // a grid-stride iteration's control
    double division;            // one mode of a flat index decomposed (rest % e, rest /= e)
    double offset = 4;          // one access's offset along one mode (a 64-bit multiply-add)
    double access = 3;          // an address, and its load or store
    double term = 3.5;          // an iteration of an unrolled loop over terms: load, address, control
    double conversion = 1.25;   // a narrow float converted to f32, or back
    double shuffle = 3;         // one step of a warp's shuffle fold
    double magic_division = 6;  // one mode split by multiply-shift (IMAD.HI, add, shift, remainder)
    double offset32 = 2;        // one access's 32-bit offset along one mode
    double tile_word = 8;       // a word through a tile: its load, shared store and load, store, addresses
    double tile_part = 2;       // each element of a packed word: its shift, and its own shared access
    double edge_check = 2;      // the bounds check of an edge tile's access
    double register_move = 1;   // short_side: a 32-bit word gathered from the loaded ones
};
constexpr IssueCosts issue_costs(bool wide) {
    IssueCosts c{};
    c.division = wide ? 100 : 39;  // (64-bit: a call of about 70 instructions)
    return c;
}

// The slots of op's fold: a NaN-propagating compare and select for max and min.
double fold_cost(Reduction op) {
    switch (info_of(op).combine) {
    case Combine::add:
    case Combine::multiply: return 1;
    case Combine::maximum:
    case Combine::minimum: return 3.5;
    case Combine::logical_or:
    case Combine::logical_and: return 2;
    }
    EINC_ASSERT(false);
}

bool narrow_float(DType d) {
    return d == DType::f16 || d == DType::bf16;
}

// One thread's events, emitted up to the options' limits and counted beyond them.
class Lane {
public:
    Lane(std::vector<LaneEvent>* out, const BehaviourOptions& options) : out_(out), options_(options) {}

    // Items: the iterations of the kernel's outer loop; terms: of a loop over one item's terms.
    bool emitting() const { return out_ && !item_limit_ && !term_limit_; }
    void begin_item() {
        ++items_;
        item_limit_ = options_.emitted_items > 0 && items_ > options_.emitted_items;
        terms_ = 0;
        term_limit_ = false;
    }
    void begin_term() {
        ++terms_;
        term_limit_ = options_.emitted_terms > 0 && terms_ > options_.emitted_terms;
    }
    void end_terms() { term_limit_ = false; }
    bool past_term_limit() const { return term_limit_; }

    // What the lane has counted, to repeat a loop's iterations past the limits without running them (they
    // emit nothing, and each counts what the one before it did).
    struct Counts {
        double accesses = 0, loads = 0, issued = 0;
        Counts operator-(const Counts& o) const {
            return {accesses - o.accesses, loads - o.loads, issued - o.issued};
        }
    };
    Counts counts() const { return {accesses_, loads_, issued_}; }
    void add(const Counts& counts, std::int64_t times = 1) {
        const auto n = static_cast<double>(times);
        accesses_ += counts.accesses * n;
        loads_ += counts.loads * n;
        issued_ += counts.issued * n;
    }

    void load(Site site, std::uint64_t address, std::size_t bytes) {
        memory(LaneEvent::Kind::load, site, address, bytes);
    }
    void store(Site site, std::uint64_t address, std::size_t bytes) {
        memory(LaneEvent::Kind::store, site, address, bytes);
    }
    void shared_load(Site site, std::uint64_t address, std::size_t bytes) {
        memory(LaneEvent::Kind::shared_load, site, address, bytes);
    }
    void shared_store(Site site, std::uint64_t address, std::size_t bytes) {
        memory(LaneEvent::Kind::shared_store, site, address, bytes);
    }
    void mark(Site site, int unroll) {
        event({LaneEvent::Kind::batch_mark, site, static_cast<std::uint32_t>(unroll), 0});
    }
    void barrier() { event({LaneEvent::Kind::barrier, 0, 0, 0}); }
    void shuffle() { event({LaneEvent::Kind::shuffle, 0, 0, 0}); }
    void issue(double instructions) { issued_ += instructions; }

    // Global loads (or, where a lane has none, all its accesses): counted, and emitted.
    double counted() const { return loads_ > 0 ? loads_ : accesses_; }
    double emitted() const { return loads_ > 0 ? emitted_loads_ : emitted_accesses_; }
    double issued() const { return issued_; }

private:
    void memory(LaneEvent::Kind kind, Site site, std::uint64_t address, std::size_t bytes) {
        const bool load = kind == LaneEvent::Kind::load;
        accesses_ += 1;
        loads_ += load ? 1 : 0;
        if (emitting()) {
            emitted_accesses_ += 1;
            emitted_loads_ += load ? 1 : 0;
        }
        event({kind, site, static_cast<std::uint32_t>(bytes), address});
    }
    void event(const LaneEvent& e) {
        if (emitting()) out_->push_back(e);
    }
    std::vector<LaneEvent>* out_;
    const BehaviourOptions& options_;
    std::int64_t items_ = 0, terms_ = 0;
    bool item_limit_ = false, term_limit_ = false;
    double accesses_ = 0, emitted_accesses_ = 0, loads_ = 0, emitted_loads_ = 0, issued_ = 0;
};

// The launch as its lane programs read it.
struct Context {
    const KernelLaunch& launch;
    const KernelSignature& s;
    const KernelParams& p;
    std::int64_t block_threads, threads;                                           // of a block, of the grid
    std::uint64_t destination = 0, sources[max_kernel_sources] = {}, scratch = 0;  // base addresses
    IssueCosts cost;

    Context(const KernelLaunch& l, const BehaviourOptions& options)
        : launch(l), s(l.signature), p(l.params),
          block_threads(static_cast<std::int64_t>(l.block.x) * l.block.y * l.block.z),
          threads(block_threads * l.grid.x), cost(issue_costs(l.signature.wide_index)) {
        // Each buffer in an address space of its own, as far from the others as any offset reaches.
        for (std::size_t a = 0; a < l.arguments.size(); ++a) {
            const std::uint64_t base = (std::uint64_t{a} + 1) << 44 | options.argument_alignment[a];
            switch (l.arguments[a]) {
            case KernelArgument::destination: destination = base; break;
            case KernelArgument::source0: sources[0] = base; break;
            case KernelArgument::source1: sources[1] = base; break;
            case KernelArgument::scratch: scratch = base; break;
            }
        }
    }

    std::size_t source_bytes(std::size_t k) const { return size_of(s.sources[k]); }
    std::size_t destination_bytes() const { return size_of(s.destination); }
    std::size_t accumulator_bytes() const {
        return s.accumulator == DType::f64 || !is_floating(s.accumulator) ? 8 : 4;
    }
    std::uint64_t at(std::uint64_t base, std::int64_t offset, std::size_t bytes) const {
        return base + static_cast<std::uint64_t>(offset * static_cast<std::int64_t>(bytes));
    }

    // Adds the coordinates of flat index `index` over the kept (or reduced) modes [0, rank), innermost last,
    // times each access's stride, to offsets[access] for the accesses listed - as codegen's decompose().
    void decompose(std::int64_t index, bool kept, int rank, std::span<const int> accesses,
                   std::int64_t* offsets, Lane& lane) const {
        const std::int64_t* extent = kept ? p.kept_extent : p.reduced_extent;
        for (int m = rank - 1; m >= 0; --m) {
            const std::int64_t c = m > 0 ? index % extent[m] : index;
            if (m > 0) index /= extent[m];
            for (const int a : accesses)
                offsets[a] += c * (kept ? p.kept_stride[a][m] : p.reduced_stride[a][m]);
        }
        lane.issue(std::max(rank - 1, 0) * cost.division +
                   rank * static_cast<double>(accesses.size()) * cost.offset);
    }

    // The copy kinds' split of `index` over the kept modes (codegen's split_index()): by multiply-shift with
    // 32-bit indices, else by 64-bit division. Returns the coordinates, adds the offsets to `offsets`.
    std::array<std::int64_t, max_kernel_rank> split_index(std::int64_t index, std::span<const int> accesses,
                                                          std::int64_t* offsets, Lane& lane) const {
        std::array<std::int64_t, max_kernel_rank> coordinate{};
        for (int m = s.kept_rank - 1; m >= 0; --m) {
            coordinate[static_cast<std::size_t>(m)] = m > 0 ? index % p.kept_extent[m] : index;
            if (m > 0) index /= p.kept_extent[m];
            for (const int a : accesses)
                offsets[a] += coordinate[static_cast<std::size_t>(m)] * p.kept_stride[a][m];
        }
        const double division = s.wide_index ? cost.division : cost.magic_division;
        lane.issue(std::max(s.kept_rank - 1, 0) * division +
                   s.kept_rank * static_cast<double>(accesses.size()) *
                       (s.wide_index ? cost.offset : cost.offset32));
        return coordinate;
    }

    // The statement storing a result into the destination at `offset`: with an epilogue that reads the
    // output, the old value first.
    void store_result(Lane& lane, std::int64_t offset, Site site = output, Site old_site = old_output) const {
        const std::size_t bytes = destination_bytes();
        if (s.epilogue.reads_output()) lane.load(old_site, at(destination, offset, bytes), bytes);
        lane.store(site, at(destination, offset, bytes), bytes);
        lane.issue(cost.access * (s.epilogue.reads_output() ? 2 : 1) +
                   (narrow_float(s.destination) ? cost.conversion : 0));
    }

    // One term of the sources at offsets q[1..]: a load of each (in a loop over terms, whose addresses
    // advance by a constant, or alone).
    void load_terms(Lane& lane, const std::int64_t* q, bool in_term_loop) const {
        for (std::size_t k = 0; k < s.sources.size(); ++k) {
            const std::size_t bytes = source_bytes(k);
            lane.load(k == 0 ? term0 : term1, at(sources[k], q[k + 1], bytes), bytes);
            lane.issue((in_term_loop ? cost.term : cost.access) +
                       (narrow_float(s.sources[k]) ? cost.conversion : 0));
        }
    }

    // The slots of one element folded: its conversion where narrow, and op's fold.
    double element_cost() const {
        return fold_cost(s.op) + (narrow_float(s.sources[0]) ? cost.conversion : 0);
    }

    // The loop over one output's terms [begin, end) by `step`, from offsets o[1..] (codegen's fold_terms);
    // with `vector`, each term a 16-byte vector of that many outputs' elements (codegen's vector columns).
    void fold_terms(Lane& lane, std::int64_t begin, std::int64_t end, std::int64_t step,
                    const std::int64_t* o, int vector = 0) const {
        std::vector<int> accesses;
        for (std::size_t k = 0; k < s.sources.size(); ++k) accesses.push_back(static_cast<int>(k) + 1);
        for (std::int64_t r = begin; r < end; r += step) {
            const Lane::Counts before = lane.counts();
            lane.begin_term();
            std::int64_t q[1 + max_kernel_sources] = {};
            for (const int a : accesses) q[a] = o[a];
            if (s.reduced_rank == 1)
                for (const int a : accesses) q[a] += r * p.reduced_stride[a][0];
            else
                decompose(r, false, s.reduced_rank, accesses, q, lane);
            if (vector > 0) {
                lane.load(term0, at(sources[0], q[1], source_bytes(0)), kernel_vector_bytes);
                lane.issue(cost.term + vector * (element_cost() + cost.register_move));
            } else {
                load_terms(lane, q, true);
                lane.issue(fold_cost(s.op));
            }
            lane.mark(fold_end, term_loop_unroll(s));
            if (lane.past_term_limit()) {  // the iterations after this one, counted as it was
                lane.add(lane.counts() - before, (end - r - 1) / step);
                break;
            }
        }
        lane.end_terms();
    }

    std::vector<int> kept_accesses(bool with_destination) const {
        std::vector<int> accesses;
        if (with_destination) accesses.push_back(0);
        for (std::size_t k = 0; k < s.sources.size(); ++k) accesses.push_back(static_cast<int>(k) + 1);
        return accesses;
    }
    bool moves_bits() const {
        return s.op == Reduction::none && s.sources.size() == 1 && s.sources[0] == s.destination &&
               s.epilogue.identity();
    }
};

// One thread per destination element (codegen's elementwise()).
void elementwise_lane(const Context& c, std::int64_t thread, Lane& lane) {
    const std::vector<int> accesses = c.kept_accesses(true);
    for (std::int64_t i = thread; i < c.p.kept_count; i += c.threads) {
        lane.begin_item();
        lane.issue(c.cost.item);
        std::int64_t o[1 + max_kernel_sources] = {};
        c.decompose(i, true, c.s.kept_rank, accesses, o, lane);
        if (c.s.reduced_rank > 0) {
            c.fold_terms(lane, 0, c.p.reduced_count, 1, o);
            c.store_result(lane, o[0]);
        } else if (c.moves_bits()) {
            c.load_terms(lane, o, false);
            lane.store(output, c.at(c.destination, o[0], c.destination_bytes()), c.destination_bytes());
            lane.issue(c.cost.access);
        } else {
            c.load_terms(lane, o, false);
            c.store_result(lane, o[0]);
        }
        lane.mark(item_end, c.s.reduced_rank > 0 ? item_loop_unroll : copy_loop_unroll);
    }
}

// Rows of the innermost kept mode as 16-byte vectors (codegen's vector_copy()).
void vector_copy_lane(const Context& c, std::int64_t thread, Lane& lane) {
    const int rank = c.s.kept_rank;
    const std::int64_t lanes = kernel_vector_bytes / static_cast<std::int64_t>(c.destination_bytes());
    const std::int64_t per_row = c.p.kept_extent[rank - 1] / lanes;
    const std::int64_t count = c.p.kept_count / c.p.kept_extent[rank - 1] * per_row;
    const std::vector<int> accesses{0, 1};
    for (std::int64_t i = thread; i < count; i += c.threads) {
        lane.begin_item();
        // (the division of the offsets by the vector's lanes: two signed 64-bit divisions by a constant)
        lane.issue(c.cost.item + (rank > 1 ? c.cost.division : 0) + 16);
        std::int64_t o[2] = {};
        c.decompose(rank > 1 ? i / per_row : 0, true, rank - 1, accesses, o, lane);
        const std::int64_t column = rank > 1 ? i % per_row : i;
        lane.load(term0,
                  c.sources[0] + static_cast<std::uint64_t>((o[1] / lanes + column) * kernel_vector_bytes),
                  kernel_vector_bytes);
        lane.store(output,
                   c.destination + static_cast<std::uint64_t>((o[0] / lanes + column) * kernel_vector_bytes),
                   kernel_vector_bytes);
        lane.issue(2 * c.cost.access);
        lane.mark(item_end, vector_loop_unroll);
    }
}

// A copy element by element, 4 elements a thread a block's width apart: their indices split, their loads
// together, then their stores (codegen's permute()).
void permute_lane(const Context& c, std::int64_t block, std::int64_t thread, Lane& lane) {
    constexpr std::int64_t n = permute_per_thread, width = kernel_block_threads;
    const std::int64_t count = c.p.kept_count, step = std::int64_t{c.launch.grid.x} * n * width;
    const std::size_t from = c.source_bytes(0);
    const std::vector<int> accesses{0, 1};
    for (std::int64_t base = block * n * width; base < count; base += step) {
        lane.begin_item();
        lane.issue(c.cost.item);
        std::int64_t o[n][2] = {};
        bool in[n] = {};
        for (std::int64_t k = 0; k < n; ++k) {
            const std::int64_t at = base + k * width + thread;
            in[k] = at < count;
            c.split_index(in[k] ? at : count - 1, accesses, o[k], lane);
        }
        for (std::int64_t k = 0; k < n; ++k)
            if (in[k]) {
                lane.load(term0, c.at(c.sources[0], o[k][1], from), from);
                lane.issue(c.cost.access + (narrow_float(c.s.sources[0]) ? c.cost.conversion : 0));
            }
        for (std::int64_t k = 0; k < n; ++k)
            if (in[k]) c.store_result(lane, o[k][0]);
        lane.mark(item_end, item_loop_unroll);
    }
}

// A transposition with a short side in registers: S vectors of C elements in, S * C elements out as
// 16-byte vectors through the warp's stage in shared memory, or the mirror (codegen's short_side()).
void short_side_lane(const Context& c, std::int64_t thread, Lane& lane) {
    const std::int64_t size = static_cast<std::int64_t>(c.destination_bytes());
    const std::int64_t S = c.s.short_extent, row = c.s.vector * size, vectors = S * row / kernel_vector_bytes;
    const std::int64_t short_stride = c.p.run_stride[0][0], count = c.p.kept_count;
    const bool rows_in = !c.s.short_source;
    const std::vector<int> accesses{0, 1};
    const auto strided = [&](std::uint64_t base, std::int64_t v) {
        return base + static_cast<std::uint64_t>(v * short_stride * size);
    };
    const auto contiguous = [&](std::uint64_t base, std::int64_t v) {
        return base + static_cast<std::uint64_t>(v * kernel_vector_bytes);
    };
    if (!rows_in) {
        for (std::int64_t item = thread; item < count; item += c.threads) {
            lane.begin_item();
            lane.issue(c.cost.item + static_cast<double>(S * row / 4) * c.cost.register_move);
            std::int64_t o[2] = {};
            c.split_index(item, accesses, o, lane);
            for (std::int64_t v = 0; v < vectors; ++v) {
                lane.load(static_cast<Site>(vector_in + v), contiguous(c.sources[0] + o[1] * size, v),
                          kernel_vector_bytes);
                lane.issue(c.cost.access);
            }
            for (std::int64_t v = 0; v < S; ++v) {
                lane.store(static_cast<Site>(vector_out + v), strided(c.destination + o[0] * size, v),
                           static_cast<std::size_t>(row));
                lane.issue(c.cost.access);
            }
            lane.mark(item_end, item_loop_unroll);
        }
        return;
    }
    // Whole warps iterate; the stage is the warp's.
    const std::int64_t stride = short_side_stage_stride(static_cast<int>(vectors));
    const std::int64_t group = short_side_stage_threads(static_cast<int>(vectors)), staged = group * vectors;
    const std::int64_t lane_index = thread % kernel_warp;
    const std::uint64_t stage = static_cast<std::uint64_t>(thread % c.block_threads / kernel_warp * group *
                                                           stride * kernel_vector_bytes);
    const auto stage_at = [&](std::int64_t of, std::int64_t k) {
        return stage + static_cast<std::uint64_t>((of * stride + k) * kernel_vector_bytes);
    };
    const BehaviourOptions unlimited{};
    for (std::int64_t base = thread - lane_index; base < count; base += c.threads) {
        lane.begin_item();
        lane.issue(c.cost.item + static_cast<double>(S * row / 4) * c.cost.register_move);
        // The destination offset of each thread of the warp (o0, which the stores shuffle).
        std::int64_t o0[kernel_warp] = {};
        Lane others(nullptr, unlimited);  // (the other threads' splits: issued by them)
        for (std::int64_t l = 0; l < kernel_warp; ++l) {
            std::int64_t o[2] = {};
            c.split_index(std::min(base + l, count - 1), accesses, o, l == lane_index ? lane : others);
            o0[l] = o[0];
            if (l != lane_index) continue;
            for (std::int64_t v = 0; v < S; ++v) {
                lane.load(static_cast<Site>(vector_in + v), strided(c.sources[0] + o[1] * size, v),
                          static_cast<std::size_t>(row));
                lane.issue(c.cost.access);
            }
        }
        for (std::int64_t first = 0, round = 0; first < kernel_warp; first += group, ++round) {
            if (lane_index / group == round)
                for (std::int64_t v = 0; v < vectors; ++v) {
                    lane.shared_store(static_cast<Site>(stage_in + 16 * round + v),
                                      stage_at(lane_index - first, v), kernel_vector_bytes);
                    lane.issue(c.cost.access);
                }
            for (std::int64_t j = 0; j * kernel_warp < staged; ++j) {
                const std::int64_t q = kernel_warp * j + lane_index, from = first + q / vectors,
                                   k = q % vectors;
                lane.shuffle();
                lane.issue(c.cost.shuffle + c.cost.magic_division);
                if (q >= staged || base + from >= count) continue;
                const std::int64_t store = 8 * round + j;  // the text's store statement
                lane.shared_load(static_cast<Site>(stage_out + store), stage_at(from - first, k),
                                 kernel_vector_bytes);
                lane.store(static_cast<Site>(vector_out + store),
                           contiguous(c.destination + o0[from] * size, k), kernel_vector_bytes);
                lane.issue(2 * c.cost.access);
            }
        }
        lane.mark(item_end, item_loop_unroll);
    }
}

// Tiles between a source-contiguous run (A) and a destination-contiguous one (B), double-buffered, one
// barrier a tile (codegen's tiles()).
void tiles_lane(const Context& c, std::int64_t block, std::int64_t thread, Lane& lane) {
    const int size = static_cast<int>(c.destination_bytes()), V = c.s.vector;
    const TileShape t = tile_shape(size, V);
    constexpr std::int64_t warps = tile_warps, warp_size = kernel_warp;
    const std::int64_t rows_b = t.b / warps, rows_a = t.a / warps;
    const std::int64_t words_a = t.a / V / warp_size, words_b = t.b / V / warp_size;
    const std::int64_t row = t.a + tile_pad(size, V), buffer = t.b * row;
    const std::int64_t lane_index = thread & 31, warp = thread >> 5;
    const std::size_t word = static_cast<std::size_t>(V * size);
    // The offsets of this thread's rows along the other side's strides of run r's modes.
    const auto row_offsets = [&](int r, std::int64_t rows) {
        std::vector<std::int64_t> offsets;
        for (std::int64_t k = 0; k < rows; ++k) {
            std::int64_t rest = warp + warps * k, offset = 0;
            for (int m = 0; m < c.s.runs[r]; ++m) {
                offset += rest % c.p.run_extent[r][m] * c.p.run_stride[r][m];
                rest /= c.p.run_extent[r][m];
            }
            offsets.push_back(offset);
        }
        lane.issue(static_cast<double>(rows * c.s.runs[r]) * (c.cost.magic_division + c.cost.offset32));
        return offsets;
    };
    const std::vector<std::int64_t> ob = row_offsets(1, rows_b), oa = row_offsets(0, rows_a);
    const int g = c.s.kept_rank;
    const std::vector<int> accesses{0, 1};
    std::int64_t parity = 0;
    std::map<std::pair<std::int64_t, std::int64_t>, Lane::Counts> tile_counts;
    for (std::int64_t tile = block; tile < c.p.kept_count; tile += c.launch.grid.x) {
        lane.begin_item();
        lane.issue(c.cost.item);
        std::int64_t o[2] = {};
        const auto coordinate = c.split_index(tile, accesses, o, lane);
        const std::int64_t na = std::min(c.p.run_length[0] -
                                             coordinate[static_cast<std::size_t>(g - 2)] * c.p.run_tile[0],
                                         c.p.run_tile[0]),
                           nb = std::min(c.p.run_length[1] -
                                             coordinate[static_cast<std::size_t>(g - 1)] * c.p.run_tile[1],
                                         c.p.run_tile[1]);
        const std::int64_t base = parity * buffer;
        parity ^= 1;
        const bool full = na == t.a && nb == t.b;
        // A tile past the limits counts what the first of its extents did (it emits nothing).
        const auto counted = tile_counts.find({na, nb});
        if (counted != tile_counts.end() && !lane.emitting()) {
            lane.add(counted->second);
            continue;
        }
        const Lane::Counts before = lane.counts();
        const double check = full ? 0 : c.cost.edge_check;
        const double moved = c.cost.tile_word + (V > 1 ? V * c.cost.tile_part : 0);
        for (std::int64_t k = 0; k < rows_b; ++k)
            for (std::int64_t h = 0; h < words_a; ++h) {
                const std::int64_t element = V * (lane_index + warp_size * h);
                if (full || (warp + warps * k < nb && element < na))
                    lane.load(full ? term0 : edge_term,
                              c.at(c.sources[0], o[1] + ob[static_cast<std::size_t>(k)] + element,
                                   static_cast<std::size_t>(size)),
                              word);
                lane.issue(check + moved / 2);
            }
        for (std::int64_t k = 0; k < rows_b; ++k)
            for (std::int64_t h = 0; h < words_a; ++h)
                for (std::int64_t j = 0; j < V; ++j) {
                    const std::int64_t at =
                        base + (warp + warps * k) * row + V * (lane_index + warp_size * h) + j;
                    lane.shared_store(V == 1 ? tile_in : static_cast<Site>(tile_in_part + j),
                                      static_cast<std::uint64_t>(at * size), static_cast<std::size_t>(size));
                }
        lane.barrier();
        for (std::int64_t k = 0; k < rows_a; ++k)
            for (std::int64_t h = 0; h < words_b; ++h) {
                for (std::int64_t j = 0; j < V; ++j) {
                    const std::int64_t at =
                        base + (V * (lane_index + warp_size * h) + j) * row + warp + warps * k;
                    lane.shared_load(V == 1 ? tile_out : static_cast<Site>(tile_out_part + j),
                                     static_cast<std::uint64_t>(at * size), static_cast<std::size_t>(size));
                }
                const std::int64_t element = V * (lane_index + warp_size * h);
                if (full || (warp + warps * k < na && element < nb))
                    lane.store(output,
                               c.at(c.destination, o[0] + oa[static_cast<std::size_t>(k)] + element,
                                    static_cast<std::size_t>(size)),
                               word);
                lane.issue(check + moved / 2);
            }
        if (!lane.emitting()) tile_counts.emplace(std::pair{na, nb}, lane.counts() - before);
    }
}

// The end of one output's (or chunk's) reduction (codegen's result()).
void reduction_result(const Context& c, Lane& lane, std::int64_t part, std::int64_t out,
                      const std::int64_t* o) {
    if (c.s.partials) {
        const std::size_t bytes = c.accumulator_bytes();
        lane.store(partial, c.at(c.scratch, part * c.p.kept_count + out, bytes), bytes);
        lane.issue(c.cost.access);
    } else {
        c.store_result(lane, o[0]);
    }
}

// A row's chunk [begin, end) as the 16-byte vectors that hold it: the elements before the first boundary, the
// vectors (lane l's are l, l + 32, ...), the elements after them (codegen's row_vectors()).
void row_vectors_lane(const Context& c, Lane& lane, std::int64_t lane_index, std::int64_t begin,
                      std::int64_t end, const std::int64_t* o) {
    const std::size_t size = c.source_bytes(0);
    const std::int64_t V = c.s.vector, step = kernel_warp * V;
    const std::uint64_t address = c.at(c.sources[0], o[1] + begin, size);
    const auto head = static_cast<std::int64_t>((kernel_vector_bytes - address % kernel_vector_bytes) %
                                                kernel_vector_bytes / size);
    const std::int64_t first = end - begin < head ? end : begin + head;
    const std::int64_t whole = first + (end - first) / V * V;
    lane.issue(3 * c.cost.access);  // head, first, whole
    const auto element = [&](Site site, std::int64_t at) {
        lane.load(site, c.at(c.sources[0], o[1] + at, size), size);
        lane.issue(c.cost.access + c.element_cost());
    };
    if (begin + lane_index < first) element(edge_element, begin + lane_index);
    for (std::int64_t t = first + lane_index * V; t < whole; t += step) {
        const Lane::Counts before = lane.counts();
        lane.begin_term();
        lane.load(term0, c.at(c.sources[0], o[1] + t, size), kernel_vector_bytes);
        lane.issue(c.cost.term + static_cast<double>(V) * (c.element_cost() + c.cost.register_move));
        lane.mark(fold_end, term_loop_unroll(c.s));
        if (lane.past_term_limit()) {  // the iterations after this one, counted as it was
            lane.add(lane.counts() - before, (whole - t - 1) / step);
            break;
        }
    }
    lane.end_terms();
    if (whole + lane_index < end) element(static_cast<Site>(edge_element + 1), whole + lane_index);
}

// A warp per output, or per chunk of one (codegen's reduce_rows()).
void reduce_rows_lane(const Context& c, std::int64_t block, std::int64_t thread, Lane& lane) {
    const std::int64_t lane_index = thread & 31, warp = (block * c.block_threads + thread) >> 5,
                       warps = c.threads >> 5;
    const std::int64_t outputs = c.p.kept_count, items = outputs * c.p.split;
    const std::vector<int> accesses = c.kept_accesses(!c.s.partials);
    for (std::int64_t item = warp; item < items; item += warps) {
        lane.begin_item();
        lane.issue(c.cost.item + c.cost.division + 2 * c.cost.access);  // out, part; begin, end
        const std::int64_t out = item % outputs, part = item / outputs;
        std::int64_t o[1 + max_kernel_sources] = {};
        c.decompose(out, true, c.s.kept_rank, accesses, o, lane);
        const std::int64_t begin = part * c.p.chunk, end = std::min(begin + c.p.chunk, c.p.reduced_count);
        if (c.s.vector > 0)
            row_vectors_lane(c, lane, lane_index, begin, end, o);
        else
            c.fold_terms(lane, begin + lane_index, end, kernel_warp, o);
        for (int delta = kernel_warp / 2; delta > 0; delta >>= 1) {
            lane.shuffle();
            lane.issue(c.cost.shuffle);
        }
        if (lane_index == 0) reduction_result(c, lane, part, out, o);
        lane.mark(item_end, item_loop_unroll);
    }
}

// A thread per output, or per chunk of one; with vectors, V neighbouring outputs a thread (codegen's
// reduce_columns()).
void reduce_columns_lane(const Context& c, std::int64_t thread, Lane& lane) {
    const std::int64_t per_item = c.s.vector > 0 ? c.s.vector : 1;
    const std::int64_t outputs = c.p.kept_count, groups = outputs / per_item, items = groups * c.p.split;
    const std::vector<int> accesses = c.kept_accesses(!c.s.partials);
    for (std::int64_t item = thread; item < items; item += c.threads) {
        lane.begin_item();
        lane.issue(c.cost.item + c.cost.division + 2 * c.cost.access);  // out, part; begin, end
        const std::int64_t out = item % groups * per_item, part = item / groups;
        std::int64_t o[1 + max_kernel_sources] = {};
        c.decompose(out, true, c.s.kept_rank, accesses, o, lane);
        const std::int64_t begin = part * c.p.chunk, end = std::min(begin + c.p.chunk, c.p.reduced_count);
        c.fold_terms(lane, begin, end, 1, o, c.s.vector);
        if (c.s.vector == 0) {
            reduction_result(c, lane, part, out, o);
        } else {
            const std::size_t bytes = c.accumulator_bytes();
            for (std::int64_t k = 0; k < per_item; ++k)
                if (c.s.partials) {
                    lane.store(partial, c.at(c.scratch, part * outputs + out + k, bytes), bytes);
                    lane.issue(c.cost.access);
                } else {
                    c.store_result(lane, o[0] + k * c.p.kept_stride[0][c.s.kept_rank - 1]);
                }
        }
        lane.mark(item_end, item_loop_unroll);
    }
}

// Each output's partial results folded in chunk order (codegen's finalize()).
void finalize_lane(const Context& c, std::int64_t thread, Lane& lane) {
    const std::int64_t outputs = c.p.kept_count;
    const std::size_t bytes = c.accumulator_bytes();
    const std::vector<int> accesses{0};
    for (std::int64_t out = thread; out < outputs; out += c.threads) {
        lane.begin_item();
        lane.issue(c.cost.item);
        std::int64_t o[1] = {};
        c.decompose(out, true, c.s.kept_rank, accesses, o, lane);
        for (std::int64_t chunk = 0; chunk < c.p.split; ++chunk) {
            lane.begin_term();
            lane.load(partial_in, c.at(c.scratch, chunk * outputs + out, bytes), bytes);
            lane.issue(c.cost.term + fold_cost(c.s.op));
            lane.mark(fold_end, term_loop_unroll(c.s));
        }
        lane.end_terms();
        c.store_result(lane, o[0]);
        lane.mark(item_end, item_loop_unroll);
    }
}

// The gradient of max, min or prod: a thread per group, which walks its terms twice (codegen's route()).
void route_lane(const Context& c, std::int64_t thread, Lane& lane) {
    const std::size_t x_bytes = c.source_bytes(0), grad_bytes = c.source_bytes(1);
    const bool product = info_of(c.s.op).combine == Combine::multiply;
    const std::vector<int> accesses{0, 1, 2};
    // One walk over the group's terms: x's term (and, in the second walk, the destination's share).
    const auto walk = [&](const std::int64_t* o, bool second) {
        for (std::int64_t r = 0; r < c.p.reduced_count; ++r) {
            lane.begin_term();
            std::int64_t q[3] = {o[0], o[1], o[2]};
            const std::vector<int> walked = second ? std::vector<int>{0, 1} : std::vector<int>{1};
            if (c.s.reduced_rank == 1)
                for (const int a : walked) q[a] += r * c.p.reduced_stride[a][0];
            else if (c.s.reduced_rank > 1)
                c.decompose(r, false, c.s.reduced_rank, walked, q, lane);
            lane.load(second ? walk_term : term0, c.at(c.sources[0], q[1], x_bytes), x_bytes);
            lane.issue(c.cost.term + fold_cost(c.s.op) +
                       (narrow_float(c.s.sources[0]) ? c.cost.conversion : 0));
            if (second) c.store_result(lane, q[0]);
            lane.mark(second ? walk_end : fold_end, term_loop_unroll(c.s));
        }
        lane.end_terms();
    };
    for (std::int64_t i = thread; i < c.p.kept_count; i += c.threads) {
        lane.begin_item();
        lane.issue(c.cost.item);
        std::int64_t o[3] = {};
        c.decompose(i, true, c.s.kept_rank, accesses, o, lane);
        lane.load(gradient, c.at(c.sources[1], o[2], grad_bytes), grad_bytes);
        if (!product) lane.load(first_term, c.at(c.sources[0], o[1], x_bytes), x_bytes);
        lane.issue(c.cost.access * (product ? 1 : 2));
        walk(o, false);
        walk(o, true);
        lane.mark(item_end, item_loop_unroll);
    }
}

// The source's run read as 16-byte vectors, folded per column, then across the warp, the block and the
// blocks (codegen's one_pass()): the last block is block grid - 1 - blocks run in index order, or a
// sample of them whose others have arrived before (tests/emulation_model_test.cpp).
void one_pass_lane(const Context& c, std::int64_t block, std::int64_t thread, Lane& lane) {
    const std::int64_t size = static_cast<std::int64_t>(c.source_bytes(0)),
                       lanes = kernel_vector_bytes / size;
    const std::int64_t columns = c.p.kept_count, n = columns * c.p.reduced_count;
    const std::size_t acc = c.accumulator_bytes();
    const std::int64_t lead = static_cast<std::int64_t>(c.sources[0] & 15) / size;
    const std::uint64_t vectors = c.sources[0] - static_cast<std::uint64_t>(lead * size);
    const std::int64_t first = lead > 0 ? 1 : 0, full_end = (lead + n) / lanes;
    const std::int64_t low = columns & -columns, period = columns / std::min(low, lanes);
    const std::int64_t stride = c.threads / period * period;
    const std::int64_t t = block * c.block_threads + thread;
    constexpr int batch = one_pass_batch;
    const auto vector_at = [&](std::int64_t w) { return vectors + static_cast<std::uint64_t>(w * 16); };
    if (t < stride) {
        std::int64_t w = t < first ? t + stride : t;
        for (; w + (batch - 1) * stride < full_end; w += batch * stride) {
            lane.begin_item();
            for (int b = 0; b < batch; ++b)
                lane.load(static_cast<Site>(batch_vector + b), vector_at(w + b * stride),
                          kernel_vector_bytes);
            lane.issue(c.cost.item +
                       batch * (c.cost.access + static_cast<double>(lanes) * fold_cost(c.s.op)));
            lane.mark(one_pass_end, one_pass_batch_unroll);
        }
        for (; w < full_end; w += stride) {
            lane.begin_item();
            lane.load(remainder_vector, vector_at(w), kernel_vector_bytes);
            lane.issue(c.cost.item + c.cost.access + static_cast<double>(lanes) * fold_cost(c.s.op));
            lane.mark(remainder_end, one_pass_remainder_unroll);
        }
        const bool head = lead > 0 && t == 0;
        const bool tail =
            lead + n != full_end * lanes && full_end % stride == t && !(lead > 0 && full_end == 0);
        for (int e = 0; e < 2; ++e) {
            if (!(e == 0 ? head : tail)) continue;
            const std::int64_t at = (e == 0 ? 0 : full_end) * lanes - lead;
            for (std::int64_t k = 0; k < lanes; ++k)
                if (at + k >= 0 && at + k < n) {
                    lane.load(static_cast<Site>(edge_element + k),
                              c.at(c.sources[0], at + k, c.source_bytes(0)), c.source_bytes(0));
                    lane.issue(c.cost.access + fold_cost(c.s.op));
                }
        }
    }
    // Same-column accumulators in registers: `live` of them hold values after.
    std::int64_t live = lanes;
    for (std::int64_t h = lanes / 2; h >= 1; h /= 2)
        if (h % columns == 0) live = h;
    std::int64_t top = period;
    while (top * 2 < kernel_warp) top *= 2;
    for (std::int64_t delta = top; delta >= period; delta >>= 1)
        for (std::int64_t k = 0; k < live; ++k) {
            lane.shuffle();
            lane.issue(c.cost.shuffle);
        }
    // Shared memory: the warps' rows of columns, then the last block's rows, then its flag.
    const std::int64_t warps = one_pass_block_threads / kernel_warp;
    const std::uint64_t block_rows = static_cast<std::uint64_t>(warps * kernel_warp) * acc;
    const std::uint64_t flag = block_rows + static_cast<std::uint64_t>(one_pass_block_threads) * acc;
    const std::int64_t lane_index = thread & 31, warp = thread >> 5;
    const auto warp_column = [&](std::int64_t w, std::int64_t column) {
        return static_cast<std::uint64_t>(w * kernel_warp + column) * acc;
    };
    if (lane_index < columns) lane.shared_store(warp_identity, warp_column(warp, lane_index), acc);
    const std::int64_t base = ((lanes * t) % columns + columns - lead % columns) % columns;
    for (std::int64_t k = 0; k < live; ++k)
        if (lane_index < period) {
            const std::uint64_t at = warp_column(warp, (base + k) % columns);
            lane.shared_load(static_cast<Site>(warp_column_in + k), at, acc);
            lane.shared_store(static_cast<Site>(warp_column_out + k), at, acc);
        }
    lane.barrier();
    if (thread < columns)
        for (std::int64_t w = 0; w < warps; ++w) lane.shared_load(warp_row_in, warp_column(w, thread), acc);
    // The column's output: its offset in the destination.
    const auto store_column = [&] {
        std::int64_t o[1] = {};
        const int access[] = {0};
        c.decompose(thread, true, c.s.kept_rank, access, o, lane);
        c.store_result(lane, o[0]);
    };
    if (c.launch.grid.x == 1) {
        if (thread < columns) store_column();
        return;
    }
    const std::uint64_t partials = c.scratch + one_pass_counter_bytes;
    if (thread < columns) {
        lane.store(partial, partials + static_cast<std::uint64_t>(block * columns + thread) * acc, acc);
        lane.issue(c.cost.access);
    }
    lane.barrier();
    if (thread == 0) lane.shared_store(last_flag_out, flag, 4);
    lane.barrier();
    lane.shared_load(last_flag_in, flag, 4);
    const auto grid = static_cast<std::int64_t>(c.launch.grid.x);
    if (block != grid - 1) return;
    std::int64_t rows = 1;
    while (rows * 2 * columns <= one_pass_block_threads) rows *= 2;
    const std::int64_t column = thread % columns, r = thread / columns;
    const auto row_at = [&](std::int64_t row) {
        return block_rows + static_cast<std::uint64_t>(row * columns + column) * acc;
    };
    if (r < rows) {
        for (std::int64_t g = r; g < grid; g += rows) {
            lane.begin_term();
            lane.load(partial_in, partials + static_cast<std::uint64_t>(g * columns + column) * acc, acc);
            lane.issue(c.cost.term + fold_cost(c.s.op));
            lane.mark(partials_end, term_loop_unroll(c.s));
        }
        lane.end_terms();
        lane.shared_store(block_row_out, row_at(r), acc);
    }
    for (std::int64_t h = rows / 2; h > 0; h >>= 1) {
        lane.barrier();
        if (r < h) {
            lane.shared_load(tree_in_high, row_at(r + h), acc);
            lane.shared_load(tree_in_low, row_at(r), acc);
            lane.shared_store(tree_out, row_at(r), acc);
        }
    }
    if (thread < columns) {
        lane.shared_load(row_result_in, block_rows + static_cast<std::uint64_t>(thread) * acc, acc);
        store_column();
    }
}

// Rows of at most a warp of 16-byte chunks, a few lanes a row, gathered for the stores (codegen's
// short_rows()).
void short_rows_lane(const Context& c, std::int64_t block, std::int64_t thread, Lane& lane) {
    const std::int64_t size = static_cast<std::int64_t>(c.source_bytes(0)),
                       lanes = kernel_vector_bytes / size;
    const std::int64_t rows = c.p.kept_count, terms = c.p.reduced_count;
    const std::int64_t chunks = ceil_div(terms, lanes);
    std::int64_t row_lanes = 1;
    while (row_lanes < chunks) row_lanes <<= 1;
    const std::int64_t per_group = kernel_warp / row_lanes, batch_rows = short_rows_batch * per_group;
    const std::int64_t lane_index = thread & 31, begin = (lane_index & (row_lanes - 1)) * lanes;
    const std::int64_t warp = (block * c.block_threads + thread) >> 5, warps = c.threads >> 5;
    bool aligned = (c.sources[0] & 15) == 0;
    for (int k = 0; k < c.s.kept_rank; ++k) aligned = aligned && (c.p.kept_stride[1][k] * size) % 16 == 0;
    const bool whole = aligned && begin + lanes <= terms;
    const std::vector<int> source{1}, destination{0};
    for (std::int64_t first = warp * batch_rows; first < rows; first += warps * batch_rows) {
        lane.begin_item();
        lane.issue(c.cost.item);
        std::int64_t s[short_rows_batch] = {};
        bool in[short_rows_batch] = {};
        for (int q = 0; q < short_rows_batch; ++q) {
            const std::int64_t row = first + q * per_group + lane_index / row_lanes;
            in[q] = row < rows && begin < terms;
            std::int64_t o[2] = {};
            c.decompose(row, true, c.s.kept_rank, source, o, lane);
            s[q] = o[1];
            if (whole && in[q]) {
                lane.load(static_cast<Site>(batch_vector + q),
                          c.at(c.sources[0], s[q] + begin, c.source_bytes(0)), kernel_vector_bytes);
                lane.issue(c.cost.access + static_cast<double>(lanes) * fold_cost(c.s.op));
            }
        }
        for (int q = 0; q < short_rows_batch; ++q)
            if (!whole && in[q])
                for (std::int64_t k = 0; k < lanes; ++k)
                    if (begin + k < terms) {
                        lane.load(static_cast<Site>(edge_element + 32 * q + k),
                                  c.at(c.sources[0], s[q] + begin + k, c.source_bytes(0)), c.source_bytes(0));
                        lane.issue(c.cost.access + fold_cost(c.s.op));
                    }
        for (std::int64_t mask = row_lanes >> 1; mask > 0; mask >>= 1)
            for (int q = 0; q < short_rows_batch; ++q) {
                lane.shuffle();
                lane.issue(c.cost.shuffle);
            }
        for (std::int64_t k = 0; k * 32 < batch_rows; ++k) {
            for (int q = 0; q < short_rows_batch; ++q) {
                lane.shuffle();
                lane.issue(c.cost.shuffle);
            }
            const std::int64_t j = k * 32 + lane_index, row = first + j;
            if (j < batch_rows && row < rows) {
                std::int64_t o[1] = {};
                c.decompose(row, true, c.s.kept_rank, destination, o, lane);
                c.store_result(lane, o[0]);
            }
        }
        lane.mark(item_end, item_loop_unroll);
    }
}

// Rows packed P = s.vector to a 16-byte vector: a warp's vector batches, each lane's rows into the warp's
// stage and out of it as 32 consecutive rows a store; then the rows after the whole vectors, a row a thread
// (codegen's packed_rows()).
void packed_rows_lane(const Context& c, std::int64_t block, std::int64_t thread, Lane& lane) {
    const std::size_t size = c.source_bytes(0), acc = c.accumulator_bytes();
    const std::int64_t P = c.s.vector, R = kernel_vector_bytes / static_cast<std::int64_t>(size) / P;
    const std::int64_t S = packed_rows_stage_stride(c.s.vector), B = packed_rows_batch;
    const std::int64_t rows = c.p.kept_count, global = block * c.block_threads + thread;
    const std::int64_t lane_index = thread & 31, warp = global >> 5, warps = c.threads >> 5;
    const std::int64_t vectors = (c.sources[0] & 15) == 0 ? rows / P : 0;
    const auto own = static_cast<std::uint64_t>((thread >> 5) * kernel_warp * S) * acc;  // the warp's stage
    const std::vector<int> destination{0};
    const auto store_row = [&](std::int64_t row, Site site, Site old_site) {
        std::int64_t o[1] = {};
        c.decompose(row, true, c.s.kept_rank, destination, o, lane);
        c.store_result(lane, o[0], site, old_site);
    };
    const std::int64_t step = warps * kernel_warp * B;
    for (std::int64_t first = warp * kernel_warp * B; first < vectors; first += step) {
        const Lane::Counts before = lane.counts();
        lane.begin_item();
        lane.issue(c.cost.item);
        for (std::int64_t b = 0; b < B; ++b)
            if (first + kernel_warp * b + lane_index < vectors) {
                lane.load(static_cast<Site>(batch_vector + b),
                          c.at(c.sources[0], (first + kernel_warp * b + lane_index) * P * R, size),
                          kernel_vector_bytes);
                lane.issue(c.cost.access);
            }
        for (std::int64_t b = 0; b < B; ++b) {
            for (std::int64_t k = 0; k < P; ++k) {
                lane.issue(static_cast<double>(R) * (c.element_cost() + c.cost.register_move));
                lane.shared_store(static_cast<Site>(packed_stage_in + 8 * b + k),
                                  own + static_cast<std::uint64_t>(lane_index * S + k) * acc, acc);
            }
            for (std::int64_t j = 0; j < P; ++j) {
                const std::int64_t q = kernel_warp * j + lane_index, row = (first + kernel_warp * b) * P + q;
                lane.issue(c.cost.access);
                if (row < vectors * P) {
                    lane.shared_load(static_cast<Site>(packed_stage_out + 8 * b + j),
                                     own + static_cast<std::uint64_t>(q / P * S + q % P) * acc, acc);
                    store_row(row, static_cast<Site>(packed_output + 8 * b + j),
                              static_cast<Site>(packed_old_output + 8 * b + j));
                }
            }
        }
        lane.mark(item_end, item_loop_unroll);
        if (!lane.emitting()) {  // the iterations after this one, counted as it was
            lane.add(lane.counts() - before, (vectors - first - 1) / step);
            break;
        }
    }
    for (std::int64_t row = vectors * P + global; row < rows; row += c.threads) {
        lane.begin_item();
        for (std::int64_t e = 0; e < R; ++e) {
            lane.load(static_cast<Site>(edge_element + e), c.at(c.sources[0], row * R + e, size), size);
            lane.issue(c.cost.access + c.element_cost());
        }
        store_row(row, output, old_output);
        lane.mark(item_end, item_loop_unroll);
    }
}

// Runs thread `thread` of block `block` through its kind's lane program.
void run_lane(const Context& c, std::int64_t block, std::int64_t thread, Lane& lane) {
    const std::int64_t global = block * c.block_threads + thread;
    switch (c.s.kind) {
    case KernelKind::elementwise: elementwise_lane(c, global, lane); break;
    case KernelKind::permute: permute_lane(c, block, thread, lane); break;
    case KernelKind::vector_copy: vector_copy_lane(c, global, lane); break;
    case KernelKind::short_side: short_side_lane(c, global, lane); break;
    case KernelKind::tiles: tiles_lane(c, block, thread, lane); break;
    case KernelKind::reduce_rows: reduce_rows_lane(c, block, thread, lane); break;
    case KernelKind::reduce_columns: reduce_columns_lane(c, global, lane); break;
    case KernelKind::finalize: finalize_lane(c, global, lane); break;
    case KernelKind::route: route_lane(c, global, lane); break;
    case KernelKind::reduce_one_pass: one_pass_lane(c, block, thread, lane); break;
    case KernelKind::reduce_short_rows: short_rows_lane(c, block, thread, lane); break;
    case KernelKind::reduce_packed_rows: packed_rows_lane(c, block, thread, lane); break;
    }
}

// ---- closed form: HBM bytes ------------------------------------------------------------------------------

// Access `a`'s layout over the launch's kept and reduced modes.
Layout access_layout(const KernelParams& p, const KernelSignature& s, int a) {
    Layout layout;
    for (int m = 0; m < s.kept_rank; ++m) layout.modes.push_back({p.kept_extent[m], p.kept_stride[a][m]});
    for (int m = 0; m < s.reduced_rank; ++m)
        layout.modes.push_back({p.reduced_extent[m], p.reduced_stride[a][m]});
    return layout;
}

// How many times an elementwise kernel reads each sector of source `a` from HBM. It walks the destination
// in order; along a kept mode whose source stride is under a sector, neighbouring elements share a sector,
// and come back one index of that mode later - every `span` flat indices, that is after span * (bytes per
// index) of traffic. Beyond the L2's reuse limit, each comes back from HBM.
double elementwise_rereads(const Context& c, int a, double bytes_per_index, double reuse_limit) {
    const double element = static_cast<double>(c.source_bytes(static_cast<std::size_t>(a - 1)));
    double factor = 1, span = 1;
    for (int m = c.s.kept_rank - 1; m >= 0; --m) {
        const double stride = std::fabs(static_cast<double>(c.p.kept_stride[a][m])) * element;
        const double extent = static_cast<double>(c.p.kept_extent[m]);
        if (extent > 1 && stride > 0 && stride < sector_size && span * bytes_per_index > reuse_limit)
            factor *= std::min(extent, sector_size / stride);
        span *= extent;
    }
    return std::min(factor, sector_size / element);
}

struct Traffic {
    double read = 0, write = 0, reread = 1;
};

// The whole copy a tiles or short_side launch makes, as layouts of the destination and the source: the
// kept modes (tiles: but the runs' chunks) and the modes inside each tile or register block.
std::pair<Layout, Layout> copy_layouts(const Context& c) {
    const KernelParams& p = c.p;
    const KernelSignature& s = c.s;
    Layout dst, src;
    const int batch = s.kind == KernelKind::tiles ? s.kept_rank - 2 : s.kept_rank;
    for (int m = 0; m < batch; ++m) {
        dst.modes.push_back({p.kept_extent[m], p.kept_stride[0][m]});
        src.modes.push_back({p.kept_extent[m], p.kept_stride[1][m]});
    }
    if (s.kind == KernelKind::short_side) {  // S short rows of C elements, S * C contiguous on the other side
        const std::int64_t S = s.short_extent, C = s.vector;
        Layout& rows = s.short_source ? dst : src;
        Layout& block = s.short_source ? src : dst;
        rows.modes.push_back({S, p.run_stride[0][0]});
        rows.modes.push_back({C, 1});
        block.modes.push_back({S * C, 1});
        return {dst, src};
    }
    for (int r = 0; r < 2; ++r) {  // each run: contiguous on its own side, run_stride on the other
        Layout& own = r == 0 ? src : dst;
        Layout& other = r == 0 ? dst : src;
        std::int64_t inner = 1;
        for (int m = 0; m < s.runs[r]; ++m) {
            const std::int64_t extent = m + 1 == s.runs[r] ? p.run_length[r] / inner : p.run_extent[r][m];
            own.modes.push_back({extent, inner});
            other.modes.push_back({extent, p.run_stride[r][m]});
            inner *= extent;
        }
    }
    return {dst, src};
}

Traffic hbm_traffic(const Context& c, double reuse_limit) {
    Traffic t;
    const KernelSignature& s = c.s;
    const auto footprint = [&](int a, std::size_t bytes) {
        return sector_footprint(access_layout(c.p, s, a), bytes) * sector_size;
    };
    // The partial results: one dense array in the scratch, on a sector boundary.
    const double partials = std::ceil(static_cast<double>(c.p.kept_count) * static_cast<double>(c.p.split) *
                                      static_cast<double>(c.accumulator_bytes()) / sector_size) *
                            sector_size;
    switch (s.kind) {
    case KernelKind::finalize: t.read = partials; break;
    case KernelKind::short_side:
    case KernelKind::tiles: {  // each element read once and written once: no epilogue
        const auto [dst, src] = copy_layouts(c);
        t.read = sector_footprint(src, c.source_bytes(0)) * sector_size;
        t.write = sector_footprint(dst, c.destination_bytes()) * sector_size;
        return t;
    }
    case KernelKind::reduce_one_pass: {
        // The run from its first element (on a sector boundary, as footprints assume); with more than one
        // block, the blocks' partial results after the counter, written once and read by the last block.
        const double run = static_cast<double>(c.p.kept_count) * static_cast<double>(c.p.reduced_count);
        t.read = std::ceil(run * static_cast<double>(c.source_bytes(0)) / sector_size) * sector_size;
        if (c.launch.grid.x > 1) {
            const double scratch =
                std::ceil((static_cast<double>(one_pass_counter_bytes) +
                           static_cast<double>(c.launch.grid.x) * static_cast<double>(c.p.kept_count) *
                               static_cast<double>(c.accumulator_bytes())) /
                          sector_size) *
                sector_size;
            t.read += scratch;
            t.write += scratch;
        }
        break;
    }
    case KernelKind::reduce_short_rows:
    case KernelKind::reduce_packed_rows: {
        Layout rows = access_layout(c.p, s, 1);  // the rows: their terms along one unit-stride mode
        t.read = sector_footprint(rows, c.source_bytes(0)) * sector_size;
        break;
    }
    case KernelKind::elementwise:
    case KernelKind::permute: {
        double per_index = static_cast<double>(c.destination_bytes());
        for (std::size_t k = 0; k < s.sources.size(); ++k)
            per_index += static_cast<double>(c.source_bytes(k)) * static_cast<double>(c.p.reduced_count);
        for (std::size_t k = 0; k < s.sources.size(); ++k) {
            const double rereads = elementwise_rereads(c, static_cast<int>(k) + 1, per_index, reuse_limit);
            t.reread = std::max(t.reread, rereads);
            t.read += footprint(static_cast<int>(k) + 1, c.source_bytes(k)) * rereads;
        }
        break;
    }
    case KernelKind::vector_copy:
    case KernelKind::reduce_rows:
    case KernelKind::reduce_columns:
    case KernelKind::route:
        for (std::size_t k = 0; k < s.sources.size(); ++k)
            t.read += footprint(static_cast<int>(k) + 1, c.source_bytes(k));
        break;
    }
    if (s.partials) {
        t.write = partials;
    } else {
        const double scratch = t.write;  // (reduce_one_pass's partial results)
        Layout kept;  // the destination, once per output (stride 0 along the reduced modes)
        for (int m = 0; m < s.kept_rank; ++m)
            kept.modes.push_back({c.p.kept_extent[m], c.p.kept_stride[0][m]});
        if (s.kind == KernelKind::route) kept = access_layout(c.p, s, 0);
        t.write = sector_footprint(kept, c.destination_bytes()) * sector_size;
        if (s.epilogue.reads_output()) t.read += t.write;
        t.write += scratch;
    }
    return t;
}

}  // namespace

std::vector<LaneEvent> lane_events(const KernelLaunch& launch, const BehaviourOptions& options,
                                   unsigned block, unsigned thread) {
    BehaviourOptions unlimited = options;
    unlimited.emitted_items = unlimited.emitted_terms = 0;
    const Context c(launch, unlimited);
    std::vector<LaneEvent> events;
    Lane lane(&events, unlimited);
    run_lane(c, block, thread, lane);
    return events;
}

KernelBehaviour behaviour_of(const KernelLaunch& launch, const BehaviourOptions& options) {
    const Context c(launch, options);
    KernelBehaviour b;
    // The warps that run: every one, or an even spread that keeps the first and the last; or every warp of
    // the blocks asked for.
    const std::int64_t warps_per_block = (c.block_threads + kernel_warp - 1) / kernel_warp;
    const std::int64_t warps = warps_per_block * launch.grid.x;
    std::vector<std::int64_t> chosen;
    for (const unsigned block : options.blocks)
        for (std::int64_t w = 0; w < warps_per_block; ++w) chosen.push_back(block * warps_per_block + w);
    const std::int64_t sampled = !chosen.empty() ? std::ssize(chosen)
                                 : options.sampled_warps <= 0 || warps <= options.sampled_warps
                                     ? warps
                                     : options.sampled_warps;
    const double weight = static_cast<double>(warps) / static_cast<double>(sampled);
    b.exact = sampled == warps && chosen.empty();
    TraceStatistics total;
    for (std::int64_t k = 0; k < sampled; ++k) {
        std::int64_t w = !chosen.empty()    ? chosen[static_cast<std::size_t>(k)]
                         : sampled == warps ? k
                         : sampled == 1     ? 0
                                            : k * (warps - 1) / (sampled - 1);
        // (reduce_one_pass: the last block's first warp, not its last, stands for it - the one that folds
        // the blocks' partial results, the busiest)
        if (chosen.empty() && sampled < warps && k == sampled - 1 &&
            launch.signature.kind == KernelKind::reduce_one_pass)
            w = warps - warps_per_block;
        const std::int64_t block = w / warps_per_block, first = w % warps_per_block * kernel_warp;
        std::vector<std::vector<LaneEvent>> lanes(kernel_warp);
        double accesses = 0, emitted = 0, issued = 0;
        for (std::int64_t l = 0; l < kernel_warp && first + l < c.block_threads; ++l) {
            Lane lane(&lanes[static_cast<std::size_t>(l)], options);
            run_lane(c, block, first + l, lane);
            accesses += lane.counted();
            emitted += lane.emitted();
            issued = std::max(issued, lane.issued());  // a warp issues as its busiest lane
        }
        TraceStatistics warp = warp_statistics(lanes);
        // What ran stands for the whole: the loads counted beyond the limits scale what was emitted.
        const double scale = emitted > 0 ? accesses / emitted : 1;
        if (scale != 1) b.exact = false;
        warp.longest_chain *= scale;
        warp.issued = issued;
        TraceStatistics scaled;
        scaled.add(warp, scale);
        scaled.issued = issued;  // counted in full, not emitted
        total.add(scaled, weight);
        b.statistics.add(warp, 1);
    }
    b.load_sector_efficiency = total.load_sector_efficiency();
    b.store_sector_efficiency = total.store_sector_efficiency();
    b.sector_efficiency = total.sector_efficiency();
    b.whole_sector_share = total.whole_sector_share();
    b.active_lane_share = total.active_lane_share();
    b.batch_bytes = total.batch_bytes();
    b.bank_ways = total.bank_ways();
    b.serial_chain = std::ceil(total.longest_chain - 1e-9);
    b.warp_batches = total.warp_batches;
    b.load_bytes = total.load_bytes;
    b.store_bytes = total.store_bytes;
    b.warp_instructions = total.issued;
    const Traffic traffic = hbm_traffic(c, options.reuse_limit_bytes);
    b.hbm_read_bytes = traffic.read;
    b.hbm_write_bytes = traffic.write;
    b.reread_factor = traffic.reread;
    switch (launch.signature.kind) {
    case KernelKind::tiles: b.barrier_rounds = true; break;
    case KernelKind::finalize: b.reads_scratch = true; break;
    case KernelKind::elementwise:
    case KernelKind::permute:
    case KernelKind::vector_copy:
    case KernelKind::short_side:
    case KernelKind::reduce_rows:
    case KernelKind::reduce_columns:
    case KernelKind::route:
    case KernelKind::reduce_one_pass:
    case KernelKind::reduce_short_rows:
    case KernelKind::reduce_packed_rows: break;
    }
    return b;
}

}  // namespace einc
