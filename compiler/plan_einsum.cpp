// Planning einsum: reduce axes that only one operand has, contract the operands pairwise in the order
// contraction_order() finds, and map every pairwise contraction with a summed axis to one strided-batched
// GEMM - copying an operand into a GEMM-friendly layout (TTGT) only when its strides cannot serve.
#include <algorithm>
#include <fmt/format.h>
#include <numeric>

#include "compiler/contraction_order.hpp"
#include "compiler/plan_builder.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::detail {
namespace {

using Axes = std::vector<AxisId>;

bool contains(const Axes& axes, AxisId a) {
    return std::find(axes.begin(), axes.end(), a) != axes.end();
}

Axes output_axes(const Bound& bound) {
    Axes axes;
    for (const BoundDim& dim : bound.outputs[0].dims)
        axes.insert(axes.end(), dim.axes.begin(), dim.axes.end());
    return axes;
}

std::string label(const Operand& operand) {
    switch (operand.buffer.kind) {
    case Buffer::Kind::input: return fmt::format("in {}", operand.buffer.index);
    case Buffer::Kind::output: return fmt::format("out {}", operand.buffer.index);
    case Buffer::Kind::temporary: return fmt::format("t{}", operand.buffer.index);
    }
    return "?";
}

// ---- GEMM mapping -----------------------------------------------------------------------------------

// The batch axes are `outer` (the first `outer` of them, none mostly) then the GEMM's own batch.
struct Groups {
    Axes batch, m, n, k;
    std::size_t outer = 0;
    Axes outer_axes() const {
        return Axes(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(outer));
    }
    Axes inner_axes() const { return Axes(batch.begin() + static_cast<std::ptrdiff_t>(outer), batch.end()); }
};

// An operand seen as batches of matrices: each group of axes merged to one mode.
struct MatrixModes {
    Mode outer, batch, rows, cols;
};

std::optional<MatrixModes> matrix_modes(const PlanBuilder& b, const Operand& x, const Groups& g,
                                        const Axes& rows, const Axes& cols) {
    const auto outer_mode = merge(b.layout_of(g.outer_axes(), x).modes);
    const auto batch_mode = merge(b.layout_of(g.inner_axes(), x).modes);
    const auto row_mode = merge(b.layout_of(rows, x).modes);
    const auto col_mode = merge(b.layout_of(cols, x).modes);
    if (!outer_mode || !batch_mode || !row_mode || !col_mode) return std::nullopt;
    return MatrixModes{*outer_mode, *batch_mode, *row_mode, *col_mode};
}

// The BLAS form of a batch of matrices: one unit stride, a leading dimension that fits, no negative strides.
std::optional<GemmMatrix> blas_matrix(const Operand& x, const MatrixModes& modes) {
    const auto [outer, batch, rows, cols] = modes;
    if (outer.stride < 0 || batch.stride < 0 || rows.stride < 0 || cols.stride < 0) return std::nullopt;
    GemmMatrix matrix{x.buffer, x.offset, batch.extent == 1 ? 0 : batch.stride,
                      0,        0,        outer.extent == 1 ? 0 : outer.stride};
    const std::int64_t r = std::max<std::int64_t>(rows.extent, 1), c = std::max<std::int64_t>(cols.extent, 1);
    if ((cols.stride == 1 || c == 1) && (r == 1 || rows.stride >= c)) {
        matrix.row_stride = r == 1 ? c : rows.stride;
        matrix.col_stride = 1;
        return matrix;
    }
    if ((rows.stride == 1 || r == 1) && (c == 1 || cols.stride >= r)) {
        matrix.row_stride = 1;
        matrix.col_stride = c == 1 ? r : cols.stride;
        return matrix;
    }
    return std::nullopt;
}

// Why an operand cannot be a BLAS matrix as it is.
std::string matrix_problem(const PlanBuilder& b, const Operand& x, const Groups& g, const Axes& rows,
                           const Axes& cols) {
    const Axes outer = g.outer_axes(), inner = g.inner_axes();
    for (const auto* group : {&outer, &inner, &rows, &cols})
        if (!merge(b.layout_of(*group, x).modes)) {
            std::vector<std::string> strides;
            for (const AxisId a : *group)
                strides.push_back(
                    fmt::format("{}:{}", b.bound.axis(a).name, x.strides[static_cast<std::size_t>(a)]));
            return fmt::format("axes ({}) are not one stride in its memory ({})", b.axis_names(*group),
                               fmt::join(strides, ", "));
        }
    const MatrixModes modes = *matrix_modes(b, x, g, rows, cols);
    return fmt::format("its matrix {}x{} has strides ({}, {}): neither is 1 with room for the other",
                       modes.rows.extent, modes.cols.extent, modes.rows.stride, modes.cols.stride);
}

// The axes of `group` ordered by their stride in `x`, outermost first.
Axes ordered_by(const PlanBuilder& b, const Axes& group, const Operand& x) {
    const Layout layout = b.layout_of(group, x);
    Axes ordered;
    for (const std::size_t k : order_by_stride(std::span(&layout, 1))) ordered.push_back(group[k]);
    return ordered;
}

void add_unique(std::vector<Axes>& candidates, Axes order) {
    if (std::find(candidates.begin(), candidates.end(), order) == candidates.end())
        candidates.push_back(std::move(order));
}

// The bytes of x stored densely (one element per index of its axes): what a copy of it writes.
double dense_bytes(const PlanBuilder& b, const Operand& x) {
    return static_cast<double>(b.size_of_axes(x.axes)) * static_cast<double>(size_of(x.dtype));
}

struct GemmChoice {
    Groups groups;
    std::optional<GemmMatrix> a, b, c;  // absent: that operand is copied first (or, for c, after)
    double copied_bytes = 0;
    unsigned copied = 0;  // which: 1 a, 2 x, 4 c
};

// Every way to map the pair onto a GEMM with these groups, in the planner's order of preference: per order
// of the axes within each group - read off one operand's strides (the destination's first) - and split of
// the batch axes, the operands that are not a BLAS matrix in that order, which get copied. Batch axes that
// are not one stride may split into an outer loop of GEMMs and the GEMM's batch (at the same place in
// every operand), which copies nothing.
std::vector<GemmChoice> gemm_candidates(const PlanBuilder& b, const Groups& groups, const Operand& a,
                                        const Operand& x, const std::optional<Operand>& c) {
    const auto candidates = [&](const Axes& group, std::initializer_list<const Operand*> operands) {
        std::vector<Axes> orders;
        for (const Operand* o : operands)
            if (o) add_unique(orders, ordered_by(b, group, *o));
        return orders;
    };
    const Operand* c_ptr = c ? &*c : nullptr;
    const auto batch_orders = candidates(groups.batch, {c_ptr, &a, &x});
    const auto m_orders = candidates(groups.m, {c_ptr, &a});
    const auto n_orders = candidates(groups.n, {c_ptr, &x});
    const auto k_orders = candidates(groups.k, {&a, &x});

    std::vector<GemmChoice> choices;
    for (const Axes& batch : batch_orders)
        for (std::size_t outer = 0; outer < std::max<std::size_t>(batch.size(), 1); ++outer)
            for (const Axes& m : m_orders)
                for (const Axes& n : n_orders)
                    for (const Axes& k : k_orders) {
                        GemmChoice choice{
                            Groups{batch, m, n, k, outer}, std::nullopt, std::nullopt, std::nullopt, 0, 0};
                        const auto try_matrix = [&](const Operand& o, const Axes& rows, const Axes& cols,
                                                    std::optional<GemmMatrix>& slot, unsigned which) {
                            if (const auto modes = matrix_modes(b, o, choice.groups, rows, cols))
                                slot = blas_matrix(o, *modes);
                            if (slot) return;
                            choice.copied_bytes += 2 * dense_bytes(b, o);
                            choice.copied |= which;
                        };
                        try_matrix(a, m, k, choice.a, 1);
                        try_matrix(x, k, n, choice.b, 2);
                        if (c) try_matrix(*c, m, n, choice.c, 4);
                        choices.push_back(std::move(choice));
                    }
    return choices;
}

// The first of the candidates that copies the fewest bytes.
GemmChoice fewest_copies(std::vector<GemmChoice> candidates) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < candidates.size(); ++i)
        if (candidates[i].copied_bytes < candidates[best].copied_bytes) best = i;
    return std::move(candidates[best]);
}

