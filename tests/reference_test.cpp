// The reference interpreter against hand-written results: every expected array below was worked out by
// hand from the pattern's meaning, never computed with the interpreter itself.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <limits>

#include "compiler/bind.hpp"
#include "grammar/diagnostic.hpp"
#include "tests/reference/reference.hpp"

using namespace einc;
using reference::make_tensor;

namespace {

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

// Binds `call` to the inputs' shapes and evaluates it.
std::vector<Tensor> run(const Call& call, const std::vector<TensorView>& inputs) {
    std::vector<Shape> shapes;
    for (const TensorView& input : inputs) shapes.push_back(input.shape);
    return reference::evaluate(einc::bind(call, shapes), inputs);
}

Tensor rearrange(std::string pattern, const TensorView& input, AxisSizes sizes = {}) {
    const Call call{Op::rearrange, std::move(pattern), Reduction::none, std::move(sizes), false, {}};
    return run(call, {input}).at(0);
}

Tensor repeat(std::string pattern, const TensorView& input, AxisSizes sizes = {}) {
    const Call call{Op::repeat, std::move(pattern), Reduction::none, std::move(sizes), false, {}};
    return run(call, {input}).at(0);
}

Tensor reduce(std::string pattern, Reduction reduction, const TensorView& input) {
    const Call call{Op::reduce, std::move(pattern), reduction, {}, false, {}};
    return run(call, {input}).at(0);
}

Tensor einsum(std::string pattern, const std::vector<TensorView>& inputs) {
    const Call call{Op::einsum, std::move(pattern), Reduction::none, {}, false, {}};
    return run(call, inputs).at(0);
}

Tensor pack(std::string pattern, const std::vector<TensorView>& inputs) {
    const Call call{Op::pack, std::move(pattern), Reduction::none, {}, false, {}};
    return run(call, inputs).at(0);
}

std::vector<Tensor> unpack(std::string pattern, const TensorView& input, std::vector<Shape> packed_shapes) {
    const Call call{Op::unpack, std::move(pattern), Reduction::none, {}, false, std::move(packed_shapes)};
    return run(call, {input});
}

// "2x3: 0 1 2 3 4 5": the shape and the values in row-major order; failures print readably.
std::string contents(const TensorView& view) {
    return fmt::format("{}: {}", format_shape(view.shape), fmt::join(reference::values_of(view), " "));
}

// 0, 1, 2, ... as a row-major tensor.
Tensor iota(const Shape& shape, DType dtype = DType::f32) {
    std::int64_t count = 1;
    for (const std::int64_t extent : shape) count *= extent;
    std::vector<double> values;
    for (std::int64_t k = 0; k < count; ++k) values.push_back(static_cast<double>(k));
    return make_tensor(dtype, shape, values);
}

// A tensor from raw elements (bit patterns), and the raw elements of a row-major tensor.
template <typename T>
Tensor raw_tensor(DType dtype, const Shape& shape, const std::vector<T>& elements) {
    Tensor tensor = Tensor::empty(dtype, shape);
    REQUIRE(tensor.nbytes() == elements.size() * sizeof(T));
    std::memcpy(tensor.data(), elements.data(), tensor.nbytes());
    return tensor;
}

template <typename T>
std::vector<T> raw_elements(const Tensor& tensor) {
    std::vector<T> elements(tensor.nbytes() / sizeof(T));
    std::memcpy(elements.data(), tensor.data(), tensor.nbytes());
    return elements;
}

// A view of `shape` and `strides` into `tensor`'s storage, starting at element `first`.
TensorView view_into(const Tensor& tensor, std::int64_t first, Shape shape, Shape strides) {
    const auto element_size = static_cast<std::int64_t>(size_of(tensor.dtype()));
    auto* data = static_cast<std::byte*>(tensor.data()) + first * element_size;
    return TensorView{data, tensor.dtype(), std::move(shape), std::move(strides), Device::cpu, 0};
}

// The kind of the einc::Error that `action` throws.
template <typename Action>
ErrorKind error_kind(const Action& action) {
    try {
        action();
    } catch (const Error& e) {
        return e.kind();
    }
    FAIL("no einc::Error was thrown");
    return ErrorKind::usage;
}

}  // namespace

// ---- rearrange ---------------------------------------------------------------------------------

