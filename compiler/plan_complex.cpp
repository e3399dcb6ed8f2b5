// Complex arithmetic as real arithmetic on the parts of complex numbers (the last part of plan()), so
// that every real kernel - the CPU's, BLAS's and cuBLAS's GEMMs, the generated GPU code - serves complex
// tensors with no instantiation of its own. A step that adds or multiplies complex values becomes steps
// on their parts (Buffer::parts: c64 read as pairs of f32), with up to two more modes: r, the part of the
// result, and p, the part of an operand.
//
//   reduce (sum, mean)  the parts are summed alike: source and destination gain r, (2):(1)
//   contract x * y      y expanded into its real matrix form Y[p, r] - rows (re, im) and (-im, re) - by
//                       three copies, then z[r] = sum over p of x[p] * Y[p, r]: a real contraction.
//                       x * y = (xr yr - xi yi) + i (xr yi + xi yr), the 8 real FLOPs of a complex
//                       multiply-add; y is the operand with fewer elements, which makes the copies small
//   gemm A * B          the same with p merged into K and r into N: one real GEMM of m x 2k x 2n
//   reduce prod         planned here too (plan_complex_product, called by plan_reduce): the terms halved
//                       again and again by elementwise products, each of them rewritten as above
//
// Data movement (views, copies) moves complex elements whole and is left as it is, but for a copy with
// an epilogue (alpha * x + beta * out), done on the parts alike.
#include <algorithm>
#include <fmt/format.h>
#include <set>
#include <string_view>
#include <utility>

#include "compiler/canonicalize.hpp"
#include "compiler/plan_builder.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::detail {
namespace {

constexpr Mode kept_part{2, 1};  // r in the destination: the result's (re, im)

GemmMatrix matrix_parts(const GemmMatrix& x) {
    EINC_ASSERT(x.col_stride == 1);
    return GemmMatrix{Buffer{x.buffer.kind, x.buffer.index, true},
                      x.offset * 2,
                      x.batch_stride * 2,
                      x.row_stride * 2,
                      1,
                      x.outer_stride * 2};
}

// The same matrices, transposed: C = A B as C^T = B^T A^T.
void transpose(Gemm& gemm) {
    for (GemmMatrix* x : {&gemm.a, &gemm.b, &gemm.c}) std::swap(x->row_stride, x->col_stride);
    std::swap(gemm.a, gemm.b);
    std::swap(gemm.m, gemm.n);
}

// A new row-major temporary of `plan`.
Buffer new_temporary(Plan& plan, DType dtype, const Shape& shape) {
    plan.temporaries.push_back(TensorSpec{dtype, shape, row_major_strides(shape)});
    return Buffer{Buffer::Kind::temporary, static_cast<std::uint32_t>(plan.temporaries.size() - 1)};
}

std::int64_t elements_of(const Layout& layout) {  // the distinct elements an access reads
    std::int64_t n = 1;
    for (const Mode& m : layout.modes)
        if (m.stride != 0) n *= m.extent;
    return n;
}

class Rewriter {
public:
    explicit Rewriter(Plan& plan) : plan_(plan) {}

    void run() {
        std::vector<PlanStep> steps = std::move(plan_.steps);
        plan_.steps.clear();
        plan_.total = Cost{};
        for (PlanStep& s : steps) {
            std::visit(Overloaded{
                           [&](Reduce& reduce) {
                               if (complex(reduce.src.buffer))
                                   return add(on_parts(std::move(reduce)), std::move(s.why));
                               add(std::move(reduce), std::move(s.why));
                           },
                           [&](Contract& contract) {
                               if (complex(contract.srcs.front().buffer))
                                   return on_parts(std::move(contract), std::move(s.why));
                               add(std::move(contract), std::move(s.why));
                           },
                           [&](Gemm& gemm) {
                               if (complex(gemm.a.buffer)) return on_parts(std::move(gemm), std::move(s.why));
                               add(std::move(gemm), std::move(s.why));
                           },
                           [&](Copy& copy) {
                               if (!copy.epilogue.identity() && complex(copy.dst.buffer))
                                   return add(on_parts(std::move(copy)), std::move(s.why));
                               add(std::move(copy), std::move(s.why));
                           },
                           [&](Route& route) {
                               EINC_ASSERT(!complex(route.src.buffer));  // (result_dtype refuses them)
                               add(std::move(route), std::move(s.why));
                           },
                           [&](auto& step) { add(std::move(step), std::move(s.why)); },
                       },
                       s.step);
        }
    }

private:
    bool complex(Buffer buffer) const { return is_complex(plan_.dtype_of(buffer)); }

