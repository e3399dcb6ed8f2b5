// Strategy route: the gradient of a max, min or prod reduction (compiler/plan.hpp, Route). For each group
// of terms (one index of the kept modes) the terms are walked twice: once to find the extremum and its
// ties (or the product of the non-zero terms and the zeros), once to write every term's share of the
// group's output gradient.
#include <algorithm>

#include "runtime/cpu/accumulator.hpp"
#include "runtime/cpu/element.hpp"
#include "runtime/cpu/epilogue.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu {
namespace {

// The groups [begin, end) of the nest (row-major over the kept modes), each walked twice.
template <DType D, typename A, bool Reads>
void route_groups(const strategy::Route& route, const Epilogue& epilogue, const Data& dst, const Data& src,
                  const Data& grad, std::int64_t begin, std::int64_t end) {
    using S = storage_t<D>;
    constexpr auto size = static_cast<std::int64_t>(sizeof(S));
    const Reduction op = route.op;
    const std::uint32_t kept = route.kept;
    const Layout& in = route.src;
    const Layout& out = route.dst;
    const Layout& g = route.grad;
    const Scale<A> scale(epilogue);
    const auto load = [](const std::byte* at) { return static_cast<A>(Element<D>::load(load_at<S>(at))); };
    // The terms of a group: one strided run when one mode is reduced, an odometer over the modes otherwise.
    const std::size_t reduced = in.rank() - kept;
    Shape index(reduced, 0);
    const auto walk = [&](const std::byte* x, std::byte* dx, auto&& visit) {
        if (reduced == 1) {
            const std::int64_t n = in.modes[kept].extent, xs = in.modes[kept].stride * size,
                               ds = out.modes[kept].stride * size;
            for (std::int64_t t = 0; t < n; ++t) visit(x + t * xs, dx + t * ds);
            return;
        }
        std::fill(index.begin(), index.end(), 0);
        for (;;) {
            visit(x, dx);
            std::size_t m = reduced;
            for (;;) {
                if (m == 0) return;
                --m;
                const Mode& mx = in.modes[kept + m];
                const std::int64_t ds = out.modes[kept + m].stride * size;
                x += mx.stride * size, dx += ds;
                if (++index[m] < mx.extent) break;
                x -= index[m] * mx.stride * size, dx -= index[m] * ds;
                index[m] = 0;
            }
        }
    };
    const auto write = [&](std::byte* at, A value) { store_scaled<D, Reads>(at, value, scale); };
    // The kept modes' odometer, started at group `begin`.
    Shape group(kept, 0);
    std::int64_t rest = begin, sx = 0, sd = 0, sg = 0;
    for (std::size_t m = kept; m-- > 0;) {
        group[m] = rest % in.modes[m].extent;
        rest /= in.modes[m].extent;
        sx += group[m] * in.modes[m].stride, sd += group[m] * out.modes[m].stride,
            sg += group[m] * g.modes[m].stride;
    }
    for (std::int64_t n = begin; n < end; ++n) {
        const std::byte* x = src.base + sx * size;
        std::byte* dx = dst.base + sd * size;
        const A gradient = load(grad.base + sg * size);
        if (info_of(op).combine == Combine::multiply) {
            A product = 1;
            std::int64_t zeros = 0;
            walk(x, dx, [&](const std::byte* at, std::byte*) {
                const A v = load(at);
                if (v == A(0))
                    ++zeros;
                else
                    product = product * v;
            });
            walk(x, dx, [&](const std::byte* at, std::byte* to) {
                const A v = load(at);
                write(to, zeros == 0                ? gradient * (product / v)
                          : zeros == 1 && v == A(0) ? gradient * product
                                                    : A(0));
            });
        } else {
            // The extremum and its ties in one pass; a NaN term leaves nothing attaining it (every share 0).
            const bool max = info_of(op).combine == Combine::maximum;
            A extremum = load(x);
            std::int64_t ties = 0;
            bool nan = false;
            walk(x, dx, [&](const std::byte* at, std::byte*) {
                const A v = load(at);
                if (v != v)
                    nan = true;
                else if (v == extremum)
                    ++ties;
                else if (max ? v > extremum : v < extremum)
                    extremum = v, ties = 1;
            });
            const A share = nan || ties == 0 ? A(0) : gradient / static_cast<A>(ties);
            walk(x, dx, [&](const std::byte* at, std::byte* to) {
                write(to, !nan && load(at) == extremum ? share : A(0));
            });
        }
        for (std::size_t m = kept; m-- > 0;) {  // the next group
            sx += in.modes[m].stride, sd += out.modes[m].stride, sg += g.modes[m].stride;
            if (++group[m] < in.modes[m].extent) break;
            sx -= group[m] * in.modes[m].stride, sd -= group[m] * out.modes[m].stride,
                sg -= group[m] * g.modes[m].stride;
            group[m] = 0;
        }
    }
}

}  // namespace

void route(const strategy::Route& route, DType accumulator, const Epilogue& epilogue, const Data& dst,
           const Data& src, const Data& grad) {
    std::int64_t groups = 1;
    for (std::size_t m = 0; m < route.kept; ++m) groups *= route.src.modes[m].extent;
    dispatch(src.dtype, [&](auto tag) {
        constexpr DType D = decltype(tag)::value;
        if constexpr (!std::is_floating_point_v<compute_t<D>>) {
            EINC_ASSERT(false);  // gradients are planned for floating dtypes only
        } else {
            with_any_accumulator(accumulator, route.op, [&](auto zero) {
                using A = decltype(zero);
                if constexpr (std::is_floating_point_v<A>) {
                    const Scale<A> scale(epilogue);
                    with_reads(scale, [&](auto reads) {
                        const auto body = [&](std::int64_t begin, std::int64_t end) {
                            route_groups<D, A, decltype(reads)::value>(route, epilogue, dst, src, grad, begin,
                                                                       end);
                        };
                        if (route.split == Split::outer)
                            parallel_for(groups, body);  // threads take disjoint groups
                        else
                            body(0, groups);
                    });
                }
            });
        }
    });
}

}  // namespace einc::cpu
