// The naive plan interpreter: every step is a loop over all indices of its layouts.
#include <algorithm>
#include <map>

#include "tests/reference/elements.hpp"
#include "tests/reference/reference.hpp"

namespace einc::reference {
namespace {

using namespace detail;

// Calls visit(index) for every index of the layout's shape, row-major.
template <typename Visit>
void for_each_index(const Layout& layout, Visit visit) {
    const Shape extents = layout.extents();
    for (const std::int64_t e : extents)
        if (e == 0) return;
    std::vector<std::int64_t> index(extents.size(), 0);
    for (;;) {
        visit(index);
        std::size_t d = extents.size();
        for (;;) {
            if (d == 0) return;
            --d;
            if (++index[d] < extents[d]) break;
            index[d] = 0;
        }
    }
}

struct Memory {
    std::span<const TensorView> inputs;
    std::vector<TensorView>& outputs;
    std::vector<Tensor>& temporaries;

    const TensorView& of(Buffer buffer) const {
        switch (buffer.kind) {
        case Buffer::Kind::input: return inputs[buffer.index];
        case Buffer::Kind::output: return outputs[buffer.index];
        case Buffer::Kind::temporary: return temporaries[buffer.index].view();
        }
        EINC_ASSERT(false);
    }
    // A buffer read as its parts (Buffer::parts) has the dtype of its real part: offsets count parts.
    DType dtype(Buffer buffer) const {
        const DType own = of(buffer).dtype;
        if (!buffer.parts) return own;
        EINC_ASSERT(is_complex(own));
        return real_part_of(own);
    }
    std::byte* element(Buffer buffer, std::int64_t offset) const {
        return static_cast<std::byte*>(of(buffer).data) +
               offset * static_cast<std::int64_t>(size_of(dtype(buffer)));
    }
    std::byte* element(const Access& access, std::span<const std::int64_t> index) const {
        return element(access.buffer, access.offset + access.layout(index));
    }
};

template <typename T>
void run_reduce(const Memory& m, const Reduce& r) {
    std::map<std::int64_t, std::vector<T>> groups;  // destination offset -> the values reduced into it
    for_each_index(r.dst.layout, [&](const std::vector<std::int64_t>& i) {
        std::vector<T>& group = groups[r.dst.offset + r.dst.layout(i)];
        if (r.src.layout.size() > 0) group.push_back(load<T>(m.element(r.src, i), m.dtype(r.src.buffer)));
    });
    // An empty reduced set still has a destination for every kept index.
    Layout kept;
    for (const Mode& mode : r.dst.layout.modes) kept.modes.push_back(mode.stride == 0 ? Mode{1, 0} : mode);
    for_each_index(kept, [&](const std::vector<std::int64_t>& i) { groups[r.dst.offset + kept(i)]; });
    for (const auto& [offset, values] : groups)
        store(m.element(r.dst.buffer, offset), m.dtype(r.dst.buffer), fold(r.op, values));
}

template <typename T>
void run_contract(const Memory& m, const Contract& c) {
    std::map<std::int64_t, T> sums;
    Layout kept;
    for (const Mode& mode : c.dst.layout.modes) kept.modes.push_back(mode.stride == 0 ? Mode{1, 0} : mode);
    for_each_index(kept, [&](const std::vector<std::int64_t>& i) { sums[c.dst.offset + kept(i)] = T{0}; });
    for_each_index(c.dst.layout, [&](const std::vector<std::int64_t>& i) {
        T product{1};
        for (const Access& src : c.srcs)
            product = multiply(product, load<T>(m.element(src, i), m.dtype(src.buffer)));
        T& sum = sums[c.dst.offset + c.dst.layout(i)];
        sum = add(sum, product);
    });
    for (const auto& [offset, sum] : sums) store(m.element(c.dst.buffer, offset), m.dtype(c.dst.buffer), sum);
}

template <typename T>
void run_gemm(const Memory& m, const Gemm& g) {
    std::int64_t o = 0;
    const auto at = [&](const GemmMatrix& x, std::int64_t b, std::int64_t row, std::int64_t col) {
        return m.element(x.buffer, x.offset + o * x.outer_stride + b * x.batch_stride + row * x.row_stride +
                                       col * x.col_stride);
    };
    for (; o < g.outer; ++o)
        for (std::int64_t b = 0; b < g.batch; ++b)
            for (std::int64_t i = 0; i < g.m; ++i)
                for (std::int64_t j = 0; j < g.n; ++j) {
                    T sum{0};
                    for (std::int64_t p = 0; p < g.k; ++p)
                        sum = add(sum, multiply(load<T>(at(g.a, b, i, p), m.dtype(g.a.buffer)),
                                                load<T>(at(g.b, b, p, j), m.dtype(g.b.buffer))));
                    store(at(g.c, b, i, j), m.dtype(g.c.buffer), sum);
                }
}

// Each group (an index of the kept modes) in full: its terms, then every term's share of the gradient.
void run_route(const Memory& m, const Route& r) {
    struct Group {
        double gradient = 0;
        std::vector<std::pair<double, std::int64_t>> terms;  // value, destination offset
    };
    std::map<std::vector<std::int64_t>, Group> groups;
    for_each_index(r.dst.layout, [&](const std::vector<std::int64_t>& i) {
        Group& group = groups[std::vector<std::int64_t>(i.begin(), i.begin() + r.kept)];
        group.gradient = load<double>(m.element(r.grad, i), m.dtype(r.grad.buffer));
        group.terms.emplace_back(load<double>(m.element(r.src, i), m.dtype(r.src.buffer)),
                                 r.dst.offset + r.dst.layout(i));
    });
    const DType dtype = m.dtype(r.dst.buffer);
    for (const auto& [key, group] : groups) {
        std::vector<double> values;
        for (const auto& term : group.terms) values.push_back(term.first);
        for (std::size_t t = 0; t < group.terms.size(); ++t) {
            double share = 0;
            if (r.op == Reduction::prod) {
                share = group.gradient;
                for (std::size_t u = 0; u < values.size(); ++u)
                    if (u != t) share *= values[u];
            } else {
                const double extremum = fold(r.op, values);
                const auto ties = std::count(values.begin(), values.end(), extremum);
                if (values[t] == extremum) share = group.gradient / static_cast<double>(ties);
            }
            store(m.element(r.dst.buffer, group.terms[t].second), dtype, share);
        }
    }
}

}  // namespace

PlanRun run_plan(const Plan& plan, std::span<const TensorView> inputs) {
    PlanRun run;
    run.outputs.resize(plan.outputs.size());
    std::vector<Tensor> temporaries;
    for (std::size_t k = 0; k < plan.outputs.size(); ++k) {
        if (plan.view_source(k)) continue;
        const TensorSpec& spec = plan.outputs[k];
        EINC_ASSERT(spec.strides == row_major_strides(spec.shape));
        run.storage.push_back(Tensor::empty(spec.dtype, spec.shape));
        run.outputs[k] = run.storage.back().view();
    }
    for (const TensorSpec& spec : plan.temporaries)
        temporaries.push_back(Tensor::empty(spec.dtype, spec.shape));
    const Memory m{inputs, run.outputs, temporaries};

    for (const PlanStep& planned : plan.steps) {
        const Step& step = planned.step;
        std::visit(
            Overloaded{
                [&](const View& view) {
                    const TensorView& source = m.of(view.source.buffer);
                    run.outputs[view.output] =
                        TensorView{m.element(view.source.buffer, view.source.offset), source.dtype,
                                   plan.outputs[view.output].shape, view.source.layout.strides()};
                },
                [&](const Copy& copy) {
                    const DType from = m.dtype(copy.src.buffer), to = m.dtype(copy.dst.buffer);
                    for_each_index(copy.dst.layout, [&](const std::vector<std::int64_t>& i) {
                        std::byte* dst = m.element(copy.dst, i);
                        const std::byte* src = m.element(copy.src, i);
                        if (from == to)
                            copy_element(dst, src, from);
                        else if (is_complex(to))
                            store_complex(dst, to, load_real(src, from), load_imaginary(src, from));
                        else
                            with_value_type(from, [&]<typename T>(T) { store(dst, to, load<T>(src, from)); });
                    });
                },
                [&](const Reduce& reduce) {
                    with_value_type(m.dtype(reduce.src.buffer),
                                    [&]<typename T>(T) { run_reduce<T>(m, reduce); });
                },
                [&](const Contract& contract) {
                    with_value_type(m.dtype(contract.srcs.front().buffer),
                                    [&]<typename T>(T) { run_contract<T>(m, contract); });
                },
                [&](const Route& route) { run_route(m, route); },
                [&](const Gemm& gemm) {
                    with_value_type(m.dtype(gemm.a.buffer), [&]<typename T>(T) { run_gemm<T>(m, gemm); });
                },
            },
            step);
    }
    run.storage.insert(run.storage.end(), temporaries.begin(), temporaries.end());
    return run;
}

}  // namespace einc::reference
