// Host emulation of the CUDA einc's generated kernels use, so that tests can run those kernels on a CPU:
// every CUDA thread is a std::thread, __syncthreads() a barrier of its block, a warp shuffle a barrier of
// its warp around 32 slots (__syncwarp() that barrier alone), shared memory an arena per block, atomics
// std::atomic_ref, __threadfence() a sequentially consistent fence. Slow, and only for small launches - but
// it executes the very source text NVRTC compiles. Included before the generated source, in a shared library
// the tests build and load (tests/emulation_test.cpp); einc_emu_run() is its entry point.
//
// einc_emu_trace() runs chosen blocks of a launch with its real grid (each does its real share of a
// grid-stride loop) and records, per thread, every global and shared access (EINC_LD, EINC_ST, EINC_LDS,
// EINC_STS, each with its site: the macro's __COUNTER__), batch mark (EINC_BATCH), barrier and shuffle,
// in program order (einc_trace.h): the trace the GPU model's description is checked against.
#pragma once

#include <atomic>
#include <barrier>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "einc_trace.h"

namespace einc_emu {

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

struct Warp {
    explicit Warp(std::ptrdiff_t lanes) : barrier(lanes) {}
    std::barrier<> barrier;
    unsigned char slots[32][8] = {};
};

struct Block {
    explicit Block(std::ptrdiff_t threads) : barrier(threads) {}
    std::barrier<> barrier;
    alignas(64) unsigned char shared[48 * 1024] = {};
    std::vector<std::unique_ptr<Warp>> warps;
};

struct ThreadState {
    dim3 thread, block, block_dim, grid_dim;
    Block* block_state = nullptr;
    std::size_t shared_used = 0;
    unsigned linear = 0;                           // the thread's index in its block
    std::vector<einc_emu_event>* trace = nullptr;  // where a traced launch records this thread's events
};
inline thread_local ThreadState current;

inline void record(einc_emu_event_kind kind, unsigned site, unsigned size, unsigned long long address) {
    if (current.trace)
        current.trace->push_back(einc_emu_event{static_cast<unsigned>(kind), site, size, address});
}

template <typename T>
T load(const T* pointer, unsigned site) {
    record(einc_emu_load, site, sizeof(T), reinterpret_cast<std::uintptr_t>(pointer));
    return *pointer;
}
template <typename T, typename V>
void store(T* pointer, const V& value, unsigned site) {
    record(einc_emu_store, site, sizeof(T), reinterpret_cast<std::uintptr_t>(pointer));
    *pointer = value;
}
inline unsigned long long shared_offset(const void* pointer) {
    return static_cast<unsigned long long>(static_cast<const unsigned char*>(pointer) -
                                           current.block_state->shared);
}
template <typename T>
T shared_load(const T* pointer, unsigned site) {
    record(einc_emu_shared_load, site, sizeof(T), shared_offset(pointer));
    return *pointer;
}
template <typename T, typename V>
void shared_store(T* pointer, const V& value, unsigned site) {
    record(einc_emu_shared_store, site, sizeof(T), shared_offset(pointer));
    *pointer = value;
}
inline void batch(unsigned site, unsigned unroll) {
    record(einc_emu_batch_mark, site, unroll, 0);
}

// Each thread asks for its block's shared arrays in the same order, so each gets the same memory.
template <typename T>
T* shared(std::size_t count) {
    const std::size_t offset = (current.shared_used + alignof(T) - 1) / alignof(T) * alignof(T);
    current.shared_used = offset + count * sizeof(T);
    return reinterpret_cast<T*>(current.block_state->shared + offset);
}

inline void sync() {
    record(einc_emu_barrier, 0, 0, 0);
    current.block_state->barrier.arrive_and_wait();
}

// A warp shuffle: every lane publishes `value`, then takes lane from(lane)'s (its own where that is not a
// lane of the warp, as __shfl_down_sync does past the last lane).
template <typename T, typename From>
T shuffle(T value, From from) {
    static_assert(sizeof(T) <= 8);
    record(einc_emu_shuffle, 0, 0, 0);
    Warp& warp = *current.block_state->warps[current.linear / 32];
    const unsigned lane = current.linear % 32;
    std::memcpy(warp.slots[lane], &value, sizeof value);
    warp.barrier.arrive_and_wait();
    T result = value;
    const unsigned source = from(lane);
    if (source < 32) std::memcpy(&result, warp.slots[source], sizeof result);
    warp.barrier.arrive_and_wait();
    return result;
}

template <typename T>
T shfl_down(T value, int delta) {
    return shuffle(value, [&](unsigned lane) { return lane + static_cast<unsigned>(delta); });
}
template <typename T>
T shfl_xor(T value, int mask) {
    return shuffle(value, [&](unsigned lane) { return lane ^ static_cast<unsigned>(mask); });
}
template <typename T>
T shfl(T value, int source) {
    return shuffle(value, [&](unsigned) { return static_cast<unsigned>(source) % 32; });
}

inline void syncwarp() {
    current.block_state->warps[current.linear / 32]->barrier.arrive_and_wait();
}

// atomicCAS: the old value, `desired` stored where it equalled `expected`.
template <typename T>
T atomic_cas(T* pointer, T expected, T desired) {
    std::atomic_ref<T>(*pointer).compare_exchange_strong(expected, desired, std::memory_order_seq_cst);
    return expected;
}

}  // namespace einc_emu

