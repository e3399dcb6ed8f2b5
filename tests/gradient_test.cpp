// Gradients (runtime/gradient.hpp, compiler/gradient.hpp) against an independent oracle: finite
// differences of the reference interpreter (tests/reference), in f64. Nothing here uses einc's own
// backward rules to compute what is expected.
//
//   phi(x) = sum over outputs k of <G_k, f_k(x)>        (f evaluated by reference::evaluate)
//   dphi/dx_j = (phi(x + h e_j) - phi(x - h e_j)) / 2h  (central differences)
//
// Every call except reduce max/min/prod is linear in each operand (einsum: multilinear; the others
// linear), so with integer-valued data and h = 1 the differences are exact, and so is the directional
// identity phi(.., x_k + E, ..) - phi(.., x_k, ..) == <dX_k, E> for a random direction E. reduce prod
// is linear in each single element, so element-wise differences with h = 1 are exact too (zeros
// included); reduce max/min is checked on data without ties (h = 1/4 keeps every extremum where it
// is), and ties by hand. Lower-precision dtypes are compared with the f64 gradient within a tolerance
// scaled by the magnitude of the terms (the same gradient of |x| and |G|).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <numeric>
#include <random>
#include <unistd.h>
#include <variant>

#include "cli/cli.hpp"
#include "compiler/bind.hpp"
#include "einc/einc.hpp"
#include "tests/cli_capture.hpp"
#include "tests/corpus_calls.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"
#include "tests/sanitized.hpp"

using namespace einc;
using reference::make_tensor;
using reference::values_of;

namespace {

namespace fs = std::filesystem;

std::int64_t count(const Shape& shape) {
    std::int64_t n = 1;
    for (const std::int64_t e : shape) n *= e;
    return n;
}

Call call_of(Op op, std::string pattern, AxisSizes sizes = {}, Reduction reduction = Reduction::none) {
    Call call;
    call.op = op;
    call.pattern = std::move(pattern);
    call.sizes = std::move(sizes);
    call.reduction = reduction;
    return call;
}
Call einsum_call(std::string pattern) {
    return call_of(Op::einsum, std::move(pattern));
}
Call reduce_call(std::string pattern, Reduction reduction, AxisSizes sizes = {}) {
    return call_of(Op::reduce, std::move(pattern), std::move(sizes), reduction);
}

std::vector<double> random_integers(std::mt19937& rng, std::int64_t n, int low, int high) {
    std::uniform_int_distribution<int> pick(low, high);
    std::vector<double> values(static_cast<std::size_t>(n));
    for (double& v : values) v = pick(rng);
    return values;
}

// Distinct integers, shuffled: data without ties for max and min.
std::vector<double> distinct_values(std::mt19937& rng, std::int64_t n) {
    std::vector<double> values(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = static_cast<double>(i) - static_cast<double>(n / 2);
    std::shuffle(values.begin(), values.end(), rng);
    return values;
}

// Powers of two and zeros: products stay exact (and finite) in f64 however many are multiplied.
std::vector<double> dyadic_values(std::mt19937& rng, std::int64_t n) {
    static const double choices[] = {-2, -1, -0.5, 0, 0.5, 1, 2};
    std::uniform_int_distribution<int> pick(0, 6);
    std::vector<double> values(static_cast<std::size_t>(n));
    for (double& v : values) v = choices[pick(rng)];
    return values;
}

// Memory orders for inputs and output gradients.
enum class Order { row_major, transposed, scattered };
std::string name_of_order(Order order) {
    return order == Order::row_major ? "row-major" : order == Order::transposed ? "transposed" : "scattered";
}

// A tensor holding `values` (row-major logical order) in memory laid out as `order`: row-major;
// transposed (dims in reverse order, column-major); or scattered (dims permuted at random, padded, some
// reversed with negative strides).
struct Strided {
    Tensor storage;
    TensorView view;
};
Strided strided(DType dtype, const Shape& shape, const std::vector<double>& values, Order order,
                std::mt19937& rng) {
    const std::size_t rank = shape.size();
    std::vector<std::size_t> dims(rank);
    std::iota(dims.begin(), dims.end(), std::size_t{0});
    if (order == Order::transposed) std::reverse(dims.begin(), dims.end());
    if (order == Order::scattered) std::shuffle(dims.begin(), dims.end(), rng);
    std::bernoulli_distribution coin(0.4);
    Shape strides(rank, 0);
    std::int64_t stride = 1;
    for (std::size_t k = rank; k-- > 0;) {
        const std::size_t d = dims[k];
        strides[d] = stride;
        stride *= std::max<std::int64_t>(shape[d], 1) + (order == Order::scattered && coin(rng) ? 1 : 0);
    }
    if (order == Order::scattered)
        for (std::size_t d = 0; d < rank; ++d)
            if (shape[d] > 1 && coin(rng)) strides[d] = -strides[d];
    const std::int64_t n = count(shape);
    std::int64_t low = 0, high = 0;
    for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t extent = (std::max<std::int64_t>(shape[d], 1) - 1) * strides[d];
        (extent < 0 ? low : high) += extent;
    }
    const std::int64_t span = n == 0 ? 1 : high - low + 1;
    Strided out{Tensor::zeros(dtype, Shape{span}), {}};
    const std::size_t bytes = size_of(dtype);
    std::byte* origin = static_cast<std::byte*>(out.storage.data()) - low * static_cast<std::int64_t>(bytes);
    const Tensor dense = make_tensor(dtype, shape, values);
    Shape index(rank, 0);
    for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t offset = 0;
        for (std::size_t d = 0; d < rank; ++d) offset += index[d] * strides[d];
        std::memcpy(origin + offset * static_cast<std::int64_t>(bytes),
                    static_cast<const std::byte*>(dense.data()) + i * static_cast<std::int64_t>(bytes),
                    bytes);
        for (std::size_t d = rank; d-- > 0;) {
            if (++index[d] < shape[d]) break;
            index[d] = 0;
        }
    }
    out.view = TensorView{origin, dtype, shape, strides};
    return out;
}

// phi(x) = sum_k <G_k, f_k(x)>, f evaluated by the reference interpreter on f64 row-major inputs.
class Phi {
public:
    Phi(const Call& call, const std::vector<Shape>& shapes, std::vector<std::vector<double>> gradients)
        : bound_(bind(call, shapes)), gradients_(std::move(gradients)) {}

    double operator()(const std::vector<Tensor>& xs) const {
        std::vector<TensorView> views;
        for (const Tensor& x : xs) views.push_back(x.view());
        const std::vector<Tensor> outputs = reference::evaluate(bound_, views);
        REQUIRE(outputs.size() == gradients_.size());
        double total = 0;
        for (std::size_t k = 0; k < outputs.size(); ++k) {
            const std::vector<double> values = values_of(outputs[k].view());
            REQUIRE(values.size() == gradients_[k].size());
            for (std::size_t i = 0; i < values.size(); ++i)
                if (gradients_[k][i] != 0) total += gradients_[k][i] * values[i];
        }
        return total;
    }

private:
    Bound bound_;
    std::vector<std::vector<double>> gradients_;
};

// d phi / d (element j of input k), by central differences with step h.
double difference(const Phi& phi, std::vector<Tensor>& xs, std::size_t k, std::int64_t j, double h) {
    double* data = xs[k].data_as<double>();
    const double saved = data[j];
    data[j] = saved + h;
    const double plus = phi(xs);
    data[j] = saved - h;
    const double minus = phi(xs);
    data[j] = saved;
    return (plus - minus) / (2 * h);
}