TEST_CASE("reference rearrange: transpose") {
    const Tensor x = iota({2, 3});  // [[0 1 2] [3 4 5]]
    CHECK(contents(rearrange("h w -> w h", x)) == "3x2: 0 3 1 4 2 5");
    CHECK(contents(rearrange("h w -> h w", x)) == "2x3: 0 1 2 3 4 5");
    const Tensor cube = iota({2, 2, 2});  // element (a, b, c) is 4a + 2b + c
    CHECK(contents(rearrange("a b c -> c a b", cube)) == "2x2x2: 0 2 4 6 1 3 5 7");
}

TEST_CASE("reference rearrange: split and merge groups, in either order") {
    const Tensor x = iota({2, 6});  // x[b][3h + w] = 6b + 3h + w with h=2, w=3
    CHECK(contents(rearrange("b (h w) -> (b w) h", x, {{"h", 2}})) == "6x2: 0 3 1 4 2 5 6 9 7 10 8 11");
    const Tensor line = iota({6});
    CHECK(contents(rearrange("(h w) -> (w h)", line, {{"h", 2}})) == "6: 0 3 1 4 2 5");
    CHECK(contents(rearrange("(h w) -> (h w)", line, {{"h", 2}})) == "6: 0 1 2 3 4 5");
    CHECK(contents(rearrange("(h w) -> h w", line, {{"w", 2}})) == "3x2: 0 1 2 3 4 5");
}

TEST_CASE("reference rearrange: ellipsis") {
    const Tensor x = iota({2, 3, 2});  // x[b][e][c] = 6b + 2e + c
    CHECK(contents(rearrange("b ... c -> c b ...", x)) == "2x2x3: 0 2 4 6 8 10 1 3 5 7 9 11");
    CHECK(contents(rearrange("... -> (...)", x)) == "12: 0 1 2 3 4 5 6 7 8 9 10 11");
    CHECK(contents(rearrange("b ... -> ... b", iota({3}))) == "3: 0 1 2");  // `...` of no dims
    CHECK(contents(rearrange("... -> ...", make_tensor(DType::f32, {}, {7}))) == "scalar: 7");
}

TEST_CASE("reference rearrange: unit axes") {
    const Tensor x = iota({2, 1, 3});  // x[a][0][b] = 3a + b
    CHECK(contents(rearrange("a 1 b -> b () a", x)) == "3x1x2: 0 3 1 4 2 5");
    CHECK(contents(rearrange("a () b -> a b 1 1", x)) == "2x3x1x1: 0 1 2 3 4 5");
}

// ---- repeat ------------------------------------------------------------------------------------

TEST_CASE("reference repeat: a new named axis, before or after") {
    const Tensor x = make_tensor(DType::f32, {2}, {1, 2});
    CHECK(contents(repeat("h -> h c", x, {{"c", 3}})) == "2x3: 1 1 1 2 2 2");
    CHECK(contents(repeat("h -> c h", x, {{"c", 3}})) == "3x2: 1 2 1 2 1 2");
    CHECK(repeat("h -> h c", x, {{"c", 0}}).shape() == Shape{2, 0});
}

TEST_CASE("reference repeat: anonymous axes, and where the copies go") {
    const Tensor x = make_tensor(DType::f32, {2, 2}, {1, 2, 3, 4});
    CHECK(contents(repeat("h w -> h (w 2)", x)) == "2x4: 1 1 2 2 3 3 4 4");  // each element twice
    CHECK(contents(repeat("h w -> h (2 w)", x)) == "2x4: 1 2 1 2 3 4 3 4");  // each row tiled
    CHECK(contents(repeat("h w -> (r h) w", x, {{"r", 2}})) == "4x2: 1 2 3 4 1 2 3 4");
    CHECK(contents(repeat("h w -> (h 2) (w 2)", x)) == "4x4: 1 1 2 2 1 1 2 2 3 3 4 4 3 3 4 4");
}

// ---- reduce ------------------------------------------------------------------------------------

