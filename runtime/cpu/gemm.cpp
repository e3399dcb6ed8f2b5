// Gemm on the CPU, as the schedule decided: library_gemm and _gemv through CBLAS (OpenBLAS) with the
// strides and transposes the planner chose - on OpenBLAS's threads, or (Split::gemms) whole GEMMs on each
// of einc's; packed_gemm through row-major blocks of the accumulator type in the scratch - f16 and bf16 in
// f32 (multiplied by sgemm where there is a CBLAS), integers in a blocked loop.
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <mutex>

#include "einc_build_info.hpp"
#include "runtime/cpu/accumulator.hpp"
#include "runtime/cpu/element.hpp"
#include "runtime/cpu/epilogue.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/parallel.hpp"

#if EINC_HAS_BLAS
#include <cblas.h>
#endif

namespace einc::cpu {
namespace {

// Matrix (rows x cols) of a GemmMatrix, batch b, copied into a dense row-major array of compute values.
template <DType D, typename T>
void pack(const std::byte* base, const GemmMatrix& m, std::int64_t b, std::int64_t rows, std::int64_t cols,
          T* out) {
    using S = storage_t<D>;
    const std::byte* matrix = base + b * m.batch_stride * static_cast<std::int64_t>(sizeof(S));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            out[r * cols + c] = static_cast<T>(Element<D>::load(load_at<S>(
                matrix + (r * m.row_stride + c * m.col_stride) * static_cast<std::int64_t>(sizeof(S)))));
}

template <DType D, typename T>
void unpack(const T* in, const GemmMatrix& m, std::int64_t b, std::int64_t rows, std::int64_t cols,
            std::byte* base, const Epilogue& epilogue) {
    using S = storage_t<D>;
    std::byte* matrix = base + b * m.batch_stride * static_cast<std::int64_t>(sizeof(S));
    if (!epilogue.identity()) {  // in the accumulator T, before the one conversion
        const Scale<T> scale(epilogue);
        return with_reads(scale, [&](auto reads) {
            for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t c = 0; c < cols; ++c)
                    store_scaled<D, decltype(reads)::value>(matrix + (r * m.row_stride + c * m.col_stride) *
                                                                         static_cast<std::int64_t>(sizeof(S)),
                                                            in[r * cols + c], scale);
        });
    }
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

// CBLAS for one element type.
template <typename T>
struct Blas;
template <>
struct Blas<float> {
    static constexpr auto gemm = cblas_sgemm;
    static constexpr auto gemv = cblas_sgemv;
};
template <>
struct Blas<double> {
    static constexpr auto gemm = cblas_dgemm;
    static constexpr auto gemv = cblas_dgemv;
};

blasint blas_int(std::int64_t value) {
    return static_cast<blasint>(value);
}

// OpenBLAS on one thread while it lives, for GEMMs run side by side on einc's threads. OpenBLAS's thread
// count is the process's: the first of the runs that overlap lowers it, the last restores what it was.
// (Meanwhile the program's other OpenBLAS calls run on one thread too, while einc has the cores busy.)
class OneLibraryThread {
public:
    OneLibraryThread() {
        const std::lock_guard lock(mutex_);
        if (holders_++ == 0) {
            saved_ = openblas_get_num_threads();
            openblas_set_num_threads(1);
        }
    }
    ~OneLibraryThread() {
        const std::lock_guard lock(mutex_);
        if (--holders_ == 0) openblas_set_num_threads(saved_);
    }
    OneLibraryThread(const OneLibraryThread&) = delete;
    OneLibraryThread& operator=(const OneLibraryThread&) = delete;

private:
    static inline std::mutex mutex_;
    static inline int holders_ = 0, saved_ = 1;
};

// One CBLAS call per batch: a GEMM (a column-major C computed as C^T = B^T A^T), or a matrix-vector product
// where C has one column (C = A x) or one row (C = x B, as B^T x).
template <typename T>
void blas_gemm(bool gemv, const Gemm& g, const T* a, const T* b, T* c) {
    // The epilogue in BLAS's own alpha and beta (beta == 0: C is not read, as BLAS specifies).
    const T alpha = static_cast<T>(g.epilogue.alpha), beta = static_cast<T>(g.epilogue.beta);
    for (std::int64_t batch = 0; batch < g.batch; ++batch) {
        const T* ab = a + batch * g.a.batch_stride;
        const T* bb = b + batch * g.b.batch_stride;
        T* cb = c + batch * g.c.batch_stride;
        if (gemv && g.n == 1) {  // C (m) = A (m x k) x, x a column of B
            const bool stored = g.a.row_major();
            Blas<T>::gemv(CblasRowMajor, stored ? CblasNoTrans : CblasTrans, blas_int(stored ? g.m : g.k),
                          blas_int(stored ? g.k : g.m), alpha, ab, blas_int(g.a.leading_dimension()), bb,
                          blas_int(g.b.row_stride), beta, cb, blas_int(g.c.row_stride));
        } else if (gemv) {  // C (n) = B^T (n x k) x, x the row of A
            const bool stored = g.b.row_major();
            Blas<T>::gemv(CblasRowMajor, stored ? CblasTrans : CblasNoTrans, blas_int(stored ? g.k : g.n),
                          blas_int(stored ? g.n : g.k), alpha, bb, blas_int(g.b.leading_dimension()), ab,
                          blas_int(g.a.col_stride), beta, cb, blas_int(g.c.col_stride));
        } else if (g.c.row_major()) {
            const BlasOperand x = as_stored(g.a), y = as_stored(g.b);
            Blas<T>::gemm(CblasRowMajor, x.trans, y.trans, blas_int(g.m), blas_int(g.n), blas_int(g.k), alpha,
                          ab, x.ld, bb, y.ld, beta, cb, blas_int(g.c.row_stride));
        } else {
            const BlasOperand x = as_transposed(g.b), y = as_transposed(g.a);
            Blas<T>::gemm(CblasRowMajor, x.trans, y.trans, blas_int(g.n), blas_int(g.m), blas_int(g.k), alpha,
                          bb, x.ld, ab, y.ld, beta, cb, blas_int(g.c.col_stride));
        }
    }
}
#endif

// Through packed row-major blocks of the compute type T (in the scratch): m x k of A, k x n of B, m x n of C.
template <DType D, typename T>
void packed_gemm(const Gemm& g, [[maybe_unused]] bool library_blocks, const std::byte* a, const std::byte* b,
                 std::byte* c, std::byte* scratch) {
    T* pa = reinterpret_cast<T*>(scratch);
    T* pb = pa + g.m * g.k;
    T* pc = pb + g.k * g.n;
    for (std::int64_t batch = 0; batch < g.batch; ++batch) {
        pack<D>(a, g.a, batch, g.m, g.k, pa);
        pack<D>(b, g.b, batch, g.k, g.n, pb);
#if EINC_HAS_BLAS
        if constexpr (std::is_same_v<T, float>)
            if (library_blocks && g.k > 0) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(g.m),
                            static_cast<blasint>(g.n), static_cast<blasint>(g.k), 1.0f, pa,
                            static_cast<blasint>(g.k), pb, static_cast<blasint>(g.n), 0.0f, pc,
                            static_cast<blasint>(g.n));
                unpack<D>(pc, g.c, batch, g.m, g.n, c, g.epilogue);
                continue;
            }
#endif
        blocked_gemm(pa, pb, pc, g.m, g.n, g.k);
        unpack<D>(pc, g.c, batch, g.m, g.n, c, g.epilogue);
    }
}

