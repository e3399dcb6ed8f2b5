// Copy: data movement by element size (bit-exact for every dtype), conversion between dtypes, and a
// tiled transpose for permutations whose source and destination are contiguous along different modes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "runtime/cpu/accumulator.hpp"
#include "runtime/cpu/element.hpp"
#include "runtime/cpu/epilogue.hpp"
#include "runtime/cpu/isa.hpp"
#include "runtime/cpu/kernels.hpp"
#include "runtime/cpu/nest.hpp"
#include "runtime/cpu/parallel.hpp"

namespace einc::cpu::EINC_CPU_ISA {
namespace {

// Unsigned integers of each element size: data movement never looks at values.
template <std::size_t Size>
struct Bits;
template <>
struct Bits<1> {
    using type = std::uint8_t;
};
template <>
struct Bits<2> {
    using type = std::uint16_t;
};
template <>
struct Bits<4> {
    using type = std::uint32_t;
};
template <>
struct Bits<8> {
    using type = std::uint64_t;
};
template <>
struct Bits<16> {  // c128
    struct type {
        std::uint64_t low, high;
    };
};

template <std::size_t Size>
EINC_KERNEL void move_run(std::byte* dst, const std::byte* src, std::int64_t count, std::int64_t dst_stride,
                          std::int64_t src_stride) {
    using T = typename Bits<Size>::type;
    if (dst_stride == Size && src_stride == Size) {
        std::memcpy(dst, src, static_cast<std::size_t>(count) * Size);
    } else if (src_stride == 0) {
        const T value = load_at<T>(src);
        for (std::int64_t i = 0; i < count; ++i) store_at<T>(dst + i * dst_stride, value);
    } else {
        for (std::int64_t i = 0; i < count; ++i)
            store_at<T>(dst + i * dst_stride, load_at<T>(src + i * src_stride));
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
__attribute__((target("avx2"))) inline void transpose_block(const std::uint32_t* s, std::int64_t ss,
                                                            std::uint32_t* d, std::int64_t ds) {
    // (No lambdas: they would not inherit the target attribute the intrinsics need.)
    const float* f = reinterpret_cast<const float*>(s);
    const __m256 r0 = _mm256_loadu_ps(f), r1 = _mm256_loadu_ps(f + ss), r2 = _mm256_loadu_ps(f + 2 * ss),
                 r3 = _mm256_loadu_ps(f + 3 * ss);
    const __m256 r4 = _mm256_loadu_ps(f + 4 * ss), r5 = _mm256_loadu_ps(f + 5 * ss),
                 r6 = _mm256_loadu_ps(f + 6 * ss), r7 = _mm256_loadu_ps(f + 7 * ss);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                 t2 = _mm256_unpacklo_ps(r2, r3);
    const __m256 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5),
                 t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44);
    const __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xEE), u4 = _mm256_shuffle_ps(t4, t6, 0x44),
                 u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
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
// One vector of 4-byte elements stored around the caches (`to` 32-byte aligned).
__attribute__((target("avx2"))) inline void stream_vector(std::uint32_t* to, const std::uint32_t* from) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from)));
}
constexpr std::int64_t register_block = 8;
#elif defined(__SSE2__)
// A 4x4 block of 4-byte elements transposed in registers (as the AVX2 version, with 4-wide vectors).
inline void transpose_block(const std::uint32_t* s, std::int64_t ss, std::uint32_t* d, std::int64_t ds) {
    __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(s)),
           r1 = _mm_loadu_ps(reinterpret_cast<const float*>(s + ss));
    __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(s + 2 * ss)),
           r3 = _mm_loadu_ps(reinterpret_cast<const float*>(s + 3 * ss));
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    float* o = reinterpret_cast<float*>(d);
    _mm_storeu_ps(o, r0);
    _mm_storeu_ps(o + ds, r1);
    _mm_storeu_ps(o + 2 * ds, r2);
    _mm_storeu_ps(o + 3 * ds, r3);
}
// One vector of 4-byte elements stored around the caches (`to` 16-byte aligned).
inline void stream_vector(std::uint32_t* to, const std::uint32_t* from) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(to), _mm_loadu_si128(reinterpret_cast<const __m128i*>(from)));
}
constexpr std::int64_t register_block = 4;
#else
constexpr std::int64_t register_block = 0;  // no vector transposes: tiles go element by element
#endif
constexpr std::int64_t stage_bytes = 16 << 10;  // stream_tile's staging area, on the stack: it stays in L1

