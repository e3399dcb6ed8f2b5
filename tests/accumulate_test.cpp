// Accumulating outputs (Options::alpha, beta): every kind of call through the `_into` calls, in several
// dtypes, against the reference interpreter computed as alpha * reference + beta * old; beta == 0 with NaN
// in the output; the usage errors; the plan's printout and cost.
#include <cmath>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <functional>
#include <random>

#include "compiler/bind.hpp"
#include "einc/einc.hpp"
#include "tests/reference/reference.hpp"

using namespace einc;
using reference::make_tensor;
using reference::values_of;

namespace {

struct Factors {
    double alpha, beta;
};

// Integer results take whole factors only: (3, -2) stands in for (0.5, -2) there.
std::vector<Factors> factors_for(DType dtype) {
    if (is_floating(dtype)) return {{1, 0}, {2, 0}, {1, 1}, {0.5, -2}};
    return {{1, 0}, {2, 0}, {1, 1}, {3, -2}};
}

double tolerance(DType dtype) {
    switch (dtype) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-5;
    default: return is_floating(dtype) ? 2e-2 : 0;
    }
}

std::int64_t count_of(const Shape& shape) {
    std::int64_t n = 1;
    for (const std::int64_t e : shape) n *= e;
    return n;
}

// Small integers: exact in every dtype, and so are their sums and products here.
Tensor random_tensor(std::mt19937& rng, DType dtype, const Shape& shape, int low = -3, int high = 3) {
    std::uniform_int_distribution<int> value(low, high);
    std::vector<double> values(static_cast<std::size_t>(count_of(shape)));
    for (double& v : values) v = value(rng);
    return make_tensor(dtype, shape, values);
}

// Runs the call under test into `out` with `options`.
using Into = std::function<void(const TensorView& out, const Options& options)>;

// For every (alpha, beta): `into` writes into a buffer holding old values (NaN where beta == 0, for
// floats), and must give alpha * reference + beta * old, rounded to the result's dtype.
void check_into(const std::string& what, const Call& call, const std::vector<Tensor>& inputs,
                const Into& into) {
    std::vector<Shape> shapes;
    std::vector<TensorView> views;
    for (const Tensor& t : inputs) {
        shapes.push_back(t.shape());
        views.push_back(t.view());
    }
    const Tensor result = reference::evaluate(einc::bind(call, shapes), views).front();
    const std::vector<double> ref = values_of(result.view());
    const DType dtype = result.dtype();
    const Shape shape = result.shape();
    std::mt19937 rng(11);
    for (const Factors f : factors_for(dtype)) {
        const std::string context = fmt::format("{} into {} ({}), alpha {} beta {}", what, name_of(dtype),
                                                fmt::join(shape, "x"), f.alpha, f.beta);
        CAPTURE(context);
        const bool poison = f.beta == 0 && is_floating(dtype);  // NaN must not leak from an output never read
        const Tensor old = poison ? make_tensor(dtype, shape, std::vector<double>(ref.size(), NAN))
                                  : random_tensor(rng, dtype, shape);
        const std::vector<double> before = values_of(old.view());
        const Tensor out = make_tensor(dtype, shape, before);
        into(out.view(), Options{.alpha = f.alpha, .beta = f.beta});
        std::vector<double> want(ref.size());
        for (std::size_t i = 0; i < ref.size(); ++i)
            want[i] = f.alpha * ref[i] + (f.beta != 0 ? f.beta * before[i] : 0.0);
        const std::vector<double> expected = values_of(make_tensor(dtype, shape, want).view());
        const std::vector<double> got = values_of(out.view());
        REQUIRE(got.size() == expected.size());
        std::string mismatch;
        for (std::size_t i = 0; i < got.size() && mismatch.empty(); ++i)
            if (!(std::isnan(got[i]) && std::isnan(expected[i])) &&  // (a mean of nothing)
                !(std::fabs(got[i] - expected[i]) <=
                  tolerance(dtype) * std::max(1.0, std::fabs(expected[i]))))
                mismatch = fmt::format("element {}: got {}, expected {} (reference {}, old {})", i, got[i],
                                       expected[i], ref[i], before[i]);
        CHECK_MESSAGE(mismatch.empty(), mismatch);
    }
}

