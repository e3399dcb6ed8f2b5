// One function per einc command. Each returns the exit status and throws einc::Error or UsageError.
#pragma once

#include <iosfwd>

#include "cli/arguments.hpp"

namespace einc::cli {

int explain(const CallArgs& args, std::ostream& out);

}  // namespace einc::cli
