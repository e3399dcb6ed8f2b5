// Concurrency: many threads compiling and running the same and different patterns at once - through the
// one-line calls (the default plan cache), a small shared cache that evicts all the time, shared
// compiled Programs and Expressions, and the CPU thread pool - with every result checked against the
// reference interpreter. Built as its own executable so that CI can run it under ThreadSanitizer
// without instrumenting the whole suite (scripts/test; docs/reliability.md).
#include <atomic>
#include <barrier>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <mutex>
#include <random>
#include <thread>

#include "compiler/bind.hpp"
#include "einc/einc.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"

using namespace einc;

namespace {

constexpr int user_threads = 8;

// Runs body(t) on `user_threads` threads released together; returns the failures they reported.
template <typename Body>
std::vector<std::string> on_threads(Body body) {
    std::mutex mutex;
    std::vector<std::string> failures;
    std::barrier start(user_threads);
    std::vector<std::thread> threads;
    for (int t = 0; t < user_threads; ++t)
        threads.emplace_back([&, t] {
            start.arrive_and_wait();
            try {
                body(t, [&](std::string failure) {
                    std::lock_guard lock(mutex);
                    if (failures.size() < 10) failures.push_back(std::move(failure));
                });
            } catch (const std::exception& error) {
                std::lock_guard lock(mutex);
                failures.push_back(fmt::format("thread {}: {}", t, error.what()));
            }
        });
    for (std::thread& t : threads) t.join();
    return failures;
}

std::vector<Input> inputs_of(const testing::RandomCase& c) {
    return {c.inputs.begin(), c.inputs.end()};
}

// The random case through the one-line call a user would write.
std::vector<Tensor> one_line(const testing::RandomCase& c) {
    const std::vector<Input> inputs = inputs_of(c);
    switch (c.call.op) {
    case Op::rearrange: return {rearrange(inputs[0], c.call.pattern, c.call.sizes)};
    case Op::repeat: return {repeat(inputs[0], c.call.pattern, c.call.sizes)};
    case Op::reduce: return {reduce(inputs[0], c.call.pattern, c.call.reduction, c.call.sizes)};
    case Op::einsum: return {einsum(c.call.pattern, std::span<const Input>(inputs))};
    case Op::pack: return {pack(std::span<const Input>(inputs), c.call.pattern).tensor};
    case Op::unpack: return unpack(inputs[0], c.call.packed_shapes, c.call.pattern);
    case Op::parse_shape: break;
    }
    return {};
}

std::optional<std::string> differs(const std::vector<Tensor>& got, const std::vector<Tensor>& expected) {
    if (got.size() != expected.size())
        return fmt::format("{} results, expected {}", got.size(), expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
        std::string difference;
        if (!testing::same_values(got[k].view(), expected[k].view(), &difference))
            return fmt::format("result {}: {}", k, difference);
    }
    return std::nullopt;
}

std::vector<Tensor> expected_of(const testing::RandomCase& c) {
    std::vector<Shape> shapes;
    for (const TensorView& v : c.inputs) shapes.push_back(v.shape);
    return reference::evaluate(bind(c.call, shapes), c.inputs);
}

// Every operation, with its dtype.
const std::pair<Op, DType> kinds[] = {{Op::rearrange, DType::f32}, {Op::repeat, DType::i32},
                                      {Op::reduce, DType::f64},    {Op::einsum, DType::f32},
                                      {Op::pack, DType::i8},       {Op::unpack, DType::bf16}};

}  // namespace

TEST_CASE("concurrency: one-line calls of the same and different patterns through the default plan cache") {
    // 48 cases shared by all threads (the same patterns, planned once, found by the others) ...
    std::mt19937 shared_rng(7);
    std::vector<testing::RandomCase> shared;
    for (int i = 0; i < 48; ++i) {
        const auto [op, dtype] = kinds[i % std::size(kinds)];
        shared.push_back(testing::random_case(shared_rng, op, dtype));
    }
    std::vector<std::vector<Tensor>> shared_expected;
    for (const testing::RandomCase& c : shared) shared_expected.push_back(expected_of(c));
    std::atomic<int> checked{0};
    const auto failures = on_threads([&](int t, auto fail) {
        std::mt19937 rng(1000 + static_cast<unsigned>(t));
        for (int round = 0; round < 60; ++round) {
            // ... and cases of the thread's own, planned while the others plan theirs.
            const std::size_t pick = static_cast<std::size_t>(round * 7 + t) % shared.size();
            if (const auto d = differs(one_line(shared[pick]), shared_expected[pick]))
                fail(fmt::format("thread {}: {}: {}", t, shared[pick].describe(), *d));
            const auto [op, dtype] = kinds[static_cast<std::size_t>(round + t) % std::size(kinds)];
            const testing::RandomCase own = testing::random_case(rng, op, dtype);
            if (const auto d = differs(one_line(own), expected_of(own)))
                fail(fmt::format("thread {}: {}: {}", t, own.describe(), *d));
            checked += 2;
        }
    });
    for (const std::string& failure : failures) FAIL_CHECK(failure);
    CHECK(checked == user_threads * 60 * 2);
    const PlanCache::Stats stats = default_plan_cache().stats();
    CHECK(stats.size <= stats.capacity);
    CHECK(stats.hits > 0);
}