    // With its cost; a temporary's bytes are workspace where it is first written (the real form is
    // written by three copies).
    void add(Step step, std::string why) {
        Cost cost = step_cost(plan_, step);
        if (const Copy* copy = std::get_if<Copy>(&step); copy != nullptr &&
                                                         copy->dst.buffer.kind == Buffer::Kind::temporary &&
                                                         !written_.insert(copy->dst.buffer.index).second)
            cost.workspace_bytes = 0;
        plan_.total += cost;
        plan_.steps.push_back(PlanStep{std::move(step), cost, std::move(why)});
    }

    // A copy with an epilogue (alpha * x + beta * out): the same on both parts.
    Copy on_parts(Copy copy) {
        EINC_ASSERT(complex(copy.src.buffer));  // (plan() refuses real parts packed into complex ones)
        Copy parts{parts_of(copy.src, {kept_part}), parts_of(copy.dst, {kept_part}), copy.epilogue};
        canonical(parts.dst.layout, parts.src.layout);
        return parts;
    }

    Reduce on_parts(Reduce reduce) {
        EINC_ASSERT(reduce.op == Reduction::sum || reduce.op == Reduction::mean);
        Reduce parts{reduce.op, parts_of(reduce.src, {kept_part}), parts_of(reduce.dst, {kept_part}),
                     reduce.epilogue};
        canonical(parts.dst.layout, parts.src.layout);
        return parts;
    }

    // The three copies that write the real matrix form of `y`'s elements into `form` - at every index
    // of `y`'s layout, form[p, r] = [[re, im], [-im, re]] - where `form` addresses (p, r) = (0, 0) with
    // the same index space, and p and r are `p_stride` and 1 apart.
    void write_real_form(const Access& y, const Access& form, std::int64_t p_stride,
                         const std::string& what) {
        const auto copy = [&](std::int64_t part, std::int64_t at, bool both, double alpha,
                              std::string_view row) {
            Copy c{parts_of(y, {}), form, Epilogue{alpha, 0}};
            c.src.offset += part;
            c.dst.offset += at;
            if (both) {
                c.src.layout.modes.push_back(kept_part);
                c.dst.layout.modes.push_back(kept_part);
            }
            canonical(c.dst.layout, c.src.layout);
            add(std::move(c), fmt::format("{} as a real matrix: {}", what, row));
        };
        copy(0, 0, true, 1, "the row (re, im)");
        copy(1, p_stride, false, -1, "-im, the row (-im, re)");
        copy(0, p_stride + 1, false, 1, "re, the row (-im, re)");
    }

    // Y[..., p, r], the real matrix form of `y` in a new temporary over the modes `y` reads distinct
    // elements along (its other modes have stride 0 in Y too): Y's access in `y`'s index space, then p, r.
    Access expanded(const Access& y, const std::string& what) {
        Access read{y.buffer, y.offset, {}}, write, form;  // read, write: the modes with a stride only
        Shape shape{2, 2};
        std::int64_t stride = 4;  // row-major, (p, r) innermost
        for (std::size_t d = y.layout.modes.size(); d-- > 0;) {
            const Mode& m = y.layout.modes[d];
            form.layout.modes.insert(form.layout.modes.begin(), Mode{m.extent, m.stride != 0 ? stride : 0});
            if (m.stride == 0) continue;
            read.layout.modes.insert(read.layout.modes.begin(), m);
            write.layout.modes.insert(write.layout.modes.begin(), Mode{m.extent, stride});
            shape.insert(shape.begin(), m.extent);
            stride *= m.extent;
        }
        form.buffer = write.buffer = new_temporary(plan_, real_part_of(plan_.dtype_of(y.buffer)), shape);
        write_real_form(read, write, 2, what);
        form.layout.modes.push_back(Mode{2, 2});  // p
        form.layout.modes.push_back(Mode{2, 1});  // r
        return form;
    }