// A tiled transpose (TransposeTiles) as one run walks it, in elements: the nest's extents and strides, the
// tile's extents and its buffer's strides (mode p contiguous, then the read order's modes), and the
// orders. Set up once per run, on the stack.
struct Tiling {
    using Modes = std::array<std::int64_t, max_transpose_rank>;
    using Order = std::array<std::size_t, max_transpose_rank>;
    std::size_t p = 0, q = 0, reads = 0, writes = 0, walks = 0;
    Modes extent{}, src_stride{}, dst_stride{}, tile{}, buffer_stride{}, tiles_along{};
    Order read{}, write{}, walk{};

    Tiling(const strategy::Transpose& transpose, std::int64_t element_bytes)
        : p(transpose.source_mode), q(transpose.dst.rank() - 1) {
        const TransposeTiles& t = transpose.tiles;
        for (std::size_t m = 0; m <= q; ++m) {
            extent[m] = transpose.dst.modes[m].extent;
            src_stride[m] = transpose.src.modes[m].stride;
            dst_stride[m] = transpose.dst.modes[m].stride;
            tile[m] = t.extents[m];
            tiles_along[m] = (extent[m] + tile[m] - 1) / tile[m];
        }
        for (const std::size_t m : t.read_order) read[reads++] = m;
        for (const std::size_t m : t.write_order) write[writes++] = m;
        for (const std::size_t m : t.tile_order) walk[walks++] = m;
        buffer_stride[p] = 1;
        std::int64_t stride = tile[p];
        for (std::size_t i = 0; i < reads; ++i) {
            buffer_stride[read[i]] = stride;
            stride *= tile[read[i]];
        }
        EINC_ASSERT(transpose.kind == TransposeKind::direct ||
                    stride * element_bytes <= transpose_buffer_bytes);
    }

    // Tile number t (innermost walk mode fastest): its first index per mode, and its offsets.
    void locate(std::int64_t t, Modes& origin, std::int64_t& src_offset, std::int64_t& dst_offset) const {
        src_offset = dst_offset = 0;
        for (std::size_t i = 0; i < walks; ++i) {
            const std::size_t m = walk[i];
            origin[m] = t % tiles_along[m] * tile[m];
            t /= tiles_along[m];
            src_offset += origin[m] * src_stride[m];
            dst_offset += origin[m] * dst_stride[m];
        }
    }
};

// An odometer over some of a tile's modes (innermost first), carrying N offsets along (one per stride array).
// Built for every run of rows of a tile: only its `count` digits are cleared (clearing all of them, a
// `rep stos`, took half of a small tile's time).
template <std::size_t N>
struct Odometer {
    const std::size_t* modes;
    std::size_t count;
    const std::int64_t* extent;
    std::array<const std::int64_t*, N> stride;
    std::array<std::int64_t, max_transpose_rank> index;
    std::array<std::int64_t, N> offset{};

    Odometer(const std::size_t* modes_, std::size_t count_, const std::int64_t* extent_,
             std::array<const std::int64_t*, N> stride_)
        : modes(modes_), count(count_), extent(extent_), stride(stride_) {
        std::fill_n(index.begin(), count, 0);
    }

    bool next() {
        for (std::size_t i = 0; i < count; ++i) {
            const std::size_t m = modes[i];
            for (std::size_t a = 0; a < N; ++a) offset[a] += stride[a][m];
            if (++index[i] < extent[m]) return true;
            for (std::size_t a = 0; a < N; ++a) offset[a] -= index[i] * stride[a][m];
            index[i] = 0;
        }
        return false;
    }
};