std::vector<Tensor> f64_copies(const std::vector<std::vector<double>>& values,
                               const std::vector<Shape>& shapes) {
    std::vector<Tensor> xs;
    for (std::size_t k = 0; k < values.size(); ++k)
        xs.push_back(make_tensor(DType::f64, shapes[k], values[k]));
    return xs;
}

std::vector<std::vector<double>> absolute(std::vector<std::vector<double>> values) {
    for (std::vector<double>& v : values)
        for (double& e : v) e = std::fabs(e);
    return values;
}

double tolerance_for(DType dtype) {
    switch (dtype) {
    case DType::f64: return 1e-9;
    case DType::f32: return 2e-5;
    case DType::f16: return 1e-2;
    default: return 4e-2;  // bf16
    }
}

enum class Kind { linear, extremum, product };
Kind kind_of(const Call& call) {
    if (call.op != Op::reduce) return Kind::linear;
    if (call.reduction == Reduction::max || call.reduction == Reduction::min) return Kind::extremum;
    if (call.reduction == Reduction::prod) return Kind::product;
    return Kind::linear;
}

struct CheckOptions {
    Order gradient_order = Order::row_major;  // how the output gradients are laid out (bound so)
    std::int64_t elementwise_limit = 300;  // linear: every element up to this many; beyond, directional only
};

// einc's gradient of `call` on `inputs` (any dtype, any layout), for random integer output gradients,
// against finite differences of the reference interpreter on the same values in f64.
void check_gradient_or_throw(const Call& call, std::span<const TensorView> inputs, std::mt19937& rng,
                             const CheckOptions& options) {
    std::string described;
    for (const TensorView& x : inputs) described += fmt::format("\n  input {}", describe(x));
    INFO("inputs:", described);
    INFO("output gradients ", name_of_order(options.gradient_order));
    const Kind kind = kind_of(call);
    const DType dtype = inputs.empty() ? DType::f64 : inputs[0].dtype;
    const double tolerance = tolerance_for(dtype);

    const Gradient plain = gradient(call, inputs);
    std::vector<Shape> shapes;
    std::vector<std::vector<double>> xs_values;
    for (const TensorView& x : inputs) {
        shapes.push_back(x.shape);
        xs_values.push_back(values_of(x));
    }
    std::vector<Strided> gs;
    std::vector<TensorView> g_views;
    std::vector<std::vector<double>> g_values;
    for (const TensorSpec& out : plain.forward().plan().outputs) {
        g_values.push_back(random_integers(rng, count(out.shape), -3, 3));
        gs.push_back(strided(out.dtype, out.shape, g_values.back(), options.gradient_order, rng));
        g_views.push_back(gs.back().view);
        g_values.back() = values_of(g_views.back());  // (as the dtype holds them: exact for small integers)
    }
    const Gradient g = options.gradient_order == Order::row_major ? plain : gradient(call, inputs, g_views);
    const std::vector<Input> in(inputs.begin(), inputs.end()), grads(g_views.begin(), g_views.end());
    const std::vector<Tensor> got = g.run(in, grads);
    REQUIRE(got.size() == inputs.size());

    const Phi phi(call, shapes, g_values);
    const Phi phi_abs(call, shapes, absolute(g_values));  // the magnitude of the terms, for tolerances
    std::vector<Tensor> xs = f64_copies(xs_values, shapes);
    std::vector<Tensor> xs_abs = f64_copies(absolute(xs_values), shapes);
    double g_max = 1;
    for (const std::vector<double>& v : g_values)
        for (const double e : v) g_max = std::max(g_max, std::fabs(e));
    const double h = kind == Kind::extremum ? 0.25 : 1;

    for (std::size_t k = 0; k < inputs.size(); ++k) {
        INFO("the gradient of input ", k);
        CHECK(got[k].dtype() == inputs[k].dtype);
        REQUIRE(got[k].shape() == inputs[k].shape);
        const std::vector<double> grad = values_of(got[k].view());
        const std::int64_t n = count(inputs[k].shape);
        if (n == 0) continue;

        // Element by element (all of them, or a sample of a large nonlinear case).
        std::vector<std::int64_t> elements;
        if (n <= options.elementwise_limit) {
            for (std::int64_t j = 0; j < n; ++j) elements.push_back(j);
        } else if (kind != Kind::linear) {
            std::uniform_int_distribution<std::int64_t> pick(0, n - 1);
            for (int s = 0; s < 48; ++s) elements.push_back(pick(rng));
        }
        std::vector<double> expected, magnitude;
        for (const std::int64_t j : elements) {
            expected.push_back(difference(phi, xs, k, j, h));
            magnitude.push_back(kind == Kind::extremum ? g_max : difference(phi_abs, xs_abs, k, j, h));
        }
        double scale = 1;
        for (const double m : magnitude) scale = std::max(scale, std::fabs(m));
        std::string mismatch;
        for (std::size_t e = 0; e < elements.size() && mismatch.empty(); ++e) {
            const std::size_t j = static_cast<std::size_t>(elements[e]);
            if (!(std::fabs(grad[j] - expected[e]) <= tolerance * scale))
                mismatch =
                    fmt::format("element {} (row-major) of {}: got {}, expected {} (finite differences)", j,
                                format_shape(inputs[k].shape), grad[j], expected[e]);
        }
        if (!mismatch.empty() && elements.size() == static_cast<std::size_t>(n) &&
            n <= 64)  // the whole gradient, when small
            mismatch +=
                fmt::format("\n  got      {}\n  expected {}", fmt::join(grad, " "), fmt::join(expected, " "));
        CHECK_MESSAGE(mismatch.empty(), mismatch);

        // The directional identity, exact for calls linear in each operand.
        if (kind == Kind::linear) {
            const std::vector<double> direction = random_integers(rng, n, -2, 2);
            std::vector<Tensor> moved = f64_copies(xs_values, shapes),
                                moved_abs = f64_copies(absolute(xs_values), shapes);
            double rhs = 0;
            for (std::int64_t j = 0; j < n; ++j) {
                moved[k].data_as<double>()[j] += direction[static_cast<std::size_t>(j)];
                moved_abs[k].data_as<double>()[j] += std::fabs(direction[static_cast<std::size_t>(j)]);
                rhs += grad[static_cast<std::size_t>(j)] * direction[static_cast<std::size_t>(j)];
            }
            const double lhs = phi(moved) - phi(xs);
            const double size = std::max(1.0, phi_abs(moved_abs) - phi_abs(xs_abs));
            INFO("<G, f(x_k + E) - f(x_k)> = ", lhs, ", <dX_k, E> = ", rhs);
            CHECK(std::fabs(lhs - rhs) <= tolerance * size);
        }
    }
}

// The same, an einc::Error reported as a failure of this call (the other calls still run).
void check_gradient(const Call& call, std::span<const TensorView> inputs, std::mt19937& rng,
                    const CheckOptions& options = {}) {
    INFO(format_call(call));
    try {
        check_gradient_or_throw(call, inputs, rng, options);
    } catch (const Error& e) {
        std::string described;
        for (const TensorView& x : inputs) described += fmt::format(" {}", describe(x));
        FAIL_CHECK(fmt::format("{} on{}: einc::Error\n{}", format_call(call), described, e.what()));
    }
}

void check_gradient(const Call& call, const std::vector<Strided>& inputs, std::mt19937& rng,
                    const CheckOptions& options = {}) {
    std::vector<TensorView> views;
    for (const Strided& s : inputs) views.push_back(s.view);
    check_gradient(call, views, rng, options);
}