TEST_CASE("reference reduce: sum, mean, prod of f32") {
    const Tensor x = make_tensor(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    CHECK(contents(reduce("a b -> a", Reduction::sum, x)) == "2: 6 15");
    CHECK(contents(reduce("a b -> b", Reduction::sum, x)) == "3: 5 7 9");
    CHECK(contents(reduce("a b -> a", Reduction::mean, x)) == "2: 2 5");
    CHECK(contents(reduce("a b -> b", Reduction::mean, x)) == "3: 2.5 3.5 4.5");
    CHECK(contents(reduce("a b -> a", Reduction::prod, x)) == "2: 6 120");
    CHECK(contents(reduce("a b -> b a", Reduction::sum, x)) == "3x2: 1 4 2 5 3 6");  // nothing reduced
    CHECK(reduce("a b -> a", Reduction::sum, x).dtype() == DType::f32);
}

TEST_CASE("reference reduce: max and min, with NaN propagating") {
    const Tensor x = make_tensor(DType::f32, {2, 3}, {1, not_a_number, 3, 4, 5, -6});
    CHECK(contents(reduce("a b -> a", Reduction::max, x)) == "2: nan 5");
    CHECK(contents(reduce("a b -> a", Reduction::min, x)) == "2: nan -6");
    CHECK(contents(reduce("a b -> b", Reduction::max, x)) == "3: 4 nan 3");
    CHECK(contents(reduce("a b -> b", Reduction::min, x)) == "3: 1 nan -6");
    const Tensor y = make_tensor(DType::f64, {4}, {-1, -7, 2.5, 0});
    CHECK(contents(reduce("a -> ", Reduction::max, y)) == "scalar: 2.5");
    CHECK(contents(reduce("a -> ", Reduction::min, y)) == "scalar: -7");
}

TEST_CASE("reference reduce: integers accumulate in int64, sum and prod give i64") {
    const Tensor small = make_tensor(DType::i8, {4}, {100, 100, 100, -5});
    const Tensor sum = reduce("a -> ", Reduction::sum, small);
    CHECK(sum.dtype() == DType::i64);
    CHECK(contents(sum) == "scalar: 295");  // no i8 overflow on the way

    const Tensor wide = make_tensor(DType::i32, {3}, {65536, 65536, 65536});
    const Tensor prod = reduce("a -> ", Reduction::prod, wide);
    CHECK(prod.dtype() == DType::i64);
    CHECK(raw_elements<std::int64_t>(prod) == std::vector<std::int64_t>{std::int64_t{1} << 48});

    constexpr std::int64_t largest = std::numeric_limits<std::int64_t>::max();
    const Tensor edge = raw_tensor<std::int64_t>(DType::i64, {2}, {largest, 1});
    CHECK(raw_elements<std::int64_t>(reduce("a -> ", Reduction::sum, edge)) ==
          std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min()});  // wraps around

    const Tensor m = make_tensor(DType::i32, {2, 2}, {-7, 3, 2, 9});
    CHECK(reduce("a b -> b", Reduction::max, m).dtype() == DType::i32);
    CHECK(contents(reduce("a b -> b", Reduction::max, m)) == "2: 2 9");
    CHECK(contents(reduce("a b -> a", Reduction::min, m)) == "2: -7 2");
}

TEST_CASE("reference reduce: any and all give bool; bool sums count") {
    const Tensor x = make_tensor(DType::boolean, {2, 3}, {1, 0, 1, 0, 0, 0});
    CHECK(reduce("a b -> a", Reduction::any, x).dtype() == DType::boolean);
    CHECK(contents(reduce("a b -> a", Reduction::any, x)) == "2: 1 0");
    CHECK(contents(reduce("a b -> a", Reduction::all, x)) == "2: 0 0");
    const Tensor y = make_tensor(DType::boolean, {2, 3}, {1, 0, 1, 1, 1, 1});
    CHECK(contents(reduce("a b -> b", Reduction::all, y)) == "3: 1 0 1");
    CHECK(contents(reduce("a b -> b", Reduction::any, y)) == "3: 1 1 1");
    const Tensor count = reduce("a b -> ", Reduction::sum, y);
    CHECK(count.dtype() == DType::i64);
    CHECK(contents(count) == "scalar: 5");

    // NaN is nonzero, as in numpy.
    const Tensor f = make_tensor(DType::f32, {3, 2}, {0, not_a_number, 0, 0, not_a_number, 2});
    CHECK(reduce("a b -> a", Reduction::any, f).dtype() == DType::boolean);
    CHECK(contents(reduce("a b -> a", Reduction::any, f)) == "3: 1 0 1");
    CHECK(contents(reduce("a b -> a", Reduction::all, f)) == "3: 0 0 1");
}