// Reads one tile into the buffer, a source run (mode p) at a time, and keeps the runs about 8 KiB further
// on (of this tile, then of the next) on their way to L2: the prefetchers don't follow hundreds of short
// runs far apart. Into L2, not L1, whose few outstanding misses held the reads to half the bandwidth
// (a 4096x4096 transpose read its tiles in 2.5 ms prefetching into L1, in 1.3 ms into L2); and no whole
// tiles ahead: runs a power of two apart share a few cache sets and evict each other before they are read.
template <std::size_t Size>
EINC_KERNEL void read_tile(const Tiling& t, const std::int64_t* n, const std::byte* src,
                           const std::byte* next, std::byte* buffer) {
    constexpr std::size_t ahead_bytes = 8 << 10;
    constexpr auto size = static_cast<std::int64_t>(Size);
    // A run is mode p, and the next read mode too where it continues p in both the source and the buffer.
    const bool longer = t.reads > 0 && n[t.p] == t.tile[t.p] && t.src_stride[t.read[0]] == n[t.p];
    const std::size_t first = longer ? 1 : 0;
    const auto run_bytes = static_cast<std::size_t>(n[t.p] * (longer ? n[t.read[0]] : 1)) * Size;
    Odometer<2> runs{
        t.read.data() + first, t.reads - first, n, {t.src_stride.data(), t.buffer_stride.data()}};
    Odometer<1> soon{t.read.data() + first, t.reads - first, n, {t.src_stride.data()}};
    auto soon_base = reinterpret_cast<std::uintptr_t>(src);  // (an address only: it may lie past the tensor)
    const auto advance = [&] {
        if (!soon.next()) soon_base = next != nullptr ? reinterpret_cast<std::uintptr_t>(next) : 0;
    };
    for (std::size_t ahead = 0; ahead < ahead_bytes; ahead += run_bytes) advance();
    do {
        if (soon_base != 0) {
            const std::uintptr_t at = soon_base + static_cast<std::uintptr_t>(soon.offset[0] * size);
            for (std::size_t line = 0; line < run_bytes; line += 64)
                __builtin_prefetch(reinterpret_cast<const void*>(at + line), 0, 2);
            advance();
        }
        const std::byte* from = src + runs.offset[0] * size;
        std::byte* to = buffer + runs.offset[1] * size;
        std::size_t i = 0;
        for (; i + 32 <= run_bytes; i += 32) std::memcpy(to + i, from + i, 32);  // vector moves
        for (; i < run_bytes; i += Size) std::memcpy(to + i, from + i, Size);
    } while (runs.next());
}

// Writes one tile from the buffer to the destination: blocks of rows of mode p (the register block's
// height), each along the destination's contiguous modes, so that every destination line is finished by
// the next block or two while it is still in L1. Kind direct passes the source and its strides as the
// buffer.
template <std::size_t Size, bool Registers>
EINC_KERNEL void write_tile(const Tiling& t, const std::int64_t* n, const std::byte* buffer_bytes,
                            const Tiling::Modes& buffer_stride, std::byte* dst_bytes, bool direct = false) {
    using T = typename Bits<Size>::type;
    const T* buffer = reinterpret_cast<const T*>(buffer_bytes);
    T* dst = reinterpret_cast<T*>(dst_bytes);
    const std::int64_t np = n[t.p], nq = n[t.q], dst_row = t.dst_stride[t.p], buffer_row = buffer_stride[t.q];
    constexpr std::int64_t block = Registers ? register_block : 1;
    // The innermost write mode is a plain loop (a 5-D tile had one register block per step of the odometer).
    const std::size_t inner = t.writes > 0 ? 1 : 0;
    const std::int64_t lines_inner = inner ? n[t.write[0]] : 1,
                       dst_line = inner ? t.dst_stride[t.write[0]] : 0,
                       buffer_line = inner ? buffer_stride[t.write[0]] : 0;
    // Read straight from the source, rows of p go in passes of a source line's worth (two AVX2 blocks), so
    // that each source line is used up at once; from the buffer, a block's worth: the destination lines a
    // pass fills share one cache set where its rows are a power of two apart, and 8 fit.
    const std::int64_t band = !Registers || block == 0 ? 1
                              : direct                 ? std::max<std::int64_t>(block, 64 / Size)
                                                       : block;
    for (std::int64_t p0 = 0; p0 < np; p0 += band) {
        const std::int64_t rows = std::min(band, np - p0);
        Odometer<2> lines{
            t.write.data() + inner, t.writes - inner, n, {t.dst_stride.data(), buffer_stride.data()}};
        do {
            for (std::int64_t line = 0; line < lines_inner; ++line) {
                T* d = dst + lines.offset[0] + line * dst_line + p0 * dst_row;
                const T* b = buffer + lines.offset[1] + line * buffer_line + p0;
                std::int64_t q0 = 0, blocked = 0;  // columns and rows moved by register blocks
#if defined(__SSE2__)
                if constexpr (Registers && Size == 4 && block > 0) {
                    blocked = rows / block * block;
                    const auto move_block = [&](std::int64_t h, std::int64_t c) {
                        transpose_block(reinterpret_cast<const std::uint32_t*>(b + h + c * buffer_row),
                                        buffer_row, reinterpret_cast<std::uint32_t*>(d + h * dst_row + c),
                                        dst_row);
                    };
                    // Two blocks side by side unrolled: each of their loads keeps one stride (a
                    // prefetcher follows it), where a loop over the blocks alternated two.
                    if (blocked == 2 * block)
                        for (; q0 + block <= nq; q0 += block) {
                            move_block(0, q0);
                            move_block(block, q0);
                        }
                    for (; blocked > 0 && q0 + block <= nq; q0 += block)
                        for (std::int64_t h = 0; h < blocked; h += block) move_block(h, q0);
                }
#endif
                for (std::int64_t r = blocked; r < rows; ++r)
                    for (std::int64_t c = 0; c < q0; ++c) d[r * dst_row + c] = b[c * buffer_row + r];
                for (std::int64_t r = 0; r < rows; ++r)
                    for (std::int64_t c = q0; c < nq; ++c) d[r * dst_row + c] = b[c * buffer_row + r];
            }
        } while (lines.next());
    }
}