    void on_parts(Contract contract, std::string why) {
        if (contract.srcs.size() == 1) {  // a sum
            Contract parts{{parts_of(contract.srcs[0], {kept_part})},
                           parts_of(contract.dst, {kept_part}),
                           contract.epilogue};
            canonical(parts.dst.layout, parts.srcs[0].layout);
            return add(std::move(parts), std::move(why));
        }
        EINC_ASSERT(contract.srcs.size() == 2);  // (einsum contracts pairs)
        const std::size_t y = elements_of(contract.srcs[1].layout) <= elements_of(contract.srcs[0].layout);
        const Access& x = contract.srcs[1 - y];
        Contract parts{{parts_of(x, {Mode{2, 1}, Mode{2, 0}}),
                        expanded(contract.srcs[y], fmt::format("factor {}", y + 1))},
                       parts_of(contract.dst, {Mode{2, 0}, kept_part}),
                       contract.epilogue};
        canonical(parts.dst.layout, parts.srcs[0].layout, parts.srcs[1].layout);
        add(std::move(parts), std::move(why) + ", on the real parts");
    }

    void on_parts(Gemm gemm, std::string why) {
        if (!gemm.c.row_major()) transpose(gemm);  // r joins C's unit-stride dim: N
        const DType dtype = plan_.dtype_of(gemm.a.buffer);
        if (!gemm.a.row_major()) {  // p joins K in A's memory: A row-major, copied so where it is not
            const std::int64_t outer = gemm.a.outer_stride != 0 ? gemm.outer : 1;
            const std::int64_t batch = gemm.a.batch_stride != 0 ? gemm.batch : 1;
            const std::int64_t matrix = gemm.m * gemm.k;
            const GemmMatrix dense{new_temporary(plan_, dtype, {outer, batch, gemm.m, gemm.k}),
                                   0,
                                   batch > 1 ? matrix : 0,
                                   gemm.k,
                                   1,
                                   outer > 1 ? batch * matrix : 0};
            Copy c{Access{gemm.a.buffer, gemm.a.offset, gemm.a.layout(outer, batch, gemm.m, gemm.k)},
                   Access{dense.buffer, 0, dense.layout(outer, batch, gemm.m, gemm.k)},
                   {}};
            canonical(c.dst.layout, c.src.layout);
            add(std::move(c), "A row-major, so that the parts of each element lie along K");
            gemm.a = dense;
        }
        // B's real matrix form, [outer, batch, k, p, n, r] row-major.
        const std::int64_t outer = gemm.b.outer_stride != 0 ? gemm.outer : 1;
        const std::int64_t batch = gemm.b.batch_stride != 0 ? gemm.batch : 1;
        const std::int64_t n2 = 2 * gemm.n, matrix = 2 * gemm.k * n2;
        const Buffer form = new_temporary(plan_, real_part_of(dtype), {outer, batch, gemm.k, 2, gemm.n, 2});
        const GemmMatrix b_form{form, 0, batch > 1 ? matrix : 0, n2, 1, outer > 1 ? batch * matrix : 0};
        write_real_form(Access{gemm.b.buffer, gemm.b.offset, gemm.b.layout(outer, batch, gemm.k, gemm.n)},
                        Access{form, 0,
                               Layout{{Mode{outer, b_form.outer_stride}, Mode{batch, b_form.batch_stride},
                                       Mode{gemm.k, 2 * n2}, Mode{gemm.n, 2}}}},
                        n2, "B");
        Gemm real{gemm.batch,           gemm.m,        n2,        2 * gemm.k, matrix_parts(gemm.a), b_form,
                  matrix_parts(gemm.c), gemm.epilogue, gemm.outer};
        add(std::move(real), std::move(why) + ", on the real parts: K and N doubled");
    }

    template <typename... L>
    static void canonical(L&... layouts) {
        std::vector<Layout> all{layouts...};
        canonicalize(all);
        std::size_t k = 0;
        ((layouts = std::move(all[k++])), ...);
    }

