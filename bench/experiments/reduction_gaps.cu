// Device session 2026-11-27, call 2: (1) what einc's per-call scratch costs the one-pass kernel on the
// GPU's timeline; (2) vector loads for bf16 rows and columns reductions.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

#include "einc_full.cuh"  // einc emit reduce "a -> " sum 67108864 --backend cuda, at e10c08c
#define CHECK(x)                                                                                             \
    do {                                                                                                     \
        cudaError_t e = (x);                                                                                 \
        if (e != cudaSuccess) {                                                                              \
            printf("%s: %s\n", #x, cudaGetErrorString(e));                                                   \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

// gpu_bench's timing: `calls` calls between two events, median over `repeats` batches.
template <class F>
double per_call_us(F work, int calls, int repeats = 15) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 2; ++i) work();
    std::vector<double> s;
    for (int r = 0; r < repeats; ++r) {
        cudaEventRecord(a);
        for (int i = 0; i < calls; ++i) work();
        cudaEventRecord(b);
        CHECK(cudaEventSynchronize(b));
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        s.push_back(ms * 1e3 / calls);
    }
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
}

__device__ __forceinline__ float bf(unsigned short h) {
    return __uint_as_float(((unsigned)h) << 16);
}
__device__ __forceinline__ unsigned short to_bf(float f) {
    unsigned short b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
    return b;
}
__device__ __forceinline__ float mx(float a, float x) {
    return (x > a || x != x) ? x : a;
}

// Rows of `terms` bf16, one warp a row: scalar loads (einc today) and 16-byte vectors.
__global__ void rows_scalar(const unsigned short* src, unsigned short* dst, int rows, int terms) {
    const int lane = threadIdx.x & 31, warps = gridDim.x * blockDim.x >> 5;
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < rows; row += warps) {
        const unsigned short* s = src + (long)row * terms;
        float acc = -__int_as_float(0x7f800000);
#pragma unroll 4
        for (int r = lane; r < terms; r += 32) acc = mx(acc, bf(s[r]));
        for (int d = 16; d > 0; d >>= 1) acc = mx(acc, __shfl_down_sync(~0u, acc, d));
        if (lane == 0) dst[row] = to_bf(acc);
    }
}
template <int U>
__global__ void rows_vec(const unsigned short* src, unsigned short* dst, int rows, int terms) {
    const int lane = threadIdx.x & 31, warps = gridDim.x * blockDim.x >> 5;
    const int vectors = terms / 8;
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < rows; row += warps) {
        const uint4* s = (const uint4*)(src + (long)row * terms);
        float acc = -__int_as_float(0x7f800000);
        int r = lane;
        for (; r + 32 * (U - 1) < vectors; r += 32 * U) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = s[r + 32 * u];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const unsigned w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    acc = mx(acc, __uint_as_float(w[k] << 16));
                    acc = mx(acc, __uint_as_float(w[k] & 0xffff0000u));
                }
            }
        }
        for (; r < vectors; r += 32) {
            const uint4 v = s[r];
            const unsigned w[4] = {v.x, v.y, v.z, v.w};
            for (int k = 0; k < 4; ++k) {
                acc = mx(acc, __uint_as_float(w[k] << 16));
                acc = mx(acc, __uint_as_float(w[k] & 0xffff0000u));
            }
        }
        for (int d = 16; d > 0; d >>= 1) acc = mx(acc, __shfl_down_sync(~0u, acc, d));
        if (lane == 0) dst[row] = to_bf(acc);
    }
}
// Columns: out[o][j] = sum_i src[o][i][j], `inner` columns contiguous; a thread a column (scalar, einc
// today), or 8 adjacent columns through 16-byte vectors.
__global__ void columns_scalar(const unsigned short* src, unsigned short* dst, int outer, int terms,
                               int inner) {
    const int items = outer * inner;
    for (int item = blockIdx.x * blockDim.x + threadIdx.x; item < items; item += gridDim.x * blockDim.x) {
        const int o = item / inner, j = item % inner;
        const unsigned short* s = src + (long)o * terms * inner + j;
        float acc = 0;
#pragma unroll 4
        for (int r = 0; r < terms; ++r) acc += bf(s[(long)r * inner]);
        dst[item] = to_bf(acc);
    }
}
template <int U>
__global__ void columns_vec(const unsigned short* src, unsigned short* dst, int outer, int terms, int inner) {
    const int vin = inner / 8, items = outer * vin;
    for (int item = blockIdx.x * blockDim.x + threadIdx.x; item < items; item += gridDim.x * blockDim.x) {
        const int o = item / vin, j = item % vin;
        const uint4* s = (const uint4*)(src + (long)o * terms * inner) + j;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int r = 0;
        for (; r + U <= terms; r += U) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = s[(long)(r + u) * vin];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const unsigned w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    acc[2 * k] += __uint_as_float(w[k] << 16);
                    acc[2 * k + 1] += __uint_as_float(w[k] & 0xffff0000u);
                }
            }
        }
        for (; r < terms; ++r) {
            const uint4 v = s[(long)r * vin];
            const unsigned w[4] = {v.x, v.y, v.z, v.w};
            for (int k = 0; k < 4; ++k) {
                acc[2 * k] += __uint_as_float(w[k] << 16);
                acc[2 * k + 1] += __uint_as_float(w[k] & 0xffff0000u);
            }
        }
        uint4 out;
        unsigned* o4 = &out.x;
        for (int k = 0; k < 4; ++k) o4[k] = to_bf(acc[2 * k]) | ((unsigned)to_bf(acc[2 * k + 1]) << 16);
        ((uint4*)dst)[item] = out;
    }
}

