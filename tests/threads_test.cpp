// The CPU executor's threads: einc::set_thread_count / thread_count, and the pool behind parallel_for -
// its chunks, several user threads' jobs running side by side, exceptions reaching their own caller, no
// allocation per call, and results that stay right while the count changes under running calls. In the
// concurrency executable, so that CI runs it under ThreadSanitizer (scripts/hardening).
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "einc/einc.hpp"
#include "runtime/cpu/parallel.hpp"
#include "tests/reference/reference.hpp"
#include "tests/sanitized.hpp"

// Sanitizers bring their own operator new; replacing it there is not reliable, so the allocation test
// runs in ordinary builds only.
#if !defined(EINC_TEST_SANITIZED)
namespace {
// Allocations on any thread are counted while counting_allocations is set (and only then: the rest of
// the executable allocates as usual).
std::atomic<bool> counting_allocations{false};
std::atomic<long> allocations{0};
void* volatile allocation_probe = nullptr;
}  // namespace

void* operator new(std::size_t size) {
    if (counting_allocations.load(std::memory_order_relaxed))
        allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
    throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
    return operator new(size);
}
void operator delete(void* memory) noexcept {
    std::free(memory);
}
void operator delete[](void* memory) noexcept {
    std::free(memory);
}
void operator delete(void* memory, std::size_t) noexcept {
    std::free(memory);
}
void operator delete[](void* memory, std::size_t) noexcept {
    std::free(memory);
}
#endif

using namespace einc;

namespace {

// Sets the thread count for one test and restores the default after it.
class ThreadCount {
public:
    explicit ThreadCount(int threads) { set_thread_count(threads); }
    ~ThreadCount() { set_thread_count(0); }
    ThreadCount(const ThreadCount&) = delete;
    ThreadCount& operator=(const ThreadCount&) = delete;
};

// Waits for `flag`, at most 5 s (far longer than any scheduling delay; what a serialising pool would
// need is forever).
bool wait_for(const std::atomic<bool>& flag) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!flag.load()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
}

// 512 x 1024 small whole numbers as f32 (2 MiB: above parallel_threshold_bytes); every sum is exact in
// f32 whatever the order of the additions, so the executor must match a plain loop exactly.
constexpr std::int64_t rows = 512, columns = 1024;
static_assert(rows * columns * 4 >= 2 * cpu::parallel_threshold_bytes);

std::vector<double> test_values() {
    std::vector<double> values(static_cast<std::size_t>(rows * columns));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 251) - 125;
    return values;
}

double at(const std::vector<double>& values, std::int64_t r, std::int64_t c) {
    return values[static_cast<std::size_t>(r * columns + c)];
}

// What each call gives, checked against plain loops; an empty string if all is right.
std::string check_calls(const Tensor& x, const std::vector<double>& values) {
    const Tensor column_sums = reduce(x, "a b -> b", einc::sum);
    for (std::int64_t c = 0; c < columns; ++c) {
        double total = 0;
        for (std::int64_t r = 0; r < rows; ++r) total += at(values, r, c);
        if (column_sums.data_as<float>()[c] != static_cast<float>(total))
            return fmt::format("column sum {} wrong", c);
    }
    const Tensor row_max = reduce(x, "a b -> a", einc::max);
    for (std::int64_t r = 0; r < rows; ++r) {
        double most = at(values, r, 0);
        for (std::int64_t c = 1; c < columns; ++c) most = std::max(most, at(values, r, c));
        if (row_max.data_as<float>()[r] != static_cast<float>(most))
            return fmt::format("row max {} wrong", r);
    }
    double total = 0;
    for (const double v : values) total += v;
    const Tensor all = reduce(x, "a b ->", einc::sum);  // one output: per-thread partial sums
    if (all.data_as<float>()[0] != static_cast<float>(total))
        return fmt::format("total {} != {}", all.data_as<float>()[0], total);
    const Tensor transposed = rearrange(x, "a b -> b a", {}, Options{.contiguous = true});
    for (std::int64_t c = 0; c < columns; ++c)
        for (std::int64_t r = 0; r < rows; ++r)
            if (transposed.data_as<float>()[c * rows + r] != static_cast<float>(at(values, r, c)))
                return fmt::format("transpose wrong at ({}, {})", c, r);
    return {};
}

}  // namespace

TEST_CASE("threads: set_thread_count sets thread_count, and results stay right at every count") {
    const std::vector<double> values = test_values();
    const Tensor x = reference::make_tensor(DType::f32, {rows, columns}, values);
    for (const int threads : {1, 2, 3, 4, 7}) {
        CAPTURE(threads);
        const ThreadCount count(threads);
        CHECK(thread_count() == threads);
        CHECK(cpu::thread_count() == threads);
        CHECK(check_calls(x, values) == "");
    }
    set_thread_count(0);
    const char* environment = std::getenv("EINC_NUM_THREADS");
    if (!environment || !*environment)
        CHECK(thread_count() == static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u,
                                                            unsigned{max_thread_count})));
}

