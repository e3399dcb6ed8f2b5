#include "runtime/cpu/parallel.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace einc::cpu {
namespace {

// Workers wait for a job: one function called with a chunk index. One job at a time; a second caller
// waits for the first to finish (kernels are called from many user threads).
class Pool {
public:
    explicit Pool(int workers) {
        for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w + 1); });
    }
    ~Pool() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (std::thread& t : threads_) t.join();
    }

    // Runs chunk(0) here and chunk(1..workers) on the workers.
    void run(const std::function<void(int)>& chunk) {
        std::unique_lock job_lock(job_mutex_);
        {
            std::lock_guard lock(mutex_);
            chunk_ = &chunk;
            pending_ = static_cast<int>(threads_.size());
            error_ = nullptr;
            ++generation_;
        }
        wake_.notify_all();
        std::exception_ptr mine;
        try {
            chunk(0);
        } catch (...) {
            mine = std::current_exception();
        }
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return pending_ == 0; });
        chunk_ = nullptr;
        if (mine) std::rethrow_exception(mine);
        if (error_) std::rethrow_exception(error_);
    }

    int size() const { return static_cast<int>(threads_.size()) + 1; }

private:
    void work(int index) {
        std::uint64_t seen = 0;
        for (;;) {
            const std::function<void(int)>* chunk = nullptr;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
                if (stopping_) return;
                seen = generation_;
                chunk = chunk_;
            }
            std::exception_ptr error;
            try {
                (*chunk)(index);
            } catch (...) {
                error = std::current_exception();
            }
            std::lock_guard lock(mutex_);
            if (error && !error_) error_ = error;
            if (--pending_ == 0) done_.notify_one();
        }
    }

    std::vector<std::thread> threads_;
    std::mutex job_mutex_;  // one job at a time
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    const std::function<void(int)>* chunk_ = nullptr;
    int pending_ = 0;
    std::uint64_t generation_ = 0;
    bool stopping_ = false;
    std::exception_ptr error_;
};

int configured_threads() {
    if (const char* value = std::getenv("EINC_NUM_THREADS")) {
        const int n = std::atoi(value);
        if (n >= 1) return n;
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
    static Pool instance(configured_threads() - 1);
    return instance;
}

// A kernel running on the pool that calls parallel_for again runs the inner loop on its own thread.
thread_local bool inside_pool = false;

}  // namespace

int thread_count() { return pool().size(); }

void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
    const int threads = inside_pool ? 1 : static_cast<int>(std::min<std::int64_t>(thread_count(), n));
    if (threads <= 1) {
        if (n > 0) body(0, n);
        return;
    }
    pool().run([&](int chunk) {
        if (chunk >= threads) return;
        const std::int64_t begin = n * chunk / threads, end = n * (chunk + 1) / threads;
        const bool was_inside = std::exchange(inside_pool, true);
        try {
            if (begin < end) body(begin, end);
        } catch (...) {
            inside_pool = was_inside;
            throw;
        }
        inside_pool = was_inside;
    });
}

}  // namespace einc::cpu