Call call_of(Op op, std::string_view pattern, Reduction reduction = Reduction::none,
             const AxisSizes& sizes = {}) {
    return Call{op, std::string(pattern), reduction, sizes, false, {}};
}

}  // namespace

TEST_CASE("accumulating einsum: GEMMs, matrix-vector and dot products, contractions, in f32 f64 bf16 i32") {
    struct Case {
        const char* pattern;
        std::vector<Shape> shapes;
    };
    const Case cases[] = {
        {"b i k, b k j -> b i j", {{2, 3, 5}, {2, 5, 4}}},   // one strided-batched GEMM
        {"i k, j k -> j i", {{4, 6}, {3, 6}}},               // a GEMM writing a column-major C
        {"i k, k -> i", {{5, 7}, {7}}},                      // matrix-vector
        {"k, k j -> j", {{7}, {7, 5}}},                      // vector-matrix
        {"i, i ->", {{40}, {40}}},                           // a dot product
        {"b i, b i -> b", {{6, 33}, {6, 33}}},               // a batch of dot products
        {"i j, i j -> i j", {{4, 5}, {4, 5}}},               // elementwise products, no sum
        {"i j k, j k -> i", {{3, 4, 5}, {4, 5}}},            // a contraction
        {"i j, j k, k l -> i l", {{3, 4}, {4, 5}, {5, 2}}},  // through a temporary: only the last step scales
        {"i j -> j", {{4, 6}}},                              // one operand: a sum
        {"i j -> j i", {{4, 6}}},                            // one operand: a copy
    };
    std::mt19937 rng(3);
    for (const DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32})
        for (const Case& c : cases) {
            std::vector<Tensor> inputs;
            for (const Shape& s : c.shapes) inputs.push_back(random_tensor(rng, dtype, s));
            const std::vector<Input> operands(inputs.begin(), inputs.end());
            check_into(fmt::format("einsum \"{}\"", c.pattern), call_of(Op::einsum, c.pattern), inputs,
                       [&](const TensorView& out, const Options& options) {
                           einsum_into(c.pattern, operands, out, options);
                       });
        }
}

TEST_CASE("accumulating reduce: sum mean max min prod over every kind of axis set") {
    const std::pair<const char*, Shape> cases[] = {
        {"a b -> a", {6, 8}},         // rows
        {"a b -> b", {6, 8}},         // columns
        {"(a 2) b -> a b", {6, 8}},   // windows
        {"a b c -> b", {3, 4, 5}},    // a middle axis kept
        {"a b ->", {5, 7}},           // everything
        {"a b -> b a", {3, 4}},       // nothing reduced: a copy
        {"a b c -> a c", {2, 0, 3}},  // an empty reduction
    };
    std::mt19937 rng(5);
    for (const DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32})
        for (const Reduction op :
             {Reduction::sum, Reduction::mean, Reduction::max, Reduction::min, Reduction::prod})
            for (const auto& c : cases) {
                const char* pattern = c.first;  // (not a structured binding: Clang 14 cannot capture one)
                const Shape& shape = c.second;
                if (op == Reduction::mean && !is_floating(dtype)) continue;  // not supported
                if ((op == Reduction::max || op == Reduction::min) && count_of(shape) == 0)
                    continue;  // no identity
                const std::vector<Tensor> inputs{op == Reduction::prod
                                                     ? random_tensor(rng, dtype, shape, -2, 2)
                                                     : random_tensor(rng, dtype, shape)};
                check_into(fmt::format("reduce {} \"{}\"", name_of(op), pattern),
                           call_of(Op::reduce, pattern, op), inputs,
                           [&](const TensorView& out, const Options& options) {
                               reduce_into(inputs[0], pattern, op, out, {}, options);
                           });
            }
}

