// Host emulation of the CUDA einc's generated kernels use, so that tests can run those kernels on a CPU:
// the blocks of a launch run one after the other on the calling thread, every CUDA thread of a block a
// fiber of its own (ucontext: switching between them is a user-space jump, where OS threads cost a futex
// round trip at every barrier), __syncthreads() a barrier of its block, a warp shuffle a barrier of its
// warp around 32 slots (__syncwarp() that barrier alone), shared memory an arena per block, atomics
// std::atomic_ref, __threadfence() a sequentially consistent fence. Only for small launches - but it
// executes the very source text NVRTC compiles. Included before the generated source, in a shared library
// the tests build and load (tests/emulation_test.cpp); einc_emu_run() is its entry point.
//
// einc_emu_trace() runs chosen blocks of a launch with its real grid (each does its real share of a
// grid-stride loop) and records, per thread, every global and shared access (EINC_LD, EINC_ST, EINC_LDS,
// EINC_STS, each with its site: the macro's __COUNTER__), batch mark (EINC_BATCH), barrier and shuffle,
// in program order (einc_trace.h): the trace the GPU model's description is checked against.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>

#include "einc_trace.h"

namespace einc_emu {

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

// A barrier of `expected` fibers: each arrival counts; the last one opens it (a new generation) and goes
// on, the others yield until it is open.
struct Barrier {
    explicit Barrier(unsigned expected) : expected(expected) {}
    unsigned expected, arrived = 0;
    unsigned long long generation = 0;
};

struct Warp {
    explicit Warp(unsigned lanes) : barrier(lanes) {}
    Barrier barrier;
    unsigned char slots[32][8] = {};
};

struct Block {
    explicit Block(unsigned threads) : barrier(threads) {}
    Barrier barrier;
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

// The scheduler's side: the fiber running now, and what it yields to.
struct Fiber {
    ucontext_t context;
    ThreadState state;
    bool finished = false;
};
inline thread_local Fiber* running = nullptr;
inline thread_local ucontext_t scheduler;
inline thread_local unsigned long long progress = 0;  // arrivals and ends: a round without any is a deadlock

inline void yield() {
    Fiber* const self = running;
    self->state = current;
    swapcontext(&self->context, &scheduler);
    current = self->state;
}

inline void arrive_and_wait(Barrier& b) {
    ++progress;
    const unsigned long long generation = b.generation;
    if (++b.arrived == b.expected) {
        b.arrived = 0;
        ++b.generation;
        return;
    }
    while (b.generation == generation) yield();
}

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
    arrive_and_wait(current.block_state->barrier);
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
    arrive_and_wait(warp.barrier);
    T result = value;
    const unsigned source = from(lane);
    if (source < 32) std::memcpy(&result, warp.slots[source], sizeof result);
    arrive_and_wait(warp.barrier);
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
    arrive_and_wait(current.block_state->warps[current.linear / 32]->barrier);
}

template <class T>
T atomic_add(T* pointer, T value) {
    return std::atomic_ref<T>(*pointer).fetch_add(value, std::memory_order_seq_cst);
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
#define EINC_ATOMIC_ADD(pointer, value) einc_emu::atomic_add(pointer, value)
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
// Negative floats into u64 wrap through i64, as the CPU kernels convert them (codegen.cpp's prelude).
inline einc_u64 einc_to_u64(double x) {
    return x >= 9223372036854775808.0 ? (einc_u64)x : (einc_u64)(einc_i64)x;
}
inline einc_u64 einc_to_u64(float x) {
    return einc_to_u64((double)x);
}
inline einc_u64 einc_to_u64(einc_i64 x) {
    return (einc_u64)x;
}
inline einc_u64 einc_to_u64(einc_u64 x) {
    return x;
}
struct einc_c64 {
    float re, im;
};
struct einc_c128 {
    double re, im;
};
inline einc_c64 einc_to_c64(double x) {
    return {(float)x, 0.0f};
}
inline einc_c64 einc_to_c64(einc_c64 x) {
    return x;
}
inline einc_c128 einc_to_c128(double x) {
    return {x, 0.0};
}
inline einc_c128 einc_to_c128(einc_c64 x) {
    return {x.re, x.im};
}
inline einc_c128 einc_to_c128(einc_c128 x) {
    return x;
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

// Fiber stacks, kept between launches: each with a guard page below it, so that an overflow faults.
// 64 KiB: every kernel of the emulation tests runs in 16 (the suite passes with that), and AddressSanitizer
// clears the shadow of the whole stack at each switch (swapcontext's interceptor): 256 KiB made that a
// sixth of the sanitized emulation tests' time.
class Stacks {
public:
    static constexpr std::size_t size = 64 * 1024, guard = 4096;
    unsigned char* get(unsigned index) {
        while (stacks_.size() <= index) {
            void* memory = mmap(nullptr, size + guard, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (memory == MAP_FAILED) {
                std::fprintf(stderr, "einc_emu: no memory for %zu fiber stacks\n", stacks_.size() + 1);
                std::abort();
            }
            mprotect(memory, guard, PROT_NONE);
            stacks_.push_back(static_cast<unsigned char*>(memory));
        }
        return stacks_[index] + guard;
    }
    ~Stacks() {
        for (unsigned char* s : stacks_) munmap(s, size + guard);
    }

private:
    std::vector<unsigned char*> stacks_;
};

inline thread_local const Job* launching = nullptr;

inline void fiber_entry() {
    launching->invoke(launching->arguments);
    running->state = current;
    running->finished = true;
    ++progress;
}  // (returns to `scheduler`: the context's uc_link)

// Runs block `b` of `job`: every thread a fiber, switched round-robin until all have finished - in
// ascending order in even blocks and descending in odd ones, so that a missing barrier shows, whichever
// thread writes what another reads (a fiber runs until it waits).
inline void run_block(const Job& job, unsigned b, std::vector<Fiber>& fibers, Stacks& stacks) {
    for (unsigned t = 0; t < job.threads; ++t) {
        Fiber& f = fibers[t];
        f.finished = false;
        f.state = ThreadState{{t % job.block_x, t / job.block_x, 0},
                              {b, 0, 0},
                              {job.block_x, job.block_y, 1},
                              {job.grid, 1, 1},
                              job.block,
                              0,
                              t,
                              job.traces ? &job.traces[t] : nullptr};
        if (f.state.trace) f.state.trace->clear();
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = stacks.get(t);
        f.context.uc_stack.ss_size = Stacks::size;
        f.context.uc_link = &scheduler;
        makecontext(&f.context, fiber_entry, 0);
    }
    for (unsigned left = job.threads; left > 0;) {
        const unsigned long long before = progress;
        for (unsigned i = 0; i < job.threads; ++i) {
            Fiber& f = fibers[b % 2 ? job.threads - 1 - i : i];
            if (f.finished) continue;
            running = &f;
            current = f.state;
            swapcontext(&scheduler, &f.context);
            if (f.finished) --left;
        }
        if (left > 0 && progress == before) {
            std::fprintf(stderr,
                         "einc_emu: block %u of a launch is stuck: %u threads wait at a barrier that the "
                         "others never reach\n",
                         b, left);
            std::abort();
        }
    }
    running = nullptr;
    current = ThreadState{};
}

inline void launch(Job job) {
    job.threads = job.block_x * job.block_y;
    Block block(job.threads);
    for (unsigned w = 0; w < (job.threads + 31) / 32; ++w)
        block.warps.push_back(std::make_unique<Warp>(std::min(32u, job.threads - 32 * w)));
    job.block = &block;
    static thread_local Stacks stacks;
    std::vector<Fiber> fibers(job.threads);
    launching = &job;
    const unsigned runs = job.blocks ? job.block_count : job.grid;
    for (unsigned k = 0; k < runs; ++k) {
        const unsigned b = job.blocks ? job.blocks[k] : job.order ? job.order[k] : k;
        run_block(job, b, fibers, stacks);  // (the block's shared memory is the next block's)
        if (job.traces)
            for (unsigned u = 0; u < job.threads; ++u)
                job.sink(job.sink_context, b, u, job.traces[u].data(), job.traces[u].size());
    }
    launching = nullptr;
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