// The classifications that batch some of the M (or N) axes instead: the operand without them is read
// with batch stride 0. Tried only when the plain one needs copies; groups of up to 4 axes; never all of
// a group (batches of vector products are a GEMM's worst case).
std::vector<Groups> with_broadcast_batches(const Groups& groups) {
    std::vector<Groups> alternatives;
    const auto subsets = [](const Axes& axes) {
        std::vector<Axes> out;
        if (axes.size() > 4) return out;
        for (unsigned mask = 1; mask + 1 < (1u << axes.size()); ++mask) {
            Axes subset;
            for (std::size_t i = 0; i < axes.size(); ++i)
                if (mask >> i & 1u) subset.push_back(axes[i]);
            out.push_back(std::move(subset));
        }
        return out;
    };
    const auto move_to_batch = [&](const Axes& moved, bool from_m) {
        Groups g = groups;
        Axes& from = from_m ? g.m : g.n;
        for (const AxisId axis : moved) {
            from.erase(std::find(from.begin(), from.end(), axis));
            g.batch.push_back(axis);
        }
        alternatives.push_back(std::move(g));
    };
    for (const Axes& moved : subsets(groups.m)) move_to_batch(moved, true);
    for (const Axes& moved : subsets(groups.n)) move_to_batch(moved, false);
    return alternatives;
}