// Inputs of `shapes` in `dtype` laid out as `order`, with values fit for the call's kind.
std::vector<Strided> inputs_for(const Call& call, const std::vector<Shape>& shapes, DType dtype, Order order,
                                std::mt19937& rng) {
    std::vector<Strided> inputs;
    for (const Shape& shape : shapes) {
        const std::int64_t n = count(shape);
        const Kind kind = kind_of(call);
        const std::vector<double> values = kind == Kind::extremum  ? distinct_values(rng, n)
                                           : kind == Kind::product ? dyadic_values(rng, n)
                                                                   : random_integers(rng, n, -3, 3);
        inputs.push_back(strided(dtype, shape, values, order, rng));
    }
    return inputs;
}

struct HandCase {
    Call call;
    std::vector<Shape> shapes;
};

Call packed(Op op, std::string pattern, std::vector<Shape> parts = {}) {
    Call call = call_of(op, std::move(pattern));
    call.packed_shapes = std::move(parts);
    return call;
}

// Calls of every operation, written by hand: what the random generator rarely or never makes.
std::vector<HandCase> linear_cases() {
    return {
        // rearrange: compositions, `()`, `1`, ellipsis
        {call_of(Op::rearrange, "b (h w) c -> b h w c", {{"h", 2}}), {{2, 6, 3}}},
        {call_of(Op::rearrange, "b h w c -> b (c h) w"), {{2, 3, 2, 2}}},
        {call_of(Op::rearrange, "(a b) c -> c (b a)", {{"a", 2}}), {{6, 2}}},
        {call_of(Op::rearrange, "a () b -> b a"), {{2, 1, 3}}},
        {call_of(Op::rearrange, "a 1 b -> (b a) ()"), {{2, 1, 3}}},
        {call_of(Op::rearrange, "... c -> c ..."), {{2, 3, 4}}},
        {call_of(Op::rearrange, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", {{"p1", 2}, {"p2", 2}}),
         {{2, 3, 4, 4}}},
        // repeat: new axes, `(w 2)`, anonymous axes
        {call_of(Op::repeat, "h w -> h w c", {{"c", 3}}), {{2, 3}}},
        {call_of(Op::repeat, "h w -> h (w 2)"), {{2, 3}}},
        {call_of(Op::repeat, "h w -> (2 h) w c", {{"c", 2}}), {{2, 3}}},
        {call_of(Op::repeat, "h -> h (r 2) t", {{"r", 3}, {"t", 2}}), {{4}}},
        {call_of(Op::repeat, "h w -> w h"), {{3, 2}}},
        // reduce sum and mean, over named and anonymous axes, to a scalar
        {reduce_call("b c h w -> b c", Reduction::sum), {{2, 3, 2, 2}}},
        {reduce_call("a b ->", Reduction::sum), {{3, 4}}},
        {reduce_call("b c (h 2) (w 2) -> b c h w", Reduction::mean), {{1, 2, 4, 4}}},
        {reduce_call("(h 2) w -> h", Reduction::mean), {{6, 3}}},
        {reduce_call("... (h 2) -> ...", Reduction::mean), {{2, 3, 4}}},
        {reduce_call("a b c -> c a", Reduction::mean), {{2, 3, 4}}},
        // einsum: diagonals, axes summed inside one operand, broadcasting, scalars, three operands
        {einsum_call("i i -> i"), {{3, 3}}},
        {einsum_call("i i j -> j"), {{3, 3, 2}}},
        {einsum_call("i i ->"), {{4, 4}}},
        {einsum_call("i j i -> j i"), {{3, 2, 3}}},
        {einsum_call("i j -> i"), {{2, 3}}},
        {einsum_call("i j, k -> i k"), {{2, 3}, {4}}},
        {einsum_call("i j, j k -> i"), {{2, 3}, {3, 4}}},
        {einsum_call("... i, ... i -> ..."), {{2, 3}, {1, 3}}},
        {einsum_call("... i, ... i -> ..."), {{1, 3}, {2, 3}}},
        {einsum_call("... i, ... i -> ... i"), {{2, 1, 3}, {4, 3}}},
        {einsum_call("i, i ->"), {{4}, {4}}},
        {einsum_call("i, j -> i j"), {{3}, {4}}},
        {einsum_call("i j, i j -> i j"), {{2, 3}, {2, 3}}},
        {einsum_call("i j -> j i"), {{2, 3}}},
        {einsum_call("b d, d k -> b k"), {{3, 4}, {4, 5}}},
        {einsum_call("b i d, b j d -> b i j"), {{2, 3, 4}, {2, 5, 4}}},
        {einsum_call("i j, j k, k l -> i l"), {{2, 3}, {3, 4}, {4, 2}}},
        {einsum_call("i, i, i -> i"), {{5}, {5}, {5}}},
        {einsum_call("a b c, c d, a -> b d"), {{2, 3, 4}, {4, 2}, {2}}},
        {einsum_call("i j, j k, k -> (i k)"), {{2, 3}, {3, 2}, {2}}},
        // pack and unpack with several parts
        {packed(Op::pack, "i *"), {{2, 3}, {2}, {2, 2, 2}}},
        {packed(Op::pack, "* c"), {{3, 4, 2}, {5, 2}, {2}}},
        {packed(Op::pack, "b * c"), {{2, 3}, {2, 2, 3}}},
        {packed(Op::unpack, "i *", {{3}, {}, {2, 2}}), {{2, 8}}},
        {packed(Op::unpack, "* c", {{2, 3}, {1}, {-1}}), {{10, 2}}},
    };
}

std::vector<HandCase> nonlinear_cases() {
    std::vector<HandCase> cases;
    for (const Reduction r : {Reduction::max, Reduction::min, Reduction::prod}) {
        cases.push_back({reduce_call("a b -> a", r), {{3, 4}}});
        cases.push_back({reduce_call("a b -> b", r), {{3, 4}}});
        cases.push_back({reduce_call("a b c ->", r), {{2, 3, 2}}});
        cases.push_back({reduce_call("b (h 2) (w 2) -> b h w", r), {{2, 4, 6}}});
        cases.push_back({reduce_call("... c -> c", r), {{2, 3, 4}}});
        cases.push_back({reduce_call("a b -> b a", r), {{2, 3}}});  // nothing reduced
    }
    return cases;
}

}  // namespace

TEST_CASE("gradient of hand-written linear calls of every operation matches finite differences (f64, every "
          "memory order)") {
    std::mt19937 rng(7);
    for (const HandCase& c : linear_cases()) {
        for (const Order order : {Order::row_major, Order::transposed, Order::scattered}) {
            INFO("inputs ", name_of_order(order));
            check_gradient(c.call, inputs_for(c.call, c.shapes, DType::f64, order, rng), rng);
        }
    }
}

// The backward einsum of an operand reads the output's gradient, whose composite dim `(i j)` must be
// split again: the sizes of its axes come from the forward call, not from the other operands alone.
TEST_CASE("gradient of einsum with a composite output dim whose axes only one operand has") {
    std::mt19937 rng(5);
    const std::vector<HandCase> cases{
        {einsum_call("i j -> (j i)"), {{2, 3}}},
        {einsum_call("i j, k -> (i j) k"), {{2, 3}, {4}}},
        {einsum_call("i i j -> (j i)"), {{3, 3, 2}}},
        {einsum_call("i j, j k -> (i k)"), {{2, 3}, {3, 4}}},  // every axis of (i k) in another operand
    };
    for (const HandCase& c : cases)
        check_gradient(c.call, inputs_for(c.call, c.shapes, DType::f64, Order::row_major, rng), rng);
}

