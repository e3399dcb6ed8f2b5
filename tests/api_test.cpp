// The C++ API: one-line calls, views and their lifetime, compiled programs, the plan cache, dims.
#include <atomic>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <thread>

#include "einc/einc.hpp"
#include "tests/environment.hpp"
#include "tests/reference/reference.hpp"

using namespace einc;
using reference::make_tensor;
using reference::values_of;

namespace {

Tensor iota(DType dtype, const Shape& shape) {
    std::int64_t n = 1;
    for (const std::int64_t e : shape) n *= e;
    std::vector<double> values;
    for (std::int64_t i = 0; i < n; ++i) values.push_back(static_cast<double>(i));
    return make_tensor(dtype, shape, values);
}

}  // namespace

TEST_CASE("rearrange that strides can express is a view of the input") {
    const Tensor x = iota(DType::f32, {2, 3, 4});
    const Tensor y = rearrange(x, "a b c -> c a b");
    CHECK(y.shape() == Shape{4, 2, 3});
    CHECK(y.data() == x.data());  // no byte moved
    CHECK(y.view().strides == Shape{1, 12, 4});
    CHECK(values_of(y.view())[1] == 4);  // y[0,0,1] = x[0,1,0]
    const Tensor copy = rearrange(x, "a b c -> c a b", {}, Options{.contiguous = true});
    CHECK(copy.data() != x.data());
    CHECK(copy.view().is_row_major());
    CHECK(values_of(copy.view()) == values_of(y.view()));
}

TEST_CASE("a view keeps an owning input alive") {
    Tensor y;
    {
        const Tensor x = iota(DType::i32, {3, 2});
        y = rearrange(x, "a b -> b a");
    }
    CHECK(values_of(y.view()) == std::vector<double>{0, 2, 4, 1, 3, 5});
}

TEST_CASE("a merge of non-adjacent axes copies; require_view says why") {
    const Tensor x = iota(DType::f32, {2, 3, 4});
    const Tensor y = rearrange(x, "a b c -> a (c b)");
    CHECK(y.data() != x.data());
    CHECK(values_of(y.view())[0] == 0);
    CHECK(values_of(y.view())[1] == 4);  // (c=0, b=1)
    CHECK_THROWS_WITH_AS(rearrange(x, "a b c -> a (c b)", {}, Options{.require_view = true}),
                         doctest::Contains("rearrange can't be a view of its input"), Error);
}

TEST_CASE("reduce, repeat and einsum in one line") {
    const Tensor x = iota(DType::f32, {1, 2, 4, 4});
    const Tensor pooled = reduce(x, "b c (h 2) (w 2) -> b c h w", einc::mean);
    CHECK(pooled.shape() == Shape{1, 2, 2, 2});
    CHECK(values_of(pooled.view())[0] == doctest::Approx((0 + 1 + 4 + 5) / 4.0));
    CHECK(values_of(reduce(x, "b c h w -> c", "max").view()) == std::vector<double>{15, 31});
    CHECK_THROWS_WITH_AS(reduce(x, "b c h w -> c", "maen"), doctest::Contains("did you mean 'mean'"), Error);
    const Tensor r = repeat(iota(DType::f64, {2}), "h -> h c", {{"c", 3}});
    CHECK(values_of(r.view()) == std::vector<double>{0, 0, 0, 1, 1, 1});
    const Tensor q = iota(DType::f32, {2, 3, 4}), k = iota(DType::f32, {2, 5, 4});
    const Tensor s = einsum("b i d, b j d -> b i j", q, k);
    CHECK(s.shape() == Shape{2, 3, 5});
    CHECK(values_of(s.view())[0] == 0 * 0 + 1 * 1 + 2 * 2 + 3 * 3);
    const Tensor compact = einsum(Subscripts{"bid,bjd->bij"}, q, k);
    CHECK(values_of(compact.view()) == values_of(s.view()));
    // The same call with options, and with operands counted at run time.
    const Tensor with_options = einsum("b i d, b j d -> b i j", {q, k}, {.contiguous = true});
    CHECK(values_of(with_options.view()) == values_of(s.view()));
    CHECK(values_of(einsum(Subscripts{"bid,bjd->bij"}, {q, k}, {}).view()) == values_of(s.view()));
    const std::vector<Input> operands{q, k};
    CHECK(values_of(einsum("b i d, b j d -> b i j", operands).view()) == values_of(s.view()));
    CHECK(values_of(einsum(Subscripts{"bid,bjd->bij"}, operands).view()) == values_of(s.view()));
    CHECK(values_of(einsum("i ->", iota(DType::f32, {4})).view()) == std::vector<double>{6});
}

