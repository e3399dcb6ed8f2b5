// Work sharing for the CPU kernels: a small pool of persistent threads (no start-up cost per call) and
// parallel_for over a range, used only when the work is large enough to pay for the hand-off.
#pragma once

#include <cstdint>
#include <functional>

namespace einc::cpu {

// Bytes of work below which a kernel runs on the calling thread alone.
inline constexpr std::int64_t parallel_threshold_bytes = 1 << 20;

// The number of threads parallel_for uses (hardware threads, at least 1; EINC_NUM_THREADS overrides).
int thread_count();

// Calls body(begin, end) on disjoint chunks covering [0, n), on up to thread_count() threads, and
// returns when all are done. The calling thread takes the first chunk. Exceptions propagate.
void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace einc::cpu