// Complex inputs: the gradient of a real loss L(z) = Re sum(conj(G) f(z)) is dL/d(re z) + i dL/d(im z),
// torch's convention (d(a) = G conj(b) for a product a b). Each derivative is a central difference of the
// reference interpreter's f, exact for these multilinear calls on small integers.
TEST_CASE("gradient of complex calls is torch's: dL/d(re) + i dL/d(im), by finite differences") {
    std::mt19937 rng(17);
    const std::vector<HandCase> cases{
        {einsum_call("i j, j k -> i k"), {{2, 3}, {3, 4}}},
        {einsum_call("k i, k j -> j i"), {{3, 2}, {3, 4}}},
        {einsum_call("b i d, b j d -> b i j"), {{2, 3, 2}, {2, 2, 2}}},
        {einsum_call("i j, i j -> i j"), {{2, 3}, {2, 3}}},
        {einsum_call("i, i ->"), {{4}, {4}}},
        {einsum_call("i j, j k, k -> i"), {{2, 3}, {3, 2}, {2}}},
        {einsum_call("i i -> i"), {{3, 3}}},
        {reduce_call("a b -> a", Reduction::sum), {{3, 4}}},
        {reduce_call("a (b 2) -> b", Reduction::mean), {{3, 4}}},
        {call_of(Op::rearrange, "a b -> b a"), {{2, 3}}},
        {call_of(Op::repeat, "a -> a c", {{"c", 3}}), {{2}}},
        {packed(Op::pack, "i *"), {{2, 3}, {2}}},
    };
    for (const DType dtype : {DType::c128, DType::c64}) {
        for (const HandCase& c : cases) {
            INFO(format_call(c.call), " in ", name_of(dtype));
            std::vector<Tensor> xs;
            std::vector<TensorView> views;
            for (const Shape& shape : c.shapes) {  // (re, im) pairs of small integers
                xs.push_back(make_tensor(dtype, shape, random_integers(rng, 2 * count(shape), -3, 3)));
                views.push_back(xs.back().view());
            }
            const Bound bound = bind(c.call, c.shapes);
            std::vector<Tensor> gs;
            std::vector<Input> g_inputs;
            std::vector<double> g_values;  // (re, im) of every output element, outputs in order
            for (const Tensor& out : reference::evaluate(bound, views)) {
                const std::vector<double> values = random_integers(rng, 2 * count(out.shape()), -3, 3);
                g_values.insert(g_values.end(), values.begin(), values.end());
                gs.push_back(make_tensor(dtype, out.shape(), values));
                g_inputs.push_back(gs.back());
            }
            const auto loss = [&] {  // Re sum conj(G) f = sum (Gr fr + Gi fi)
                double total = 0;
                std::size_t at = 0;
                for (const Tensor& out : reference::evaluate(bound, views))
                    for (const double v : values_of(out.view())) total += g_values.at(at++) * v;
                return total;
            };
            const std::vector<Tensor> got =
                gradient(c.call, views).run(std::vector<Input>(xs.begin(), xs.end()), g_inputs);
            for (std::size_t k = 0; k < xs.size(); ++k) {
                CHECK(got[k].dtype() == dtype);
                const std::vector<double> grad = values_of(got[k].view());
                const double part_bytes = static_cast<double>(size_of(dtype)) / 2;
                for (std::size_t p = 0; p < grad.size(); ++p) {  // each part of each element
                    auto* part =
                        static_cast<std::byte*>(xs[k].data()) + static_cast<std::ptrdiff_t>(p * part_bytes);
                    const auto nudge = [&](double by) {
                        if (dtype == DType::c64) {
                            float v;
                            std::memcpy(&v, part, 4);
                            v += static_cast<float>(by);
                            std::memcpy(part, &v, 4);
                        } else {
                            double v;
                            std::memcpy(&v, part, 8);
                            v += by;
                            std::memcpy(part, &v, 8);
                        }
                    };
                    nudge(1);
                    const double up = loss();
                    nudge(-2);
                    const double down = loss();
                    nudge(1);
                    CHECK_MESSAGE(grad[p] == doctest::Approx((up - down) / 2).epsilon(1e-5),
                                  fmt::format("input {}, part {} of element {}", k, p % 2, p / 2));
                }
            }
        }
    }
}

TEST_CASE("gradient of reduce max, min and prod matches finite differences (f64, no ties; prod with zeros)") {
    std::mt19937 rng(11);
    for (const HandCase& c : nonlinear_cases()) {
        for (const Order order : {Order::row_major, Order::scattered}) {
            INFO("inputs ", name_of_order(order));
            check_gradient(c.call, inputs_for(c.call, c.shapes, DType::f64, order, rng), rng);
        }
    }
}

TEST_CASE("gradient of random calls of every operation matches finite differences of the reference") {
    std::mt19937 rng(20250611);
    const Op ops[] = {Op::rearrange, Op::repeat, Op::reduce, Op::einsum, Op::pack, Op::unpack};
    for (const DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
        const int per_op = (dtype == DType::f64 ? 100 : 20) / testing::sample_every;
        for (const Op op : ops) {
            for (int i = 0; i < per_op; ++i) {
                testing::RandomCase c = testing::random_case(rng, op, dtype);
                INFO("random case ", i, " (", name_of(dtype), "): ", c.describe());
                if (c.call.op == Op::reduce &&
                    (c.call.reduction == Reduction::any || c.call.reduction == Reduction::all)) {
                    CHECK_THROWS_AS(gradient(c.call, std::span<const TensorView>(c.inputs)), Error);
                    continue;
                }
                const Kind kind = kind_of(c.call);
                if (kind ==
                    Kind::linear) {  // the generator's own layouts: permuted, padded, broadcast, reversed
                    check_gradient(c.call, c.inputs, rng);
                    continue;
                }
                // max, min: distinct values (no ties); prod: powers of two and zeros; laid out at random
                // (no broadcast stride, which would make ties)
                const Shape shape = c.inputs.at(0).shape;
                const std::int64_t n = count(shape);
                if (dtype != DType::f64) {
                    std::vector<Shape> shapes{shape};
                    const Bound bound = bind(c.call, shapes);
                    const std::int64_t group = n / std::max<std::int64_t>(1, count(bound.outputs[0].shape()));
                    if (kind == Kind::extremum && n > 400) continue;   // distinct integers exact in bf16
                    if (kind == Kind::product && group > 6) continue;  // products stay within f16
                }
                std::vector<Strided> inputs =
                    inputs_for(c.call, {shape}, dtype, (i % 2) ? Order::scattered : Order::transposed, rng);
                check_gradient(c.call, inputs, rng);
            }
        }
    }
}

TEST_CASE("gradient in f32, f16 and bf16 is the f64 gradient within the dtype's precision") {
    std::mt19937 rng(13);
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        INFO("dtype ", name_of(dtype));
        for (const HandCase& c : linear_cases())
            check_gradient(c.call, inputs_for(c.call, c.shapes, dtype, Order::scattered, rng), rng);
        for (const HandCase& c : nonlinear_cases())
            check_gradient(c.call, inputs_for(c.call, c.shapes, dtype, Order::row_major, rng), rng);
    }
}

TEST_CASE("gradient with output gradients that are not row-major (bound so)") {
    std::mt19937 rng(17);
    CheckOptions options;
    for (const Order order : {Order::transposed, Order::scattered}) {
        options.gradient_order = order;
        for (const HandCase& c : linear_cases())
            check_gradient(c.call, inputs_for(c.call, c.shapes, DType::f64, Order::scattered, rng), rng,
                           options);
        for (const HandCase& c : nonlinear_cases())
            check_gradient(c.call, inputs_for(c.call, c.shapes, DType::f32, Order::scattered, rng), rng,
                           options);
    }
}