TEST_CASE("reference reduce: f16 and bf16 accumulate wide and round once") {
    // Accumulated in f16, 2048 + 1 rounds back to 2048 (ties to even) twice; the exact sum is 2050.
    const Tensor h = make_tensor(DType::f16, {3}, {2048, 1, 1});
    CHECK(reduce("a -> ", Reduction::sum, h).dtype() == DType::f16);
    CHECK(contents(reduce("a -> ", Reduction::sum, h)) == "scalar: 2050");
    // 2050 / 3 = 683.33..., between the f16 neighbours 683 and 683.5.
    CHECK(contents(reduce("a -> ", Reduction::mean, h)) == "scalar: 683.5");
    // 2049 + 2^-24 lies just above the tie between 2048 and 2050: rounded straight from the exact sum it
    // is 2050; rounded to f32 first it would become the tie 2049, then 2048.
    const Tensor tie = make_tensor(DType::f16, {3}, {2048, 1, 0x1p-24});
    CHECK(contents(reduce("a -> ", Reduction::sum, tie)) == "scalar: 2050");
    const Tensor b = make_tensor(DType::bf16, {3}, {256, 1, 1});  // bf16 steps by 2 at 256
    CHECK(contents(reduce("a -> ", Reduction::sum, b)) == "scalar: 258");
}

TEST_CASE("reference reduce: pooling with anonymous axes") {
    const Tensor x = iota({4, 4});  // x[r][c] = 4r + c
    CHECK(contents(reduce("(h 2) (w 2) -> h w", Reduction::max, x)) == "2x2: 5 7 13 15");
    CHECK(contents(reduce("(h 2) (w 2) -> h w", Reduction::mean, x)) == "2x2: 2.5 4.5 10.5 12.5");
    const Tensor column = make_tensor(DType::f32, {4, 1}, {1, 2, 4, 8});
    CHECK(contents(reduce("(h 2) w -> h w", Reduction::sum, column)) == "2x1: 3 12");  // adjacent pairs
    CHECK(contents(reduce("(2 h) w -> h w", Reduction::sum, column)) == "2x1: 5 10");  // halves
}

TEST_CASE("reference reduce: to a scalar") {
    const Tensor x = iota({2, 3});
    CHECK(contents(reduce("a b -> ", Reduction::sum, x)) == "scalar: 15");
    CHECK(contents(reduce("... -> ", Reduction::max, x)) == "scalar: 5");
    CHECK(contents(reduce("a b -> () 1", Reduction::mean, x)) == "1x1: 2.5");
}

TEST_CASE("reference reduce: an empty reduced set") {
    const Tensor x = Tensor::empty(DType::f32, {2, 0});
    CHECK(contents(reduce("a b -> a", Reduction::sum, x)) == "2: 0 0");
    CHECK(contents(reduce("a b -> a", Reduction::prod, x)) == "2: 1 1");
    CHECK(contents(reduce("a b -> a", Reduction::mean, x)) == "2: nan nan");
    const Tensor flags = Tensor::empty(DType::boolean, {2, 0});
    CHECK(contents(reduce("a b -> a", Reduction::any, flags)) == "2: 0 0");
    CHECK(contents(reduce("a b -> a", Reduction::all, flags)) == "2: 1 1");
    // max and min have no value over an empty set. bind rejects that too; the interpreter checks on its
    // own, for bound expressions built by other means (here: a sum turned into a max).
    CHECK(error_kind([&] { reduce("a b -> a", Reduction::max, x); }) == ErrorKind::shape);
    const std::vector<Shape> shapes{x.shape()};
    Bound bound = einc::bind(Call{Op::reduce, "a b -> a", Reduction::sum, {}, false, {}}, shapes);
    bound.reduction = Reduction::min;
    const std::vector<TensorView> inputs{x};
    CHECK_THROWS_WITH_AS(reference::evaluate(bound, inputs), doctest::Contains("min of an empty set"), Error);
    CHECK(reduce("a b -> b", Reduction::max, x).shape() == Shape{0});  // no output element: nothing to fold
}

// ---- einsum ------------------------------------------------------------------------------------