#if defined(__SSE2__)
// `count` 4-byte elements stored around the caches, in order: whole vectors from the first aligned one on,
// the ends stored as usual.
EINC_KERNEL void stream_run(std::uint32_t* to, const std::uint32_t* from, std::int64_t count) {
    constexpr auto vector_bytes = static_cast<std::uintptr_t>(register_block * 4);
    const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(to) % vector_bytes;
    const std::int64_t head =
        offset == 0 ? 0 : std::min(count, static_cast<std::int64_t>((vector_bytes - offset) / 4));
    std::int64_t i = 0;
    for (; i < head; ++i) to[i] = from[i];
    for (; i + register_block <= count; i += register_block) stream_vector(to + i, from + i);
    for (; i < count; ++i) to[i] = from[i];
}

// Writes one tile of 4-byte elements with streaming stores, each destination run whole and in order. A
// register block writes a vector into each of 8 destination rows (4 under SSE2); its rows go to a staging
// area in L1 first, a row of it per destination row, and from there each run is streamed. Streamed
// straight from the blocks, interleaved across the rows, the stores left their write-combining buffers
// part-filled: on a 2-core EPYC VM, a 4096^2 f32 transpose took 23 ms that way on two threads, 10.7 ms
// staged (writing 64 MB in runs of 512 bytes took 2.1 ms, in runs of 64 bytes 11). A run is mode q, with
// the first write mode where the destination continues q (whole lines of a tile spanning several modes);
// runs longer than a staged row go in pieces.
EINC_KERNEL void stream_tile(const Tiling& t, const std::int64_t* n, const std::byte* buffer_bytes,
                             std::byte* dst_bytes) {
    constexpr std::int64_t block = register_block, staged_row = stage_bytes / (block * 4);
    alignas(64) std::uint32_t stage[block * staged_row];
    const auto* buffer = reinterpret_cast<const std::uint32_t*>(buffer_bytes);
    auto* dst = reinterpret_cast<std::uint32_t*>(dst_bytes);
    const std::int64_t np = n[t.p], nq = n[t.q], dst_row = t.dst_stride[t.p],
                       buffer_row = t.buffer_stride[t.q];
    const bool longer = t.writes > 0 && t.dst_stride[t.write[0]] == nq;
    const std::size_t first = longer ? 1 : 0;
    const std::int64_t segments = longer ? n[t.write[0]] : 1,
                       segment_buffer = longer ? t.buffer_stride[t.write[0]] : 0;
    for (std::int64_t p0 = 0; p0 < np; p0 += block) {
        const std::int64_t rows = std::min(block, np - p0);
        Odometer<2> lines{
            t.write.data() + first, t.writes - first, n, {t.dst_stride.data(), t.buffer_stride.data()}};
        do {
            std::uint32_t* run = dst + lines.offset[0] + p0 * dst_row;
            std::int64_t staged = 0, written = 0;  // elements of the run in the stage, and before it
            const auto flush = [&] {
                for (std::int64_t r = 0; r < rows; ++r)
                    stream_run(run + r * dst_row + written, stage + r * staged_row, staged);
                written += staged;
                staged = 0;
            };
            for (std::int64_t s = 0; s < segments; ++s) {
                const std::uint32_t* b = buffer + lines.offset[1] + s * segment_buffer + p0;
                for (std::int64_t q0 = 0; q0 < nq; q0 += block) {
                    if (staged + block > staged_row) flush();
                    const std::int64_t columns = std::min(block, nq - q0);
                    if (rows == block && columns == block)
                        transpose_block(b + q0 * buffer_row, buffer_row, stage + staged, staged_row);
                    else
                        for (std::int64_t r = 0; r < rows; ++r)
                            for (std::int64_t c = 0; c < columns; ++c)
                                stage[r * staged_row + staged + c] = b[(q0 + c) * buffer_row + r];
                    staged += columns;
                }
            }
            flush();
        } while (lines.next());
    }
}
#endif

