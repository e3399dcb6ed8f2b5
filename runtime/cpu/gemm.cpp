// Gemm on the CPU: f32 and f64 through CBLAS (OpenBLAS) with the strides and transposes the planner
// chose; f16 and bf16 converted through f32 blocks; integers (and every type in a build without BLAS)
// through a blocked loop over packed row-major blocks.
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <vector>

#include "einc_build_info.hpp"
#include "runtime/cpu/element.hpp"
#include "runtime/cpu/kernels.hpp"

#if EINC_HAS_BLAS
#include <cblas.h>
#endif

namespace einc::cpu {
namespace {

// Matrix (rows x cols) of a GemmMatrix, batch b, copied into a dense row-major array of compute values.
template <DType D, typename T>
void pack(const std::byte* base, const GemmMatrix& m, std::int64_t b, std::int64_t rows, std::int64_t cols, T* out) {
    using S = storage_t<D>;
    const std::byte* matrix = base + b * m.batch_stride * static_cast<std::int64_t>(sizeof(S));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            out[r * cols + c] = static_cast<T>(Element<D>::load(load_at<S>(matrix + (r * m.row_stride + c * m.col_stride) *
                                                                                         static_cast<std::int64_t>(sizeof(S)))));
}

template <DType D, typename T>
void unpack(const T* in, const GemmMatrix& m, std::int64_t b, std::int64_t rows, std::int64_t cols, std::byte* base) {
    using S = storage_t<D>;
    std::byte* matrix = base + b * m.batch_stride * static_cast<std::int64_t>(sizeof(S));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            store_at<S>(matrix + (r * m.row_stride + c * m.col_stride) * static_cast<std::int64_t>(sizeof(S)),
                        Element<D>::store(convert<compute_t<D>>(in[r * cols + c])));
}

// C (m x n) = A (m x k) * B (k x n), all dense row-major, in blocks that stay in cache; the inner loop
// runs along a row of B and C, so it vectorises.
template <typename T>
void blocked_gemm(const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k) {
    constexpr std::int64_t block_k = 256, block_n = 512;
    std::fill(c, c + m * n, T{0});
    for (std::int64_t k0 = 0; k0 < k; k0 += block_k)
        for (std::int64_t n0 = 0; n0 < n; n0 += block_n) {
            const std::int64_t k1 = std::min(k0 + block_k, k), n1 = std::min(n0 + block_n, n);
            for (std::int64_t i = 0; i < m; ++i) {
                T* crow = c + i * n;
                for (std::int64_t p = k0; p < k1; ++p) {
                    const T aip = a[i * k + p];
                    const T* brow = b + p * n;
                    for (std::int64_t j = n0; j < n1; ++j) crow[j] += aip * brow[j];
                }
            }
        }
}

#if EINC_HAS_BLAS
// How CBLAS (row-major) sees a matrix, or its transpose.
struct BlasOperand {
    CBLAS_TRANSPOSE trans;
    blasint ld;
};
BlasOperand as_stored(const GemmMatrix& m) {
    return m.row_major() ? BlasOperand{CblasNoTrans, static_cast<blasint>(m.row_stride)}
                         : BlasOperand{CblasTrans, static_cast<blasint>(m.col_stride)};
}
BlasOperand as_transposed(const GemmMatrix& m) {
    return m.row_major() ? BlasOperand{CblasTrans, static_cast<blasint>(m.row_stride)}
                         : BlasOperand{CblasNoTrans, static_cast<blasint>(m.col_stride)};
}

// One GEMM per batch through cblas_?gemm. A column-major C is computed as C^T = B^T A^T.
template <typename T, typename Call>
void blas_gemm(const Gemm& g, const T* a, const T* b, T* c, Call call) {
    for (std::int64_t batch = 0; batch < g.batch; ++batch) {
        const T* ab = a + batch * g.a.batch_stride;
        const T* bb = b + batch * g.b.batch_stride;
        T* cb = c + batch * g.c.batch_stride;
        if (g.c.row_major()) {
            const BlasOperand x = as_stored(g.a), y = as_stored(g.b);
            call(x.trans, y.trans, g.m, g.n, g.k, ab, x.ld, bb, y.ld, cb, static_cast<blasint>(g.c.row_stride));
        } else {
            const BlasOperand x = as_transposed(g.b), y = as_transposed(g.a);
            call(x.trans, y.trans, g.n, g.m, g.k, bb, x.ld, ab, y.ld, cb, static_cast<blasint>(g.c.col_stride));
        }
    }
}
#endif

// Through packed row-major blocks of the compute type T: narrow floats, integers, and builds without BLAS.
template <DType In, DType Out, typename T>
void packed_gemm(const Gemm& g, const std::byte* a, const std::byte* b, std::byte* c) {
    std::vector<T> pa(static_cast<std::size_t>(g.m * g.k)), pb(static_cast<std::size_t>(g.k * g.n)), pc(static_cast<std::size_t>(g.m * g.n));
    for (std::int64_t batch = 0; batch < g.batch; ++batch) {
        pack<In>(a, g.a, batch, g.m, g.k, pa.data());
        pack<In>(b, g.b, batch, g.k, g.n, pb.data());
#if EINC_HAS_BLAS
        if constexpr (std::is_same_v<T, float>) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(g.m), static_cast<blasint>(g.n),
                        static_cast<blasint>(g.k), 1.0f, pa.data(), static_cast<blasint>(std::max<std::int64_t>(g.k, 1)), pb.data(),
                        static_cast<blasint>(std::max<std::int64_t>(g.n, 1)), 0.0f, pc.data(), static_cast<blasint>(std::max<std::int64_t>(g.n, 1)));
        } else {
            blocked_gemm(pa.data(), pb.data(), pc.data(), g.m, g.n, g.k);
        }
#else
        blocked_gemm(pa.data(), pb.data(), pc.data(), g.m, g.n, g.k);
#endif
        unpack<Out>(pc.data(), g.c, batch, g.m, g.n, c);
    }
}

}  // namespace