// numpy's habit: subscripts in einsum's einops notation. Where the one-letter reading binds, the error
// spells it out and names the API that takes subscripts; where it does not either, the error stays.
TEST_CASE("an einsum written as numpy subscripts: the error shows the pattern meant and the API for it") {
    const Tensor q = iota(DType::f32, {2, 3, 4}), k = iota(DType::f32, {2, 5, 4});
    try {
        (void)einsum("bid,bjd->bij", q, k);
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::pattern);
        CHECK(e.diagnostic().message == "output axis 'bij' appears in no operand");
        CHECK(e.diagnostic().help ==
              "as numpy subscripts (one letter an axis) this is `b i d, b j d -> b i j`: "
              "write it so, or ask for subscripts: "
              "einc::einsum(einc::Subscripts{\"bid,bjd->bij\"}, ...)");
        CHECK(e.subscripts().written == "bid,bjd->bij");
        CHECK(e.subscripts().reading == "b i d, b j d -> b i j");
    }
    // ij-> of a matrix: one axis `ij` in einops notation, a rank error; as subscripts a full sum
    CHECK_THROWS_WITH_AS(einsum("ij->", iota(DType::f32, {2, 3})), doctest::Contains("this is `i j ->`"),
                         Error);
    // a syntax error as written, subscripts that parse: said at parse time already
    CHECK_THROWS_WITH_AS(compile(Op::einsum, "...ij,...jk->...ik"),
                         doctest::Contains("this is `... i j, ... j k -> ... i k`"), Error);
    // not subscripts either (a wrong letter): the error as it was
    try {
        (void)einsum("bid,bjd->bix", q, k);
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.subscripts().reading.empty());
        CHECK(e.diagnostic().help == "every output axis must come from an input");
    }
    // wrong shapes for the subscripts too: no hint
    try {
        (void)einsum("ij,jk->ik", iota(DType::f32, {2, 3}), iota(DType::f32, {4, 5}));
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.subscripts().reading.empty());
    }
}