TEST_CASE("gradient of a matmul with transposed and strided operands") {
    std::mt19937 rng(19);
    // x stored as its transpose (column-major), w as a column block of a wider row-major matrix
    const Strided x = strided(DType::f64, {5, 7}, random_integers(rng, 35, -3, 3), Order::transposed, rng);
    CHECK(x.view.strides == Shape{1, 5});
    const Tensor wide = make_tensor(DType::f64, {7, 10}, random_integers(rng, 70, -3, 3));
    const TensorView w{static_cast<double*>(wide.data()) + 2, DType::f64, {7, 4}, {10, 1}};
    const std::vector<TensorView> inputs{x.view, w};
    check_gradient(einsum_call("b d, d k -> b k"), inputs, rng, CheckOptions{Order::transposed, 300});
    check_gradient(einsum_call("b d, d k -> b k"), inputs, rng);
    // a permuted 3-d view: q[b, i, d] stored as [d][b][i]
    const Strided q = strided(DType::f32, {2, 3, 4}, random_integers(rng, 24, -3, 3), Order::scattered, rng);
    const Strided k = strided(DType::f32, {2, 5, 4}, random_integers(rng, 40, -3, 3), Order::transposed, rng);
    check_gradient(einsum_call("b i d, b j d -> b i j"), std::vector<TensorView>{q.view, k.view}, rng);
}

TEST_CASE("gradient of reduce max and min: ties share the output's gradient evenly") {
    for (const DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
        INFO("dtype ", name_of(dtype));
        const Tensor x = make_tensor(dtype, {4, 4}, {1, 3, 3, 2, 5, 0, 0, 4, 7, 7, 7, 7, -1, -2, -3, -4});
        const Tensor dy = make_tensor(dtype, {4}, {3, 2, 4, -6});
        const Gradient to_max = gradient(reduce_call("a b -> a", Reduction::max), {x.view()});
        CHECK(values_of(to_max.run({x}, {dy})[0].view()) ==
              std::vector<double>{0, 1.5, 1.5, 0, 2, 0, 0, 0, 1, 1, 1, 1, -6, 0, 0, 0});
        const Gradient to_min = gradient(reduce_call("a b -> a", Reduction::min), {x.view()});
        CHECK(values_of(to_min.run({x}, {dy})[0].view()) ==
              std::vector<double>{3, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, -6});
        // the brief's example: [1, 3, 3, 2] -> [0, g/2, g/2, 0], to a scalar
        const Tensor v = make_tensor(dtype, {4}, {1, 3, 3, 2});
        const Tensor g = make_tensor(dtype, Shape{}, {5});
        CHECK(values_of(gradient(reduce_call("i ->", Reduction::max), {v.view()}).run({v}, {g})[0].view()) ==
              std::vector<double>{0, 2.5, 2.5, 0});
        // 2x2 max pooling with ties inside windows
        const Tensor image = make_tensor(dtype, {2, 4}, {1, 1, 0, 2, 1, 0, 2, 2});
        const Tensor dp = make_tensor(dtype, {1, 2}, {6, 3});
        const Gradient pool = gradient(reduce_call("(h 2) (w 2) -> h w", Reduction::max), {image.view()});
        CHECK(values_of(pool.run({image}, {dp})[0].view()) == std::vector<double>{2, 2, 0, 1, 2, 0, 1, 1});
    }
}

TEST_CASE(
    "gradient of reduce prod with zeros: one zero gets the product of the others, two zeros give all zeros") {
    for (const DType dtype : {DType::f64, DType::f32, DType::bf16}) {
        INFO("dtype ", name_of(dtype));
        const Tensor x =
            make_tensor(dtype, {5, 4}, {2, 0, 3, 4, 0, 2, 0, 3, 1, 2, 3, 4, -1, 0.5, 2, -2, 0, 0, 0, 0});
        const Tensor dy = make_tensor(dtype, {5}, {1, 2, 3, 0.5, 7});
        const Gradient g = gradient(reduce_call("a b -> a", Reduction::prod), {x.view()});
        CHECK(values_of(g.run({x}, {dy})[0].view()) ==
              std::vector<double>{0, 24, 0, 0, 0, 0, 0, 0, 72, 36, 24, 18, -1, 2, 0.5, -0.5, 0, 0, 0, 0});
        // over the other axis: columns [2,0,1,-1,0], [0,2,2,0.5,0], [3,0,3,2,0], [4,3,4,-2,0]
        const Tensor dc = make_tensor(dtype, {4}, {1, 1, 1, 1});
        const Gradient columns = gradient(reduce_call("a b -> b", Reduction::prod), {x.view()});
        const std::vector<double> got = values_of(columns.run({x}, {dc})[0].view());
        std::vector<double> expected(20, 0);  // columns 0-2 have two zeros; column 3 one, at row 4
        expected[19] = 4 * 3 * 4 * -2;
        CHECK(got == expected);
    }
}

TEST_CASE("gradient of calls with zero-size axes has the right, empty shape") {
    std::mt19937 rng(23);
    const std::vector<HandCase> cases{
        {call_of(Op::rearrange, "a b -> b a"), {{0, 3}}},
        {call_of(Op::rearrange, "a (b c) -> c a b", {{"b", 2}}), {{3, 0}}},
        {einsum_call("i j, j k -> i k"), {{0, 3}, {3, 2}}},  // dW = x^T dy over an empty batch: zeros
        {einsum_call("i j, j k -> i k"), {{2, 0}, {0, 3}}},  // empty contraction: both gradients empty
        {einsum_call("i j -> j"), {{0, 4}}},
        {reduce_call("a b -> a", Reduction::sum), {{3, 0}}},
        {reduce_call("a b -> b", Reduction::mean), {{0, 3}}},
        {reduce_call("a b -> a", Reduction::max), {{0, 3}}},
        {call_of(Op::repeat, "a -> a c", {{"c", 0}}), {{3}}},  // nothing repeated: a zero gradient
        {packed(Op::pack, "i *"), {{2, 0}, {2, 3}}},
        {packed(Op::unpack, "i *", {{0}, {3}}), {{2, 3}}},
    };
    for (const HandCase& c : cases) {
        check_gradient(c.call, inputs_for(c.call, c.shapes, DType::f32, Order::row_major, rng), rng);
    }
    // explicitly: the zero gradient of w through an empty batch
    const Tensor x = Tensor::zeros(DType::f32, {0, 3});
    const Tensor w = make_tensor(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6});
    const Tensor dy = Tensor::zeros(DType::f32, {0, 2});
    const std::vector<Tensor> d =
        gradient(einsum_call("i j, j k -> i k"), {x.view(), w.view()}).run({x, w}, {dy});
    REQUIRE(d.size() == 2);
    CHECK(d[0].shape() == Shape{0, 3});
    CHECK(d[1].shape() == Shape{3, 2});
    CHECK(values_of(d[1].view()) == std::vector<double>(6, 0));
    const Tensor r = make_tensor(DType::f32, {3}, {1, 2, 3});
    const std::vector<Tensor> dr = gradient(call_of(Op::repeat, "a -> a c", {{"c", 0}}), {r.view()})
                                       .run({r}, {Tensor::zeros(DType::f32, {3, 0})});
    CHECK(dr[0].shape() == Shape{3});
    CHECK(values_of(dr[0].view()) == std::vector<double>(3, 0));
}