void gemm(const Gemm& g, const std::byte* a, const std::byte* b, std::byte* c, DType in, DType out) {
    EINC_ASSERT(in == out);
    if (g.batch == 0 || g.m == 0 || g.n == 0) return;
    if (g.k == 0) {  // an empty sum: C = 0
        dispatch(out, [&](auto tag) {
            constexpr DType D = decltype(tag)::value;
            std::vector<compute_t<D>> zeros(static_cast<std::size_t>(g.m * g.n), compute_t<D>{0});
            for (std::int64_t batch = 0; batch < g.batch; ++batch) unpack<D>(zeros.data(), g.c, batch, g.m, g.n, c);
        });
        return;
    }
#if EINC_HAS_BLAS
    if (in == DType::f32) {
        blas_gemm(g, reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b), reinterpret_cast<float*>(c),
                  [](CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* x, blasint lx,
                     const float* y, blasint ly, float* z, blasint lz) {
                      cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k),
                                  1.0f, x, lx, y, ly, 0.0f, z, lz);
                  });
        return;
    }
    if (in == DType::f64) {
        blas_gemm(g, reinterpret_cast<const double*>(a), reinterpret_cast<const double*>(b), reinterpret_cast<double*>(c),
                  [](CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* x, blasint lx,
                     const double* y, blasint ly, double* z, blasint lz) {
                      cblas_dgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k),
                                  1.0, x, lx, y, ly, 0.0, z, lz);
                  });
        return;
    }
#endif
    dispatch(in, [&](auto tag) {
        constexpr DType D = decltype(tag)::value;
        if constexpr (D == DType::f8e4m3 || D == DType::f8e5m2 || D == DType::boolean)
            throw Error(ErrorKind::unsupported, fmt::format("einsum of {} is not supported", name_of(D)));
        else if constexpr (D == DType::f64) packed_gemm<D, D, double>(g, a, b, c);
        else if constexpr (std::is_floating_point_v<compute_t<D>>) packed_gemm<D, D, float>(g, a, b, c);
        else packed_gemm<D, D, std::uint64_t>(g, a, b, c);  // wraps modulo 2^64, as numpy's int64 does
    });
}

}  // namespace einc::cpu
