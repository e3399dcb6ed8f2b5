// Copy: data movement by element size (bit-exact for every dtype), conversion between dtypes, and a
// tiled transpose for permutations whose source and destination are contiguous along different modes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "runtime/cpu/element.hpp"
#include "runtime/cpu/epilogue.hpp"
#include "runtime/cpu/isa.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/nest.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu::EINC_CPU_ISA {
namespace {

// Unsigned integers of each element size: data movement never looks at values.
template <std::size_t Size> struct Bits;
template <> struct Bits<1> { using type = std::uint8_t; };
template <> struct Bits<2> { using type = std::uint16_t; };
template <> struct Bits<4> { using type = std::uint32_t; };
template <> struct Bits<8> { using type = std::uint64_t; };

template <std::size_t Size>
EINC_KERNEL void move_run(std::byte* dst, const std::byte* src, std::int64_t count, std::int64_t dst_stride, std::int64_t src_stride) {
    using T = typename Bits<Size>::type;
    if (dst_stride == Size && src_stride == Size) {
        std::memcpy(dst, src, static_cast<std::size_t>(count) * Size);
    } else if (src_stride == 0) {
        const T value = load_at<T>(src);
        for (std::int64_t i = 0; i < count; ++i) store_at<T>(dst + i * dst_stride, value);
    } else {
        for (std::int64_t i = 0; i < count; ++i) store_at<T>(dst + i * dst_stride, load_at<T>(src + i * src_stride));
    }
}

// Walks the nest; Split::outer shares its outermost mode between threads.
template <std::size_t N, typename Run>
void walk(const Nest<N>& nest, Split split, Run run) {
    const std::int64_t outer = nest.rank() == 0 ? 1 : nest.extents[0];
    if (split != Split::outer) {
        for_each_run(nest, 0, outer, run);
        return;
    }
    parallel_for(outer, [&](std::int64_t begin, std::int64_t end) { for_each_run(nest, begin, end, run); });
}

#if defined(EINC_CPU_AVX2)
// An 8x8 block of 4-byte elements transposed in registers: source rows s, s + ss, ... (8 elements each)
// become destination rows d, d + ds, ... (strides in elements). Bits only move: any 4-byte dtype.
__attribute__((target("avx2"))) inline void transpose_block(const std::uint32_t* s, std::int64_t ss, std::uint32_t* d, std::int64_t ds) {
    // (No lambdas: they would not inherit the target attribute the intrinsics need.)
    const float* f = reinterpret_cast<const float*>(s);
    const __m256 r0 = _mm256_loadu_ps(f), r1 = _mm256_loadu_ps(f + ss), r2 = _mm256_loadu_ps(f + 2 * ss), r3 = _mm256_loadu_ps(f + 3 * ss);
    const __m256 r4 = _mm256_loadu_ps(f + 4 * ss), r5 = _mm256_loadu_ps(f + 5 * ss), r6 = _mm256_loadu_ps(f + 6 * ss), r7 = _mm256_loadu_ps(f + 7 * ss);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3);
    const __m256 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE), u2 = _mm256_shuffle_ps(t1, t3, 0x44);
    const __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xEE), u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    float* o = reinterpret_cast<float*>(d);
    _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(o + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(o + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(o + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(o + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(o + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(o + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(o + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}
constexpr std::int64_t register_block = 8;
#elif defined(__SSE2__)
// A 4x4 block of 4-byte elements transposed in registers (as the AVX2 version, with 4-wide vectors).
inline void transpose_block(const std::uint32_t* s, std::int64_t ss, std::uint32_t* d, std::int64_t ds) {
    __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(s)), r1 = _mm_loadu_ps(reinterpret_cast<const float*>(s + ss));
    __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(s + 2 * ss)), r3 = _mm_loadu_ps(reinterpret_cast<const float*>(s + 3 * ss));
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(reinterpret_cast<float*>(d), r0);
    _mm_storeu_ps(reinterpret_cast<float*>(d + ds), r1);
    _mm_storeu_ps(reinterpret_cast<float*>(d + 2 * ds), r2);
    _mm_storeu_ps(reinterpret_cast<float*>(d + 3 * ds), r3);
}
constexpr std::int64_t register_block = 4;
#else
constexpr std::int64_t register_block = 0;  // no vector transposes: tiles go through the buffer
#endif

#if defined(__SSE2__)
// Rows [row_begin, row_end) of a 2-D transpose of 4-byte elements, in 64 x 64 tiles of register blocks
// loaded from the source and stored to the destination directly: whole blocks are 32 (16) contiguous
// bytes on both sides, so no buffer is needed; the edges of a tile that make no whole block are copied
// one element at a time. (About 2.5x the buffered transpose on a 4096^2 f32 matrix.)
EINC_KERNEL void transpose_tiles_in_registers(std::uint32_t* d, const std::uint32_t* s, std::int64_t row_begin, std::int64_t row_end,
                                              std::int64_t cols, std::int64_t src_col, std::int64_t dst_row) {
    constexpr std::int64_t tile = 64, b = register_block;
    for (std::int64_t r0 = row_begin; r0 < row_end; r0 += tile)
        for (std::int64_t c0 = 0; c0 < cols; c0 += tile) {
            const std::int64_t nr = std::min(tile, row_end - r0), nc = std::min(tile, cols - c0);
            const std::int64_t whole_r = nr / b * b, whole_c = nc / b * b;
            for (std::int64_t c = c0; c < c0 + whole_c; c += b)
                for (std::int64_t r = r0; r < r0 + whole_r; r += b) transpose_block(s + c * src_col + r, src_col, d + r * dst_row + c, dst_row);
            for (std::int64_t r = r0; r < r0 + nr; ++r)
                for (std::int64_t c = r < r0 + whole_r ? c0 + whole_c : c0; c < c0 + nc; ++c) d[r * dst_row + c] = s[c * src_col + r];
        }
}
#endif

// Rows [row_begin, row_end) of a 2-D transpose, tile by tile through a buffer (see transpose()).
template <std::size_t Size>
EINC_KERNEL void transpose_tiles(std::byte* d_bytes, const std::byte* s_bytes, std::int64_t row_begin, std::int64_t row_end,
                                 std::int64_t cols, std::int64_t src_col, std::int64_t dst_row) {
    using T = typename Bits<Size>::type;
    T* d = reinterpret_cast<T*>(d_bytes);
    const T* s = reinterpret_cast<const T*>(s_bytes);
    constexpr std::int64_t tile = Size == 8 ? 32 : 64;
    alignas(64) T buffer[tile * tile];  // buffer[c * tile + r]
    for (std::int64_t r0 = row_begin; r0 < row_end; r0 += tile)
        for (std::int64_t c0 = 0; c0 < cols; c0 += tile) {
            const std::int64_t nr = std::min(tile, row_end - r0), nc = std::min(tile, cols - c0);
            for (std::int64_t c = 0; c < nc; ++c)
                std::memcpy(buffer + c * tile, s + (c0 + c) * src_col + r0, static_cast<std::size_t>(nr) * Size);
            for (std::int64_t r = 0; r < nr; ++r) {
                T* out = d + (r0 + r) * dst_row + c0;
                for (std::int64_t c = 0; c < nc; ++c) out[c] = buffer[c * tile + r];
            }
        }
}

// A 2-D transpose with a short side (8 elements or fewer): stream along the long one. Either the source
// is read in order and written to a few destination rows, or the destination is written in order from a
// few source rows; [begin, end) is a range of the long side.
template <std::size_t Size>
EINC_KERNEL void transpose_short(std::byte* d_bytes, const std::byte* s_bytes, std::int64_t begin, std::int64_t end, std::int64_t rows,
                                 std::int64_t cols, std::int64_t src_col, std::int64_t dst_row) {
    using T = typename Bits<Size>::type;
    T* d = reinterpret_cast<T*>(d_bytes);
    const T* s = reinterpret_cast<const T*>(s_bytes);
    if (rows <= 8) {  // few rows: columns [begin, end), each read in order (rows elements)
        for (std::int64_t c = begin; c < end; ++c)
            for (std::int64_t r = 0; r < rows; ++r) d[r * dst_row + c] = s[c * src_col + r];
    } else {  // few columns: rows [begin, end), each written in order (cols elements)
        for (std::int64_t r = begin; r < end; ++r)
            for (std::int64_t c = 0; c < cols; ++c) d[r * dst_row + c] = s[c * src_col + r];
    }
}

// A 2-D transpose between mode `p` (unit stride in the source) and the last mode (unit stride in the
// destination), for every index of the other modes. Each tile goes through registers, or through a small
// buffer: read from the source along its contiguous mode, then written to the destination along its own.
// Done directly, with power-of-two strides every line of a tile maps to the same L1 set and lines evict
// each other before they are used up; through the buffer each side streams whole lines.
template <std::size_t Size>
void transpose(const ScheduledStep& step, const Data& dst, const Data& src) {
    const Layout& src_layout = step.nest.src;
    const Layout& dst_layout = step.nest.dst;
    const std::size_t p = step.transpose_mode, last = dst_layout.rank() - 1;
    const std::int64_t rows = src_layout.modes[p].extent, cols = src_layout.modes[last].extent;
    const std::int64_t src_col = src_layout.modes[last].stride;  // elements; the source is unit stride along rows
    const std::int64_t dst_row = dst_layout.modes[p].stride;     // elements; the destination is unit stride along cols
    // The other modes form an outer nest; each of its runs has length 1.
    Layout src_outer, dst_outer;
    for (std::size_t k = 0; k < last; ++k)
        if (k != p) {
            src_outer.modes.push_back(src_layout.modes[k]);
            dst_outer.modes.push_back(dst_layout.modes[k]);
        }
    src_outer.modes.push_back(Mode{1, 0});
    dst_outer.modes.push_back(Mode{1, 0});
    const Nest<2> outer = make_nest<2>({&dst_outer, &src_outer}, {dst.base, src.base}, {Size, Size});
    constexpr std::int64_t tile = Size == 8 ? 32 : 64;  // 16 KiB or less: a buffered tile stays in L1
    const TransposeKind kind = step.transpose_kind;
    const std::int64_t long_side = kind == TransposeKind::short_side && rows <= 8 ? cols : rows;
    const auto block = [&](std::byte* d, const std::byte* s_, std::int64_t begin, std::int64_t end) {
        if (kind == TransposeKind::short_side) return transpose_short<Size>(d, s_, begin, end, rows, cols, src_col, dst_row);
#if defined(__SSE2__)
        if constexpr (Size == 4)
            if (kind == TransposeKind::registers)
                return transpose_tiles_in_registers(reinterpret_cast<std::uint32_t*>(d), reinterpret_cast<const std::uint32_t*>(s_), begin,
                                                    end, cols, src_col, dst_row);
#endif
        EINC_ASSERT(kind != TransposeKind::registers);
        transpose_tiles<Size>(d, s_, begin, end, cols, src_col, dst_row);
    };
    const auto whole = [&](std::array<std::byte*, 2> ptr, std::int64_t, const std::array<std::int64_t, 2>&) { block(ptr[0], ptr[1], 0, long_side); };
    switch (step.split) {
    case Split::outer:
        parallel_for(outer.extents[0], [&](std::int64_t begin, std::int64_t end) { for_each_run(outer, begin, end, whole); });
        break;
    case Split::tiles:
        parallel_for((long_side + tile - 1) / tile, [&](std::int64_t begin, std::int64_t end) {
            block(dst.base, src.base, begin * tile, std::min(end * tile, long_side));
        });
        break;
    default: for_each_run(outer, 0, outer.extents[0], whole);
    }
}

template <std::size_t Size>
void move(const ScheduledStep& step, const Data& dst, const Data& src) {
    if (step.strategy == Strategy::transpose) return transpose<Size>(step, dst, src);
    const Nest<2> nest = make_nest<2>({&step.nest.dst, &step.nest.src}, {dst.base, src.base}, {Size, Size});
    walk(nest, step.split, [](std::array<std::byte*, 2> p, std::int64_t count, const std::array<std::int64_t, 2>& stride) {
        move_run<Size>(p[0], p[1], count, stride[0], stride[1]);
    });
}

template <DType From, DType To>
EINC_KERNEL void convert_run(std::byte* dst, const std::byte* src, std::int64_t count, std::int64_t dst_stride, std::int64_t src_stride) {
    using S = storage_t<From>;
    using D = storage_t<To>;
    for (std::int64_t i = 0; i < count; ++i) {
        const auto value = Element<From>::load(load_at<S>(src + i * src_stride));
        store_at<D>(dst + i * dst_stride, Element<To>::store(convert<compute_t<To>>(value)));
    }
}

template <DType From, DType To>
void convert_copy(const ScheduledStep& step, const Data& dst, const Data& src) {
    using S = storage_t<From>;
    using D = storage_t<To>;
    const Nest<2> nest = make_nest<2>({&step.nest.dst, &step.nest.src}, {dst.base, src.base}, {sizeof(D), sizeof(S)});
    walk(nest, step.split, [](std::array<std::byte*, 2> p, std::int64_t count, const std::array<std::int64_t, 2>& stride) {
        convert_run<From, To>(p[0], p[1], count, stride[0], stride[1]);
    });
}

// A run of source elements as accumulator values, and a run of those stored with the epilogue: two
// passes over a short chunk, so that the loops are instantiated per dtype and not per pair of them.
template <DType From, typename A>
EINC_KERNEL void load_values(A* out, const std::byte* src, std::int64_t count, std::int64_t stride) {
    for (std::int64_t i = 0; i < count; ++i)
        out[i] = static_cast<A>(Element<From>::load(load_at<storage_t<From>>(src + i * stride)));
}

template <DType To, bool Reads, typename A>
EINC_KERNEL void store_values(std::byte* dst, const A* values, std::int64_t count, std::int64_t stride,
                              const Scale<A>& scale) {
    for (std::int64_t i = 0; i < count; ++i) store_scaled<To, Reads>(dst + i * stride, values[i], scale);
}

// dst = alpha * src + beta * dst, in the step's accumulator (the schedule makes such a copy `convert`).
template <typename A>
void scaled_copy(const ScheduledStep& step, const Data& dst, const Data& src) {
    const Scale<A> scale(step.epilogue);
    const Nest<2> nest = make_nest<2>({&step.nest.dst, &step.nest.src}, {dst.base, src.base},
                                      {size_of(dst.dtype), size_of(src.dtype)});
    walk(nest, step.split,
         [&](std::array<std::byte*, 2> p, std::int64_t count, const std::array<std::int64_t, 2>& stride) {
             constexpr std::int64_t chunk = 256;
             A values[chunk];
             for (std::int64_t i0 = 0; i0 < count; i0 += chunk) {
                 const std::int64_t n = std::min(chunk, count - i0);
                 dispatch(src.dtype, [&](auto from) {
                     load_values<decltype(from)::value>(values, p[1] + i0 * stride[1], n, stride[1]);
                 });
                 dispatch(dst.dtype, [&](auto to) {
                     with_reads(scale, [&](auto reads) {
                         store_values<decltype(to)::value, decltype(reads)::value>(
                             p[0] + i0 * stride[0], values, n, stride[0], scale);
                     });
                 });
             }
         });
}

}  // namespace

void copy(const ScheduledStep& step, const Data& dst, const Data& src) {
    if (step.nest.dst.size() == 0) return;
    if (!step.epilogue.identity())
        return with_accumulator_type(step.accumulator,
                                     [&](auto a) { scaled_copy<decltype(a)>(step, dst, src); });
    if (step.strategy == Strategy::convert) {
        dispatch(src.dtype, [&](auto from) {
            dispatch(dst.dtype, [&](auto to) { convert_copy<decltype(from)::value, decltype(to)::value>(step, dst, src); });
        });
        return;
    }
    switch (size_of(src.dtype)) {
    case 1: return move<1>(step, dst, src);
    case 2: return move<2>(step, dst, src);
    case 4: return move<4>(step, dst, src);
    case 8: return move<8>(step, dst, src);
    default: EINC_ASSERT(false);
    }
}

}  // namespace einc::cpu::EINC_CPU_ISA
