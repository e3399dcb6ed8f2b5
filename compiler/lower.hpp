// The compiler in one function: lower() runs the passes in order - parse, bind, plan, schedule - and is
// the one sequence every caller goes through (runtime/program.cpp binding a program, the gradient's
// backward calls, `einc explain`, `emit`, `roofline`, `aot`). Read it as the table of contents.
//
//   const Lowered lowered = lower(call, inputs, {.until = Stage::scheduled, .target = Target::gpu(sms)});
//   print_plan(lowered.plan, lowered.schedule, device);
//
// A caller with work of its own between two passes stops early (`until`) and lowers the rest later from
// where it stopped: the runtime checks a caller's outputs against the bound call before it plans, and
// picks its target from the plan; `explain` without a plan runs the front end alone, so that plan errors
// stay out of what it prints.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/bound.hpp"
#include "compiler/call.hpp"
#include "compiler/plan.hpp"
#include "compiler/schedule.hpp"
#include "grammar/syntax.hpp"

namespace einc {

// The last pass a lowering has run.
enum class Stage : std::uint8_t {
    bound,      // parse, bind: the front end (shapes only)
    planned,    // plan: the operands' layouts, the PlanOptions
    scheduled,  // schedule: the target
};

struct Lowered {
    Stage stage = Stage::bound;
    std::vector<TensorSpec>
        inputs{};  // the operands' layouts, strides planned (planned()): what the plan reads
    Bound bound{};
    Plan plan{};          // from Stage::planned
    Schedule schedule{};  // at Stage::scheduled
};

struct LowerOptions {
    Stage until = Stage::scheduled;  // the last pass to run
    PlanOptions plan{};              // for the plan
    Target target{};                 // for the schedule
};

// Lowers `call` over operands laid out as `inputs` up to options.until.
// Throws einc::Error for what parse, bind, plan or schedule refuse (each says which).
Lowered lower(const Call& call, std::span<const TensorSpec> inputs, const LowerOptions& options);

// The same for a pattern parsed already: a compiled Expression's, or one a caller parses first so that a
// syntax error comes before anything else it checks.
// @pre syntax == parse(call)
Lowered lower(const Call& call, const syntax::Pattern& syntax, std::span<const TensorSpec> inputs,
              const LowerOptions& options);

// Lowers further, from where `lowered` stopped, up to options.until (the earlier passes' options are not
// read again).
// @pre options.until >= lowered.stage
Lowered lower(Lowered lowered, const LowerOptions& options);

}  // namespace einc
