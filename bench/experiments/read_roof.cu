// Read-bandwidth experiments for einc's one-pass reductions (device session 2026-11-27).
// Which streaming-read shape reaches the H200's read roof: vectors in flight per thread, threads per SM,
// grid-stride vs contiguous chunks, cache hints, software pipelining; beside einc's own kernel.
#include <algorithm>
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

__device__ __forceinline__ float sum4(uint4 v) {
    return __uint_as_float(v.x) + __uint_as_float(v.y) + __uint_as_float(v.z) + __uint_as_float(v.w);
}
__device__ __forceinline__ void block_fold(float a, float* out) {
    for (int d = 16; d > 0; d >>= 1) a += __shfl_xor_sync(0xffffffffu, a, d);
    __shared__ float warps[32];
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = a;
    __syncthreads();
    if (threadIdx.x < 32) {
        a = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0.f;
        for (int d = 16; d > 0; d >>= 1) a += __shfl_xor_sync(0xffffffffu, a, d);
        if (threadIdx.x == 0) atomicAdd(out, a);
    }
}

enum Hint { plain = 0, nc = 1, cs = 2, lu = 3 };
template <int H>
__device__ __forceinline__ uint4 load(const uint4* p) {
    if constexpr (H == nc)
        return __ldg(p);
    else if constexpr (H == cs)
        return __ldcs(p);
    else if constexpr (H == lu)
        return __ldlu(p);
    else
        return *p;
}

// Grid stride: iteration loads U vectors, stride apart.
template <int U, int H>
__global__ void grid_stride(const uint4* v, long n, float* out) {
    const long stride = (long)gridDim.x * blockDim.x;
    long w = (long)blockIdx.x * blockDim.x + threadIdx.x;
    float4 a = {0, 0, 0, 0};
    for (; w + (U - 1) * stride < n; w += U * stride) {
        uint4 x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = load<H>(v + w + u * stride);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            a.x += __uint_as_float(x[u].x);
            a.y += __uint_as_float(x[u].y);
            a.z += __uint_as_float(x[u].z);
            a.w += __uint_as_float(x[u].w);
        }
    }
    for (; w < n; w += stride) {
        uint4 x = load<H>(v + w);
        a.x += sum4(x);
    }
    block_fold(a.x + a.y + a.z + a.w, out);
}

// Grid stride, software pipelined: the next U vectors are loaded before this U are added.
template <int U>
__global__ void pipelined(const uint4* v, long n, float* out) {
    const long stride = (long)gridDim.x * blockDim.x;
    long w = (long)blockIdx.x * blockDim.x + threadIdx.x;
    float4 a = {0, 0, 0, 0};
    uint4 x[U];
    bool have = w + (U - 1) * stride < n;
    if (have) {
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = v[w + u * stride];
    }
    while (have) {
        const long next = w + U * stride;
        const bool more = next + (U - 1) * stride < n;
        uint4 y[U];
        if (more) {
#pragma unroll
            for (int u = 0; u < U; ++u) y[u] = v[next + u * stride];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            a.x += __uint_as_float(x[u].x);
            a.y += __uint_as_float(x[u].y);
            a.z += __uint_as_float(x[u].z);
            a.w += __uint_as_float(x[u].w);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = y[u];
        w = next;
        have = more;
    }
    for (; w < n; w += stride) {
        uint4 x1 = v[w];
        a.x += sum4(x1);
    }
    block_fold(a.x + a.y + a.z + a.w, out);
}

// Contiguous chunk per block: the block walks its own run, U vectors of blockDim apart per iteration.
template <int U>
__global__ void chunked(const uint4* v, long n, float* out) {
    const long per = (n + gridDim.x - 1) / gridDim.x;
    const long begin = blockIdx.x * per, end = begin + per < n ? begin + per : n;
    const int b = blockDim.x;
    long w = begin + threadIdx.x;
    float4 a = {0, 0, 0, 0};
    for (; w + (U - 1) * b < end; w += U * b) {
        uint4 x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = v[w + u * b];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            a.x += __uint_as_float(x[u].x);
            a.y += __uint_as_float(x[u].y);
            a.z += __uint_as_float(x[u].z);
            a.w += __uint_as_float(x[u].w);
        }
    }
    for (; w < end; w += b) {
        uint4 x = v[w];
        a.x += sum4(x);
    }
    block_fold(a.x + a.y + a.z + a.w, out);
}

__global__ void fill(float* p, long n) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        p[i] = 1.0f;
}

struct Timer {
    cudaEvent_t a, b;
    Timer() {
        cudaEventCreate(&a);
        cudaEventCreate(&b);
    }
};