#if EINC_HAS_BLAS
// CBLAS for f32 and f64: the GEMMs (or matrix-vector products) of g, outer x batch of them, each whole on a
// thread where the schedule shares them out (Split::gemms).
void library_gemms(const Gemm& g, bool gemv, Split split, DType dtype, const std::byte* a, const std::byte* b,
                   std::byte* c) {
    if (g.outer == 0 || g.batch == 0 || g.m == 0 || g.n == 0) return;
    // The GEMMs of `one` at its operands' offsets (in elements).
    const auto call = [&](const Gemm& one, std::int64_t a_at, std::int64_t b_at, std::int64_t c_at) {
        if (dtype == DType::f32)
            return blas_gemm(gemv, one, reinterpret_cast<const float*>(a) + a_at,
                             reinterpret_cast<const float*>(b) + b_at, reinterpret_cast<float*>(c) + c_at);
        EINC_ASSERT(dtype == DType::f64);
        blas_gemm(gemv, one, reinterpret_cast<const double*>(a) + a_at,
                  reinterpret_cast<const double*>(b) + b_at, reinterpret_cast<double*>(c) + c_at);
    };
    Gemm one = g;
    one.outer = 1;
    if (split ==
        Split::gemms) {  // GEMM i = (outer index i / batch, batch index i % batch), whole on a thread
        one.batch = 1;
        const OneLibraryThread one_thread;
        parallel_for(g.outer * g.batch, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t i = begin; i < end; ++i) {
                const std::int64_t o = i / g.batch, n = i % g.batch;
                call(one, o * g.a.outer_stride + n * g.a.batch_stride,
                     o * g.b.outer_stride + n * g.b.batch_stride,
                     o * g.c.outer_stride + n * g.c.batch_stride);
            }
        });
        return;
    }
    for (std::int64_t o = 0; o < g.outer; ++o)  // a strided-batched GEMM per outer index
        call(one, o * g.a.outer_stride, o * g.b.outer_stride, o * g.c.outer_stride);
}
#endif

}  // namespace

