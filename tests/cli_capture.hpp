// The `einc` command line run in this process, its output captured: what the CLI tests assert on.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

namespace einc::testing {

struct CliResult {
    int status;
    std::string out, err;
};

inline CliResult einc_cli(const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int status = cli::run(args, out, err);
    return {status, out.str(), err.str()};
}

}  // namespace einc::testing
