// Running a scheduled plan on the CPU: every step kind, any input strides. The caller allocates the
// outputs the plan writes; outputs the plan makes Views are set here to alias their input.
#pragma once

#include <span>

#include "compiler/schedule.hpp"
#include "runtime/tensor.hpp"

namespace einc {

// The CPU the schedule is made for: this machine's thread count and kernels, and whether BLAS is linked.
Target cpu_target();

// @pre schedule = einc::schedule(plan, a CPU target); inputs[i] has plan.inputs[i]'s dtype, shape and
//      strides (its data pointer is the origin of those strides); outputs[k] likewise for every output not
//      produced by a View step
//      `workspace`: schedule.workspace_bytes, 64-byte aligned (null: allocated for this run)
// @post every output holds its result; View outputs alias an input's memory
void execute_on_cpu(const Plan& plan, const Schedule& schedule, std::span<const TensorView> inputs,
                    std::span<TensorView> outputs, std::byte* workspace = nullptr);

}  // namespace einc
