// The hot path of an inference engine: a program bound once and run into the caller's outputs with the
// caller's workspace performs no heap allocation at all, for every step kind and CPU strategy (threads
// included), into row-major and strided outputs. Its own executable: it replaces the global operator
// new with one that counts (on every thread) while a run is being watched.
#include <atomic>
#include <cstdlib>
#include <doctest/doctest.h>
#include <new>
#include <set>

#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/api.hpp"
#include "runtime/plan_cache.hpp"
#include "runtime/program.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"

// GCC, inlining the replacements below, sees free() of memory that std::allocator got from operator new
// and does not know that this operator new is malloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {

std::atomic<bool> watching{false};
std::atomic<long> allocations{0};

void* counted_allocation(std::size_t bytes, std::size_t alignment) {
    if (watching.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
    if (bytes == 0) bytes = 1;
    void* p = alignment <= alignof(std::max_align_t)
                  ? std::malloc(bytes)
                  : std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

// The heap allocations made (by any thread) while `body` runs.
template <typename Body>
long allocations_during(Body body) {
    allocations = 0;
    watching = true;
    body();
    watching = false;
    return allocations.load();
}

}  // namespace

void* operator new(std::size_t bytes) {
    return counted_allocation(bytes, 0);
}
void* operator new[](std::size_t bytes) {
    return counted_allocation(bytes, 0);
}
void* operator new(std::size_t bytes, std::align_val_t alignment) {
    return counted_allocation(bytes, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t bytes, std::align_val_t alignment) {
    return counted_allocation(bytes, static_cast<std::size_t>(alignment));
}
// The nothrow forms too: one left to the runtime would hand this file's delete memory it did not allocate.
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
    try {
        return counted_allocation(bytes, 0);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t bytes, const std::nothrow_t& tag) noexcept {
    return operator new(bytes, tag);
}
void* operator new(std::size_t bytes, std::align_val_t alignment, const std::nothrow_t&) noexcept {
    try {
        return counted_allocation(bytes, static_cast<std::size_t>(alignment));
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t bytes, std::align_val_t alignment, const std::nothrow_t& tag) noexcept {
    return operator new(bytes, alignment, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}

using namespace einc;

namespace {

struct Case {
    Op op;
    std::string pattern;
    std::vector<Shape> shapes;
    DType dtype;
    Reduction reduction = Reduction::none;
};

// Small integers, exact in every dtype and in every sum these cases make.
Tensor random_tensor(DType dtype, const Shape& shape, unsigned& seed) {
    std::int64_t n = 1;
    for (const std::int64_t e : shape) n *= e;
    std::vector<double> values(static_cast<std::size_t>(n));
    for (double& v : values) v = static_cast<double>((seed = seed * 1103515245u + 12345u) >> 16 & 7) - 3;
    return reference::make_tensor(dtype, shape, values);
}

std::vector<Case> cases() {
    std::vector<Case> all;
    for (const std::int64_t n : {std::int64_t{24}, std::int64_t{600}}) {  // 600: split between threads
        all.push_back({Op::rearrange, "a b c -> c (a b)", {{n, 7, 6}}, DType::f32});  // transpose
        all.push_back({Op::rearrange, "a b c -> b (a c)", {{n, 7, 6}}, DType::i8});   // move
        all.push_back({Op::rearrange, "a b c -> a b c", {{n, 7, 6}}, DType::bf16});   // a view, materialised
        all.push_back({Op::repeat, "a b -> a b r", {{n, 30}}, DType::f32});           // broadcast copy
        all.push_back({Op::reduce, "a b -> a", {{n, 300}}, DType::f32, Reduction::sum});   // rows
        all.push_back({Op::reduce, "a b -> a", {{n, 300}}, DType::bf16, Reduction::max});  // rows, narrow
        all.push_back({Op::reduce, "(a 2) (b 2) -> a b", {{n, 40}}, DType::f32, Reduction::max});  // windows
        all.push_back({Op::reduce, "a b -> b", {{n * 8, 30}}, DType::f32, Reduction::mean});  // accumulator
        all.push_back({Op::reduce, "a ->", {{n * 1000}}, DType::f32, Reduction::sum});        // partials
        all.push_back({Op::einsum, "i j, i j -> i j", {{n, 300}, {n, 300}}, DType::f32});     // elementwise
        all.push_back({Op::einsum, "b s e, e -> b s e", {{n, 3, 100}, {100}}, DType::bf16});  // broadcast
        all.push_back(
            {Op::einsum, "b h d, b j h d -> b h j", {{n, 3, 64}, {n, 5, 3, 64}}, DType::f32});  // rows
        all.push_back({Op::einsum,
                       "b h t, b t h k -> b h k",
                       {{n, 3, 20}, {n, 20, 3, 16}},
                       DType::f32});                                                       // accumulator
        all.push_back({Op::einsum, "i k, k j -> i j", {{n, 30}, {30, 20}}, DType::f32});   // gemm
        all.push_back({Op::einsum, "i k, k j -> i j", {{n, 30}, {30, 20}}, DType::bf16});  // packed, scratch
        all.push_back({Op::einsum, "i k, k j -> i j", {{n, 30}, {30, 20}}, DType::i32});   // packed
        all.push_back({Op::einsum, "i j, j -> i", {{n, 50}, {50}}, DType::f64});           // gemv
        all.push_back({Op::einsum, "b i, b i -> b", {{n, 70}, {n, 70}}, DType::f32});      // dots
        all.push_back({Op::einsum, "i, i ->", {{n * 1000}, {n * 1000}}, DType::f32});      // one long dot
        all.push_back({Op::einsum,
                       "a b, b c, c d -> a d",
                       {{n, 8}, {8, 40}, {40, 6}},
                       DType::f32});  // chain: temporaries
        all.push_back(
            {Op::einsum, "a b, b c, c d -> a d", {{n, 8}, {8, 40}, {40, 6}}, DType::i32});  // chain, packed
        all.push_back({Op::pack, "* c", {{n, 3}, {2, n, 3}, {3}}, DType::f32});             // several copies
        all.push_back({Op::unpack, "* c", {{n + 2 * n + 1, 3}}, DType::f32});               // several results
    }
    return all;
}

Call call_of(const Case& c) {
    Call call{c.op, c.pattern, c.reduction, {}, false, {}};
    if (c.op == Op::repeat) call.sizes = {{"r", 3}};
    if (c.op == Op::unpack) {
        const std::int64_t rows = c.shapes[0][0];
        const std::int64_t n = (rows - 1) / 3;
        call.packed_shapes = {{n}, {2, n}, {}};
    }
    return call;
}

}  // namespace

TEST_CASE("allocation: a bound program run into the caller's outputs with a workspace allocates nothing, "
          "every step kind") {
    std::set<std::string_view> strategies;
    for (const Case& c : cases()) {
        CAPTURE(c.pattern);
        CAPTURE(name_of(c.dtype));
        unsigned seed = 7;
        std::vector<Tensor> storage;
        std::vector<TensorView> views;
        for (const Shape& shape : c.shapes) {
            storage.push_back(random_tensor(c.dtype, shape, seed));
            views.push_back(storage.back().view());
        }
        const Call call = call_of(c);
        const Expression expression(call);
        Options options;
        options.contiguous = true;
        const Program program = expression.bind(views, options);
        for (const ScheduledStep& step : program.schedule().steps) strategies.insert(name_of(step.strategy));

        std::vector<Tensor> results;
        std::vector<TensorView> outputs;
        for (const TensorSpec& spec : program.plan().outputs) {
            results.push_back(Tensor::empty(spec.dtype, spec.shape));
            outputs.push_back(results.back().view());
        }
        CHECK(program.workspace_bytes() == static_cast<std::size_t>(program.schedule().workspace_bytes));
        const Tensor workspace =
            Tensor::empty(DType::i8, {static_cast<std::int64_t>(program.workspace_bytes())});
        const Workspace scratch{workspace.data(), program.workspace_bytes()};
        const std::vector<Input> inputs(views.begin(), views.end());

        program.run(inputs, outputs, scratch);  // the first run may start the thread pool and BLAS
        const long during = allocations_during([&] {
            for (int run = 0; run < 3; ++run) program.run(inputs, outputs, scratch);
        });
        CHECK_MESSAGE(during == 0, during, " allocations in 3 runs, plan:\n", program.explain("cpu"));

        const std::vector<Tensor> expected = reference::evaluate(program.bound(), views);
        REQUIRE(expected.size() == outputs.size());
        for (std::size_t k = 0; k < outputs.size(); ++k) {
            std::string difference;
            CHECK_MESSAGE(testing::same_values(outputs[k], expected[k].view(), &difference), difference);
        }
    }
    for (const std::string_view s :
         {"move", "transpose", "reduce_rows", "reduce_windows", "reduce_accumulate", "contract_elementwise",
          "contract_rows", "contract_accumulate", "library_gemv", "packed_gemm"})
        CHECK_MESSAGE(strategies.contains(s), "no case was scheduled as ", s);
#if EINC_HAS_BLAS
    CHECK(strategies.contains("library_gemm"));
#endif
}

TEST_CASE("allocation: strided outputs - a column block and a KV-cache slot - are written in place, "
          "allocating nothing") {
    unsigned seed = 3;
    // Scores of 2 heads written into columns [8, 8 + 40) of a wider row-major buffer.
    const Tensor q = random_tensor(DType::f32, {2, 16, 32}, seed);
    const Tensor k = random_tensor(DType::f32, {2, 40, 32}, seed);
    Tensor wide = Tensor::zeros(DType::f32, {2, 16, 64});
    const TensorView block{wide.data_as<float>() + 8, DType::f32, {2, 16, 40}, {16 * 64, 64, 1}};
    // One new token's keys, (b h d), written into slot 5 of a cache laid out (b t h d).
    const Tensor x = random_tensor(DType::f32, {3, 4, 8}, seed);
    Tensor cache = Tensor::zeros(DType::f32, {3, 10, 4, 8});
    const TensorView slot{cache.data_as<float>() + 5 * 4 * 8, DType::f32, {3, 8, 4}, {10 * 4 * 8, 1, 8}};

    struct Write {
        Call call;
        std::vector<TensorView> inputs;
        TensorView output;
    };
    const std::vector<Write> writes{
        {Call{Op::einsum, "h i d, h j d -> h i j", Reduction::none, {}, false, {}},
         {q.view(), k.view()},
         block},
        {Call{Op::rearrange, "b h d -> b d h", Reduction::none, {}, false, {}}, {x.view()}, slot},
    };
    for (const Write& write : writes) {
        CAPTURE(write.call.pattern);
        const Program program = Expression(write.call).bind(write.inputs, std::span(&write.output, 1));
        CHECK(program.plan().outputs[0].strides == write.output.strides);
        const Tensor workspace =
            Tensor::empty(DType::i8, {static_cast<std::int64_t>(program.workspace_bytes())});
        const std::vector<Input> inputs(write.inputs.begin(), write.inputs.end());
        program.run(inputs, std::span(&write.output, 1),
                    Workspace{workspace.data(), program.workspace_bytes()});
        const long during = allocations_during([&] {
            program.run(inputs, std::span(&write.output, 1),
                        Workspace{workspace.data(), program.workspace_bytes()});
        });
        CHECK(during == 0);
        const std::vector<Tensor> expected = reference::evaluate(program.bound(), write.inputs);
        std::string difference;
        CHECK_MESSAGE(testing::same_values(write.output, expected[0].view(), &difference), difference);
    }
    // Nothing outside the block and the slot was touched.
    const std::vector<double> wide_values = reference::values_of(wide.view());
    const std::vector<double> cache_values = reference::values_of(cache.view());
    for (std::size_t i = 0; i < wide_values.size(); ++i)
        if (i % 64 < 8 || i % 64 >= 48) REQUIRE(wide_values[i] == 0);
    for (std::size_t i = 0; i < cache_values.size(); ++i)
        if (i / 32 % 10 != 5) REQUIRE(cache_values[i] == 0);
}

TEST_CASE(
    "allocation: a workspace that is too small or misaligned is refused; without one, einc allocates it") {
    unsigned seed = 5;
    const Tensor a = random_tensor(DType::f32, {6, 8}, seed), b = random_tensor(DType::f32, {8, 40}, seed),
                 c = random_tensor(DType::f32, {40, 5}, seed);
    const Program program = compile(Op::einsum, "a b, b c, c d -> a d").bind({a.view(), b.view(), c.view()});
    REQUIRE(program.workspace_bytes() > 0);  // the chain's temporary
    Tensor out = Tensor::empty(DType::f32, {6, 5});
    const std::vector<Input> inputs{a, b, c};
    const std::vector<TensorView> outputs{out.view()};
    const Tensor memory =
        Tensor::empty(DType::i8, {static_cast<std::int64_t>(program.workspace_bytes()) + 64});
    auto* base = static_cast<std::byte*>(memory.data());
    CHECK_THROWS_WITH_AS(program.run(inputs, outputs, Workspace{base, program.workspace_bytes() - 1}),
                         doctest::Contains("the workspace holds"), Error);
    CHECK_THROWS_WITH_AS(program.run(inputs, outputs, Workspace{base + 4, program.workspace_bytes()}),
                         doctest::Contains("is not aligned to 64 bytes"), Error);
    CHECK_THROWS_WITH_AS(program.run(inputs, outputs, Workspace{nullptr, program.workspace_bytes()}),
                         doctest::Contains("is not aligned"), Error);
    program.run(inputs, outputs, Workspace{});  // none given: einc's own
    const std::vector<Tensor> expected =
        reference::evaluate(program.bound(), std::vector<TensorView>{a, b, c});
    CHECK(testing::same_values(out.view(), expected[0].view()));
}

TEST_CASE("allocation: outputs bound with strides are checked: shape, dtype, elements written twice, overlap "
          "with an input") {
    const Tensor x = Tensor::zeros(DType::f32, {4, 6});
    const Expression transpose = compile(Op::rearrange, "a b -> b a");
    Tensor out = Tensor::zeros(DType::f32, {6, 4});
    const TensorView wrong_shape{out.data(), DType::f32, {4, 6}, {6, 1}};
    CHECK_THROWS_WITH_AS(transpose.bind({x.view()}, {wrong_shape}),
                         doctest::Contains("output 0 has shape 4x6, the call's result 6x4"), Error);
    const TensorView wrong_dtype{out.data(), DType::i32, {6, 4}, {4, 1}};
    CHECK_THROWS_WITH_AS(transpose.bind({x.view()}, {wrong_dtype}),
                         doctest::Contains("output 0 is i32, the call's result f32"), Error);
    const TensorView twice{out.data(), DType::f32, {6, 4}, {0, 1}};
    CHECK_THROWS_WITH_AS(transpose.bind({x.view()}, {twice}), doctest::Contains("write some elements twice"),
                         Error);
    const TensorView column_major{out.data(), DType::f32, {6, 4}, {1, 6}};
    const Program program = transpose.bind({x.view()}, {column_major});
    const std::vector<Input> inputs{x};
    const TensorView row_major_out = out.view();
    CHECK_THROWS_WITH_AS(program.run(inputs, std::span(&row_major_out, 1)),
                         doctest::Contains("output 0 is not what the program writes"), Error);
    const TensorView into_input{x.data(), DType::f32, {6, 4}, {1, 6}};
    CHECK_THROWS_WITH_AS(program.run(inputs, std::span(&into_input, 1)),
                         doctest::Contains("output 0 overlaps input 0"), Error);
}

TEST_CASE("allocation: the one-line _into calls write strided outputs, planned and cached for their layout") {
    unsigned seed = 11;
    const Tensor x = random_tensor(DType::f32, {5, 6}, seed), w = random_tensor(DType::f32, {6, 4}, seed);
    Tensor wide = Tensor::zeros(DType::f32, {5, 10});
    const TensorView columns{wide.data_as<float>() + 3, DType::f32, {5, 4}, {10, 1}};  // columns [3, 7)
    PlanCache& cache = default_plan_cache();
    cache.clear();
    einsum_into("i k, k j -> i j", {x, w}, columns);
    einsum_into("i k, k j -> i j", {x, w}, columns, {.alpha = 1, .beta = 1});  // the same again, accumulated
    const Call matmul{Op::einsum, "i k, k j -> i j", Reduction::none, {}, false, {}};
    const std::vector<Tensor> expected = reference::evaluate(
        testing::bind_and_plan(matmul, std::vector<TensorView>{x, w}).bound, std::vector<TensorView>{x, w});
    const std::vector<double> want = reference::values_of(expected[0].view()),
                              got = reference::values_of(wide.view());
    for (std::int64_t i = 0; i < 5; ++i)
        for (std::int64_t j = 0; j < 10; ++j) {
            CAPTURE(i);
            CAPTURE(j);
            const double value = got[static_cast<std::size_t>(i * 10 + j)];
            CHECK(value == (j >= 3 && j < 7 ? 2 * want[static_cast<std::size_t>(i * 4 + j - 3)] : 0.0));
        }
    // A transposed output: a plan of its own, kept beside the first.
    Tensor transposed = Tensor::zeros(DType::f32, {4, 5});
    const TensorView column_major{transposed.data(), DType::f32, {5, 4}, {1, 5}};
    einsum_into("i k, k j -> i j", {x, w}, column_major);
    const std::vector<double> t = reference::values_of(transposed.view());
    for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t j = 0; j < 4; ++j) CHECK(t[j * 5 + i] == want[i * 4 + j]);
    CHECK(cache.stats().misses == 3);
    CHECK(cache.stats().hits == 0);
    einsum_into("i k, k j -> i j", {x, w}, columns);
    CHECK(cache.stats().hits == 1);
}