TEST_CASE("reference einsum: matrix product, in floats and integers") {
    const std::vector<double> a{1, 2, 3, 4, 5, 6}, b{7, 8, 9, 10, 11, 12};
    const Tensor af = make_tensor(DType::f32, {2, 3}, a), bf = make_tensor(DType::f32, {3, 2}, b);
    CHECK(contents(einsum("i k, k j -> i j", {af, bf})) == "2x2: 58 64 139 154");
    CHECK(contents(einsum("i k, k j -> j i", {af, bf})) == "2x2: 58 139 64 154");
    const Tensor ai = make_tensor(DType::i32, {2, 3}, a), bi = make_tensor(DType::i32, {3, 2}, b);
    CHECK(einsum("i k, k j -> i j", {ai, bi}).dtype() == DType::i32);
    CHECK(contents(einsum("i k, k j -> i j", {ai, bi})) == "2x2: 58 64 139 154");
    // i8 accumulates in int64 and wraps once, on the way out: 100*2 + 100*1 = 300 = 44 + 256.
    const Tensor x = make_tensor(DType::i8, {2}, {100, 100}), y = make_tensor(DType::i8, {2}, {2, 1});
    CHECK(contents(einsum("i, i -> ", {x, y})) == "scalar: 44");
}

TEST_CASE("reference einsum: batched attention scores") {
    const Tensor q = make_tensor(DType::f64, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    const Tensor k = make_tensor(DType::f64, {2, 2, 2}, {1, 1, 1, 0, 1, -1, 0, 2});
    CHECK(contents(einsum("b i d, b j d -> b i j", {q, k})) == "2x2x2: 3 1 7 3 -1 12 -1 16");
}

TEST_CASE("reference einsum: trace and diagonal") {
    const Tensor x = iota({3, 3});
    CHECK(contents(einsum("i i -> ", {x})) == "scalar: 12");
    CHECK(contents(einsum("i i -> i", {x})) == "3: 0 4 8");
    const Tensor batch = iota({2, 2, 2});  // batch[b][i][j] = 4b + 2i + j
    CHECK(contents(einsum("b i i -> b i", {batch})) == "2x2: 0 3 4 7");
}

TEST_CASE("reference einsum: outer product, three operands") {
    const Tensor u = make_tensor(DType::f32, {2}, {1, 2}), v = make_tensor(DType::f32, {3}, {3, 4, 5});
    CHECK(contents(einsum("i, j -> i j", {u, v})) == "2x3: 3 4 5 6 8 10");
    CHECK(contents(einsum("i, j -> j i", {u, v})) == "3x2: 3 6 4 8 5 10");
    const Tensor m = make_tensor(DType::f32, {2, 2}, {1, 2, 3, 4}), w = make_tensor(DType::f32, {2}, {5, 6});
    // 1 * (1*5 + 2*6) + 2 * (3*5 + 4*6) = 17 + 78
    CHECK(contents(einsum("i, i j, j -> ", {u, m, w})) == "scalar: 95");
    CHECK(contents(einsum("i, i, i -> i", {u, u, w})) == "2: 5 24");
}

TEST_CASE("reference einsum: a length-1 dim broadcasts, and '...' aligns from the right") {
    const Tensor row = make_tensor(DType::f32, {1, 3}, {1, 2, 3});
    const Tensor grid = make_tensor(DType::f32, {2, 3}, {1, 1, 1, 2, 2, 2});
    CHECK(contents(einsum("i j, i j -> i j", {row, grid})) == "2x3: 1 2 3 2 4 6");

    const Tensor a = make_tensor(DType::f32, {2, 1, 2}, {1, 2, 3, 4});  // two 1x2 matrices
    const Tensor b = make_tensor(DType::f32, {2, 1}, {5, 6});
    CHECK(contents(einsum("... i j, j k -> ... i k", {a, b})) == "2x1x1: 17 39");
    // `...` is (2, 1) in c and (3) in d: it broadcasts to (2, 3).
    const Tensor c = make_tensor(DType::f32, {2, 1, 2}, {1, 2, 3, 4});
    const Tensor d = make_tensor(DType::f32, {3, 2}, {1, 0, 0, 1, 1, 1});
    CHECK(contents(einsum("... i, ... i -> ...", {c, d})) == "2x3: 1 2 3 3 4 7");
}

TEST_CASE("reference einsum: a summed axis of length 0 gives zeros; f16 rounds once") {
    const Tensor a = Tensor::empty(DType::f32, {2, 0}), b = Tensor::empty(DType::f32, {0, 2});
    CHECK(contents(einsum("i k, k j -> i j", {a, b})) == "2x2: 0 0 0 0");
    const Tensor h = make_tensor(DType::f16, {3}, {2048, 1, 1});
    const Tensor ones = make_tensor(DType::f16, {3}, {1, 1, 1});
    CHECK(einsum("i, i -> ", {h, ones}).dtype() == DType::f16);
    CHECK(contents(einsum("i, i -> ", {h, ones})) == "scalar: 2050");
}

// ---- pack and unpack ---------------------------------------------------------------------------

TEST_CASE("reference pack: three tensors along '*'") {
    const Tensor a = make_tensor(DType::f32, {2}, {1, 2});               // part () : 1 column
    const Tensor b = make_tensor(DType::f32, {2, 2}, {10, 11, 12, 13});  // part (2): 2 columns
    const Tensor c = make_tensor(DType::f32, {2, 2, 2}, {20, 21, 22, 23, 24, 25, 26, 27});  // part (2 2): 4
    CHECK(contents(pack("b *", {a, b, c})) == "2x7: 1 10 11 20 21 22 23 2 12 13 24 25 26 27");

    const Tensor x = make_tensor(DType::f32, {2, 3}, {0, 1, 2, 3, 4, 5});
    const Tensor y = make_tensor(DType::f32, {2, 2, 3}, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21});
    CHECK(contents(pack("b * c", {x, y})) == "2x3x3: 0 1 2 10 11 12 13 14 15 3 4 5 16 17 18 19 20 21");
    const Tensor z = make_tensor(DType::f32, {3}, {5, 6, 7});
    CHECK(contents(pack("* c", {x, z})) == "3x3: 0 1 2 3 4 5 5 6 7");
}

