// The einc command line, as a library: tests run it in-process on the test corpus.
#pragma once

#include <iosfwd>
#include <span>
#include <string>

namespace einc::cli {

// Exit statuses.
inline constexpr int exit_ok = 0;
inline constexpr int exit_error = 1;     // the input is wrong: a diagnostic went to `err`
inline constexpr int exit_usage = 2;     // the command line is wrong
inline constexpr int exit_internal = 3;  // an einc bug

// Runs `einc args...` (args without the program name).
int run(std::span<const std::string> args, std::ostream& out, std::ostream& err);

}  // namespace einc::cli