TEST_CASE("threads: a program bound for one count runs right at any other") {
    const std::vector<double> values = test_values();
    const Tensor x = reference::make_tensor(DType::f32, {rows, columns}, values);
    double total = 0;
    for (const double v : values) total += v;
    for (const int bound_at : {1, 4}) {
        const ThreadCount count(bound_at);
        const Program program = compile(Op::reduce, "a b ->", {}, Reduction::sum).bind({x.view()});
        CHECK(program.schedule().target.threads == bound_at);
        for (const int run_at : {1, 2, 3, 8}) {
            CAPTURE(bound_at);
            CAPTURE(run_at);
            set_thread_count(run_at);
            CHECK(program.run({x})[0].data_as<float>()[0] == static_cast<float>(total));
        }
    }
}

TEST_CASE("threads: a count out of range is a clear error that changes nothing") {
    const ThreadCount count(3);
    for (const int wrong : {-1, -1000, max_thread_count + 1}) {
        CAPTURE(wrong);
        try {
            set_thread_count(wrong);
            FAIL("no error");
        } catch (const Error& error) {
            CHECK(error.kind() == ErrorKind::usage);
            const std::string text = error.what();
            CHECK_MESSAGE(text.find(fmt::format("set_thread_count({})", wrong)) != std::string::npos, text);
            CHECK_MESSAGE(text.find("from 1 to 1024") != std::string::npos, text);
            CHECK_MESSAGE(text.find("help: pass 0 for the default") != std::string::npos, text);
        }
        CHECK(thread_count() == 3);
    }
    CHECK_NOTHROW(set_thread_count(16));  // more than this machine's hardware threads is allowed
    CHECK(thread_count() == 16);
    // From inside a chunk it would wait for its own job.
    set_thread_count(2);
    std::atomic<int> refused{0};
    cpu::parallel_for(2, [&](std::int64_t, std::int64_t) {
        try {
            set_thread_count(1);
        } catch (const Error& error) {
            if (std::string(error.what()).find("inside a parallel job") != std::string::npos) ++refused;
        }
    });
    CHECK(refused == 2);
    CHECK(thread_count() == 2);
}

TEST_CASE("threads: chunks cover the range as n*c/k .. n*(c+1)/k, and nested loops run inline") {
    // k = min(n, threads * chunks_per_thread)
    const ThreadCount count(4);
    for (const std::int64_t n : {1, 3, 4, 10, 32, 33, 1001}) {
        CAPTURE(n);
        std::mutex mutex;
        std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
        std::atomic<int> nested_inline{0};
        cpu::parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
            const std::thread::id here = std::this_thread::get_id();
            int calls = 0;
            cpu::parallel_for(100, [&](std::int64_t b, std::int64_t e) {
                if (b == 0 && e == 100 && std::this_thread::get_id() == here) ++calls;
            });
            if (calls == 1) ++nested_inline;
            std::lock_guard lock(mutex);
            ranges.emplace_back(begin, end);
        });
        std::sort(ranges.begin(), ranges.end());
        const std::int64_t k = std::min<std::int64_t>(4 * cpu::chunks_per_thread, n);
        REQUIRE(ranges.size() == static_cast<std::size_t>(k));
        for (std::int64_t c = 0; c < k; ++c) {
            CHECK(ranges[static_cast<std::size_t>(c)].first == n * c / k);
            CHECK(ranges[static_cast<std::size_t>(c)].second == n * (c + 1) / k);
        }
        if (k > 1) CHECK(nested_inline == k);  // (a loop of one chunk runs inline: its nested loop may split)
    }
}

TEST_CASE("threads: a thread held up in its chunk leaves the rest of the range to the others") {
    // The caller's chunk (the first) waits until the other chunks are done: claimed as threads finish
    // them, they all go to the worker. (Split equally, the worker would have had half the range.)
    const ThreadCount count(2);
    const std::int64_t n = 1000, k = std::min<std::int64_t>(n, 2 * cpu::chunks_per_thread), first = n / k;
    std::atomic<std::int64_t> by_others{0};
    std::atomic<bool> rest_done{false};
    bool waited = false;
    cpu::parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
        if (begin == 0) {
            waited = wait_for(rest_done);
            return;
        }
        if ((by_others += end - begin) == n - first) rest_done = true;
    });
    CHECK(waited);
    CHECK(by_others == n - first);
    CHECK(by_others >= n * 3 / 4);
}