// Tiles [begin, end) of a tiled transpose, through a buffer on this thread's stack (kind direct: none).
template <std::size_t Size>
void transpose_tiles(const strategy::Transpose& transpose, const Tiling& t, std::byte* dst,
                     const std::byte* src, std::int64_t begin, std::int64_t end) {
    alignas(64) std::byte buffer[transpose_buffer_bytes];
    constexpr auto size = static_cast<std::int64_t>(Size);
    const bool registers = transpose.kind == TransposeKind::registers;
    [[maybe_unused]] const bool stream =
        registers && transpose.streaming_stores && register_block > 0 && Size == 4;
    Tiling::Modes origin{}, next_origin{};
    for (std::int64_t k = begin; k < end; ++k) {
        std::int64_t src_offset = 0, dst_offset = 0, next_src = 0, next_dst = 0;
        t.locate(k, origin, src_offset, dst_offset);
        std::array<std::int64_t, max_transpose_rank> n{};
        for (std::size_t m = 0; m <= t.q; ++m) n[m] = std::min(t.tile[m], t.extent[m] - origin[m]);
        std::byte* out = dst + dst_offset * size;
        if (transpose.kind == TransposeKind::direct) {
            write_tile<Size, true>(t, n.data(), src + src_offset * size, t.src_stride, out, true);
            continue;
        }
        if (k + 1 < end) t.locate(k + 1, next_origin, next_src, next_dst);
        read_tile<Size>(t, n.data(), src + src_offset * size, k + 1 < end ? src + next_src * size : nullptr,
                        buffer);
#if defined(__SSE2__)
        if (stream) {
            stream_tile(t, n.data(), buffer, out);
            continue;
        }
#endif
        if (registers)
            write_tile<Size, true>(t, n.data(), buffer, t.buffer_stride, out);
        else
            write_tile<Size, false>(t, n.data(), buffer, t.buffer_stride, out);
    }
#if defined(__SSE2__)
    if (stream) _mm_sfence();  // the streamed lines are visible before this thread says it is done
#endif
}

// A 2-D transpose with a short side (the schedule's short_source_mode): stream along the long one. Either
// the source is read in order and written to a few destination rows, or the destination is written in
// order from a few source rows; [begin, end) is a range of the long side.
template <std::size_t Size>
EINC_KERNEL void transpose_short(std::byte* d_bytes, const std::byte* s_bytes, std::int64_t begin,
                                 std::int64_t end, bool few_rows, std::int64_t rows, std::int64_t cols,
                                 std::int64_t src_col, std::int64_t dst_row) {
    using T = typename Bits<Size>::type;
    T* d = reinterpret_cast<T*>(d_bytes);
    const T* s = reinterpret_cast<const T*>(s_bytes);
    if (few_rows) {  // few rows: columns [begin, end), each read in order (rows elements)
        for (std::int64_t c = begin; c < end; ++c)
            for (std::int64_t r = 0; r < rows; ++r) d[r * dst_row + c] = s[c * src_col + r];
    } else {  // few columns: rows [begin, end), each written in order (cols elements)
        for (std::int64_t r = begin; r < end; ++r)
            for (std::int64_t c = 0; c < cols; ++c) d[r * dst_row + c] = s[c * src_col + r];
    }
}