TEST_CASE("accumulating rearrange, repeat and pack: every result written, even one a view could give") {
    std::mt19937 rng(9);
    for (const DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32}) {
        const Tensor x = random_tensor(rng, dtype, {5, 7});
        for (const char* pattern : {"a b -> b a", "a b -> a b", "a b -> (a b)", "a (b 1) -> b a"})
            check_into(fmt::format("rearrange \"{}\"", pattern), call_of(Op::rearrange, pattern), {x},
                       [&](const TensorView& out, const Options& options) {
                           rearrange_into(x, pattern, out, {}, options);
                       });
        const Tensor big = random_tensor(rng, dtype, {40, 72});  // large enough for a tiled transpose
        check_into("rearrange \"a b -> b a\" (40x72)", call_of(Op::rearrange, "a b -> b a"), {big},
                   [&](const TensorView& out, const Options& options) {
                       rearrange_into(big, "a b -> b a", out, {}, options);
                   });
        const AxisSizes c3{{"c", 3}};
        check_into("repeat \"a b -> a b c\"", call_of(Op::repeat, "a b -> a b c", Reduction::none, c3), {x},
                   [&](const TensorView& out, const Options& options) {
                       repeat_into(x, "a b -> a b c", out, c3, options);
                   });
        check_into("repeat \"a b -> (a 2) b\"", call_of(Op::repeat, "a b -> (a 2) b"), {x},
                   [&](const TensorView& out, const Options& options) {
                       repeat_into(x, "a b -> (a 2) b", out, {}, options);
                   });
        const Tensor y = random_tensor(rng, dtype, {5, 2, 3});
        const std::vector<Input> parts{x, y};
        check_into(
            "pack \"a *\"", call_of(Op::pack, "a *"), {x, y},
            [&](const TensorView& out, const Options& options) { pack_into(parts, "a *", out, options); });
    }
}

