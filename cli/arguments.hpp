// Reading the command line of an einc call: `<op> <pattern> [<reduction>] [-a name=size]... <operand>...`
// with options anywhere after the command. Operands are shape literals (`2x3x224x224`, `scalar`) or
// layouts with strides in elements (`(4,8):(1,4)`).
#pragma once

#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/call.hpp"
#include "runtime/program.hpp"

namespace einc::cli {

// A command-line mistake (exit status 2), as opposed to a mistake in the pattern or shapes.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct OperandArg {
    std::string text;              // as typed
    Shape shape;                   // for shape literals and layouts
    std::optional<Shape> strides;  // in elements; row-major when absent
    bool is_file = false;          // a .npy file: its header gives dtype and shape
};

struct CallArgs {
    Call call;
    std::vector<OperandArg> operands;
    std::string dtype = "f32";
    bool dtype_given = false;  // --dtype was typed: a .npy operand of another dtype is then an error
    bool json = false;
    bool view = false;           // require a zero-copy result
    bool contiguous = false;     // never a view: materialise every result (einc::Options::contiguous)
    double alpha = 1, beta = 0;  // results stored as alpha * result + beta * out (run: -o holds out)
    std::size_t max_intermediate_bytes = 0;  // einsum's largest intermediate (0: no limit)
    std::string device;                      // cost-model device: h100, h200, a100, cpu
    std::string backend;  // run, bench: where to execute (cpu, the default, or cuda); explain: the
                          // schedule to show (default: cuda for a GPU --device, cpu for cpu)
    std::vector<std::string> outputs;  // run: -o files
    bool backward = false;             // the call's backward: its gradients (run), their plans and costs
    std::vector<std::string> output_gradients;  // run --backward: a .npy file per output of the call
    bool ptx = false;                           // emit: PTX instead of CUDA source
    int arch = 90;                              // emit --ptx: sm_<arch>
    // explain: which stages to print (syntax, bound, plan, schedule); all but the schedule by default
    bool print_syntax = true, print_bound = true, print_plan = true, print_schedule = false;
};

CallArgs parse_call_args(std::span<const std::string> args);

// The call's options as the C++ API takes them (--view, --contiguous, --alpha, --beta, --max-intermediate);
// the planner's are plan_options_of(options_of(args)) (runtime/program.hpp).
Options options_of(const CallArgs& args);

// `2x3x10` -> {2, 3, 10}; `scalar` -> {}; `-1` allowed only when allow_unknown (unpack's packed shapes).
Shape parse_shape_literal(const std::string& text, bool allow_unknown = false);

}  // namespace einc::cli
