#include <fmt/ostream.h>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "compiler/bind.hpp"
#include "grammar/print.hpp"

namespace einc::cli {

int explain(const CallArgs& args, std::ostream& out) {
    const syntax::Pattern pattern = parse(args.call);
    std::vector<Shape> shapes;
    for (const OperandArg& operand : args.operands) shapes.push_back(operand.shape);
    const Bound bound = bind(pattern, args.call, shapes);
    fmt::print(out, "{}{}", print_syntax(pattern), print_bound(bound));
    return exit_ok;
}

}  // namespace einc::cli