// The GEMM of the pair with the fewest bytes copied: the plain classification's, unless it copies and
// one batching some M or N axes copies fewer (the first of equals).
GemmChoice chosen_gemm(const PlanBuilder& b, const Groups& groups, const Operand& a, const Operand& x,
                       const std::optional<Operand>& c) {
    GemmChoice best = fewest_copies(gemm_candidates(b, groups, a, x, c));
    if (best.copied_bytes > 0)
        for (const Groups& alternative : with_broadcast_batches(groups)) {
            GemmChoice candidate = fewest_copies(gemm_candidates(b, alternative, a, x, c));
            if (candidate.copied_bytes < best.copied_bytes) best = std::move(candidate);
        }
    return best;
}

// chosen_gemm's choice as PlanChoices takes it: one of the candidates it could choose for some sizes.
// It takes the first candidate - the plain classification's, then those batching M or N axes - that
// copies the fewest bytes, and an operand's bytes can be anything, 0 included: a candidate can be chosen
// unless an earlier one copies a subset of what it copies (then never more bytes).
GemmChoice possible_gemm(const PlanBuilder& b, const Groups& groups, const Operand& a, const Operand& x,
                         const std::optional<Operand>& c) {
    std::vector<GemmChoice> possible;
    const auto consider = [&](std::vector<GemmChoice> candidates) {
        for (GemmChoice& candidate : candidates)
            if (std::none_of(possible.begin(), possible.end(), [&](const GemmChoice& earlier) {
                    return (earlier.copied & ~candidate.copied) == 0;
                }))
                possible.push_back(std::move(candidate));
    };
    consider(gemm_candidates(b, groups, a, x, c));
    const bool copy_free = std::any_of(possible.begin(), possible.end(),
                                       [](const GemmChoice& choice) { return choice.copied == 0; });
    if (!copy_free)  // (else none that batches could be chosen: it copies a superset of nothing)
        for (const Groups& alternative : with_broadcast_batches(groups))
            consider(gemm_candidates(b, alternative, a, x, c));
    return std::move(possible[b.options.choices->choose(possible.size())]);
}