#define threadIdx (einc_emu::current.thread)
#define blockIdx (einc_emu::current.block)
#define blockDim (einc_emu::current.block_dim)
#define gridDim (einc_emu::current.grid_dim)
#define EINC_FN inline
#define EINC_KERNEL_ENTRY extern "C" void
#define EINC_SHARED(type, name, count) type* name = einc_emu::shared<type>(count)
#define EINC_SYNC() einc_emu::sync()
#define EINC_SHFL_DOWN(value, delta) einc_emu::shfl_down(value, delta)
#define EINC_SHFL_XOR(value, mask) einc_emu::shfl_xor(value, mask)
#define EINC_SHFL(value, lane) einc_emu::shfl(value, lane)
#define EINC_SYNCWARP() einc_emu::syncwarp()
#define EINC_FENCE() std::atomic_thread_fence(std::memory_order_seq_cst)
#define EINC_ATOMIC_CAS(pointer, expected, desired) einc_emu::atomic_cas(pointer, expected, desired)
#define EINC_LAUNCH_BOUNDS(threads, blocks)
#define EINC_LD(pointer) einc_emu::load(pointer, __COUNTER__)
#define EINC_LD_L2(pointer) einc_emu::load(pointer, __COUNTER__)
#define EINC_ST(pointer, value) einc_emu::store(pointer, value, __COUNTER__)
#define EINC_LDS(pointer) einc_emu::shared_load(pointer, __COUNTER__)
#define EINC_STS(pointer, value) einc_emu::shared_store(pointer, value, __COUNTER__)
#define EINC_BATCH(unroll) einc_emu::batch(__COUNTER__, unroll)
#define EINC_RESTRICT

typedef long long einc_i64;
typedef unsigned short einc_u16;
typedef unsigned char einc_u8;
typedef signed char einc_i8;
typedef unsigned long long einc_u64;
struct alignas(16) einc_vec16 {
    unsigned x, y, z, w;
};
inline float einc_f32_of(unsigned bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
inline double einc_f64_of(einc_u64 bits) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
}

