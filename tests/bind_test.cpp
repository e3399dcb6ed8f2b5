// Binding: sizes, groups, ellipsis, the reduced and repeated axes, and each check's error.
#include <doctest/doctest.h>

#include "compiler/bind.hpp"
#include "grammar/diagnostic.hpp"

using namespace einc;

namespace {

Bound bind_call(Op op, std::string pattern, std::vector<Shape> shapes, AxisSizes sizes = {},
                Reduction reduction = Reduction::none) {
    Call call{op, std::move(pattern), reduction, std::move(sizes), false, {}};
    return bind(call, shapes);
}

std::vector<std::string> names(const Bound& bound, const std::vector<AxisId>& axes) {
    std::vector<std::string> out;
    for (const AxisId a : axes) out.push_back(bound.axis(a).name);
    return out;
}

// The message of the error binding raises (first line only).
std::string error_of(Op op, std::string pattern, std::vector<Shape> shapes, AxisSizes sizes = {},
                     Reduction reduction = Reduction::none) {
    try {
        bind_call(op, std::move(pattern), std::move(shapes), std::move(sizes), reduction);
    } catch (const Error& e) {
        return e.diagnostic().message;
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("a group splits into elementary axes, the unknown one inferred") {
    const Bound b = bind_call(Op::rearrange, "b (h w) c -> b h w c", {{2, 32, 3}}, {{"h", 4}});
    REQUIRE(b.axes.size() == 4);
    CHECK(b.axis(1).name == "h");
    CHECK(b.axis(1).size == 4);
    CHECK(b.axis(2).size == 8);
    CHECK(b.inputs[0].dims[1].axes == std::vector<AxisId>{1, 2});
    CHECK(b.outputs[0].shape() == Shape{2, 4, 8, 3});
    CHECK(b.reduced.empty());
}

TEST_CASE("'...' expands to as many axes as the input has extra dims") {
    const Bound b = bind_call(Op::rearrange, "b ... c -> b (...) c", {{2, 3, 4, 5}});
    CHECK(b.outputs[0].shape() == Shape{2, 12, 5});
    CHECK(b.axis(b.outputs[0].dims[1].axes[0]).name == "...0");
    CHECK(bind_call(Op::rearrange, "... -> ...", {{}}).outputs[0].shape().empty());
}

TEST_CASE("reduce: axes missing from the output are reduced, anonymous ones included") {
    const Bound b = bind_call(Op::reduce, "b c (h 2) (w 2) -> b c h w", {{2, 3, 8, 8}}, {}, Reduction::mean);
    CHECK(b.reduced.size() == 2);
    CHECK(b.outputs[0].shape() == Shape{2, 3, 4, 4});
    CHECK(bind_call(Op::reduce, "b ... -> b", {{2, 3, 4}}, {}, Reduction::sum).reduced.size() == 2);
    CHECK(bind_call(Op::reduce, "b c -> ", {{2, 3}}, {}, Reduction::max).outputs[0].shape().empty());
}

TEST_CASE("repeat: new axes come from sizes or anonymous lengths") {
    const Bound b = bind_call(Op::repeat, "h w -> h (w 2) c", {{3, 4}}, {{"c", 5}});
    CHECK(b.outputs[0].shape() == Shape{3, 8, 5});
    CHECK(names(b, b.broadcast) == std::vector<std::string>{"2@12", "c"});
}

TEST_CASE("einsum: shared axes, summed axes, diagonals, broadcasting") {
    const Bound b = bind_call(Op::einsum, "b i d, b j d -> b i j", {{2, 3, 4}, {2, 5, 4}});
    CHECK(names(b, b.reduced) == std::vector<std::string>{"d"});
    CHECK(b.outputs[0].shape() == Shape{2, 3, 5});
    const Bound diagonal = bind_call(Op::einsum, "i i -> i", {{3, 3}});
    CHECK(diagonal.inputs[0].dims[0].axes == diagonal.inputs[0].dims[1].axes);
    const Bound broadcast = bind_call(Op::einsum, "i j, i j -> i j", {{1, 3}, {2, 3}});
    CHECK(broadcast.inputs[0].dims[0].axes.empty());  // broadcast from length 1
    CHECK(broadcast.outputs[0].shape() == Shape{2, 3});
    const Bound composite = bind_call(Op::einsum, "b (h d), h d e -> b h e", {{2, 12}, {3, 4, 5}});
    CHECK(composite.outputs[0].shape() == Shape{2, 3, 5});
}

TEST_CASE("einsum '...' broadcasts from the right, as numpy does") {
    const Bound b = bind_call(Op::einsum, "... i j, ... j k -> ... i k", {{7, 1, 2, 3}, {5, 3, 4}});
    CHECK(b.outputs[0].shape() == Shape{7, 5, 2, 4});
}

TEST_CASE("compact subscripts, with numpy's implicit output") {
    Call call{Op::einsum, "ij,jk", Reduction::none, {}, true, {}};
    const std::vector<Shape> shapes{{2, 3}, {3, 4}};
    const Bound b = bind(call, shapes);
    CHECK(b.outputs[0].shape() == Shape{2, 4});
    Call trace{Op::einsum, "ii", Reduction::none, {}, true, {}};
    const std::vector<Shape> square{{3, 3}};
    CHECK(bind(trace, square).outputs[0].shape().empty());
}

TEST_CASE("pack and unpack") {
    Call pack{Op::pack, "b * c", Reduction::none, {}, false, {}};
    const std::vector<Shape> shapes{{2, 3, 4, 5}, {2, 5}, {2, 7, 5}};
    const Bound b = bind(pack, shapes);
    CHECK(b.outputs[0].shape() == Shape{2, 20, 5});
    CHECK(b.concat->offsets == std::vector<std::int64_t>{0, 12, 13});
    Call unpack{Op::unpack, "b * c", Reduction::none, {}, false, {{3, 4}, {}, {-1}}};
    const std::vector<Shape> packed{{2, 20, 5}};
    const Bound u = bind(unpack, packed);
    REQUIRE(u.outputs.size() == 3);
    CHECK(u.outputs[2].shape() == Shape{2, 7, 5});
}

TEST_CASE("parse_shape returns the named sizes") {
    Call call{Op::parse_shape, "b _ h ...", Reduction::none, {}, false, {}};
    const std::vector<Shape> shapes{{2, 3, 4, 5, 6}};
    CHECK(parsed_shape(bind(call, shapes)) == AxisSizes{{"b", 2}, {"h", 4}});
}

TEST_CASE("every einops check has its error") {
    CHECK(error_of(Op::rearrange, "b h (h w) -> b w h", {{2, 3, 12}}) ==
          "axis 'h' appears twice on the left side of rearrange");
    CHECK(error_of(Op::rearrange, "... a ... -> a", {{2}}) == "'...' appears twice on the left side");
    CHECK(error_of(Op::rearrange, "(a ...) -> a ...", {{2}}) == "'...' inside a group on the left side");
    CHECK(error_of(Op::rearrange, "a b -> a", {{2, 3}}) == "axis 'b' appears on the left side only");
    CHECK(error_of(Op::rearrange, "a -> a b c", {{2}}) == "axes 'b' and 'c' appear on the right side only");
    CHECK(error_of(Op::rearrange, "a -> a ...", {{2}}) == "'...' on the right side but not on the left side");
    CHECK(error_of(Op::rearrange, "(a 2) -> a", {{4}}) == "anonymous axis of length 2 in rearrange");
    CHECK(error_of(Op::repeat, "a b -> a", {{2, 3}}) ==
          "axis 'b' appears on the left side of repeat but not on the right");
    CHECK(error_of(Op::repeat, "a -> a c", {{2}}) == "new axis 'c' in repeat has no size");
    CHECK(error_of(Op::reduce, "a -> a c", {{2}}, {}, Reduction::sum) ==
          "axis 'c' appears on the right side of reduce but not on the left");
    CHECK(error_of(Op::reduce, "a -> a", {{2}}) == "reduce needs a reduction");
    CHECK(error_of(Op::rearrange, "a b c d -> a b c d", {{2, 3, 4}}) ==
          "expected 4 dims for the left side, got 3");
    CHECK(error_of(Op::rearrange, "a b ... -> a b ...", {{2}}) ==
          "expected at least 2 dims for the left side, got 1");
    CHECK(error_of(Op::einsum, "i j, j k -> i k", {{2, 3}, {4, 5}}) ==
          "axis 'j' has length 3 in operand 0 but 4 in operand 1");
    CHECK(error_of(Op::rearrange, "a b -> b a", {{2, 3}}, {{"a", 3}}) ==
          "axis 'a' is given size 3, but the input's dim 0 has length 2");
    CHECK(error_of(Op::rearrange, "(h w) -> h w", {{10}}, {{"w", 3}}) ==
          "can't divide the input's dim 0 of length 10 into chunks of 3");
    CHECK(error_of(Op::rearrange, "(h w) -> h w", {{12}}) ==
          "can't infer the sizes of 'h' and 'w' from one dim of length 12");
    CHECK(error_of(Op::rearrange, "a -> a", {{2}}, {{"x", 3}}) ==
          "axis 'x' is given a size but is not in the pattern");
    CHECK(error_of(Op::rearrange, "(h w) -> h w", {{12}}, {{"h", -2}}) ==
          "axis 'h' is given a negative size, -2");
    CHECK(error_of(Op::repeat, "a -> a b c", {{2}},
                   {{"b", std::int64_t{1} << 40}, {"c", std::int64_t{1} << 40}}) ==
          "the output has more elements than fit in 64 bits");
    CHECK(error_of(Op::rearrange, "a -> (a a2)", {{1 << 20}}, {}) ==
          "axis 'a2' appears on the right side only");
    CHECK(error_of(Op::rearrange, "a () -> a", {{2, 3}}) ==
          "'()' needs a dim of length 1, but the input's dim 1 has length 3");
    CHECK(error_of(Op::rearrange, "a b -> b a", {{2, 3}, {2, 3}}) ==
          "the pattern has 1 input, but 2 tensors were given");
    CHECK(error_of(Op::rearrange, "a, b -> a b", {{2}, {3}}) ==
          "rearrange takes one input, but the pattern lists 2");
    CHECK(error_of(Op::rearrange, "a b", {{2, 3}}) == "rearrange pattern has no '->'");
}