    Plan& plan_;
    std::set<std::uint32_t> written_;  // the temporaries written so far
};

}  // namespace

void plan_complex_product(PlanBuilder& b, const Operand& in, const Operand& out) {
    std::vector<AxisId> kept;
    for (const BoundDim& dim : b.bound.outputs[0].dims)
        kept.insert(kept.end(), dim.axes.begin(), dim.axes.end());
    const std::vector<AxisId>& reduced = b.bound.reduced;
    std::vector<AxisId> axes = kept;
    axes.insert(axes.end(), reduced.begin(), reduced.end());
    const std::int64_t n = b.size_of_axes(reduced);
    const std::string what = fmt::format("prod over {}", b.axis_names(reduced));
    if (n == 0) {  // the product of nothing, 1 + 0i: a real product and a real sum of no parts
        if (b.size_of_axes(kept) == 0) return;  // (nor any result to write)
        const Access src = parts_of(Access{in.buffer, 0, b.layout_of(axes, in)}, {});  // (read nowhere)
        const Access dst = parts_of(Access{out.buffer, 0, b.layout_of(axes, out)}, {});
        b.reduce(Reduction::prod, src, dst, what + ": 1, the real part of an empty product");
        b.reduce(Reduction::sum, src, Access{dst.buffer, dst.offset + 1, dst.layout},
                 what + ": 0, its imaginary part");
        return;
    }
    // The terms as rows: a temporary [reduced..., kept...], row-major; each step multiplies the first
    // half of the rows by the second, an odd last row carried along, until one row is left.
    std::vector<AxisId> rows_first(reduced.begin(), reduced.end());
    rows_first.insert(rows_first.end(), kept.begin(), kept.end());
    const Operand terms = b.temporary(rows_first, in.dtype);
    b.copy(Access{in.buffer, 0, b.layout_of(rows_first, in)},
           Access{terms.buffer, 0, b.layout_of(rows_first, terms)}, what + ": the terms as rows");
    Buffer rows = terms.buffer;
    Layout row;  // one row, over the kept axes
    std::int64_t row_size = 1;
    for (std::size_t k = kept.size(); k-- > 0;) {
        row.modes.insert(row.modes.begin(), Mode{b.bound.size(kept[k]), row_size});
        row_size *= b.bound.size(kept[k]);
    }
    const Layout out_row = b.layout_of(kept, out);
    const auto with_rows = [](std::int64_t count, std::int64_t stride, const Layout& layout) {
        Layout l{{Mode{count, stride}}};
        l.modes.insert(l.modes.end(), layout.modes.begin(), layout.modes.end());
        return l;
    };
    for (std::int64_t left = n; left > 1;) {
        const std::int64_t half = left / 2, next = half + left % 2;
        Buffer into = out.buffer;
        if (next > 1) {  // a temporary of `next` rows
            Shape shape{next};
            for (const AxisId a : kept) shape.push_back(b.bound.size(a));
            into = new_temporary(b.plan, in.dtype, shape);
        }
        b.contract({Access{rows, 0, with_rows(half, row_size, row)},
                    Access{rows, half * row_size, with_rows(half, row_size, row)}},
                   next == 1 ? Access{into, 0, with_rows(1, 0, out_row)}
                             : Access{into, 0, with_rows(half, row_size, row)},
                   fmt::format("{}: {} rows times the {} after them", what, half, half));
        if (left % 2 == 1)
            b.copy(Access{rows, 2 * half * row_size, row}, Access{into, half * row_size, row},
                   fmt::format("{}: the odd last row, carried", what));
        rows = into;
        left = next;
    }
}

Access parts_of(const Access& access, std::initializer_list<Mode> added) {
    Access parts{Buffer{access.buffer.kind, access.buffer.index, true}, access.offset * 2, {}};
    for (const Mode& m : access.layout.modes) parts.layout.modes.push_back(Mode{m.extent, m.stride * 2});
    for (const Mode& m : added) parts.layout.modes.push_back(m);
    return parts;
}

void compute_complex_on_parts(Plan& plan) {
    Rewriter(plan).run();
}

}  // namespace einc::detail
