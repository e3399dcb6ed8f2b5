// Errors. A user error (einc::Error) says what is wrong with what the user gave, shows the pattern with
// a caret under the offending part, and says what would be right; an internal error (einc::InternalError)
// is an einc bug. Nothing a user types may surface as anything but einc::Error.
//
//   error: axis 'h' appears twice on the left side of rearrange
//     b h (h w) -> b w h
//         ^  ~
//     note: operand 0 has shape 2x3x12
//     help: ...
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "syntax.hpp"

namespace einc {

// What kind of input was wrong; lets API users react without parsing the message.
enum class ErrorKind {
    syntax,       // the pattern text cannot be read
    pattern,      // readable, but not valid for the operation (duplicates, one-sided axes, ...)
    shape,        // the pattern does not fit the operands' shapes or the given axis sizes
    usage,        // arguments: unknown operation, reduction, option, dtype
    unsupported,  // valid but not implemented by this build or backend
    file,         // a file is missing, unreadable or malformed
    device,       // a GPU, driver, NVRTC or cuBLAS failure, out of memory
};

struct Label {
    syntax::Span span;
    bool primary = true;  // `^` under a primary span, `~` under a secondary one
};

struct Diagnostic {
    ErrorKind kind = ErrorKind::pattern;
    std::string message;  // one line, no trailing period
    std::string source;   // the pattern the labels point into; empty: no caret lines
    std::vector<Label> labels;
    std::vector<std::string> notes;  // facts: shapes, sizes given
    std::string help;                // what would be right
    std::string location;  // "kernels.txt:3:12" where the source was read from a file; empty otherwise
};

// "error: ..." (after "file:line:column: " when located), then the source line with its caret line, then
// notes and help, each on its own line.
std::string render(const Diagnostic& diagnostic);

// A user error. Built fluently where it is thrown:
//   throw Error(ErrorKind::pattern, "axis 'h' appears twice").at(text, second).also(first);
class Error : public std::exception {
public:
    Error(ErrorKind kind, std::string message);
    explicit Error(Diagnostic diagnostic);

    Error& at(std::string_view source, syntax::Span primary) &;
    Error& also(syntax::Span secondary) &;
    Error& note(std::string text) &;
    Error& help(std::string text) &;
    // An einsum pattern as written (`ij,jk->ik`) and as numpy subscripts read it, one letter an axis, in
    // einops notation (`i j, j k -> i k`), where that reading binds and the one as written does not; front
    // ends say how to ask for it. Empty otherwise.
    struct Subscripts {
        std::string written, reading;
    };
    Error& subscripts(std::string written, std::string reading) &;
    const Subscripts& subscripts() const noexcept { return subscripts_; }
    Error&& at(std::string_view source, syntax::Span primary) && { return std::move(at(source, primary)); }
    Error&& also(syntax::Span secondary) && { return std::move(also(secondary)); }
    Error&& note(std::string text) && { return std::move(note(std::move(text))); }
    Error&& help(std::string text) && { return std::move(help(std::move(text))); }

    const Diagnostic& diagnostic() const noexcept { return diagnostic_; }
    ErrorKind kind() const noexcept { return diagnostic_.kind; }
    const char* what() const noexcept override;  // render(diagnostic())

private:
    Diagnostic diagnostic_;
    Subscripts subscripts_;
    mutable std::string rendered_;
};

class InternalError : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

[[noreturn]] void internal_error(const char* condition, const char* file, int line);

// "1 result", "2 results", "0 results": a count and its noun, for messages.
std::string counted(std::int64_t count, std::string_view noun);

}  // namespace einc

// An invariant of einc itself; failing it is a bug, reported as InternalError rather than a crash.
#define EINC_ASSERT(condition)                                                                               \
    do {                                                                                                     \
        if (!(condition)) ::einc::internal_error(#condition, __FILE__, __LINE__);                            \
    } while (false)
