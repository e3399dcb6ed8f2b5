// Property: for random patterns and random (often non-contiguous) input layouts, running the plan step
// by step with naive loops gives exactly what the reference interpreter gives on the bound expression.
// This tests the planner - views, copies, reductions, GEMM mappings, contraction orders - apart from
// any executor.
#include <doctest/doctest.h>

#include "compiler/bind.hpp"
#include "compiler/plan.hpp"
#include "grammar/diagnostic.hpp"
#include "tests/random_cases.hpp"
#include "tests/reference/reference.hpp"

using namespace einc;

namespace {

void check_plans(Op op, DType dtype, int cases, unsigned seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < cases; ++i) {
        const testing::RandomCase c = testing::random_case(rng, op, dtype);
        CAPTURE(c.describe());
        try {
            const auto [bound, planned] = testing::bind_and_plan(c.call, c.inputs);
            const std::vector<Tensor> expected = reference::evaluate(bound, c.inputs);
            const reference::PlanRun run = reference::run_plan(planned, c.inputs);
            REQUIRE(run.outputs.size() == expected.size());
            for (std::size_t k = 0; k < expected.size(); ++k) {
                std::string difference;
                CHECK_MESSAGE(testing::same_values(run.outputs[k], expected[k].view(), &difference),
                              difference);
            }
        } catch (const Error& e) {
            FAIL_CHECK(e.what());
        }
    }
}

}  // namespace

TEST_CASE("planner property: rearrange") {
    check_plans(Op::rearrange, DType::f32, 400, 11);
    check_plans(Op::rearrange, DType::i8, 100, 12);
}
TEST_CASE("planner property: repeat") {
    check_plans(Op::repeat, DType::f64, 300, 13);
}
TEST_CASE("planner property: reduce") {
    check_plans(Op::reduce, DType::f32, 400, 14);
    check_plans(Op::reduce, DType::i32, 200, 15);
    check_plans(Op::reduce, DType::boolean, 100, 16);
}
TEST_CASE("planner property: einsum") {
    check_plans(Op::einsum, DType::f32, 600, 17);
    check_plans(Op::einsum, DType::i64, 200, 18);
}
TEST_CASE("planner property: pack and unpack") {
    check_plans(Op::pack, DType::f32, 200, 19);
    check_plans(Op::unpack, DType::bf16, 200, 20);
}
