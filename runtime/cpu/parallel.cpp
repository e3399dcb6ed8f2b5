#include "runtime/cpu/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fmt/format.h>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "grammar/diagnostic.hpp"

namespace einc::cpu {
namespace {

// Set on the pool's workers for good and on a caller while it runs its own chunks: a parallel_for from
// inside a chunk runs on that chunk's thread (the other threads are busy with the outer loop).
thread_local bool inside_pool = false;

class InsidePool {
public:
    InsidePool() : was_inside_(std::exchange(inside_pool, true)) {}
    ~InsidePool() { inside_pool = was_inside_; }
    InsidePool(const InsidePool&) = delete;
    InsidePool& operator=(const InsidePool&) = delete;

private:
    bool was_inside_;
};

// One parallel_for: lives on its caller's stack, linked into the pool's list of running jobs while
// workers may join it. Chunks are claimed from an atomic counter, so any number of threads can share it.
struct Job {
    Job(FunctionRef<void(std::int64_t, std::int64_t)> body, std::int64_t n, int chunks)
        : body(body), n(n), chunks(chunks) {}

    bool has_unclaimed_chunks() const { return next_chunk.load(std::memory_order_relaxed) < chunks; }

    // Runs chunks until none is left unclaimed (chunk 0 first where `first_chunk`: the caller's); the first
    // exception stops further chunks from starting.
    std::exception_ptr run_chunks(bool first_chunk = false) noexcept {
        try {
            if (first_chunk) run_chunk(0);
            for (int chunk; (chunk = next_chunk.fetch_add(1)) < chunks;) run_chunk(chunk);
            return nullptr;
        } catch (...) {
            next_chunk.store(chunks);
            return std::current_exception();
        }
    }

    void run_chunk(int chunk) const {
        const std::int64_t begin = n * chunk / chunks, end = n * (chunk + 1) / chunks;
        if (begin < end) body(begin, end);
    }

    const FunctionRef<void(std::int64_t, std::int64_t)> body;
    const std::int64_t n;
    const int chunks;
    std::atomic<int> next_chunk{1};  // chunk 0 is the caller's
    // Guarded by the pool's mutex:
    int helpers = 0;                           // workers inside run_chunks
    std::exception_ptr helper_error;           // the first a worker caught
    std::condition_variable helpers_finished;  // the caller waits for helpers == 0
    Job* previous = nullptr;
    Job* next = nullptr;
};

// Persistent workers that help the running jobs. Worker w runs while w < workers_wanted_; the vector of
// threads changes only under resize_mutex_, so resizing never races with itself.
class Pool {
public:
    Pool() = default;
    ~Pool() { resize_workers(0); }
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    int threads() const { return threads_.load(std::memory_order_acquire); }

    // Gives the pool `threads` threads in all (the caller of a job counts as one). The default, at first
    // use, only where no count was set meanwhile, and as many of its threads as the system lets start;
    // a count asked for is an error where they cannot all start.
    void set_threads(int threads, bool is_default = false) {
        std::lock_guard resize(resize_mutex_);
        if (is_default && threads_.load() != 0) return;
        resize_workers(threads - 1);
        threads_.store(static_cast<int>(workers_.size()) + 1, std::memory_order_release);
        if (!is_default && static_cast<int>(workers_.size()) + 1 != threads)
            throw Error(
                ErrorKind::device,
                fmt::format("could not start the CPU executor's threads: {} of the {} asked for are running",
                            workers_.size() + 1, threads))
                .note(start_failure_)
                .help("ask for fewer threads (einc::set_thread_count or EINC_NUM_THREADS)");
    }

    void run(Job& job) {
        int wake = 0;
        {
            std::lock_guard lock(mutex_);
            link(job);
            wake = std::min(job.chunks - 1, workers_wanted_);
        }
        for (int w = 0; w < wake; ++w) work_.notify_one();
        std::exception_ptr error;
        {
            const InsidePool inside;
            error = job.run_chunks(/*first_chunk=*/true);
        }
        std::unique_lock lock(mutex_);
        unlink(job);
        job.helpers_finished.wait(lock, [&] { return job.helpers == 0; });
        if (!error) error = job.helper_error;
        lock.unlock();
        if (error) std::rethrow_exception(error);
    }

private:
    // Under resize_mutex_: starts or stops workers until `wanted` run (fewer if threads cannot start).
    void resize_workers(int wanted) {
        const int running = static_cast<int>(workers_.size());
        if (wanted < running) {
            {
                std::lock_guard lock(mutex_);
                workers_wanted_ = wanted;
            }
            work_.notify_all();
            // Those leaving finish the chunks they are running first.
            for (int w = running - 1; w >= wanted; --w) workers_[static_cast<std::size_t>(w)].join();
            workers_.resize(static_cast<std::size_t>(wanted));
            return;
        }
        {
            std::lock_guard lock(mutex_);
            workers_wanted_ = wanted;
        }
        try {
            workers_.reserve(static_cast<std::size_t>(wanted));
            for (int w = running; w < wanted; ++w) workers_.emplace_back([this, w] { work(w); });
        } catch (const std::exception& error) {
            start_failure_ = error.what();
            std::lock_guard lock(mutex_);
            workers_wanted_ = static_cast<int>(workers_.size());
        }
    }