TEST_CASE("gradient is refused where there is none: reduce any/all, parse_shape, integer dtypes") {
    const Tensor x = make_tensor(DType::f32, {2, 3}, {1, 0, 2, 0, 3, 1});
    for (const Reduction r : {Reduction::any, Reduction::all}) {
        INFO(name_of(r));
        CHECK_THROWS_WITH_AS(gradient(reduce_call("a b -> a", r), {x.view()}),
                             doctest::Contains("not differentiable"), Error);
        try {
            (void)gradient(reduce_call("a b -> a", r), {x.view()});
        } catch (const Error& e) {
            CHECK(e.kind() == ErrorKind::unsupported);
        }
    }
    CHECK_THROWS_WITH_AS(gradient(call_of(Op::parse_shape, "a b"), {x.view()}),
                         doctest::Contains("no gradient"), Error);
    for (const DType dtype : {DType::i32, DType::i64, DType::i8}) {
        INFO(name_of(dtype));
        const Tensor i = make_tensor(dtype, {2, 3}, {1, 0, 2, 0, 3, 1});
        CHECK_THROWS_WITH_AS(gradient(einsum_call("a b, a b -> a"), {i.view(), i.view()}),
                             doctest::Contains("floating and complex dtypes"), Error);
        CHECK_THROWS_WITH_AS(gradient(reduce_call("a b -> a", Reduction::sum), {i.view()}),
                             doctest::Contains("floating and complex dtypes"), Error);
        CHECK_THROWS_WITH_AS(gradient(call_of(Op::rearrange, "a b -> b a"), {i.view()}),
                             doctest::Contains("floating and complex dtypes"), Error);
    }
    // Operands of mixed dtypes: the forward call promotes them, the gradients are refused (for now).
    const Tensor f = make_tensor(DType::f32, {2, 3}, {1, 0, 2, 0, 3, 1}),
                 d = make_tensor(DType::f64, {2, 3}, {1, 0, 2, 0, 3, 1});
    CHECK_THROWS_WITH_AS(gradient(einsum_call("a b, a b -> a"), {f.view(), d.view()}),
                         doctest::Contains("gradients of operands of mixed dtypes (f32 and f64)"), Error);
    const Tensor b = make_tensor(DType::boolean, {2, 3}, {1, 0, 1, 0, 1, 1});
    CHECK_THROWS_WITH_AS(gradient(call_of(Op::rearrange, "a b -> b a"), {b.view()}),
                         doctest::Contains("floating and complex dtypes"), Error);
    // an output gradient of the wrong shape
    const Tensor wrong = Tensor::zeros(DType::f32, {2, 3});
    const std::vector<TensorView> inputs{x.view()}, grads{wrong.view()};
    CHECK_THROWS_AS(gradient(reduce_call("a b -> a", Reduction::sum), inputs, grads), Error);
}

TEST_CASE("gradient of a linear layer costs twice its forward, in GEMMs") {
    const std::int64_t B = 64, D = 1024, K = 4096;
    const TensorView x{nullptr, DType::f32, {B, D}, {D, 1}};
    const TensorView w{nullptr, DType::f32, {D, K}, {K, 1}};
    const Gradient g = gradient(einsum_call("b d, d k -> b k"), {x, w});
    CHECK(g.forward_cost().flops == doctest::Approx(2.0 * B * D * K).epsilon(1e-12));
    CHECK(g.backward_cost().flops == doctest::Approx(4.0 * B * D * K).epsilon(1e-12));
    CHECK(g.forward_cost().flops == 2.0 * 64 * 1024 * 4096);
    CHECK(g.backward_cost().flops == 4.0 * 64 * 1024 * 4096);
    REQUIRE(g.steps().size() == 2);
    for (const Gradient::Step& step : g.steps()) {
        INFO(step.call.why);
        REQUIRE(step.program.plan().steps.size() == 1);
        CHECK(std::holds_alternative<Gemm>(step.program.plan().steps[0].step));
    }
    const std::string text = g.explain();  // on the CPU the program runs on (uncalibrated in the tests)
    CHECK(text.find(device_model_named("cpu")->name) != std::string::npos);
    CHECK(text.find("H100") == std::string::npos);
    CHECK(text.find("backward 1:") != std::string::npos);
    CHECK(text.find("backward 2:") != std::string::npos);
    CHECK(text.find("backward / forward FLOPs: 2") != std::string::npos);
}

TEST_CASE("gradient of attention scores: each operand's gradient is one GEMM, no copies") {
    const std::int64_t B = 4, I = 128, J = 96, D = 64;
    const TensorView q{nullptr, DType::f32, {B, I, D}, {I * D, D, 1}};
    const TensorView k{nullptr, DType::f32, {B, J, D}, {J * D, D, 1}};
    const Gradient g = gradient(einsum_call("b i d, b j d -> b i j"), {q, k});
    CHECK(g.forward_cost().flops == 2.0 * B * I * J * D);
    CHECK(g.backward_cost().flops == 4.0 * B * I * J * D);
    REQUIRE(g.steps().size() == 2);
    for (const Gradient::Step& step : g.steps()) {
        INFO(step.call.why);
        REQUIRE(step.program.plan().steps.size() == 1);
        for (const PlanStep& s : step.program.plan().steps) CHECK(std::holds_alternative<Gemm>(s.step));
    }
    // and the values, at a size the reference evaluates quickly (directional identity, exact)
    std::mt19937 rng(29);
    const Strided qs =
        strided(DType::f64, {2, 16, 8}, random_integers(rng, 256, -3, 3), Order::row_major, rng);
    const Strided ks =
        strided(DType::f64, {2, 12, 8}, random_integers(rng, 192, -3, 3), Order::row_major, rng);
    check_gradient(einsum_call("b i d, b j d -> b i j"), std::vector<TensorView>{qs.view, ks.view}, rng,
                   CheckOptions{Order::row_major, 0});
}

TEST_CASE("gradient of attention scores in the projection's layout (b i h d): a GEMM per b, no copies") {
    const std::int64_t B = 2, I = 64, J = 48, H = 4, D = 16;
    const TensorView q{nullptr, DType::f32, {B, I, H, D}, {I * H * D, H * D, D, 1}};
    const TensorView k{nullptr, DType::f32, {B, J, H, D}, {J * H * D, H * D, D, 1}};
    const Gradient g = gradient(einsum_call("b i h d, b j h d -> b h i j"), {q, k});
    CHECK(g.backward_cost().flops == 4.0 * B * H * I * J * D);
    std::vector<const Plan*> plans{&g.forward().plan()};
    for (const Gradient::Step& step : g.steps()) plans.push_back(&step.program.plan());
    for (const Plan* plan : plans) {
        REQUIRE(plan->steps.size() == 1);
        const Gemm* gemm = std::get_if<Gemm>(&plan->steps[0].step);
        REQUIRE(gemm != nullptr);
        CHECK(gemm->outer == B);
        CHECK(gemm->batch == H);
    }
    std::mt19937 rng(31);
    const Strided qs =
        strided(DType::f64, {2, 6, 3, 4}, random_integers(rng, 144, -3, 3), Order::row_major, rng);
    const Strided ks =
        strided(DType::f64, {2, 5, 3, 4}, random_integers(rng, 120, -3, 3), Order::row_major, rng);
    check_gradient(einsum_call("b i h d, b j h d -> b h i j"), std::vector<TensorView>{qs.view, ks.view}, rng,
                   CheckOptions{Order::row_major, 0});
}