TEST_CASE("concurrency: a small shared plan cache evicting while threads plan, run, resize and clear it") {
    PlanCache cache(4);
    std::mt19937 rng(11);
    std::vector<testing::RandomCase> cases;
    for (int i = 0; i < 24; ++i) cases.push_back(testing::random_case(rng, Op::reduce, DType::f32));
    std::vector<std::vector<Tensor>> expected;
    for (const testing::RandomCase& c : cases) expected.push_back(expected_of(c));
    std::atomic<bool> done{false};
    std::thread janitor([&] {  // keeps changing the cache under the others' feet
        for (std::size_t i = 0; !done; ++i) {
            if (i % 3 == 0) cache.set_capacity(i % 2 ? 2 : 6);
            if (i % 7 == 0) cache.clear();
            const PlanCache::Stats stats = cache.stats();
            if (stats.size > 6) FAIL_CHECK("cache holds more than its largest capacity");
            std::this_thread::yield();
        }
    });
    const auto failures = on_threads([&](int t, auto fail) {
        for (int round = 0; round < 80; ++round) {
            const std::size_t pick = static_cast<std::size_t>(round * 5 + t * 3) % cases.size();
            const testing::RandomCase& c = cases[pick];
            const std::vector<Input> inputs = inputs_of(c);
            const CallRef call{c.call.op,     c.call.pattern, c.call.reduction,
                               &c.call.sizes, c.call.compact, &c.call.packed_shapes};
            const Program program = cache.get(call, inputs, {});
            if (const auto d = differs(program.run(inputs), expected[pick]))
                fail(fmt::format("thread {}: {}: {}", t, c.describe(), *d));
        }
    });
    done = true;
    janitor.join();
    for (const std::string& failure : failures) FAIL_CHECK(failure);
    const PlanCache::Stats stats = cache.stats();
    CHECK(stats.hits + stats.misses == user_threads * 80);
    CHECK(stats.evictions > 0);
    CHECK(stats.size <= stats.capacity);
}

TEST_CASE(
    "concurrency: one compiled Program and one Expression shared by every thread, each with its own data") {
    const Expression scores = compile(Op::einsum, "b i d, b j d -> b i j");
    const Tensor q0 = Tensor::zeros(DType::f32, {2, 8, 16}), k0 = Tensor::zeros(DType::f32, {2, 8, 16});
    const Program program = scores.bind({q0.view(), k0.view()});
    const Expression pooled = compile(Op::reduce, "b (h 2) (w 2) -> b h w", {}, Reduction::max);
    std::atomic<int> checked{0};
    const auto failures = on_threads([&](int t, auto fail) {
        std::mt19937 rng(static_cast<unsigned>(t));
        std::uniform_int_distribution<int> value(-3, 3);
        for (int round = 0; round < 40; ++round) {
            std::vector<double> qv(2 * 8 * 16), kv(2 * 8 * 16);
            for (double& v : qv) v = value(rng);
            for (double& v : kv) v = value(rng);
            const Tensor q = reference::make_tensor(DType::f32, {2, 8, 16}, qv),
                         k = reference::make_tensor(DType::f32, {2, 8, 16}, kv);
            const std::vector<Tensor> got = program.run({q, k});
            const std::vector<TensorView> views{q.view(), k.view()};
            if (const auto d = differs(got, reference::evaluate(program.bound(), views)))
                fail(fmt::format("thread {} einsum: {}", t, *d));
            // The Expression binds anew for a shape of this thread's own, concurrently with the others.
            const Shape shape{t % 3 + 1, 2 * (round % 4 + 1), 4};
            std::vector<double> xv(static_cast<std::size_t>(shape[0] * shape[1] * shape[2]));
            for (double& v : xv) v = value(rng);
            const Tensor x = reference::make_tensor(DType::i32, shape, xv);
            const Program p = pooled.bind({x.view()});
            const std::vector<TensorView> x_views{x.view()};
            if (const auto d = differs(p.run({x}), reference::evaluate(p.bound(), x_views)))
                fail(fmt::format("thread {} reduce: {}", t, *d));
            ++checked;
        }
    });
    for (const std::string& failure : failures) FAIL_CHECK(failure);
    CHECK(checked == user_threads * 40);
}