// The dtype einsum's steps compute in: the result's, but i64 for bool (numpy's bool einsum is an or of
// ands: a count of true products, nonzero, which the last step's conversion to bool gives) and the wider
// integer for the integers no kernel is built for (arithmetic_dtype: u8 in i32, wrapping to u8 as numpy).
DType einsum_dtype(const PlanBuilder& b) {
    return b.output_dtype == DType::boolean ? DType::i64 : arithmetic_dtype(b.output_dtype);
}

// ---- the contraction of two operands --------------------------------------------------------------

// Contracts `a` and `x` into `destination` (the output) or, when absent, into a new temporary holding
// the axes `kept`. Returns the result.
Operand contract_pair(PlanBuilder& b, const Operand& a, const Operand& x, const Axes& kept, bool to_output) {
    Groups groups;
    Axes all = a.axes;
    for (const AxisId axis : x.axes)
        if (!contains(all, axis)) all.push_back(axis);
    for (const AxisId axis : all) {
        const bool in_a = contains(a.axes, axis), in_x = contains(x.axes, axis),
                   is_kept = contains(kept, axis);
        if (in_a && in_x)
            (is_kept ? groups.batch : groups.k).push_back(axis);
        else if (in_a)
            groups.m.push_back(axis);
        else
            groups.n.push_back(axis);
    }
    const std::string what = fmt::format("{} * {}", label(a), label(x));
    std::optional<Operand> destination;
    if (to_output) destination = b.output(0);

    // The GEMM, if a summed axis makes it worth one: the group orders that copy least, and - when even
    // those copy - the same with some M or N axes batched instead (the other operand's batch stride 0).
    std::optional<GemmChoice> gemm_choice;
    if (b.size_of_axes(groups.k) > 1)
        gemm_choice = b.options.choices ? possible_gemm(b, groups, a, x, destination)
                                        : chosen_gemm(b, groups, a, x, destination);
    // Without a summed axis a GEMM is all overhead; and a dot product or matrix-vector product whose
    // operands would need copying, or a loop of GEMMs, is better done in one memory-bound pass: multiply
    // elementwise.
    const bool vector_shaped = gemm_choice && (b.size_of_axes(gemm_choice->groups.m) == 1 ||
                                               b.size_of_axes(gemm_choice->groups.n) == 1);
    if (!gemm_choice || (vector_shaped && (gemm_choice->copied_bytes > 0 || gemm_choice->groups.outer > 0))) {
        Axes result_axes;
        for (const AxisId axis : all)
            if (contains(kept, axis)) result_axes.push_back(axis);
        const Operand dst = to_output ? *destination : b.temporary(result_axes, einsum_dtype(b));
        std::string why = fmt::format("{} -> {}: elementwise product", what, label(dst));
        if (gemm_choice)
            why += fmt::format(", summed over {} (vector-shaped: one pass instead of copies for a GEMM)",
                               b.axis_names(groups.k));
        else if (!groups.k.empty())
            why += fmt::format(", summing {} of length 1", b.axis_names(groups.k));
        b.contract({Access{a.buffer, a.offset, b.layout_of(all, a)},
                    Access{x.buffer, x.offset, b.layout_of(all, x)}},
                   Access{dst.buffer, dst.offset, b.layout_of(all, dst)}, std::move(why));
        return dst;
    }
    GemmChoice choice = std::move(*gemm_choice);
    const Groups& g = choice.groups;
    const auto concat = [](std::initializer_list<const Axes*> parts) {
        Axes out;
        for (const Axes* p : parts) out.insert(out.end(), p->begin(), p->end());
        return out;
    };
    // Copies of operands whose strides cannot serve (TTGT): into row-major [batch, rows, cols].
    const auto prepare = [&](const Operand& o, const Axes& rows, const Axes& cols,
                             std::optional<GemmMatrix>& slot) {
        if (slot) return;
        const Axes axes = concat({&g.batch, &rows, &cols});
        const Operand copy = b.temporary(axes, o.dtype);
        b.copy(Access{o.buffer, o.offset, b.layout_of(axes, o)},
               Access{copy.buffer, 0, b.layout_of(axes, copy)},
               fmt::format("{} -> {} for the GEMM: {}", label(o), label(copy),
                           matrix_problem(b, o, g, rows, cols)));
        slot = blas_matrix(copy, *matrix_modes(b, copy, g, rows, cols));
        EINC_ASSERT(slot.has_value());
    };
    prepare(a, g.m, g.k, choice.a);
    prepare(x, g.k, g.n, choice.b);

    const Axes c_axes = concat({&g.batch, &g.m, &g.n});
    const bool through_temporary = !choice.c;
    const Operand c = !through_temporary ? *destination : b.temporary(c_axes, einsum_dtype(b));
    if (through_temporary) choice.c = blas_matrix(c, *matrix_modes(b, c, g, g.m, g.n));
    EINC_ASSERT(choice.c.has_value());

    const Axes outer = g.outer_axes(), inner = g.inner_axes();
    Gemm gemm{b.size_of_axes(inner),
              b.size_of_axes(g.m),
              b.size_of_axes(g.n),
              b.size_of_axes(g.k),
              *choice.a,
              *choice.b,
              *choice.c,
              {},
              b.size_of_axes(outer)};
    b.add(gemm, fmt::format("{} -> {}: {}batch ({}), M ({}), N ({}), K ({})", what, label(c),
                            outer.empty() ? "" : fmt::format("a GEMM per ({}), each ", b.axis_names(outer)),
                            b.axis_names(inner), b.axis_names(g.m), b.axis_names(g.n), b.axis_names(g.k)));

    if (through_temporary && to_output) {
        const Operand out = *destination;
        b.copy(Access{c.buffer, 0, b.layout_of(c_axes, c)},
               Access{out.buffer, out.offset, b.layout_of(c_axes, out)},
               fmt::format("{} -> {}: {}", label(c), label(out), matrix_problem(b, out, g, g.m, g.n)));
        return out;
    }
    return c;
}

