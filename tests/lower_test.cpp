// lower(): the passes in order give what calling them one by one gives, it stops where asked (the front
// end makes no plan, so plan errors wait), and lowering in two goes is lowering in one. Also the one GPU
// target the CLI lowers for.
#include <doctest/doctest.h>

#include "cli/commands.hpp"
#include "compiler/bind.hpp"
#include "compiler/lower.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/execute.hpp"

using namespace einc;

namespace {

Call call_of(Op op, std::string pattern, Reduction reduction = Reduction::none, AxisSizes sizes = {}) {
    return Call{op, std::move(pattern), reduction, std::move(sizes), false, {}};
}

TensorSpec row_major(Shape shape, DType dtype = DType::f32) {
    return TensorSpec{dtype, shape, row_major_strides(shape)};
}

struct Case {
    Call call;
    std::vector<TensorSpec> inputs;
};

std::vector<Case> cases() {
    return {
        {call_of(Op::einsum, "b i d, b j d -> b i j"), {row_major({8, 64, 32}), row_major({8, 48, 32})}},
        {call_of(Op::reduce, "b (h 2) w -> b h", Reduction::max), {row_major({4, 16, 9})}},
        {call_of(Op::rearrange, "a b c -> c (b a)"), {TensorSpec{DType::f16, {6, 5, 4}, {1, 6, 30}}}},
        {call_of(Op::repeat, "h w -> h w c", Reduction::none, {{"c", 3}}), {row_major({7, 9}, DType::bf16)}},
    };
}

// Everything the passes made, printed: equal text, equal lowering.
std::string printed(const Plan& plan, const Schedule& schedule) {
    return plan_to_json(plan, schedule, *device_model_named("h100")) + print_schedule(plan, schedule);
}

}  // namespace

TEST_CASE("lower: the passes in order, as called one by one") {
    for (const Target& target : {cpu_target(), Target::gpu(132), Target::gpu(7)}) {
        for (const Case& c : cases()) {
            CAPTURE(c.call.pattern);
            std::vector<Shape> shapes;
            for (const TensorSpec& input : c.inputs) shapes.push_back(input.shape);
            const PlanOptions options{.contiguous = true};
            const Bound bound = bind(parse(c.call), c.call, shapes);
            const Plan plan = einc::plan(bound, c.inputs, options);
            const Schedule schedule = einc::schedule(plan, target);

            const Lowered lowered = lower(c.call, c.inputs, {.plan = options, .target = target});
            CHECK(lowered.stage == Stage::scheduled);
            CHECK(print_bound(lowered.bound) == print_bound(bound));
            CHECK(lowered.schedule.target == target);
            CHECK(printed(lowered.plan, lowered.schedule) == printed(plan, schedule));

            // The same from a pattern parsed already, and in two goes.
            const Lowered parsed =
                lower(c.call, parse(c.call), c.inputs, {.plan = options, .target = target});
            CHECK(printed(parsed.plan, parsed.schedule) == printed(plan, schedule));
            Lowered in_two = lower(c.call, c.inputs, {.until = Stage::planned, .plan = options});
            CHECK(in_two.stage == Stage::planned);
            CHECK(in_two.schedule.steps.empty());
            in_two = lower(std::move(in_two), {.until = Stage::scheduled, .target = target});
            CHECK(printed(in_two.plan, in_two.schedule) == printed(plan, schedule));
        }
    }
}

TEST_CASE("lower: the front end alone makes no plan, so a plan error waits for the plan") {
    const Call call = call_of(Op::rearrange, "a b -> (b a)");
    const std::vector<TensorSpec> inputs{row_major({3, 4})};
    const LowerOptions view_only{.until = Stage::bound, .plan = {.require_view = true}};
    const Lowered front = lower(call, inputs, view_only);  // (b a) of row-major memory: a copy
    CHECK(front.stage == Stage::bound);
    CHECK(front.bound.outputs.at(0).shape() == Shape{12});
    CHECK(front.plan.steps.empty());
    CHECK_THROWS_AS(lower(front, {.until = Stage::planned, .plan = view_only.plan}), Error);
    CHECK(lower(front, {.until = Stage::planned}).plan.steps.size() == 1);
    // Bind errors are the front end's.
    CHECK_THROWS_AS(lower(call, std::vector<TensorSpec>{row_major({3, 4, 5})}, view_only), Error);
}

TEST_CASE("lower: a plan made elsewhere (a gradient's Route) is scheduled from where it stands") {
    const Call call = call_of(Op::reduce, "a b -> a", Reduction::max);
    const std::vector<TensorSpec> inputs{row_major({5, 6})};
    const Lowered forward = lower(call, inputs, {.until = Stage::planned});
    Plan route = plan_route(forward.bound, inputs[0], row_major({5}));
    const Schedule expected = schedule(route, cpu_target());
    const Lowered lowered = lower(Lowered{.stage = Stage::planned, .bound = forward.bound, .plan = route},
                                  {.target = cpu_target()});
    CHECK(printed(lowered.plan, lowered.schedule) == printed(route, expected));
}

TEST_CASE("cli: one GPU target, the device's multiprocessors or an H100's") {
    CHECK(cli::gpu_target(*device_model_named("a100")) == Target::gpu(108));
    CHECK(cli::gpu_target(*device_model_named("h200")) == Target::gpu(132));
    CHECK(cli::gpu_target(*device_model_named("cpu")) == Target::gpu(default_multiprocessors));
    CHECK(Target{}.multiprocessors == default_multiprocessors);
    cli::CallArgs args;
    args.backend = "cuda";
    CHECK(cli::schedule_target(args, *device_model_named("cpu")) ==
          cli::gpu_target(*device_model_named("cpu")));
    CHECK(cli::schedule_target(args, *device_model_named("a100")) == Target::gpu(108));
    args.backend = "";
    CHECK(cli::schedule_target(args, *device_model_named("a100")) == Target::gpu(108));
    CHECK(cli::schedule_target(args, *device_model_named("cpu")).backend == Backend::cpu);
}