// (The schedule sends GEMMs to CBLAS only where the target has one.)
void gemm([[maybe_unused]] const strategy::LibraryGemm& gemm, [[maybe_unused]] DType dtype,
          [[maybe_unused]] const std::byte* a, [[maybe_unused]] const std::byte* b,
          [[maybe_unused]] std::byte* c) {
#if EINC_HAS_BLAS
    library_gemms(gemm.gemm, false, gemm.split, dtype, a, b, c);
#else
    EINC_ASSERT(false);
#endif
}

void gemm([[maybe_unused]] const strategy::LibraryGemv& gemv, [[maybe_unused]] DType dtype,
          [[maybe_unused]] const std::byte* a, [[maybe_unused]] const std::byte* b,
          [[maybe_unused]] std::byte* c) {
#if EINC_HAS_BLAS
    library_gemms(gemv.gemm, true, gemv.split, dtype, a, b, c);
#else
    EINC_ASSERT(false);
#endif
}

void gemm(const strategy::PackedGemm& packed, DType dtype, DType accumulator, const std::byte* a,
          const std::byte* b, std::byte* c, std::byte* scratch) {
    const Gemm& g = packed.gemm;
    if (g.outer == 0 || g.batch == 0 || g.m == 0 || g.n == 0) return;
    const auto size = static_cast<std::int64_t>(size_of(dtype));
    dispatch(dtype, [&](auto tag) {
        constexpr DType D = decltype(tag)::value;
        if constexpr (D == DType::f8e4m3 || D == DType::f8e5m2 || D == DType::boolean ||
                      !computed_natively<D>) {
            EINC_ASSERT(false);  // the plan refuses einsum of these (result_dtype) or converts them
        } else {
            with_accumulator<Reduction::none, D>(accumulator, [&](auto t) {
                for (std::int64_t o = 0; o < g.outer; ++o)  // a strided-batched GEMM per outer index
                    packed_gemm<D, decltype(t)>(g, packed.library_blocks, a + o * g.a.outer_stride * size,
                                                b + o * g.b.outer_stride * size,
                                                c + o * g.c.outer_stride * size, scratch);
            });
        }
    });
}

}  // namespace einc::cpu