// A transpose between mode p (unit stride in the source) and the last mode (unit stride in the
// destination). Tiled (TransposeTiles), or, with a short side, a 2-D loop for every index of the other
// modes. (Moved directly, element by element between two power-of-two strided sides, every line of a
// tile maps to the same L1 set, and lines evict each other before they are used up.)
template <std::size_t Size>
void transpose_by_size(const strategy::Transpose& transpose, const Data& dst, const Data& src) {
    if (transpose.kind != TransposeKind::short_side) {
        const Tiling tiling(transpose, static_cast<std::int64_t>(Size));
        const auto tiles = [&](std::int64_t begin, std::int64_t end) {
            transpose_tiles<Size>(transpose, tiling, dst.base, src.base, begin, end);
        };
        if (transpose.split == Split::tiles)
            parallel_for(transpose.tiles.count, tiles);
        else
            tiles(0, transpose.tiles.count);
        return;
    }
    const Layout& src_layout = transpose.src;
    const Layout& dst_layout = transpose.dst;
    const std::size_t p = transpose.source_mode, last = dst_layout.rank() - 1;
    const bool few_rows = transpose.short_source_mode;
    const std::int64_t rows = src_layout.modes[p].extent, cols = src_layout.modes[last].extent;
    const std::int64_t src_col =
        src_layout.modes[last].stride;  // elements; the source is unit stride along rows
    const std::int64_t dst_row =
        dst_layout.modes[p].stride;  // elements; the destination is unit stride along cols
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
    constexpr std::int64_t band = 64;
    const std::int64_t long_side = few_rows ? cols : rows;
    const auto whole = [&](std::array<std::byte*, 2> ptr, std::int64_t, const std::array<std::int64_t, 2>&) {
        transpose_short<Size>(ptr[0], ptr[1], 0, long_side, few_rows, rows, cols, src_col, dst_row);
    };
    switch (transpose.split) {
    case Split::outer:
        parallel_for(outer.extents[0],
                     [&](std::int64_t begin, std::int64_t end) { for_each_run(outer, begin, end, whole); });
        break;
    case Split::tiles:
        parallel_for((long_side + band - 1) / band, [&](std::int64_t begin, std::int64_t end) {
            transpose_short<Size>(dst.base, src.base, begin * band, std::min(end * band, long_side), few_rows,
                                  rows, cols, src_col, dst_row);
        });
        break;
    default: for_each_run(outer, 0, outer.extents[0], whole);
    }
}

template <std::size_t Size>
void move_by_size(const strategy::Move& move, const Data& dst, const Data& src) {
    const Nest<2> nest = make_nest<2>({&move.dst, &move.src}, {dst.base, src.base}, {Size, Size});
    walk(nest, move.split,
         [](std::array<std::byte*, 2> p, std::int64_t count, const std::array<std::int64_t, 2>& stride) {
             move_run<Size>(p[0], p[1], count, stride[0], stride[1]);
         });
}

// A conversion runs a chunk at a time through the source's compute type (double, float, int64 or
// uint64): loaded by one loop per source dtype, then converted and stored by one per destination dtype
// and compute type - not one loop per pair of dtypes (289 pairs), which tripled this file's build time. The
// chunk stays in L1; the conversion is bound by memory, not by the second pass.
// Unit-stride runs get a loop of their own: a stride the compiler knows lets it vectorize the conversion.
template <DType From>
EINC_KERNEL void load_computed(compute_t<From>* __restrict out, const std::byte* src, std::int64_t count,
                               std::int64_t stride) {
    using S = storage_t<From>;
    const auto load = [&](std::int64_t at) { return Element<From>::load(load_at<S>(src + at)); };
    if (stride == sizeof(S))
        for (std::int64_t i = 0; i < count; ++i) out[i] = load(i * std::int64_t{sizeof(S)});
    else
        for (std::int64_t i = 0; i < count; ++i) out[i] = load(i * stride);
}

template <DType To, typename V>
EINC_KERNEL void store_converted(std::byte* dst, const V* __restrict values, std::int64_t count,
                                 std::int64_t stride) {
    using D = storage_t<To>;
    const auto store = [&](std::int64_t at, V value) {
        store_at<D>(dst + at, Element<To>::store(convert<compute_t<To>>(value)));
    };
    if (stride == sizeof(D))
        for (std::int64_t i = 0; i < count; ++i) store(i * std::int64_t{sizeof(D)}, values[i]);
    else
        for (std::int64_t i = 0; i < count; ++i) store(i * stride, values[i]);
}

