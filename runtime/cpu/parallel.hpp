// Work sharing for the CPU kernels: a small pool of persistent threads (no start-up cost per call) and
// parallel_for over a range, used only when the work is large enough to pay for the hand-off. Several user
// threads may call parallel_for at once: each call is a job of its own, which its caller always works on,
// so no call waits for another's; idle workers help whichever jobs are running.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "runtime/threads.hpp"

namespace einc::cpu {

// Bytes of work below which a kernel runs on the calling thread alone.
inline constexpr std::int64_t parallel_threshold_bytes = 1 << 20;

// The number of threads parallel_for uses: set_thread_count's, else EINC_NUM_THREADS, else the hardware
// threads (at least 1, at most max_thread_count). An EINC_NUM_THREADS that is not a whole number in
// [1, max_thread_count] is an einc::Error, raised by every call until set_thread_count gives a count.
int thread_count();

// Sets the number of threads (1 to max_thread_count; 0: the default, as if never set) and returns the
// previous count (0: the pool was not used yet). Safe while other threads call parallel_for: running jobs
// finish on the threads they have; it waits for the workers that leave to finish their chunks. Throws
// einc::Error for a count out of range, or when called from inside a parallel_for chunk.
int set_thread_count(int threads);

// A non-owning reference to a callable, called through one indirect call: what std::function would be,
// without its allocation. It must not outlive the callable it refers to (a lambda passed as an argument
// lives until the call returns).
template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
    template <typename F>
    static constexpr bool refers_to =
        !std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
        std::is_object_v<std::remove_reference_t<F>> && std::is_invocable_r_v<R, F&, Args...>;

public:
    // Implicit, so that call sites pass a lambda as they would to a std::function.
    template <typename F, typename = std::enable_if_t<refers_to<F>>>
    FunctionRef(F&& callable) noexcept  // NOLINT: implicit by design
        : callable_(const_cast<void*>(static_cast<const void*>(std::addressof(callable)))),
          call_(&call_as<std::remove_reference_t<F>>) {}

    R operator()(Args... args) const { return call_(callable_, std::forward<Args>(args)...); }

private:
    template <typename F>
    static R call_as(void* callable, Args... args) {
        return (*static_cast<F*>(callable))(std::forward<Args>(args)...);
    }

    void* callable_;
    R (*call_)(void*, Args...);
};

// Chunks of a parallel_for per thread. Threads claim chunks as they finish them, so a thread that runs
// slower - its core shared with the user's other threads, another process or the host of a virtual
// machine, or a smaller core - takes fewer: an equal split waited for it (a 64 MB transpose at 13-26 ms
// instead of 4-5 in such moments; 6-8 ms in 8 chunks a thread).
inline constexpr int chunks_per_thread = 8;

// Calls body(begin, end) on disjoint chunks covering [0, n), on up to thread_count() threads, and returns
// when all are done; chunk c of k covers [n*c/k, n*(c+1)/k), k = min(n, threads * chunks_per_thread). The
// calling thread takes the first chunk and then any not yet taken. A parallel_for inside a chunk runs on
// that chunk's thread alone. The first exception a chunk throws propagates to this call (chunks not yet
// started then do not run). Allocates nothing.
void parallel_for(std::int64_t n, FunctionRef<void(std::int64_t, std::int64_t)> body);

}  // namespace einc::cpu
