#include "runtime/threads.hpp"

#include "runtime/cpu/parallel.hpp"
#include "runtime/plan_cache.hpp"

namespace einc {

void set_thread_count(int threads) {
    const int previous = cpu::set_thread_count(threads);
    // Cached programs were scheduled for the previous count (0: none was planned for the CPU yet).
    if (previous != 0 && previous != cpu::thread_count()) default_plan_cache().clear();
}

int thread_count() {
    return cpu::thread_count();
}

}  // namespace einc
