// The passes in order, each one line; what each turns into what is said in its header (bind.hpp,
// plan.hpp, schedule.hpp) and in compiler/README.md.
#include "compiler/lower.hpp"

#include "compiler/bind.hpp"
#include "grammar/diagnostic.hpp"

namespace einc {

Lowered lower(const Call& call, std::span<const TensorSpec> inputs, const LowerOptions& options) {
    // 1. parse: the pattern's text into a syntax tree, in the notation the operation reads
    return lower(call, parse(call), inputs, options);
}

Lowered lower(const Call& call, const syntax::Pattern& syntax, std::span<const TensorSpec> inputs,
              const LowerOptions& options) {
    Lowered lowered;
    // The operands' strides as plans read them (planned_stride), once: explain shows what runs.
    for (const TensorSpec& input : inputs) lowered.inputs.push_back(planned(input));
    std::vector<Shape> shapes;
    for (const TensorSpec& input : inputs) shapes.push_back(input.shape);
    // 2. bind: names, groups and `...` into elementary axes with sizes, checked against the shapes
    lowered.bound = bind(syntax, call, shapes);
    lowered.stage = Stage::bound;
    return lower(std::move(lowered), options);
}

Lowered lower(Lowered lowered, const LowerOptions& options) {
    EINC_ASSERT(options.until >= lowered.stage);
    if (lowered.stage < Stage::planned && options.until >= Stage::planned) {
        // 3. plan: the bound axes over the operands' strides into views, copies, reductions, GEMMs
        lowered.plan = plan(lowered.bound, lowered.inputs, options.plan);
        lowered.stage = Stage::planned;
    }
    if (lowered.stage < Stage::scheduled && options.until >= Stage::scheduled) {
        // 4. schedule: how each step runs on the target - strategy or kernels, nests, split, scratch
        lowered.schedule = schedule(lowered.plan, options.target);
        lowered.stage = Stage::scheduled;
    }
    return lowered;
}

}  // namespace einc