TEST_CASE("threads: two user threads' jobs run at the same time, not one after the other") {
    // Each job's chunks wait for a chunk of the other job to start: a pool that runs one job at a time
    // would keep the second job waiting until the first gave up.
    const ThreadCount count(2);
    std::atomic<bool> a_started{false}, b_started{false}, a_saw_b{true}, b_saw_a{true};
    const auto job = [](std::atomic<bool>& mine, const std::atomic<bool>& other,
                        std::atomic<bool>& saw_other) {
        cpu::parallel_for(2, [&](std::int64_t, std::int64_t) {
            mine = true;
            if (!wait_for(other)) saw_other = false;
        });
    };
    std::thread a([&] { job(a_started, b_started, a_saw_b); });
    std::thread b([&] { job(b_started, a_started, b_saw_a); });
    a.join();
    b.join();
    CHECK(a_saw_b);
    CHECK(b_saw_a);
}

TEST_CASE("threads: an exception thrown by a chunk reaches its own caller only") {
    const ThreadCount count(3);
    constexpr int callers = 4;
    std::atomic<int> right{0}, wrong{0};
    std::barrier start(callers);
    std::vector<std::thread> threads;
    for (int t = 0; t < callers; ++t)
        threads.emplace_back([&, t] {
            start.arrive_and_wait();
            for (int round = 0; round < 50; ++round) {
                // Odd callers throw from a chunk other than the first (the caller's own), often on a worker.
                const bool throws = t % 2 == 1;
                std::atomic<int> chunks{0};
                try {
                    cpu::parallel_for(6, [&](std::int64_t begin, std::int64_t) {
                        ++chunks;
                        if (throws && begin > 0) throw std::runtime_error(fmt::format("caller {}", t));
                    });
                    (throws ? wrong : right) += 1;
                } catch (const std::runtime_error& error) {
                    (throws && error.what() == fmt::format("caller {}", t) ? right : wrong) += 1;
                }
                if (!throws && chunks != 6) ++wrong;  // 6 items, a chunk each: every chunk ran
            }
        });
    for (std::thread& t : threads) t.join();
    CHECK(wrong == 0);
    CHECK(right == callers * 50);
    // The pool is still whole.
    std::atomic<std::int64_t> covered{0};
    cpu::parallel_for(300, [&](std::int64_t begin, std::int64_t end) { covered += end - begin; });
    CHECK(covered == 300);
}

TEST_CASE("threads: parallel_for allocates nothing once the pool runs") {
#if defined(EINC_TEST_SANITIZED)
    fmt::print("SKIP threads allocation count: sanitizers replace operator new\n");
#else
    const ThreadCount count(4);
    std::atomic<std::int64_t> covered{0};
    std::atomic<int> helped{0};
    // The caller's chunk waits for a worker to start another, so that every call goes through the workers'
    // side of the pool too.
    const auto call = [&](std::int64_t n) {
        std::atomic<bool> worker_started{false};
        cpu::parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
            covered += end - begin;
            if (begin > 0)
                worker_started = true;
            else if (wait_for(worker_started))
                ++helped;
        });
    };
    call(1000);  // the workers start
    allocations = 0;
    counting_allocations = true;
    for (int round = 0; round < 100; ++round) call(round % 2 ? 1000 : 3);
    counting_allocations = false;
    CHECK(allocations == 0);
    CHECK(helped == 101);
    CHECK(covered == 1000 + 50 * 1000 + 50 * 3);
    // The counter works: this allocates (through a volatile pointer, which no compiler elides).
    counting_allocations = true;
    allocation_probe = ::operator new(64);
    counting_allocations = false;
    ::operator delete(allocation_probe);
    CHECK(allocations > 0);
#endif
}

TEST_CASE("threads: one-line reductions from 4 threads while another changes the thread count") {
    const std::vector<double> values = test_values();
    const Tensor x = reference::make_tensor(DType::f32, {rows, columns}, values);
    const ThreadCount count(4);
    constexpr int callers = 4;
    std::atomic<bool> done{false};
    std::thread changer([&] {
        for (int i = 0; !done; ++i) {
            set_thread_count(1 + i % 4);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    });
    std::mutex mutex;
    std::vector<std::string> failures;
    std::barrier start(callers);
    std::vector<std::thread> threads;
    for (int t = 0; t < callers; ++t)
        threads.emplace_back([&, t] {
            start.arrive_and_wait();
            for (int round = 0; round < 2; ++round) {
                std::string failure;
                try {
                    failure = check_calls(x, values);
                } catch (const std::exception& error) {
                    failure = error.what();
                }
                if (!failure.empty()) {
                    std::lock_guard lock(mutex);
                    failures.push_back(fmt::format("thread {} round {}: {}", t, round, failure));
                }
            }
        });
    for (std::thread& t : threads) t.join();
    done = true;
    changer.join();
    for (const std::string& failure : failures) FAIL_CHECK(failure);
}
