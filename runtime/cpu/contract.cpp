// Contractions that are not GEMMs (elementwise products, products summed over some modes), as the
// schedule decided them:
//   contract_elementwise  each product written straight to the destination (contiguous runs vectorise);
//   contract_rows         each output's terms one row of the first source: four chains of products per
//                         row, folded straight into the destination;
//   contract_accumulate   products folded into an accumulator array in the scratch (split between threads
//                         over the outermost mode - with arrays of partials when that mode is summed), then
//                         written out in the destination's dtype.
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "runtime/cpu/accumulator.hpp"
#include "runtime/cpu/epilogue.hpp"
#include "runtime/cpu/fold.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/nest.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu::EINC_CPU_ISA {
namespace {

template <DType In, typename A>
EINC_KERNEL void multiply_run(storage_t<In>* __restrict d, const storage_t<In>* __restrict x,
                              const storage_t<In>* __restrict y, std::int64_t count, std::int64_t ds,
                              std::int64_t xs, std::int64_t ys) {
    const auto product = [](storage_t<In> u, storage_t<In> v) {
        return Element<In>::store(convert<compute_t<In>>(static_cast<A>(Element<In>::load(u)) *
                                                         static_cast<A>(Element<In>::load(v))));
    };
    if (ds == 1 && xs == 1 &&
        ys == 1) {  // the loops the compiler vectorises: contiguous, or one side broadcast
        for (std::int64_t i = 0; i < count; ++i) d[i] = product(x[i], y[i]);
    } else if (ds == 1 && xs == 1 && ys == 0) {
        const storage_t<In> v = *y;
        for (std::int64_t i = 0; i < count; ++i) d[i] = product(x[i], v);
    } else if (ds == 1 && xs == 0 && ys == 1) {
        const storage_t<In> u = *x;
        for (std::int64_t i = 0; i < count; ++i) d[i] = product(u, y[i]);
    } else {
        for (std::int64_t i = 0; i < count; ++i) d[i * ds] = product(x[i * xs], y[i * ys]);
    }
}

#if defined(__SSE2__)
#if defined(EINC_CPU_AVX2)
using Floats = __m256;  // the vector streaming stores write: 8 floats (AVX2), or 4
__attribute__((target("avx2"))) inline Floats floats_at(const float* p, std::int64_t stride) {
    return stride == 0 ? _mm256_set1_ps(*p) : _mm256_loadu_ps(p);
}
__attribute__((target("avx2"))) inline void stream_product(float* d, Floats u, Floats v) {
    _mm256_stream_ps(d, _mm256_mul_ps(u, v));
}
#else
using Floats = __m128;
inline Floats floats_at(const float* p, std::int64_t stride) {
    return stride == 0 ? _mm_set1_ps(*p) : _mm_loadu_ps(p);
}
inline void stream_product(float* d, Floats u, Floats v) {
    _mm_stream_ps(d, _mm_mul_ps(u, v));
}
#endif

// f32 products into a contiguous run of the destination with streaming stores (the schedule's
// streaming_stores), x and y each contiguous or one value (stride 0); the elements before the first
// vector-aligned one, and after the last whole vector, stored as usual. false: a run it does not take.
EINC_KERNEL bool multiply_streaming(float* d, const float* x, const float* y, std::int64_t count,
                                    std::int64_t ds, std::int64_t xs, std::int64_t ys) {
    constexpr std::int64_t lanes = sizeof(Floats) / sizeof(float);
    if (ds != 1 || xs > 1 || ys > 1 || xs < 0 || ys < 0) return false;
    std::int64_t i = 0;
    for (; i < count && reinterpret_cast<std::uintptr_t>(d + i) % sizeof(Floats) != 0; ++i)
        d[i] = x[i * xs] * y[i * ys];
    for (; i + lanes <= count; i += lanes)
        stream_product(d + i, floats_at(x + i * xs, xs), floats_at(y + i * ys, ys));
    for (; i < count; ++i) d[i] = x[i * xs] * y[i * ys];
    return true;
}
#endif

template <DType In, typename A>
void contract_elementwise(const strategy::ContractElementwise& nest, const Data& dst, const Data& src,
                          const Data& src1) {
    using S = storage_t<In>;
    const Nest<3> products = make_nest<3>({&nest.dst, &nest.src, &nest.src1}, {dst.base, src.base, src1.base},
                                          {sizeof(S), sizeof(S), sizeof(S)});
    const auto run = [&](std::int64_t begin, std::int64_t end) {
        for_each_run(
            products, begin, end,
            [&](std::array<std::byte*, 3> p, std::int64_t count, const std::array<std::int64_t, 3>& stride) {
                constexpr auto size = static_cast<std::int64_t>(sizeof(S));
                auto* d = reinterpret_cast<S*>(p[0]);
                const auto *x = reinterpret_cast<const S*>(p[1]), *y = reinterpret_cast<const S*>(p[2]);
#if defined(__SSE2__)
                if constexpr (In == DType::f32 && std::is_same_v<A, float>)
                    if (nest.streaming_stores && multiply_streaming(d, x, y, count, stride[0] / size,
                                                                    stride[1] / size, stride[2] / size))
                        return;
#endif
                multiply_run<In, A>(d, x, y, count, stride[0] / size, stride[1] / size, stride[2] / size);
            });
#if defined(__SSE2__)
        if (nest.streaming_stores)
            _mm_sfence();  // the streamed lines are visible before this thread says it is done
#endif
    };
    const std::int64_t outer = products.rank() == 0 ? 1 : products.extents[0];
    if (nest.split == Split::outer)
        parallel_for(outer, run);
    else
        run(0, outer);
}

#if defined(EINC_CPU_AVX2)
// Contiguous f32 products summed in f64, sixteen at a time. Each product is rounded to f32 and its rounding
// error, exact by FMA, kept apart: the products are widened and summed in f64, the errors (each under half
// an f32 ulp of its product) summed in f32. That is the f64 sum of the exact products to within an f32
// rounding of the errors' sum, at one conversion per product where widening both factors took two (a
// 64K-term row: 64 GB/s from L1 on one core, against 32). Where the products' sum is not finite (an
// infinity or a NaN among the factors, or a product past f32's range) it is returned as it is, and the
// caller sums the row again with both factors widened.
__attribute__((target("avx2,fma"))) inline double dot_f32_in_f64(const float* x, const float* y,
                                                                 std::int64_t count) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    __m256 e0 = _mm256_setzero_ps(), e1 = e0;
    std::int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
        const __m256 u0 = _mm256_loadu_ps(x + i), v0 = _mm256_loadu_ps(y + i);
        const __m256 u1 = _mm256_loadu_ps(x + i + 8), v1 = _mm256_loadu_ps(y + i + 8);
        const __m256 p0 = _mm256_mul_ps(u0, v0), p1 = _mm256_mul_ps(u1, v1);
        e0 = _mm256_add_ps(e0, _mm256_fmsub_ps(u0, v0, p0));
        e1 = _mm256_add_ps(e1, _mm256_fmsub_ps(u1, v1, p1));
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(p0)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(p0, 1)));
        s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(p1)));
        s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(p1, 1)));
    }
    alignas(32) double products[4];
    alignas(32) float errors[8];
    _mm256_store_pd(products, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    _mm256_store_ps(errors, _mm256_add_ps(e0, e1));
    double sum = (products[0] + products[1]) + (products[2] + products[3]);
    for (; i < count; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(y[i]);
    if (!std::isfinite(sum)) return sum;  // (not an exact sum: see above)
    const float error = ((errors[0] + errors[1]) + (errors[2] + errors[3])) +
                        ((errors[4] + errors[5]) + (errors[6] + errors[7]));
    return sum + static_cast<double>(error);
}
#endif

// One output's products, over a row of `count` terms, in four chains (which the compiler vectorises
// without reassociating) where both sources are contiguous along it.
template <DType In, typename A>
EINC_KERNEL A dot_row(const storage_t<In>* __restrict x, const storage_t<In>* __restrict y,
                      std::int64_t count, std::int64_t xs, std::int64_t ys) {
    const auto load = [](storage_t<In> v) { return static_cast<A>(Element<In>::load(v)); };
    if constexpr (In == DType::f32 && std::is_same_v<A, double>) {
        if (xs == 1 && ys == 1) {
#if defined(EINC_CPU_AVX2)
            if (const double sum = dot_f32_in_f64(x, y, count); std::isfinite(sum)) return sum;
#endif
            // Both factors widened (under AVX2, only a row whose sum above is not finite): four chains of
            // four-lane vectors.
            using F [[gnu::vector_size(16)]] = float;
            using D [[gnu::vector_size(32)]] = double;
            D sums[4] = {};
            std::int64_t i = 0;
            for (; i + 16 <= count; i += 16)
                for (int j = 0; j < 4; ++j) {
                    F u, v;
                    std::memcpy(&u, x + i + 4 * j, sizeof u);
                    std::memcpy(&v, y + i + 4 * j, sizeof v);
                    sums[j] += __builtin_convertvector(u, D) * __builtin_convertvector(v, D);
                }
            const D total = (sums[0] + sums[1]) + (sums[2] + sums[3]);
            A s = (total[0] + total[1]) + (total[2] + total[3]);
            for (; i < count; ++i) s += load(x[i]) * load(y[i]);
            return s;
        }
    }
    if (xs == 1 && ys == 1) {
        A s0{0}, s1{0}, s2{0}, s3{0};
        std::int64_t i = 0;
        for (; i + 4 <= count; i += 4) {
            s0 += load(x[i]) * load(y[i]);
            s1 += load(x[i + 1]) * load(y[i + 1]);
            s2 += load(x[i + 2]) * load(y[i + 2]);
            s3 += load(x[i + 3]) * load(y[i + 3]);
        }
        for (; i < count; ++i) s0 += load(x[i]) * load(y[i]);
        return (s0 + s1) + (s2 + s3);
    }
    A s{0};
    for (std::int64_t i = 0; i < count; ++i) s += load(x[i * xs]) * load(y[i * ys]);
    return s;
}

template <DType In, typename A>
void contract_rows(const strategy::ContractRows& nest, const Data& dst, const Data& src, const Data& src1) {
    using S = storage_t<In>;
    const std::size_t rank = nest.src.rank();
    const Layout dst_outer = outer_of(nest.dst), src_outer = outer_of(nest.src),
                 src1_outer = outer_of(nest.src1);
    const std::int64_t rows = nest.src.modes[rank - 2].extent, terms = nest.src.modes[rank - 1].extent;
    const std::int64_t dst_row = nest.dst.modes[rank - 2].stride, x_row = nest.src.modes[rank - 2].stride,
                       y_row = nest.src1.modes[rank - 2].stride, x_term = nest.src.modes[rank - 1].stride,
                       y_term = nest.src1.modes[rank - 1].stride;
    const std::int64_t nest_extent = rank > 2 ? nest.src.modes[0].extent : 1;
    const Nest<3> blocks = make_nest<3>({&dst_outer, &src_outer, &src1_outer},
                                        {dst.base, src.base, src1.base}, {sizeof(S), sizeof(S), sizeof(S)});
    const auto run = [&](std::int64_t nest_begin, std::int64_t nest_end, std::int64_t row_begin,
                         std::int64_t row_end) {
        for_each_run(blocks, nest_begin, nest_end,
                     [&](std::array<std::byte*, 3> p, std::int64_t, const std::array<std::int64_t, 3>&) {
                         S* d = reinterpret_cast<S*>(p[0]);
                         const S* x = reinterpret_cast<const S*>(p[1]);
                         const S* y = reinterpret_cast<const S*>(p[2]);
                         for (std::int64_t r = row_begin; r < row_end; ++r)
                             store_at<S>(reinterpret_cast<std::byte*>(d + r * dst_row),
                                         Element<In>::store(convert<compute_t<In>>(dot_row<In, A>(
                                             x + r * x_row, y + r * y_row, terms, x_term, y_term))));
                     });
    };
    switch (nest.split) {
    case Split::outer:
        return parallel_for(nest_extent, [&](std::int64_t b0, std::int64_t b1) { run(b0, b1, 0, rows); });
    case Split::rows: return parallel_for(rows, [&](std::int64_t r0, std::int64_t r1) { run(0, 1, r0, r1); });
    default: return run(0, nest_extent, 0, rows);
    }
}

template <DType In, typename A>
void contract_accumulate(const strategy::ContractAccumulate& nest, const Epilogue& epilogue, const Data& dst,
                         const Data& src, const Data& src1, std::byte* scratch) {
    using S = storage_t<In>;
    using D = storage_t<In>;
    const strategy::Accumulators& arrays = nest.acc;
    const auto array = [&](int k) {
        return reinterpret_cast<A*>(scratch + k * arrays.array_stride);
    };  // 0: the result
    std::fill(array(0), array(0) + arrays.count, A{0});
    const Nest<3> products = make_nest<3>({&arrays.layout, &nest.src, &nest.src1},
                                          {nullptr, src.base, src1.base}, {sizeof(A), sizeof(S), sizeof(S)});
    // Folds modes [begin, end) of the outermost mode into `accumulators`.
    const auto fold_range = [&](A* accumulators, std::int64_t begin, std::int64_t end) {
        Nest<3> local = products;
        local.base[0] = reinterpret_cast<std::byte*>(accumulators);
        for_each_run(
            local, begin, end,
            [](std::array<std::byte*, 3> p, std::int64_t count, const std::array<std::int64_t, 3>& stride) {
                A* a = reinterpret_cast<A*>(p[0]);
                const std::int64_t acc_step = stride[0] / static_cast<std::int64_t>(sizeof(A));
                if (acc_step == 0) {  // a run of one output's terms: a dot product in vectors
                    constexpr auto size = static_cast<std::int64_t>(sizeof(S));
                    *a += dot_row<In, A>(reinterpret_cast<const S*>(p[1]), reinterpret_cast<const S*>(p[2]),
                                         count, stride[1] / size, stride[2] / size);
                    return;
                }
                for (std::int64_t i = 0; i < count; ++i) {
                    const A x = static_cast<A>(Element<In>::load(load_at<S>(p[1] + i * stride[1])));
                    const A y = static_cast<A>(Element<In>::load(load_at<S>(p[2] + i * stride[2])));
                    a[i * acc_step] += x * y;
                }
            });
    };
    const std::int64_t outer = products.rank() == 0 ? 1 : products.extents[0];
    switch (nest.split) {
    case Split::outer:
        parallel_for(outer, [&](std::int64_t begin, std::int64_t end) { fold_range(array(0), begin, end); });
        break;
    case Split::partials_outer: {
        const int threads = arrays.partial_arrays;
        parallel_for(threads, [&](std::int64_t first, std::int64_t last) {
            for (std::int64_t t = first; t < last; ++t) {
                A* partial = array(static_cast<int>(t) + 1);
                std::fill(partial, partial + arrays.count, A{0});
                fold_range(partial, outer * t / threads, outer * (t + 1) / threads);
            }
        });
        for (int t = 1; t <= threads; ++t)
            for (std::int64_t i = 0; i < arrays.count; ++i) array(0)[i] += array(t)[i];
        break;
    }
    default:
        if (nest.dst.size() > 0) fold_range(array(0), 0, outer);
    }
    const auto [dst_kept, acc_kept] = kept_modes(nest.dst, arrays.layout);
    const Nest<2> out = make_nest<2>(
        {&dst_kept, &acc_kept}, {dst.base, reinterpret_cast<std::byte*>(array(0))}, {sizeof(D), sizeof(A)});
    const std::int64_t outer_out = out.rank() == 0 ? 1 : out.extents[0];
    if (epilogue.identity()) {
        for_each_run(
            out, 0, outer_out,
            [](std::array<std::byte*, 2> p, std::int64_t n, const std::array<std::int64_t, 2>& stride) {
                for (std::int64_t i = 0; i < n; ++i)
                    store_at<D>(p[0] + i * stride[0],
                                Element<In>::store(convert<compute_t<In>>(load_at<A>(p[1] + i * stride[1]))));
            });
        return;
    }
    const Scale<A> scale(epilogue);  // in the accumulator, as the products were summed
    with_reads(scale, [&](auto reads) {
        for_each_run(
            out, 0, outer_out,
            [&](std::array<std::byte*, 2> p, std::int64_t n, const std::array<std::int64_t, 2>& stride) {
                for (std::int64_t i = 0; i < n; ++i)
                    store_scaled<In, decltype(reads)::value>(p[0] + i * stride[0],
                                                             load_at<A>(p[1] + i * stride[1]), scale);
            });
    });
}

// The kernel of each strategy, with what it needs of the step.
template <DType In, typename A>
void contract_typed(const strategy::ContractElementwise& products, const Epilogue&, const Data& dst,
                    const Data& src, const Data& src1, std::byte*) {
    contract_elementwise<In, A>(products, dst, src, src1);
}
template <DType In, typename A>
void contract_typed(const strategy::ContractRows& rows, const Epilogue&, const Data& dst, const Data& src,
                    const Data& src1, std::byte*) {
    contract_rows<In, A>(rows, dst, src, src1);
}
template <DType In, typename A>
void contract_typed(const strategy::ContractAccumulate& folding, const Epilogue& epilogue, const Data& dst,
                    const Data& src, const Data& src1, std::byte* scratch) {
    contract_accumulate<In, A>(folding, epilogue, dst, src, src1, scratch);
}

template <typename Strategy>
void contract_any(const Strategy& strategy, DType accumulator, const Epilogue& epilogue, const Data& dst,
                  const Data& src, const Data& src1, std::byte* scratch) {
    EINC_ASSERT(src.dtype == src1.dtype && dst.dtype == src.dtype);
    dispatch(src.dtype, [&](auto in) {
        constexpr DType I = decltype(in)::value;
        if constexpr (I == DType::f8e4m3 || I == DType::f8e5m2 || I == DType::boolean ||
                      !computed_natively<I>) {
            EINC_ASSERT(false);  // the plan refuses einsum of these (result_dtype) or converts them
        } else {
            with_accumulator<Reduction::sum, I>(accumulator, [&](auto a) {
                contract_typed<I, decltype(a)>(strategy, epilogue, dst, src, src1, scratch);
            });
        }
    });
}

}  // namespace

void contract(const strategy::ContractElementwise& products, DType accumulator, const Data& dst,
              const Data& src, const Data& src1) {
    contract_any(products, accumulator, Epilogue{}, dst, src, src1, nullptr);
}
void contract(const strategy::ContractRows& rows, DType accumulator, const Data& dst, const Data& src,
              const Data& src1) {
    contract_any(rows, accumulator, Epilogue{}, dst, src, src1, nullptr);
}
void contract(const strategy::ContractAccumulate& folding, DType accumulator, const Epilogue& epilogue,
              const Data& dst, const Data& src, const Data& src1, std::byte* scratch) {
    contract_any(folding, accumulator, epilogue, dst, src, src1, scratch);
}

}  // namespace einc::cpu::EINC_CPU_ISA