TEST_CASE("rearrange of a list stacks it, as einops does") {
    const Tensor a = iota(DType::f32, {2, 3}), b = iota(DType::f32, {2, 3});
    const std::vector<Input> list{a, b};
    const Tensor y = rearrange(std::span<const Input>(list), "n h w -> h (n w)");
    CHECK(y.shape() == Shape{2, 6});
    CHECK(values_of(y.view()) == std::vector<double>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
    CHECK(values_of(reduce(std::span<const Input>(list), "n h w -> h w", einc::sum).view()) ==
          std::vector<double>{0, 2, 4, 6, 8, 10});
    CHECK(repeat(std::span<const Input>(list), "n h w -> n h w c", {{"c", 2}}).shape() == Shape{2, 2, 3, 2});
    CHECK_THROWS_WITH_AS(rearrange(std::span<const Input>(), "n -> n"), doctest::Contains("empty list"),
                         Error);
}

TEST_CASE("pack and unpack round-trip; unpack returns views") {
    const Tensor a = iota(DType::i64, {2, 3, 5}), b = iota(DType::i64, {2, 5});
    const Packed packed = pack({a, b}, "i * j");
    CHECK(packed.tensor.shape() == Shape{2, 4, 5});
    CHECK(packed.packed_shapes == std::vector<Shape>{{3}, {}});
    const std::vector<Tensor> parts = unpack(packed.tensor, packed.packed_shapes, "i * j");
    REQUIRE(parts.size() == 2);
    CHECK(parts[0].data() == packed.tensor.data());
    CHECK(values_of(parts[0].view()) == values_of(a.view()));
    CHECK(values_of(parts[1].view()) == values_of(b.view()));
}

TEST_CASE("parse_shape and dims") {
    const Tensor x = iota(DType::f32, {2, 3, 4});
    CHECK(parse_shape(x, "b _ w") == AxisSizes{{"b", 2}, {"w", 4}});
    dims d;
    d.check(x, "batch seq hidden");
    d.check(iota(DType::f32, {2, 7, 4}), "batch seq2 hidden");
    CHECK(d["seq2"] == 7);
    CHECK_THROWS_WITH_AS(d.check(iota(DType::f32, {2, 3, 5}), "batch seq hidden"),
                         doctest::Contains("axis 'hidden' is 5 here, but was 4 before"), Error);
    CHECK_THROWS_AS(d["nope"], Error);
}

TEST_CASE("a compiled program runs on new data with the same layout, and refuses another") {
    const Program program = compile(Op::einsum, "i k, k j -> i j")
                                .bind({iota(DType::f32, {2, 3}).view(), iota(DType::f32, {3, 2}).view()});
    CHECK(program.plan().steps.size() == 1);
    const Tensor a = make_tensor(DType::f32, {2, 3}, {1, 0, 0, 0, 1, 0}), b = iota(DType::f32, {3, 2});
    CHECK(values_of(program.run({a, b})[0].view()) == std::vector<double>{0, 1, 2, 3});
    CHECK_THROWS_WITH_AS(program.run({a, iota(DType::f32, {3, 3})}),
                         doctest::Contains("does not match what the program was bound to"), Error);
    CHECK(program.explain().find("gemm") != std::string::npos);
}

TEST_CASE("Program::explain compares a CPU program with this CPU by default, another device when named") {
    const testing::IsolatedConfigHome config;  // uncalibrated: the `cpu` model
    const Program program = compile(Op::einsum, "i k, k j -> i j")
                                .bind({iota(DType::f32, {2, 3}).view(), iota(DType::f32, {3, 2}).view()});
    REQUIRE(program.schedule().target.backend == Backend::cpu);
    const std::string here = program.explain(), h100 = program.explain("h100");
    CHECK(here.find(fmt::format("on {}", device_model_named("cpu")->name)) != std::string::npos);
    CHECK(here.find("H100") == std::string::npos);
    CHECK(h100.find("on NVIDIA H100 SXM5 80GB") != std::string::npos);
    CHECK_THROWS_WITH_AS(program.explain("tpu"), doctest::Contains("unknown device 'tpu'"), Error);
    // Predicted times start from the step's floor: the 2x3x2 GEMM's 64 B at 25 GB/s (2.56 ns) after the cpu
    // model's 0.25 us dispatch; on an H100, 64 B at 3.35 TB/s after a 3.275 us launch.
    CHECK(here.find("time:  >= 253 ns on AMD EPYC, 2 cores (development machine) (roofline, a 250 ns "
                    "dispatch per step") != std::string::npos);
    CHECK(h100.find("time:  >= 3.28 us on NVIDIA H100 SXM5 80GB (roofline, a 3.27 us launch per step") !=
          std::string::npos);
    CHECK(&program.device_model() == device_model_named("cpu"));
}

TEST_CASE("a program writes into caller outputs, and refuses aliasing ones") {
    const Tensor x = iota(DType::f32, {4, 4});
    const Program program =
        compile(Op::rearrange, "a b -> b a").bind({x.view()}, Options{.contiguous = true});
    Tensor out = Tensor::zeros(DType::f32, {4, 4});
    const std::vector<Input> inputs{x};
    const std::vector<TensorView> outputs{out.view()};
    program.run(inputs, outputs);
    CHECK(values_of(out.view())[1] == 4);
    const std::vector<TensorView> in_place{x.view()};
    CHECK_THROWS_WITH_AS(program.run(inputs, in_place), doctest::Contains("overlaps input 0"), Error);
    const Program view_program = compile(Op::rearrange, "a b -> b a").bind({x.view()});
    CHECK_THROWS_WITH_AS(view_program.run(inputs, outputs), doctest::Contains("views of its inputs"), Error);
}

TEST_CASE("the plan cache hits on a repeated call, misses on a new layout, evicts beyond capacity") {
    PlanCache cache(2);
    const Tensor x = iota(DType::f32, {2, 3});
    const std::vector<Input> inputs{x};
    const CallRef call{Op::rearrange, "a b -> b a"};
    cache.get(call, inputs, {});
    cache.get(call, inputs, {});
    CHECK(cache.stats().hits == 1);
    CHECK(cache.stats().misses == 1);
    const Tensor transposed = rearrange(x, "a b -> b a");
    const std::vector<Input> other{transposed};
    cache.get(call, other, {});  // same shape class, other strides: a new plan
    CHECK(cache.stats().misses == 2);
    cache.get(CallRef{Op::rearrange, "a b -> (a b)"}, inputs, {});
    CHECK(cache.stats().evictions == 1);
    CHECK(cache.stats().size == 2);
    cache.set_capacity(0);
    CHECK(cache.stats().size == 0);
}

TEST_CASE("the plan cache is shared safely by many threads") {
    PlanCache cache(8);
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            const Tensor x = iota(DType::f32, {t % 3 + 1, 4});
            const std::vector<Input> inputs{x};
            for (int i = 0; i < 200; ++i) {
                const Program p = cache.get(CallRef{Op::reduce, "a b -> b", Reduction::sum}, inputs, {});
                const std::vector<double> got = values_of(p.run(inputs)[0].view());
                const double rows = t % 3 + 1;
                if (got[0] != 4 * rows * (rows - 1) / 2) ++wrong;
            }
        });
    for (std::thread& t : threads) t.join();
    CHECK(wrong == 0);
    CHECK(cache.stats().misses >= 3);
    CHECK(cache.stats().hits + cache.stats().misses == 1600);
}

TEST_CASE("length-1 dims hit the same plan whatever their stride") {
    PlanCache cache;
    Tensor x = iota(DType::f32, {1, 6});
    TensorView odd = x.view();
    odd.strides = {999, 1};
    const std::vector<Input> a{x}, b{Input(odd)};
    cache.get(CallRef{Op::rearrange, "a b -> b a"}, a, {});
    cache.get(CallRef{Op::rearrange, "a b -> b a"}, b, {});
    CHECK(cache.stats().hits == 1);
}