TEST_CASE("accumulating: a running sum over calls, and programs cached per alpha and beta") {
    const Tensor x = make_tensor(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    const Tensor total = make_tensor(DType::f32, {3}, {0, 0, 0});
    for (int i = 0; i < 3; ++i)
        reduce_into(x, "a b -> b", Reduction::sum, total.view(), {}, Options{.beta = 1});
    CHECK(values_of(total.view()) == std::vector<double>{15, 21, 27});
    reduce_into(x, "a b -> b", Reduction::sum, total.view(), {},
                Options{.alpha = -1, .beta = 0.5});  // another plan
    CHECK(values_of(total.view()) == std::vector<double>{2.5, 3.5, 4.5});
    reduce_into(x, "a b -> b", Reduction::sum, total.view());  // and the plain one
    CHECK(values_of(total.view()) == std::vector<double>{5, 7, 9});

    // A compiled program bound once with the epilogue, run into outputs many times.
    const Tensor w = make_tensor(DType::f32, {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
    const Program add = compile(Op::einsum, "i k, k j -> i j").bind({x.view(), w.view()}, Options{.beta = 1});
    const Tensor y = make_tensor(DType::f32, {2, 3}, {10, 10, 10, 10, 10, 10});
    const std::vector<Input> inputs{x, w};
    const std::vector<TensorView> outputs{y.view()};
    add.run(inputs, outputs);
    add.run(inputs, outputs);
    CHECK(values_of(y.view()) == std::vector<double>{12, 14, 16, 18, 20, 22});
    CHECK(add.plan().steps.size() == 1);  // one GEMM, accumulating into its C
    einsum_into("i k, k j -> i j", {x, w}, y.view(), {.alpha = -1, .beta = 1});  // (as docs/api.md writes it)
    CHECK(values_of(y.view()) == std::vector<double>{11, 12, 13, 14, 15, 16});
}

TEST_CASE("accumulating: usage errors are clear, and cheap checks come first") {
    const Tensor x = make_tensor(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    const Program accumulate = compile(Op::rearrange, "a b -> b a").bind({x.view()}, Options{.beta = 1});
    CHECK_THROWS_WITH_AS(accumulate.run({x}), doctest::Contains("beta reads the outputs"), Error);
    const Tensor out = make_tensor(DType::f32, {3, 2}, {1, 1, 1, 1, 1, 1});
    const std::vector<Input> inputs{x};
    const std::vector<TensorView> outputs{out.view()};
    accumulate.run(inputs, outputs);
    CHECK(values_of(out.view()) == std::vector<double>{2, 5, 3, 6, 4, 7});

    // alpha != 1 alone: run(inputs) gives a fresh, scaled result (never a view of the input).
    const Program scaled = compile(Op::rearrange, "a b -> b a").bind({x.view()}, Options{.alpha = 2});
    const Tensor doubled = scaled.run({x})[0];
    CHECK(doubled.data() != x.data());
    CHECK(values_of(doubled.view()) == std::vector<double>{2, 8, 4, 10, 6, 12});

    const Tensor i = make_tensor(DType::i32, {2, 3}, {1, 2, 3, 4, 5, 6});
    CHECK_THROWS_WITH_AS(compile(Op::rearrange, "a b -> b a").bind({i.view()}, Options{.alpha = 0.5}),
                         doctest::Contains("whole numbers"), Error);
    const Tensor i_out = make_tensor(DType::i64, {3}, {0, 0, 0});
    CHECK_THROWS_WITH_AS(reduce_into(i, "a b -> b", Reduction::sum, i_out.view(), {}, Options{.beta = 0.25}),
                         doctest::Contains("whole numbers for a i64 result"), Error);
    CHECK_THROWS_WITH_AS(compile(Op::rearrange, "a b -> b a").bind({x.view()}, Options{.alpha = NAN}),
                         doctest::Contains("finite"), Error);
    CHECK_THROWS_WITH_AS(
        compile(Op::rearrange, "a b -> b a").bind({x.view()}, Options{.require_view = true, .alpha = 2}),
        doctest::Contains("can't be a view"), Error);
    const Tensor wrong = make_tensor(DType::f32, {2, 3}, {0, 0, 0, 0, 0, 0});
    CHECK_THROWS_WITH_AS(rearrange_into(x, "a b -> b a", wrong.view()),
                         doctest::Contains("output 0 has shape 2x3, the call's result 3x2"), Error);
}

TEST_CASE("accumulating: the plan shows the epilogue and costs it") {
    const Tensor x = make_tensor(DType::f32, {4, 8}, std::vector<double>(32, 1));
    const Program plain = compile(Op::rearrange, "a b -> b a").bind({x.view()});
    const Program accumulate =
        compile(Op::rearrange, "a b -> b a").bind({x.view()}, Options{.alpha = 0.5, .beta = -2});
    const Program scale = compile(Op::rearrange, "a b -> b a").bind({x.view()}, Options{.alpha = 0.5});
    CHECK(plain.explain().find("result") == std::string::npos);
    CHECK(accumulate.explain().find("out 0 = 0.5 * result - 2 * out 0") != std::string::npos);
    CHECK(scale.explain().find("out 0 = 0.5 * result\n") != std::string::npos);
    const Cost copy =
        compile(Op::rearrange, "a b -> b a").bind({x.view()}, Options{.contiguous = true}).plan().total;
    CHECK(copy.flops == 0);
    CHECK(copy.bytes_read == 128);
    CHECK(accumulate.plan().total.bytes_read == 256);  // beta reads the output
    CHECK(accumulate.plan().total.bytes_written == 128);
    CHECK(accumulate.plan().total.flops == 64);  // 2 per element
    CHECK(scale.plan().total.bytes_read == 128);
    CHECK(scale.plan().total.flops == 64);
    const std::string json =
        plan_to_json(accumulate.plan(), accumulate.schedule(), *device_model_named("h100"));
    CHECK(json.find("\"epilogue\":{\"alpha\":0.5,\"beta\":-2}") != std::string::npos);

    // Steps writing temporaries never carry it: only the step that writes the output.
    const Tensor m = make_tensor(DType::f32, {3, 3}, std::vector<double>(9, 1));
    const Program chain =
        compile(Op::einsum, "i j, j k, k l -> i l").bind({m.view(), m.view(), m.view()}, Options{.beta = 1});
    for (const PlanStep& step : chain.plan().steps) {
        const bool writes_output =
            std::visit(Overloaded{[](const View&) { return false; },
                                  [](const Gemm& g) { return g.c.buffer.kind == Buffer::Kind::output; },
                                  [](const auto& s) { return s.dst.buffer.kind == Buffer::Kind::output; }},
                       step.step);
        CHECK(epilogue_of(step.step).identity() == !writes_output);
    }
}

// Outputs given to bind (any strides): a column block of a wider buffer, row- and column-major, so that
// BLAS's C has a leading dimension of its own and beta reads it there; the elements outside are untouched.
TEST_CASE("accumulating into strided outputs bound to the program: blocks of a wider buffer") {
    const Tensor a = make_tensor(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    const Tensor b = make_tensor(DType::f32, {3, 2}, {1, 0, 0, 1, 1, 1});  // a @ b = [[4, 5], [10, 11]]
    const std::vector<Input> inputs{a, b};
    const std::vector<TensorView> views{a.view(), b.view()}, first{a.view()};
    const auto block_of = [](const Tensor& big, std::int64_t offset, Shape shape, Shape strides) {
        TensorView view = big.view();
        view.data = static_cast<float*>(view.data) + offset;
        view.shape = std::move(shape);
        view.strides = std::move(strides);
        return view;
    };
    SUBCASE("a GEMM into a row-major block (ldc 5)") {
        const Tensor big = make_tensor(DType::f32, {2, 5}, std::vector<double>(10, 1));
        const std::vector<TensorView> out{block_of(big, 1, {2, 2}, {5, 1})};
        const Program p =
            compile(Op::einsum, "i k, k j -> i j").bind(views, out, Options{.alpha = 2, .beta = 1});
        p.run(inputs, out);
        CHECK(values_of(big.view()) == std::vector<double>{1, 9, 11, 1, 1, 1, 21, 23, 1, 1});
    }
    SUBCASE("a GEMM into a column-major block") {
        const Tensor big = make_tensor(DType::f32, {2, 5}, std::vector<double>(10, 1));
        const std::vector<TensorView> out{block_of(big, 0, {2, 2}, {1, 5})};  // (i, j) at i + 5 j
        const Program p =
            compile(Op::einsum, "i k, k j -> i j").bind(views, out, Options{.alpha = 1, .beta = -1});
        p.run(inputs, out);
        CHECK(values_of(big.view()) == std::vector<double>{3, 9, 1, 1, 1, 4, 10, 1, 1, 1});
        CHECK(values_of(out[0]) == std::vector<double>{3, 4, 9, 10});
    }
    SUBCASE("a reduction into a column, and a transpose into a block") {
        const Tensor big = make_tensor(DType::f32, {3, 5}, std::vector<double>(15, 1));
        const std::vector<TensorView> column{block_of(big, 4, {3}, {5})};
        const Program sum = compile(Op::reduce, "a b -> b", {}, Reduction::sum)
                                .bind(first, column, Options{.alpha = 0.5, .beta = 2});
        sum.run({&inputs[0], 1}, column);
        CHECK(values_of(column[0]) == std::vector<double>{4.5, 5.5, 6.5});
        const std::vector<TensorView> block{block_of(big, 0, {3, 2}, {5, 1})};
        const Program t = compile(Op::rearrange, "a b -> b a").bind(first, block, Options{.beta = -1});
        t.run({&inputs[0], 1}, block);
        CHECK(values_of(block[0]) == std::vector<double>{0, 3, 1, 4, 2, 5});
        CHECK(values_of(big.view())[2] == 1);  // outside the block
    }
}