// The same, the terms split in `split` parts, each writing 8 f32 partials (a finalize would fold them).
template <int U>
__global__ void columns_vec_split(const unsigned short* src, float* partials, int outer, int terms, int inner,
                                  int split) {
    const int vin = inner / 8, items = outer * vin, chunk = terms / split;
    for (int item = blockIdx.x * blockDim.x + threadIdx.x; item < items * split;
         item += gridDim.x * blockDim.x) {
        const int part = item / items, it = item % items, o = it / vin, j = it % vin;
        const uint4* s = (const uint4*)(src + (long)o * terms * inner) + j;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int r = part * chunk; r < part * chunk + chunk; r += U) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = s[(long)(r + u) * vin];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const unsigned w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    acc[2 * k] += __uint_as_float(w[k] << 16);
                    acc[2 * k + 1] += __uint_as_float(w[k] & 0xffff0000u);
                }
            }
        }
        float4* out = (float4*)(partials + (long)item * 8);
        out[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        out[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
}
__global__ void fill_bf16(unsigned short* p, long n) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        p[i] = to_bf((float)((i * 2654435761u >> 7) % 64) * 0.125f);
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    printf("# %s\n", prop.name);
    // ---- (1) the one-pass kernel and its scratch
    {
        const long n = 67108864;
        float *src, *out, *fixed;
        CHECK(cudaMalloc(&src, n * 4));
        CHECK(cudaMalloc(&out, 64));
        CHECK(cudaMalloc(&fixed, 4096));
        CHECK(cudaMemset(src, 0, n * 4));
        CHECK(cudaMemset(fixed, 0, 4096));
        einc_params p{};
        p.kept_count = 1;
        p.reduced_count = n;
        p.split = 1;
        auto kernel = [&](float* scratch) {
            einc_reduce_one_pass_sum_f32_to_f32_acc_f32_k0_r0_i32<<<264, 512>>>(p, out, src, scratch);
        };
        const double gb = n * 4 / 1e3;
        for (int calls : {7, 50}) {
            double us = per_call_us([&] { kernel(fixed); }, calls);
            printf("one_pass, fixed scratch, %2d calls/batch          %7.1f us %6.0f GB/s\n", calls, us,
                   gb / us);
            us = per_call_us(
                [&] {
                    float* s;
                    CHECK(cudaMallocAsync((void**)&s, 1280, 0));
                    kernel(s);
                    cudaFreeAsync(s, 0);
                },
                calls);
            printf("one_pass, cudaMallocAsync scratch, %2d calls/batch %7.1f us %6.0f GB/s\n", calls, us,
                   gb / us);
            us = per_call_us(
                [&] {
                    cudaMemsetAsync(fixed, 0, 16);
                    kernel(fixed);
                },
                calls);
            printf("one_pass, scratch zeroed each call, %2d calls      %7.1f us %6.0f GB/s\n", calls, us,
                   gb / us);
            us = per_call_us(
                [&] {
                    cudaMemsetAsync(fixed + 1024, 0, 16);
                    kernel(fixed);
                },
                calls);
            printf("one_pass, a memset beside each call, %2d calls     %7.1f us %6.0f GB/s\n", calls, us,
                   gb / us);
        }
        cudaMemPool_t pool;
        CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
        uint64_t keep = UINT64_MAX;
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
        double us = per_call_us(
            [&] {
                float* s;
                CHECK(cudaMallocAsync((void**)&s, 1280, 0));
                kernel(s);
                cudaFreeAsync(s, 0);
            },
            7);
        printf("one_pass, cudaMallocAsync, pool kept, 7 calls     %7.1f us %6.0f GB/s\n", us, gb / us);
        // what the scratch holds after a batch
        unsigned long long words[2];
        CHECK(cudaMemcpy(words, fixed, 16, cudaMemcpyDeviceToHost));
        printf("fixed scratch words after: %llx %llx\n", words[0], words[1]);
        cudaFree(src);
        cudaFree(out);
        cudaFree(fixed);
    }
    // ---- (2) bf16 rows and columns
    {
        const long n = 8L * 16 * 2048 * 2048;  // b h i j bf16, 1.07 GB
        unsigned short *src, *dst, *ref;
        CHECK(cudaMalloc(&src, n * 2));
        CHECK(cudaMalloc(&dst, 64 << 20));
        CHECK(cudaMalloc(&ref, 64 << 20));
        fill_bf16<<<sms * 8, 256>>>(src, n);
        CHECK(cudaDeviceSynchronize());
        const double gb = n * 2 / 1e3;
        const int rows = n / 2048;
        auto compare = [&](long count) {
            std::vector<unsigned short> a(count), b(count);
            cudaMemcpy(a.data(), ref, count * 2, cudaMemcpyDeviceToHost);
            cudaMemcpy(b.data(), dst, count * 2, cudaMemcpyDeviceToHost);
            long bad = 0;
            for (long i = 0; i < count; ++i) bad += a[i] != b[i];
            return bad;
        };
        double us = per_call_us([&] { rows_scalar<<<4224, 256>>>(src, ref, rows, 2048); }, 5);
        printf("max rows 2048 bf16, scalar <<<4224,256>>>     %7.1f us %6.0f GB/s\n", us, gb / us);
        for (int blocks : {1056, 4224}) {
            us = per_call_us([&] { rows_vec<4><<<blocks, 256>>>(src, dst, rows, 2048); }, 5);
            printf("max rows 2048 bf16, vec16 U4 <<<%d,256>>>   %7.1f us %6.0f GB/s  mismatches %ld\n",
                   blocks, us, gb / us, compare(rows));
            us = per_call_us([&] { rows_vec<8><<<blocks, 256>>>(src, dst, rows, 2048); }, 5);
            printf("max rows 2048 bf16, vec16 U8 <<<%d,256>>>   %7.1f us %6.0f GB/s  mismatches %ld\n",
                   blocks, us, gb / us, compare(rows));
        }
        const int outer = 8 * 16, terms = 2048, inner = 2048;
        us = per_call_us([&] { columns_scalar<<<1024, 256>>>(src, ref, outer, terms, inner); }, 5);
        printf("sum columns bf16, scalar <<<1024,256>>>       %7.1f us %6.0f GB/s\n", us, gb / us);
        for (int blocks : {128, 264, 528}) {
            us = per_call_us([&] { columns_vec<4><<<blocks, 256>>>(src, dst, outer, terms, inner); }, 5);
            printf("sum columns bf16, vec16 U4 <<<%d,256>>>     %7.1f us %6.0f GB/s  mismatches %ld\n",
                   blocks, us, gb / us, compare((long)outer * inner));
            us = per_call_us([&] { columns_vec<8><<<blocks, 256>>>(src, dst, outer, terms, inner); }, 5);
            printf("sum columns bf16, vec16 U8 <<<%d,256>>>     %7.1f us %6.0f GB/s  mismatches %ld\n",
                   blocks, us, gb / us, compare((long)outer * inner));
        }

        float* partials;
        CHECK(cudaMalloc(&partials, (long)outer * inner * 16 * 4));
        for (int split : {4, 8, 16})
            for (int blocks : {528, 1056}) {
                us = per_call_us(
                    [&] { columns_vec_split<4><<<blocks, 256>>>(src, partials, outer, terms, inner, split); },
                    5);
                printf("sum columns bf16, vec16 U4 split %2d <<<%d,256>>> %7.1f us %6.0f GB/s\n", split,
                       blocks, us, gb / us);
            }
    }
    return 0;
}