void convert_copy(const strategy::Convert& convert, const Data& dst, const Data& src) {
    const Nest<2> nest = make_nest<2>({&convert.dst, &convert.src}, {dst.base, src.base},
                                      {size_of(dst.dtype), size_of(src.dtype)});
    walk(nest, convert.split,
         [&](std::array<std::byte*, 2> p, std::int64_t count, const std::array<std::int64_t, 2>& stride) {
             dispatch(src.dtype, [&](auto from) {
                 using V = compute_t<decltype(from)::value>;
                 constexpr std::int64_t chunk = 256;
                 V values[chunk];
                 for (std::int64_t i0 = 0; i0 < count; i0 += chunk) {
                     const std::int64_t n = std::min(chunk, count - i0);
                     load_computed<decltype(from)::value>(values, p[1] + i0 * stride[1], n, stride[1]);
                     dispatch(dst.dtype, [&](auto to) {
                         store_converted<decltype(to)::value>(p[0] + i0 * stride[0], values, n, stride[0]);
                     });
                 }
             });
         });
}

// A run of source elements as accumulator values, and a run of those stored with the epilogue: two
// passes over a short chunk, so that the loops are instantiated per dtype and not per pair of them.
template <DType From, typename A>
EINC_KERNEL void load_values(A* out, const std::byte* src, std::int64_t count, std::int64_t stride) {
    for (std::int64_t i = 0; i < count; ++i)
        out[i] = convert<A>(Element<From>::load(load_at<storage_t<From>>(src + i * stride)));
}

template <DType To, bool Reads, typename A>
EINC_KERNEL void store_values(std::byte* dst, const A* values, std::int64_t count, std::int64_t stride,
                              const Scale<A>& scale) {
    for (std::int64_t i = 0; i < count; ++i) store_scaled<To, Reads>(dst + i * stride, values[i], scale);
}

// dst = alpha * src + beta * dst, in the step's accumulator (the schedule makes such a copy `convert`).
template <typename A>
void scaled_copy(const strategy::Convert& convert, const Epilogue& epilogue, const Data& dst,
                 const Data& src) {
    const Scale<A> scale(epilogue);
    const Nest<2> nest = make_nest<2>({&convert.dst, &convert.src}, {dst.base, src.base},
                                      {size_of(dst.dtype), size_of(src.dtype)});
    walk(nest, convert.split,
         [&](std::array<std::byte*, 2> p, std::int64_t count, const std::array<std::int64_t, 2>& stride) {
             constexpr std::int64_t chunk = 256;
             A values[chunk];
             for (std::int64_t i0 = 0; i0 < count; i0 += chunk) {
                 const std::int64_t n = std::min(chunk, count - i0);
                 dispatch(src.dtype, [&](auto from) {
                     load_values<decltype(from)::value>(values, p[1] + i0 * stride[1], n, stride[1]);
                 });
                 dispatch(dst.dtype, [&](auto to) {
                     if constexpr (is_complex(decltype(to)::value))
                         EINC_ASSERT(false);  // (the plan refuses)
                     else
                         with_reads(scale, [&](auto reads) {
                             store_values<decltype(to)::value, decltype(reads)::value>(
                                 p[0] + i0 * stride[0], values, n, stride[0], scale);
                         });
                 });
             }
         });
}

// Calls f.template operator()<Size>() for the element size of `dtype`.
template <typename F>
void by_size(DType dtype, F&& f) {
    switch (size_of(dtype)) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 4: return f.template operator()<4>();
    case 8: return f.template operator()<8>();
    case 16: return f.template operator()<16>();
    default: EINC_ASSERT(false);
    }
}

}  // namespace

void move(const strategy::Move& move, const Data& dst, const Data& src) {
    if (move.dst.size() == 0) return;
    by_size(src.dtype, [&]<std::size_t Size>() { move_by_size<Size>(move, dst, src); });
}

void transpose(const strategy::Transpose& transpose, const Data& dst, const Data& src) {
    if (transpose.dst.size() == 0) return;
    by_size(src.dtype, [&]<std::size_t Size>() { transpose_by_size<Size>(transpose, dst, src); });
}

void convert_elements(const strategy::Convert& convert, DType accumulator, const Epilogue& epilogue,
                      const Data& dst, const Data& src) {
    if (convert.dst.size() == 0) return;
    if (!epilogue.identity())
        return with_any_accumulator(accumulator, Reduction::none,
                                    [&](auto a) { scaled_copy<decltype(a)>(convert, epilogue, dst, src); });
    convert_copy(convert, dst, src);
}

}  // namespace einc::cpu::EINC_CPU_ISA