    void work(int index) {
        inside_pool = true;
        std::unique_lock lock(mutex_);
        for (;;) {
            if (index >= workers_wanted_) return;
            Job* job = first_;
            while (job && !job->has_unclaimed_chunks()) job = job->next;
            if (!job) {
                work_.wait(lock);
                continue;
            }
            ++job->helpers;
            lock.unlock();
            std::exception_ptr error = job->run_chunks();
            lock.lock();
            if (error && !job->helper_error) job->helper_error = std::move(error);
            // Under the mutex: the caller cannot see helpers == 0, return and destroy the job before this.
            if (--job->helpers == 0) job->helpers_finished.notify_one();
        }
    }

    void link(Job& job) {
        job.previous = last_;
        (last_ ? last_->next : first_) = &job;
        last_ = &job;
    }
    void unlink(Job& job) {
        (job.previous ? job.previous->next : first_) = job.next;
        (job.next ? job.next->previous : last_) = job.previous;
        job.previous = job.next = nullptr;
    }

    std::atomic<int> threads_{0};  // 0: not set yet
    std::mutex resize_mutex_;
    std::vector<std::thread> workers_;  // under resize_mutex_
    std::string start_failure_;         // under resize_mutex_
    std::mutex mutex_;
    std::condition_variable work_;
    int workers_wanted_ = 0;  // under mutex_
    Job* first_ = nullptr;    // the running jobs, oldest first, under mutex_
    Job* last_ = nullptr;
};

Pool& pool() {
    static Pool instance;
    return instance;
}

// EINC_NUM_THREADS, else one thread per hardware thread.
int default_threads() {
    const int hardware =
        static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, unsigned{max_thread_count}));
    const char* value = std::getenv("EINC_NUM_THREADS");
    if (!value || !*value) return hardware;
    const std::string_view text(value);
    int threads = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), threads);
    if (error != std::errc{} || end != text.data() + text.size() || threads < 1 || threads > max_thread_count)
        throw Error(ErrorKind::usage,
                    fmt::format("EINC_NUM_THREADS is '{}', not a number of threads from 1 to {}", text,
                                max_thread_count))
            .help(fmt::format("set EINC_NUM_THREADS to a whole number from 1 to {}, or unset it to use every "
                              "hardware thread ({} here)",
                              max_thread_count, hardware));
    return threads;
}

}  // namespace

int thread_count() {
    Pool& instance = pool();
    if (const int threads = instance.threads(); threads > 0) return threads;
    instance.set_threads(default_threads(), /*is_default=*/true);
    return instance.threads();
}

int set_thread_count(int threads) {
    if (threads < 0 || threads > max_thread_count)
        throw Error(ErrorKind::usage,
                    fmt::format("set_thread_count({}): the thread count must be from 1 to {}", threads,
                                max_thread_count))
            .help("pass 0 for the default (EINC_NUM_THREADS, else one thread per hardware thread)");
    if (inside_pool)  // it would wait for the very job that runs it
        throw Error(ErrorKind::usage, "set_thread_count was called from inside a parallel job")
            .help("set the thread count before or after the parallel work, from a thread of your own");
    Pool& instance = pool();
    const int previous = instance.threads();
    instance.set_threads(threads == 0 ? default_threads() : threads);
    return previous;
}

void parallel_for(std::int64_t n, FunctionRef<void(std::int64_t, std::int64_t)> body) {
    if (n <= 0) return;
    const int threads = inside_pool ? 1 : static_cast<int>(std::min<std::int64_t>(thread_count(), n));
    if (threads <= 1) return body(0, n);
    Job job(body, n, static_cast<int>(std::min<std::int64_t>(n, std::int64_t{threads} * chunks_per_thread)));
    pool().run(job);
}

}  // namespace einc::cpu