TEST_CASE("concurrency: kernels large enough for the CPU thread pool, called from every thread at once") {
    // 2 MiB and more per call: above the pool's threshold, so parallel_for hands chunks to its workers
    // while the other user threads run jobs of their own beside them. The batched GEMMs (where there are
    // threads to share them) each lower OpenBLAS's thread count while they run, the last restoring it.
    const Shape shape{512, 1024};
    std::vector<double> values(512 * 1024);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 251) - 125;
    const Tensor x = reference::make_tensor(DType::f32, shape, values);
    const Tensor q = reference::make_tensor(
        DType::f32, {4, 64, 128}, std::vector<double>(values.begin(), values.begin() + 4 * 64 * 128));
    std::atomic<int> checked{0};
    const auto failures = on_threads([&](int t, auto fail) {
        for (int round = 0; round < 3; ++round, ++checked) {
            if (t % 3 == 2) {
                const Tensor scores = einsum("b i d, b j d -> b i j", {q, q});
                const float* out = scores.data_as<float>();
                for (std::int64_t b = 0; b < 4; ++b)
                    for (std::int64_t i = 0; i < 64; i += 7)
                        for (std::int64_t j = 0; j < 64; j += 5) {
                            const auto at = [&](std::int64_t row, std::int64_t d) {
                                return values[static_cast<std::size_t>((b * 64 + row) * 128 + d)];
                            };
                            double dot = 0;
                            for (std::int64_t d = 0; d < 128; ++d) dot += at(i, d) * at(j, d);
                            if (out[(b * 64 + i) * 64 + j] != static_cast<float>(dot))
                                return fail(
                                    fmt::format("thread {}: batched GEMM wrong at ({}, {}, {})", t, b, i, j));
                        }
            } else if (t % 3 == 0) {
                const Tensor y = rearrange(x, "a b -> b a", {}, Options{.contiguous = true});
                const float* out = y.data_as<float>();
                for (std::int64_t b = 0; b < 1024; b += 37)
                    for (std::int64_t a = 0; a < 512; a += 29)
                        if (out[b * 512 + a] !=
                            static_cast<float>(values[static_cast<std::size_t>(a * 1024 + b)]))
                            return fail(fmt::format("thread {}: transpose wrong at ({}, {})", t, b, a));
            } else {
                const Tensor s = reduce(x, "a b -> b", einc::sum);
                const float* out = s.data_as<float>();
                for (std::int64_t b = 0; b < 1024; b += 13) {
                    double total = 0;
                    for (std::int64_t a = 0; a < 512; ++a)
                        total += values[static_cast<std::size_t>(a * 1024 + b)];
                    if (out[b] != static_cast<float>(total))
                        return fail(fmt::format("thread {}: sum wrong at {}", t, b));
                }
            }
        }
    });
    for (const std::string& failure : failures) FAIL_CHECK(failure);
    CHECK(checked == user_threads * 3);
}

TEST_CASE("concurrency: errors thrown and rendered on every thread at once") {
    std::atomic<int> caught{0};
    const auto failures = on_threads([&](int t, auto fail) {
        const Tensor x = Tensor::zeros(DType::f32, {2, 3});
        for (int round = 0; round < 50; ++round) {
            try {
                rearrange(x, round % 2 ? "a b -> b c" : "a (b -> b a", {});
                fail(fmt::format("thread {}: no error", t));
            } catch (const Error& error) {
                if (std::string(error.what()).find("error:") == std::string::npos)
                    fail(fmt::format("thread {}: no diagnostic", t));
                ++caught;
            }
        }
    });
    for (const std::string& failure : failures) FAIL_CHECK(failure);
    CHECK(caught == user_threads * 50);
}
