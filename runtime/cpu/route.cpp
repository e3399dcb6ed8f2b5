// Strategy route: the gradient of a max, min or prod reduction (compiler/plan.hpp, Route). For each group
// of terms (one index of the kept modes) the terms are walked twice: once to find the extremum and its
// ties (or the product of the non-zero terms and the zeros), once to write every term's share of the
// group's output gradient.
#include <cmath>

#include "runtime/cpu/element.hpp"
#include "runtime/cpu/epilogue.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/nest.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu {
namespace {

template <DType D, typename A, bool Reads>
void route_groups(const ScheduledStep& step, Reduction op, std::uint32_t kept, const Data& dst, const Data& src, const Data& grad,
                  std::int64_t begin, std::int64_t end) {
    using S = storage_t<D>;
    constexpr auto size = static_cast<std::int64_t>(sizeof(S));
    const Layout& in = step.nest.src;
    const Layout& out = step.nest.dst;
    const Layout& g = step.nest.src1;
    const Scale<A> scale(step.epilogue);
    const auto load = [](const std::byte* at) { return static_cast<A>(Element<D>::load(load_at<S>(at))); };
    // The reduced modes, walked by an odometer over (src, dst) offsets in elements.
    const std::size_t rank = in.rank();
    Shape index(rank - kept, 0);
    const auto walk = [&](auto&& visit) {
        std::fill(index.begin(), index.end(), 0);
        std::int64_t s = 0, d = 0;
        for (;;) {
            visit(s, d);
            std::size_t m = index.size();
            for (;;) {
                if (m == 0) return;
                --m;
                s += in.modes[kept + m].stride, d += out.modes[kept + m].stride;
                if (++index[m] < in.modes[kept + m].extent) break;
                s -= index[m] * in.modes[kept + m].stride, d -= index[m] * out.modes[kept + m].stride;
                index[m] = 0;
            }
        }
    };
    for (std::int64_t group = begin; group < end; ++group) {
        // The group's offsets along the kept modes (mode 0 outermost).
        std::int64_t rest = group, s0 = 0, d0 = 0, g0 = 0;
        for (std::size_t m = kept; m-- > 0;) {
            const std::int64_t i = rest % in.modes[m].extent;
            rest /= in.modes[m].extent;
            s0 += i * in.modes[m].stride, d0 += i * out.modes[m].stride, g0 += i * g.modes[m].stride;
        }
        const std::byte* x = src.base + s0 * size;
        std::byte* dx = dst.base + d0 * size;
        const A gradient = load(grad.base + g0 * size);
        const auto write = [&](std::int64_t d, A value) {
            if constexpr (Reads)
                store_scaled<D, true>(dx + d * size, value, scale);
            else
                store_scaled<D, false>(dx + d * size, value, scale);
        };
        if (op == Reduction::prod) {
            A product = 1;
            std::int64_t zeros = 0;
            walk([&](std::int64_t s, std::int64_t) {
                const A v = load(x + s * size);
                if (v == A(0)) ++zeros;
                else product = product * v;
            });
            walk([&](std::int64_t s, std::int64_t d) {
                const A v = load(x + s * size);
                A share = 0;
                if (zeros == 0) share = gradient * (product / v);
                else if (zeros == 1 && v == A(0)) share = gradient * product;
                write(d, share);
            });
            continue;
        }
        const bool max = op == Reduction::max;
        A extremum = load(x);
        bool nan = false;
        walk([&](std::int64_t s, std::int64_t) {
            const A v = load(x + s * size);
            if (v != v) nan = true;
            else if (max ? v > extremum : v < extremum) extremum = v;
        });
        std::int64_t ties = 0;
        if (!nan)
            walk([&](std::int64_t s, std::int64_t) { ties += load(x + s * size) == extremum ? 1 : 0; });
        const A share = ties > 0 ? gradient / static_cast<A>(ties) : A(0);
        walk([&](std::int64_t s, std::int64_t d) { write(d, !nan && load(x + s * size) == extremum ? share : A(0)); });
    }
}

}  // namespace

void route(const ScheduledStep& step, Reduction op, std::uint32_t kept, const Data& dst, const Data& src, const Data& grad) {
    std::int64_t groups = 1;
    for (std::size_t m = 0; m < kept; ++m) groups *= step.nest.src.modes[m].extent;
    dispatch(src.dtype, [&](auto tag) {
        constexpr DType D = decltype(tag)::value;
        if constexpr (!std::is_floating_point_v<compute_t<D>>) {
            EINC_ASSERT(false);  // gradients are planned for floating dtypes only
        } else {
            with_accumulator_type(step.accumulator, [&](auto zero) {
                using A = decltype(zero);
                if constexpr (std::is_floating_point_v<A>) {
                    const Scale<A> scale(step.epilogue);
                    with_reads(scale, [&](auto reads) {
                        const auto body = [&](std::int64_t begin, std::int64_t end) {
                            route_groups<D, A, decltype(reads)::value>(step, op, kept, dst, src, grad, begin, end);
                        };
                        if (step.split == Split::outer) parallel_for(groups, body);  // threads take disjoint groups
                        else body(0, groups);
                    });
                }
            });
        }
    });
}

}  // namespace einc::cpu
