// Contractions that are not GEMMs (elementwise products, products summed over some modes), as the
// schedule decided them: the nest in the first source's memory order, products folded into an
// accumulator array in the scratch (split between threads over the outermost mode - with arrays of
// partials when that mode is summed), then written out in the destination's dtype.
#include <fmt/format.h>

#include "runtime/cpu/fold.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/nest.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu::EINC_CPU_ISA {
namespace {

template <DType In, typename A>
void contract_typed(const ScheduledStep& step, const Data& dst, const Data& src, const Data& src1, std::byte* scratch) {
    using S = storage_t<In>;
    using D = storage_t<In>;
    const CpuNest& nest = step.nest;
    const auto array = [&](int k) { return reinterpret_cast<A*>(scratch + k * step.array_stride); };  // 0: the result
    std::fill(array(0), array(0) + step.accumulators, A{0});
    const Nest<3> products = make_nest<3>({&nest.acc, &nest.src, &nest.src1}, {nullptr, src.base, src1.base}, {sizeof(A), sizeof(S), sizeof(S)});
    // Folds modes [begin, end) of the outermost mode into `accumulators`.
    const auto fold_range = [&](A* accumulators, std::int64_t begin, std::int64_t end) {
        Nest<3> local = products;
        local.base[0] = reinterpret_cast<std::byte*>(accumulators);
        for_each_run(local, begin, end, [](std::array<std::byte*, 3> p, std::int64_t count, const std::array<std::int64_t, 3>& stride) {
            A* a = reinterpret_cast<A*>(p[0]);
            const std::int64_t acc_step = stride[0] / static_cast<std::int64_t>(sizeof(A));
            for (std::int64_t i = 0; i < count; ++i) {
                const A x = static_cast<A>(Element<In>::load(load_at<S>(p[1] + i * stride[1])));
                const A y = static_cast<A>(Element<In>::load(load_at<S>(p[2] + i * stride[2])));
                a[i * acc_step] += x * y;
            }
        });
    };
    const std::int64_t outer = products.rank() == 0 ? 1 : products.extents[0];
    switch (step.split) {
    case Split::outer: parallel_for(outer, [&](std::int64_t begin, std::int64_t end) { fold_range(array(0), begin, end); }); break;
    case Split::partials_outer: {
        const int threads = step.partial_arrays;
        parallel_for(threads, [&](std::int64_t first, std::int64_t last) {
            for (std::int64_t t = first; t < last; ++t) {
                A* partial = array(static_cast<int>(t) + 1);
                std::fill(partial, partial + step.accumulators, A{0});
                fold_range(partial, outer * t / threads, outer * (t + 1) / threads);
            }
        });
        for (int t = 1; t <= threads; ++t)
            for (std::int64_t i = 0; i < step.accumulators; ++i) array(0)[i] += array(t)[i];
        break;
    }
    default:
        if (nest.dst.size() > 0) fold_range(array(0), 0, outer);
    }
    const auto [dst_kept, acc_kept] = kept_modes(nest.dst, nest.acc);
    const Nest<2> out = make_nest<2>({&dst_kept, &acc_kept}, {dst.base, reinterpret_cast<std::byte*>(array(0))}, {sizeof(D), sizeof(A)});
    for_each_run(out, 0, out.rank() == 0 ? 1 : out.extents[0], [](std::array<std::byte*, 2> p, std::int64_t n, const std::array<std::int64_t, 2>& stride) {
        for (std::int64_t i = 0; i < n; ++i)
            store_at<D>(p[0] + i * stride[0], Element<In>::store(convert<compute_t<In>>(load_at<A>(p[1] + i * stride[1]))));
    });
}

}  // namespace

void contract(const ScheduledStep& step, const Data& dst, const Data& src, const Data& src1, std::byte* scratch) {
    EINC_ASSERT(src.dtype == src1.dtype && dst.dtype == src.dtype);
    dispatch(src.dtype, [&](auto in) {
        constexpr DType I = decltype(in)::value;
        if constexpr (I == DType::f8e4m3 || I == DType::f8e5m2 || I == DType::boolean) {
            throw Error(ErrorKind::unsupported, fmt::format("einsum of {} is not supported", name_of(I)));
        } else {
            using Natural = wrapping_t<Reduction::sum, compute_t<I>>;
            if constexpr (I == DType::f32)
                if (step.accumulator == DType::f64) return contract_typed<I, double>(step, dst, src, src1, scratch);
            contract_typed<I, Natural>(step, dst, src, src1, scratch);
        }
    });
}

}  // namespace einc::cpu::EINC_CPU_ISA