TEST_CASE("reference unpack: the parts, and a round trip") {
    const Tensor packed =
        make_tensor(DType::f32, {2, 7}, {1, 10, 11, 20, 21, 22, 23, 2, 12, 13, 24, 25, 26, 27});
    const std::vector<Tensor> parts = unpack("b *", packed, {{}, {2}, {2, 2}});
    REQUIRE(parts.size() == 3);
    CHECK(contents(parts[0]) == "2: 1 2");
    CHECK(contents(parts[1]) == "2x2: 10 11 12 13");
    CHECK(contents(parts[2]) == "2x2x2: 20 21 22 23 24 25 26 27");

    const Tensor x = iota({2, 3, 2}), y = iota({2, 2}, DType::f32);
    const Tensor both = pack("b * c", {x, y});  // x's part is (3), y's is (): 4 rows of c in all
    CHECK(contents(both) == "2x4x2: 0 1 2 3 4 5 0 1 6 7 8 9 10 11 2 3");
    const std::vector<Tensor> back = unpack("b * c", both, {{-1}, {}});  // -1: inferred, 3
    REQUIRE(back.size() == 2);
    CHECK(contents(back[0]) == contents(x));
    CHECK(contents(back[1]) == contents(y));
}

// ---- strided inputs ----------------------------------------------------------------------------

TEST_CASE("reference: transposed, broadcast and reversed views are read element by element") {
    const Tensor buffer = iota({6});                                     // 0 1 2 3 4 5
    const TensorView transposed = view_into(buffer, 0, {3, 2}, {1, 3});  // [[0 3] [1 4] [2 5]]
    CHECK(contents(rearrange("a b -> a b", transposed)) == "3x2: 0 3 1 4 2 5");
    CHECK(contents(reduce("a b -> a", Reduction::sum, transposed)) == "3: 3 5 7");

    const TensorView broadcast = view_into(buffer, 1, {3, 2}, {0, 1});  // [[1 2] [1 2] [1 2]]
    CHECK(contents(rearrange("a b -> b a", broadcast)) == "2x3: 1 1 1 2 2 2");
    const Tensor weights = make_tensor(DType::f32, {2}, {10, 1});
    CHECK(contents(einsum("i j, j -> i", {broadcast, weights})) == "3: 12 12 12");

    const TensorView reversed = view_into(buffer, 5, {2, 3}, {-3, -1});  // [[5 4 3] [2 1 0]]
    CHECK(contents(rearrange("a b -> b a", reversed)) == "3x2: 5 2 4 1 3 0");
    const TensorView rows_reversed = view_into(buffer, 3, {2, 3}, {-3, 1});  // [[3 4 5] [0 1 2]]
    CHECK(contents(reduce("a b -> b", Reduction::max, rows_reversed)) == "3: 3 4 5");
    CHECK(contents(pack("*", {reversed, rows_reversed})) == "12: 5 4 3 2 1 0 3 4 5 0 1 2");
}

// ---- dtypes ------------------------------------------------------------------------------------