template <class Launch>
double time_us(Launch launch, int reps = 20, int rounds = 5) {
    static Timer t;
    for (int i = 0; i < 3; ++i) launch();
    CHECK(cudaDeviceSynchronize());
    std::vector<double> best;
    for (int r = 0; r < rounds; ++r) {
        cudaEventRecord(t.a);
        for (int i = 0; i < reps; ++i) launch();
        cudaEventRecord(t.b);
        CHECK(cudaEventSynchronize(t.b));
        float ms;
        cudaEventElapsedTime(&ms, t.a, t.b);
        best.push_back(ms * 1000.0 / reps);
    }
    std::sort(best.begin(), best.end());
    return best[best.size() / 2];
}

int main(int argc, char** argv) {
    const long n = argc > 1 ? atol(argv[1]) : 67108864L;  // f32 elements
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    float *src, *dst, *out, *einc_scratch;
    CHECK(cudaMalloc(&src, n * 4));
    CHECK(cudaMalloc(&dst, n * 4));
    CHECK(cudaMalloc(&out, 64));
    CHECK(cudaMalloc(&einc_scratch, 1 << 20));
    CHECK(cudaMemset(einc_scratch, 0, 1 << 20));
    fill<<<sms * 8, 256>>>(src, n);
    CHECK(cudaDeviceSynchronize());
    const double bytes = n * 4.0;
    const long vectors = n / 4;
    printf("# %s, %d SMs, L2 %d MB, %.0f MB read per call\n", prop.name, sms, prop.l2CacheSize >> 20,
           bytes / 1e6);
    printf("%-44s %9s %9s %8s\n", "kernel", "us", "GB/s", "result");
    {
        double us = time_us([&] { cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice); });
        printf("%-44s %9.1f %9.0f  (read+write counted: %.0f)\n", "cudaMemcpy D2D", us, bytes / us / 1e3,
               2 * bytes / us / 1e3);
    }
    auto run = [&](const char* name, auto kernel, int blocks, int threads) {
        double us = time_us([&] { kernel<<<blocks, threads>>>((const uint4*)src, vectors, out); });
        CHECK(cudaGetLastError());
        CHECK(cudaMemset(out, 0, 4));
        kernel<<<blocks, threads>>>((const uint4*)src, vectors, out);
        float r;
        CHECK(cudaMemcpy(&r, out, 4, cudaMemcpyDeviceToHost));
        char label[96];
        snprintf(label, sizeof label, "%s <<<%d,%d>>>", name, blocks, threads);
        printf("%-44s %9.1f %9.0f %8.3g%s\n", label, us, bytes / us / 1e3, r, r == (float)n ? "" : " WRONG");
    };
    // einc's kernel, as einc launches it.
    {
        einc_params p{};
        p.kept_count = 1;
        p.reduced_count = n;
        p.split = 1;
        double us = time_us([&] {
            einc_reduce_one_pass_sum_f32_to_f32_acc_f32_k0_r0_i32<<<264, 512>>>(p, out, src, einc_scratch);
        });
        CHECK(cudaGetLastError());
        float r;
        CHECK(cudaMemcpy(&r, out, 4, cudaMemcpyDeviceToHost));
        printf("%-44s %9.1f %9.0f %8.3g%s\n", "einc one_pass <<<264,512>>>", us, bytes / us / 1e3, r,
               r == (float)n ? "" : " WRONG");
    }
    run("grid_stride U4", grid_stride<4, plain>, 2 * sms, 512);
    run("grid_stride U8", grid_stride<8, plain>, 2 * sms, 512);
    run("grid_stride U16", grid_stride<16, plain>, 2 * sms, 512);
    run("grid_stride U4", grid_stride<4, plain>, 4 * sms, 512);
    run("grid_stride U4", grid_stride<4, plain>, 8 * sms, 256);
    run("grid_stride U8", grid_stride<8, plain>, 8 * sms, 256);
    run("grid_stride U2", grid_stride<2, plain>, 8 * sms, 256);
    run("grid_stride U8 nc", grid_stride<8, nc>, 2 * sms, 512);
    run("grid_stride U8 cs", grid_stride<8, cs>, 2 * sms, 512);
    run("grid_stride U8 lu", grid_stride<8, lu>, 2 * sms, 512);
    run("pipelined U4", pipelined<4>, 2 * sms, 512);
    run("pipelined U4", pipelined<4>, 4 * sms, 256);
    run("pipelined U8", pipelined<8>, 2 * sms, 512);
    run("chunked U4", chunked<4>, 2 * sms, 512);
    run("chunked U8", chunked<8>, 2 * sms, 512);
    run("chunked U8", chunked<8>, 4 * sms, 512);
    run("chunked U8", chunked<8>, 16 * sms, 512);
    run("chunked U4", chunked<4>, 64 * sms, 256);
    return 0;
}