// The conversions, as runtime/narrow_float.hpp does them (round to nearest even).
inline float einc_f16_to_f32(einc_u16 h) {
    const unsigned sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
    unsigned bits;
    if (exponent == 0) {
        const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
        return sign ? -magnitude : magnitude;
    }
    bits = exponent == 31 ? (sign | 0x7F800000u | (mantissa << 13))
                          : (sign | ((exponent + 112) << 23) | (mantissa << 13));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
inline einc_u16 einc_f32_to_f16(float value) {
    unsigned f;
    std::memcpy(&f, &value, 4);
    const auto sign = static_cast<einc_u16>((f >> 16) & 0x8000u);
    f &= 0x7FFFFFFFu;
    if (f >= 0x7F800000u) return sign | (f > 0x7F800000u ? 0x7E00u : 0x7C00u);
    if (f >= 0x47800000u) return sign | 0x7C00u;
    if (f < 0x38800000u) {
        float shifted;
        std::memcpy(&shifted, &f, 4);
        shifted += 0.5f;
        unsigned s;
        std::memcpy(&s, &shifted, 4);
        return sign | static_cast<einc_u16>(s - 0x3F000000u);
    }
    const unsigned odd = (f >> 13) & 1u;
    f += 0xC8000FFFu + odd;
    return sign | static_cast<einc_u16>(f >> 13);
}
inline float einc_bf16_to_f32(einc_u16 b) {
    const unsigned bits = static_cast<unsigned>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
inline einc_u16 einc_f32_to_bf16(float value) {
    unsigned f;
    std::memcpy(&f, &value, 4);
    if ((f & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<einc_u16>((f >> 16) | 0x0040u);
    return static_cast<einc_u16>((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}
inline float einc_inf_f32() {
    return INFINITY;
}
inline double einc_inf_f64() {
    return static_cast<double>(INFINITY);
}

namespace einc_emu {

// One launch, as the workers see it.
struct Job {
    void (*invoke)(void**) = nullptr;
    void** arguments = nullptr;
    unsigned grid = 0, block_x = 0, block_y = 0, threads = 0;
    Block* block = nullptr;
    const unsigned* order = nullptr;  // the blocks in the order they run (null: 0, 1, ...)
    // Traced launches: only these blocks run (else all of the grid), each thread recording into
    // traces[thread], handed to `sink` after each block.
    const unsigned* blocks = nullptr;
    unsigned block_count = 0;
    std::vector<einc_emu_event>* traces = nullptr;
    einc_emu_sink sink = nullptr;
    void* sink_context = nullptr;
};

// Threads that stay between launches (creating hundreds of threads per launch dominates otherwise).
class Pool {
public:
    void run(const Job& job) {
        std::unique_lock lock(mutex_);
        while (workers_.size() < job.threads) {
            const unsigned index = static_cast<unsigned>(workers_.size());
            workers_.emplace_back([this, index] { work(index); });
        }
        job_ = job;
        pending_ = job.threads;
        ++generation_;
        wake_.notify_all();
        done_.wait(lock, [&] { return pending_ == 0; });
    }
    ~Pool() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
            ++generation_;
        }
        wake_.notify_all();
        for (std::thread& w : workers_) w.join();
    }

private:
    void work(unsigned t) {
        unsigned long long seen = 0;
        for (;;) {
            Job job;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
                if (stopping_) return;
                seen = generation_;
                job = job_;
            }
            if (t >= job.threads) continue;
            const unsigned runs = job.blocks ? job.block_count : job.grid;
            for (unsigned k = 0; k < runs; ++k) {
                const unsigned b = job.blocks ? job.blocks[k] : job.order ? job.order[k] : k;
                std::vector<einc_emu_event>* trace = job.traces ? &job.traces[t] : nullptr;
                if (trace) trace->clear();
                current = ThreadState{{t % job.block_x, t / job.block_x, 0},
                                      {b, 0, 0},
                                      {job.block_x, job.block_y, 1},
                                      {job.grid, 1, 1},
                                      job.block,
                                      0,
                                      t,
                                      trace};
                job.invoke(job.arguments);
                job.block->barrier.arrive_and_wait();  // the block's shared memory is the next block's
                if (trace && t == 0)  // every thread's events, once all have finished the block
                    for (unsigned u = 0; u < job.threads; ++u)
                        job.sink(job.sink_context, b, u, job.traces[u].data(), job.traces[u].size());
                if (trace) job.block->barrier.arrive_and_wait();  // before any thread clears its trace
            }
            current.trace = nullptr;
            std::lock_guard lock(mutex_);
            if (--pending_ == 0) done_.notify_one();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_, done_;
    std::vector<std::thread> workers_;
    Job job_;
    unsigned pending_ = 0;
    unsigned long long generation_ = 0;
    bool stopping_ = false;
};

}  // namespace einc_emu

namespace einc_emu {

inline Pool& pool() {
    static Pool p;
    return p;
}

inline void launch(Job job) {
    job.threads = job.block_x * job.block_y;
    Block block(job.threads);
    for (unsigned w = 0; w < (job.threads + 31) / 32; ++w)
        block.warps.push_back(std::make_unique<Warp>(std::min<std::ptrdiff_t>(32, job.threads - 32 * w)));
    job.block = &block;
    pool().run(job);
}

}  // namespace einc_emu

// Runs `invoke(arguments)` as a launch of grid x block threads: one thread per CUDA thread of a block,
// the blocks one after the other - in the order `order` lists them (a permutation of 0 .. grid - 1; null:
// in index order), so that a test can make any block the last to run.
extern "C" void einc_emu_run(void (*invoke)(void**), unsigned grid, unsigned block_x, unsigned block_y,
                             void** arguments, const unsigned* order) {
    einc_emu::Job job{invoke, arguments, grid, block_x, block_y};
    job.order = order;
    einc_emu::launch(job);
}

// Runs blocks `blocks[0..count)` of a launch of grid x block threads, recording each thread's events and
// handing them to `sink` after each block.
extern "C" void einc_emu_trace(void (*invoke)(void**), unsigned grid, unsigned block_x, unsigned block_y,
                               void** arguments, const unsigned* blocks, unsigned count, einc_emu_sink sink,
                               void* context) {
    std::vector<std::vector<einc_emu_event>> traces(block_x * block_y);
    einc_emu::Job job{invoke, arguments, grid, block_x, block_y};
    job.blocks = blocks;
    job.block_count = count;
    job.traces = traces.data();
    job.sink = sink;
    job.sink_context = context;
    einc_emu::launch(job);
}