TEST_CASE("reference: data movement is bit-exact for every dtype") {
    // A 2x3 tensor whose bytes are 1, 2, 3, ...: the transpose must move whole elements unchanged.
    for (const DType dtype : all_dtypes) {
        CAPTURE(name_of(dtype));
        const std::size_t size = size_of(dtype);
        std::vector<std::uint8_t> bytes(6 * size);
        for (std::size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<std::uint8_t>(k + 1);
        const Tensor x = raw_tensor<std::uint8_t>(dtype, {2, 3}, bytes);
        const Tensor t = rearrange("a b -> b a", x);
        CHECK(t.dtype() == dtype);
        const std::vector<std::uint8_t> moved = raw_elements<std::uint8_t>(t);
        const std::size_t source_of[] = {0, 3, 1, 4, 2, 5};  // element k of the transpose
        for (std::size_t k = 0; k < 6; ++k)
            CHECK(std::memcmp(moved.data() + k * size, bytes.data() + source_of[k] * size, size) == 0);
    }
}

TEST_CASE("reference: NaN payloads, signed zeros and fp8 encodings survive data movement") {
    const std::vector<std::uint32_t> floats{0x7FC01234u, 0x7F800001u, 0x80000000u, 0xFFC00000u};
    const Tensor f = raw_tensor(DType::f32, {2, 2}, floats);
    CHECK(raw_elements<std::uint32_t>(rearrange("a b -> b a", f)) ==
          std::vector<std::uint32_t>{0x7FC01234u, 0x80000000u, 0x7F800001u, 0xFFC00000u});
    CHECK(raw_elements<std::uint32_t>(pack("*", {f, f})) ==
          std::vector<std::uint32_t>{0x7FC01234u, 0x7F800001u, 0x80000000u, 0xFFC00000u,  //
                                     0x7FC01234u, 0x7F800001u, 0x80000000u, 0xFFC00000u});

    const std::vector<std::uint8_t> fp8{0x7F, 0x80, 0x01, 0xFE};  // e4m3: NaN, -0, smallest subnormal, -448
    for (const DType dtype : {DType::f8e4m3, DType::f8e5m2}) {
        const Tensor x = raw_tensor(dtype, {4}, fp8);
        CHECK(raw_elements<std::uint8_t>(repeat("a -> a r", x, {{"r", 2}})) ==
              std::vector<std::uint8_t>{0x7F, 0x7F, 0x80, 0x80, 0x01, 0x01, 0xFE, 0xFE});
    }
    const Tensor b = raw_tensor<std::uint16_t>(DType::bf16, {2}, {0x7FC1, 0xFF81});  // bf16 NaNs
    const std::vector<Tensor> halves = unpack("*", b, {{1}, {1}});
    CHECK(raw_elements<std::uint16_t>(halves[1]) == std::vector<std::uint16_t>{0xFF81});
}

TEST_CASE("reference helpers: make_tensor converts, values_of reads every dtype") {
    for (const DType dtype : all_dtypes) {
        CAPTURE(name_of(dtype));
        const std::string expected = dtype == DType::boolean ? "4: 1 1 0 1"    // v != 0
                                     : dtype == DType::u8    ? "4: 1 254 0 0"  // truncated, wrapped
                                     : dtype == DType::u16   ? "4: 1 65534 0 0"
                                     : dtype == DType::u32   ? "4: 1 4294967294 0 0"
                                     : dtype == DType::u64   ? "4: 1 1.8446744073709552e+19 0 0"
                                     : is_complex(dtype)     ? "4: 1 0 -2 0 0 0 0.5 0"  // (real, imaginary)
                                     : is_integer(dtype)     ? "4: 1 -2 0 0"            // truncated
                                                             : "4: 1 -2 0 0.5";
        CHECK(contents(make_tensor(dtype, {4}, {1, -2, 0, 0.5})) == expected);
    }
    CHECK(contents(make_tensor(DType::i8, {2}, {200, -129})) == "2: -56 127");  // wraps
    CHECK(raw_elements<std::uint64_t>(make_tensor(DType::u64, {2}, {0x1p63, -1})) ==
          std::vector<std::uint64_t>{std::uint64_t{1} << 63, ~std::uint64_t{0}});  // past int64; wraps
    CHECK(contents(make_tensor(DType::i32, {1}, {2.75})) == "1: 2");               // truncates
    CHECK(raw_elements<std::uint16_t>(make_tensor(DType::bf16, {1}, {1 + 0x1p-8})) ==
          std::vector<std::uint16_t>{0x3F80});  // tie: to even (down)
    CHECK(raw_elements<std::uint16_t>(make_tensor(DType::f16, {1}, {1 + 3 * 0x1p-11})) ==
          std::vector<std::uint16_t>{0x3C02});  // tie: to even (up)
    CHECK(contents(make_tensor(DType::f8e5m2, {1}, {1000})) == "1: 1024");
    CHECK(contents(make_tensor(DType::f8e4m3, {2}, {1000, 0.3})) == "2: nan 0.3125");  // no inf in e4m3fn
}

TEST_CASE("reference: operands of mixed dtypes are promoted as numpy; the mean of integers is f64") {
    // numpy.einsum('i,i->i', float32 [0 1 2] * 0.5, int64 [0 1 2] + 2^40): float64 [0 549755813888.5 ...]
    const Tensor halves = make_tensor(DType::f32, {3}, {0, 0.5, 1});
    const Tensor big = make_tensor(DType::i64, {3}, {0x1p40, 0x1p40 + 1, 0x1p40 + 2});
    const Tensor product = einsum("i, i -> i", {halves, big});
    CHECK(product.dtype() == DType::f64);
    CHECK(contents(product) == "3: 0 549755813888.5 1099511627778");
    CHECK(reference::values_of(product.view())[1] == 0x1p39 + 0.5);  // exact in f64, not in f32
    // i8 with i32 stays integer (i32), wrapping as numpy's int32 does; bool with f16 gives f16.
    const Tensor small = make_tensor(DType::i8, {2}, {-128, 127});
    const Tensor wrapped = einsum("i, i -> i", {small, make_tensor(DType::i32, {2}, {0x1p25, 0x1p25})});
    CHECK(wrapped.dtype() == DType::i32);
    CHECK(contents(wrapped) == "2: 0 -33554432");  // -2^32 and 127 * 2^25, modulo 2^32
    CHECK(einsum("i, i -> i", {make_tensor(DType::boolean, {2}, {1, 0}), iota({2}, DType::f16)}).dtype() ==
          DType::f16);
    // pack converts each part: [i32 -1, 2] and [f32 0.5] -> f64 [-1 2 0.5] (numpy.concatenate).
    const Tensor packed =
        pack("*", {make_tensor(DType::i32, {2}, {-1, 2}), make_tensor(DType::f32, {1}, {0.5})});
    CHECK(packed.dtype() == DType::f64);
    CHECK(contents(packed) == "3: -1 2 0.5");
    // mean of i32 [[1 2] [3 5]] over b: f64 [1.5 4]; of bool [1 0 0]: 1/3 in f64.
    const Tensor means = reduce("a b -> a", Reduction::mean, make_tensor(DType::i32, {2, 2}, {1, 2, 3, 5}));
    CHECK(means.dtype() == DType::f64);
    CHECK(contents(means) == "2: 1.5 4");
    CHECK(reference::values_of(
              reduce("a -> ", Reduction::mean, make_tensor(DType::boolean, {3}, {1, 0, 0})).view())[0] ==
          1.0 / 3.0);
}

// ---- misuse --------------------------------------------------------------------------------------

TEST_CASE("reference: inputs that do not match the bound expression are errors") {
    const Tensor x = iota({2, 3});
    const std::vector<Shape> shapes{{2, 3}};
    const Call call{Op::rearrange, "a b -> b a", Reduction::none, {}, false, {}};
    const Bound transpose = einc::bind(call, shapes);

    const std::vector<TensorView> two{x, x};
    CHECK(error_kind([&] { reference::evaluate(transpose, two); }) == ErrorKind::usage);

    const Tensor wrong_shape = iota({3, 2});
    const std::vector<TensorView> misshapen{wrong_shape};
    CHECK_THROWS_WITH_AS(reference::evaluate(transpose, misshapen),
                         doctest::Contains("input 0 has shape 3x2"), Error);

    TensorView on_gpu = x;
    on_gpu.device = Device::cuda;
    const std::vector<TensorView> gpu{on_gpu};
    CHECK_THROWS_WITH_AS(reference::evaluate(transpose, gpu), doctest::Contains("CPU memory only"), Error);

    CHECK(error_kind([&] {
              einsum("i, i -> i", {iota({3}, DType::f8e4m3), iota({3})});
          }) == ErrorKind::unsupported);

    const Bound parsed = einc::bind(Call{Op::parse_shape, "a b", Reduction::none, {}, false, {}}, shapes);
    const std::vector<TensorView> one{x};
    CHECK(reference::evaluate(parsed, one).empty());
}