TEST_CASE("gradient of a rearrange is a view of the output's gradient where it can be") {
    std::mt19937 rng(31);
    for (const HandCase& c :
         std::vector<HandCase>{{call_of(Op::rearrange, "b h w c -> b c h w"), {{2, 3, 4, 5}}},
                               {call_of(Op::rearrange, "b (h w) c -> b h w c", {{"h", 2}}), {{2, 6, 3}}},
                               {call_of(Op::rearrange, "a b -> (b a)"), {{3, 4}}}}) {
        INFO(format_call(c.call));
        const Tensor x =
            make_tensor(DType::f32, c.shapes[0], random_integers(rng, count(c.shapes[0]), -3, 3));
        const Gradient g = gradient(c.call, {x.view()});
        REQUIRE(g.steps().size() == 1);
        for (const PlanStep& s : g.steps()[0].program.plan().steps)
            CHECK(std::holds_alternative<View>(s.step));
        const TensorSpec& out = g.forward().plan().outputs[0];
        const Tensor dy = make_tensor(DType::f32, out.shape, random_integers(rng, count(out.shape), -3, 3));
        const std::vector<Tensor> d = g.run({x}, {dy});
        const std::byte* begin = static_cast<const std::byte*>(dy.data());
        const std::byte* at = static_cast<const std::byte*>(d[0].data());
        CHECK((at >= begin && at < begin + dy.nbytes()));  // no byte moved
        check_gradient(c.call, std::vector<TensorView>{x.view()}, rng);
    }
}

TEST_CASE("gradient: a bound Gradient runs again on new data") {
    std::mt19937 rng(37);
    const Call call = einsum_call("i j, j k -> i k");
    const Tensor x1 = make_tensor(DType::f64, {2, 3}, random_integers(rng, 6, -3, 3)),
                 w1 = make_tensor(DType::f64, {3, 2}, random_integers(rng, 6, -3, 3));
    const Gradient g = gradient(call, {x1.view(), w1.view()});
    const Tensor x2 = make_tensor(DType::f64, {2, 3}, {1, 2, 3, 4, 5, 6}),
                 w2 = make_tensor(DType::f64, {3, 2}, {1, 0, 0, 1, 1, 1});
    const Tensor dy = make_tensor(DType::f64, {2, 2}, {1, 0, 0, 1});
    (void)g.run({x1, w1}, {dy});
    const std::vector<Tensor> d = g.run({x2, w2}, {dy});
    // dx = dy w^T = w^T (dy is the identity); dw = x^T dy = x^T
    CHECK(values_of(d[0].view()) == std::vector<double>{1, 0, 1, 0, 1, 1});
    CHECK(values_of(d[1].view()) == std::vector<double>{1, 4, 2, 5, 3, 6});
}