// Sums away the axes of `x` that no other operand and not the output has (numpy sums them too).
Operand reduce_own_axes(PlanBuilder& b, const Operand& x, const Axes& needed, bool to_output) {
    Axes kept, own;
    for (const AxisId axis : x.axes) (contains(needed, axis) ? kept : own).push_back(axis);
    if (own.empty()) return x;
    Operand reduced = x;
    if (b.size_of_axes(own) != 1) {
        const Operand dst = to_output ? b.output(0) : b.temporary(kept, einsum_dtype(b));
        Axes axes = to_output ? output_axes(b.bound) : kept;
        axes.insert(axes.end(), own.begin(), own.end());
        b.reduce(Reduction::sum, Access{x.buffer, x.offset, b.layout_of(axes, x)},
                 Access{dst.buffer, dst.offset, b.layout_of(axes, dst)},
                 fmt::format("{} -> {}: sum over {}, which only {} has", label(x), label(dst),
                             b.axis_names(own), label(x)));
        reduced = dst;
    }
    reduced.axes = kept;  // axes of length 1 are simply dropped
    return reduced;
}

}  // namespace

void plan_einsum(PlanBuilder& b) {
    const Axes out_axes = output_axes(b.bound);
    if (b.options.require_view && b.bound.inputs.size() > 1)
        throw Error(ErrorKind::pattern, "einsum of several operands can't be a view")
            .help("it computes new values");

    // Where the steps compute in another dtype than the result's (bool), the result is written by a
    // last conversion, not by the step that computes it; one operand that sums nothing only moves.
    const bool only_moves = b.bound.inputs.size() == 1 && b.size_of_axes(b.bound.reduced) == 1;
    const DType dtype = only_moves ? b.output_dtype : einsum_dtype(b);
    const bool into_output = dtype == b.output_dtype;
    std::vector<Operand> operands;
    for (std::size_t i = 0; i < b.bound.inputs.size(); ++i) {
        const Operand input = b.input(i);
        operands.push_back(b.converted(
            input, dtype,
            input.dtype != b.input_dtype ? fmt::format("operand {}, for numpy's promotion of the operands", i)
            : input.dtype == DType::boolean ? fmt::format("operand {}: bool einsum counts true products", i)
                                            : fmt::format("operand {}: einc computes {} in {}", i,
                                                          name_of(input.dtype), name_of(dtype))));
        if (i < b.options.conjugated.size() && b.options.conjugated[i] && is_complex(dtype))
            operands.back() = b.conjugated(operands.back(), fmt::format("operand {}", i));
    }

    // Axes needed by anything but operand `i`: the output's and the other operands'.
    const auto needed_besides = [&](std::size_t i) {
        Axes needed = out_axes;
        for (std::size_t o = 0; o < operands.size(); ++o)
            if (o != i) needed.insert(needed.end(), operands[o].axes.begin(), operands[o].axes.end());
        return needed;
    };

    if (operands.size() == 1) {
        if (b.options.require_view && b.size_of_axes(b.bound.reduced) != 1)
            throw Error(ErrorKind::pattern, "einsum can't be a view of its input")
                .help(fmt::format("it sums over {}", b.axis_names(b.bound.reduced)));
        const Operand reduced = reduce_own_axes(b, operands[0], out_axes, into_output);
        if (reduced.buffer.kind != Buffer::Kind::output)
            move_to_output(b, reduced, 0, "einsum of one operand");
        return;
    }
    for (std::size_t i = 0; i < operands.size(); ++i)
        operands[i] = reduce_own_axes(b, operands[i], needed_besides(i), false);

    if (operands.size() > 2) {
        std::vector<Axes> sets;
        for (const Operand& o : operands) sets.push_back(o.axes);
        std::vector<std::int64_t> sizes;
        for (const Axis& axis : b.bound.axes) sizes.push_back(axis.size);
        b.plan.path =
            b.options.choices
                ? contraction_path(sets, out_axes, sizes,
                                   [&](std::size_t pairs) { return b.options.choices->choose(pairs); })
                : contraction_order(sets, out_axes, sizes,
                                    {.max_intermediate_bytes = b.options.max_intermediate_bytes,
                                     .element_bytes = size_of(einsum_dtype(b))});
    }
    const std::vector<std::pair<std::size_t, std::size_t>> pairs =
        b.plan.path ? b.plan.path->pairs : std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}};
    for (const auto& [i, j] : pairs) {
        const Operand a = operands[i], x = operands[j];
        operands.erase(operands.begin() + static_cast<std::ptrdiff_t>(j));
        operands.erase(operands.begin() + static_cast<std::ptrdiff_t>(i));
        Axes kept = out_axes;
        for (const Operand& o : operands) kept.insert(kept.end(), o.axes.begin(), o.axes.end());
        // Axes only one of the pair has and nothing later needs are summed before the contraction.
        Axes needed_by_a = kept, needed_by_x = kept;
        needed_by_a.insert(needed_by_a.end(), x.axes.begin(), x.axes.end());
        needed_by_x.insert(needed_by_x.end(), a.axes.begin(), a.axes.end());
        const Operand a_reduced = reduce_own_axes(b, a, needed_by_a, false);
        const Operand x_reduced = reduce_own_axes(b, x, needed_by_x, false);
        operands.push_back(contract_pair(b, a_reduced, x_reduced, kept, into_output && operands.empty()));
    }
    if (!into_output) move_to_output(b, operands.front(), 0, "bool einsum: true where any product is");
}

}  // namespace einc::detail