namespace {

struct TempDir {
    fs::path path = fs::temp_directory_path() / fmt::format("einc-gradient-test-{}", ::getpid());
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The reference gradient of `call` at row-major f64 inputs for output gradients `gs` (f64 row-major),
// element by element.
std::vector<std::vector<double>> reference_gradient(const Call& call, const std::vector<Tensor>& inputs,
                                                    const std::vector<Tensor>& gs, double h) {
    std::vector<Shape> shapes;
    std::vector<std::vector<double>> values, g_values;
    for (const Tensor& x : inputs) {
        shapes.push_back(x.shape());
        values.push_back(values_of(x.view()));
    }
    for (const Tensor& g : gs) g_values.push_back(values_of(g.view()));
    const Phi phi(call, shapes, g_values);
    std::vector<Tensor> xs = f64_copies(values, shapes);
    std::vector<std::vector<double>> out;
    for (std::size_t k = 0; k < xs.size(); ++k) {
        out.emplace_back();
        for (std::int64_t j = 0; j < count(shapes[k]); ++j)
            out.back().push_back(difference(phi, xs, k, j, h));
    }
    return out;
}

}  // namespace

TEST_CASE("gradient on the command line: einc run --backward and einc explain --backward") {
    const TempDir dir;
    std::mt19937 rng(41);
    const Tensor x = make_tensor(DType::f64, {3, 4}, random_integers(rng, 12, -3, 3));
    const Tensor w = make_tensor(DType::f64, {4, 5}, random_integers(rng, 20, -3, 3));
    const Tensor dy = make_tensor(DType::f64, {3, 5}, random_integers(rng, 15, -3, 3));
    write_npy(dir / "x.npy", x.view());
    write_npy(dir / "w.npy", w.view());
    write_npy(dir / "dy.npy", dy.view());
    const testing::CliResult ran =
        testing::einc_cli({"run", "einsum", "b d, d k -> b k", dir / "x.npy", dir / "w.npy", "--backward",
                           dir / "dy.npy", "-o", dir / "p.npy"});
    INFO(ran.out, ran.err);
    REQUIRE(ran.status == cli::exit_ok);
    CHECK(ran.out.find("wrote " + (dir / "p_0.npy")) != std::string::npos);
    CHECK(ran.out.find("wrote " + (dir / "p_1.npy")) != std::string::npos);
    const std::vector<std::vector<double>> expected =
        reference_gradient(einsum_call("b d, d k -> b k"), {x, w}, {dy}, 1);
    const Tensor p0 = read_npy(dir / "p_0.npy"), p1 = read_npy(dir / "p_1.npy");
    CHECK(p0.shape() == Shape{3, 4});
    CHECK(p1.shape() == Shape{4, 5});
    CHECK(values_of(p0.view()) == expected[0]);
    CHECK(values_of(p1.view()) == expected[1]);

    // one result, one -o; a reduce max with a tie
    const Tensor m = make_tensor(DType::f32, {2, 3}, {1, 4, 4, 0, -1, 2});
    const Tensor dm = make_tensor(DType::f32, {2}, {2, 3});
    write_npy(dir / "m.npy", m.view());
    write_npy(dir / "dm.npy", dm.view());
    const testing::CliResult routed =
        testing::einc_cli({"run", "reduce", "a b -> a", "max", dir / "m.npy", "--backward", dir / "dm.npy",
                           "-o", dir / "dmx.npy"});
    INFO(routed.out, routed.err);
    REQUIRE(routed.status == cli::exit_ok);
    const Tensor dmx = read_npy(dir / "dmx.npy");
    CHECK(dmx.dtype() == DType::f32);
    CHECK(values_of(dmx.view()) == std::vector<double>{0, 1, 1, 0, 0, 3});

    // --backward without the gradient's file: a usage error, not a crash
    const testing::CliResult missing = testing::einc_cli({"run", "einsum", "b d, d k -> b k", dir / "x.npy",
                                                          dir / "w.npy", "--backward", "-o", dir / "q.npy"});
    CHECK(missing.status != cli::exit_ok);
    CHECK(missing.err.find("--backward") != std::string::npos);

    const testing::CliResult json = testing::einc_cli(
        {"explain", "einsum", "b d, d k -> b k", "64x1024", "1024x4096", "--backward", "--json"});
    INFO(json.out, json.err);
    REQUIRE(json.status == cli::exit_ok);
    CHECK(json.out.find("\"backward\":{\"flops\":1073741824,") != std::string::npos);  // 4 * 64 * 1024 * 4096
    CHECK(json.out.find("\"flops\":536870912") != std::string::npos);  // the forward: 2 * 64 * 1024 * 4096
    CHECK(json.out.find("\"calls\":[") != std::string::npos);

    const testing::CliResult text =
        testing::einc_cli({"explain", "einsum", "b d, d k -> b k", "64x1024", "1024x4096", "--backward"});
    INFO(text.out, text.err);
    CHECK(text.status == cli::exit_ok);
    CHECK(text.out.find("backward / forward FLOPs: 2") != std::string::npos);
}

TEST_CASE("gradient of every corpus call: bound, or refused with a clear error; the small ones match finite "
          "differences") {
    std::mt19937 rng(37);
    int bound = 0, refused = 0, checked = 0;
    std::vector<testing::CorpusCall> calls = testing::corpus_calls(EINC_CORPUS_DIR, DType::f64);
    testing::sanitizer_sample(calls);
    for (const testing::CorpusCall& c : calls) {
        INFO(c.line);
        std::vector<TensorView> layouts;
        std::int64_t elements = 0;
        for (const TensorSpec& spec : c.specs) {
            layouts.push_back(TensorView{nullptr, spec.dtype, spec.shape, spec.strides});
            elements += count(spec.shape);
        }
        try {
            (void)gradient(c.call, layouts);
            ++bound;
        } catch (const Error& e) {  // only what has no gradient
            CHECK(e.kind() == ErrorKind::unsupported);
            ++refused;
            continue;
        }
        // (Finite differences go through the reference interpreter, which loops over every combination of
        // the call's axes: for the tensor networks of plan/contraction_order.txt, 9 operands and more, a
        // product of extents far beyond their elements.)
        if (elements > 600 || c.specs.size() > 8) continue;
        // Row-major data: integers (exact differences) - distinct ones for max and min, which ties would
        // make non-differentiable.
        const bool extremum = c.call.op == Op::reduce &&
                              (c.call.reduction == Reduction::max || c.call.reduction == Reduction::min);
        std::vector<Strided> inputs;
        for (const TensorSpec& spec : c.specs) {
            std::vector<double> values = random_integers(rng, count(spec.shape), -3, 3);
            if (extremum) {
                std::iota(values.begin(), values.end(), -static_cast<double>(values.size()) / 2);
                std::shuffle(values.begin(), values.end(), rng);
            }
            inputs.push_back(strided(DType::f64, spec.shape, values, Order::row_major, rng));
        }
        check_gradient(c.call, inputs, rng);
        ++checked;
    }
    MESSAGE(bound, " corpus calls bound with their backward, ", refused, " refused, ", checked,
            " checked against finite differences");
    CHECK(bound > 100 / testing::sample_every);
    CHECK(checked > 20 / testing::sample_every);
}

namespace {

// The gradients of `call` written into `buffers` (bound so) as alpha * d + beta * old, against the
// gradients returned fresh, combined by hand.
void check_into(const Call& call, const std::vector<Tensor>& xs, const std::vector<Tensor>& dys,
                const std::vector<TensorView>& buffers, double alpha, double beta) {
    std::vector<TensorView> x_views, dy_views;
    for (const Tensor& x : xs) x_views.push_back(x.view());
    for (const Tensor& dy : dys) dy_views.push_back(dy.view());
    const std::vector<Input> x_in(xs.begin(), xs.end()), dy_in(dys.begin(), dys.end());
    const std::vector<Tensor> fresh = gradient(call, x_views).run(x_in, dy_in);
    std::vector<std::vector<double>> before;
    for (const TensorView& b : buffers) before.push_back(values_of(b));
    const Gradient into = gradient(call, x_views, dy_views, buffers, Options{.alpha = alpha, .beta = beta});
    into.run(x_in, dy_in, buffers);
    for (std::size_t k = 0; k < buffers.size(); ++k) {
        INFO("input ", k);
        const std::vector<double> d = values_of(fresh[k].view()), got = values_of(buffers[k]);
        REQUIRE(got.size() == d.size());
        for (std::size_t i = 0; i < d.size(); ++i) CHECK(got[i] == alpha * d[i] + beta * before[k][i]);
    }
}

}  // namespace

TEST_CASE("gradient into your buffers: any strides, alpha and beta (beta = 1 accumulates)") {
    std::mt19937 rng(43);
    const auto ints = [&](const Shape& shape) {
        return make_tensor(DType::f64, shape, random_integers(rng, count(shape), -3, 3));
    };
    const Call matmul = einsum_call("b d, d k -> b k");
    const Tensor x = ints({4, 3}), w = ints({3, 5}), dy = ints({4, 5});
    // dx into a column block of a wider matrix, dw into a column-major one
    Tensor wide = ints({4, 7}), column_major = ints({5, 3});
    const TensorView dx{static_cast<double*>(wide.data()) + 2, DType::f64, {4, 3}, {7, 1}};
    const TensorView dw{column_major.data(), DType::f64, {3, 5}, {1, 3}};
    for (const double beta : {0.0, 1.0}) check_into(matmul, {x, w}, {dy}, {dx, dw}, 1, beta);
    check_into(matmul, {x, w}, {dy}, {dx, dw}, 0.5, -2);

    // max with ties, mean (alpha folds into its 1/n), a rearrange written rather than viewed
    const Tensor m = make_tensor(DType::f64, {2, 4}, {1, 3, 3, 2, 0, 0, -1, 0}), dm = ints({2});
    Tensor gm = ints({2, 4});
    check_into(reduce_call("a b -> a", Reduction::max), {m}, {dm}, {gm.view()}, 0.5, 1);
    const Tensor r = ints({2, 6}), dr = ints({2});
    Tensor gr = ints({2, 6});
    check_into(reduce_call("a (b 3) -> a", Reduction::mean), {r}, {dr}, {gr.view()}, 3, 1);
    const Tensor t = ints({2, 3, 4}), dt = ints({4, 2, 3});
    Tensor gt = ints({2, 3, 4});
    check_into(call_of(Op::rearrange, "a b c -> c a b"), {t}, {dt}, {gt.view()}, 1, 0);

    // a diagonal: accumulated into any buffer (the off-diagonal keeps its values), or zeroed first when
    // row-major
    const Tensor sq = ints({3, 3}), dd = ints({3});
    Tensor into = ints({3, 3});
    check_into(einsum_call("i i -> i"), {sq}, {dd}, {into.view()}, 1, 1);
    check_into(einsum_call("i i -> i"), {sq}, {dd}, {into.view()}, 1, 0);
    Tensor transposed = ints({3, 3});
    const TensorView column{transposed.data(), DType::f64, {3, 3}, {1, 3}};
    check_into(einsum_call("i i -> i"), {sq}, {dd}, {column}, 1, 1);
    using Views = std::vector<TensorView>;
    CHECK_THROWS_WITH_AS(gradient(einsum_call("i i -> i"), Views{sq.view()}, Views{dd.view()}, Views{column}),
                         doctest::Contains("must be row-major to be zeroed first"), Error);

    // what is refused: a wrong layout at run, the other kind of run, a gradient that writes an element twice
    const Gradient bound = gradient(matmul, Views{x.view(), w.view()}, Views{dy.view()}, Views{dx, dw});
    const std::vector<Input> in{x, w}, grads{dy};
    const std::vector<TensorView> swapped{dx, TensorView{column_major.data(), DType::f64, {3, 5}, {5, 1}}};
    CHECK_THROWS_WITH_AS(bound.run(in, grads, swapped),
                         doctest::Contains("not what the gradient was bound to write"), Error);
    CHECK_THROWS_WITH_AS((void)bound.run(in, grads), doctest::Contains("bound to write into your gradients"),
                         Error);
    const TensorView twice{wide.data(), DType::f64, {4, 3}, {0, 1}};
    CHECK_THROWS_WITH_AS(gradient(matmul, Views{x.view(), w.view()}, Views{dy.view()}, Views{twice, dw}),
                         doctest::Contains("write some elements twice"), Error);
}
