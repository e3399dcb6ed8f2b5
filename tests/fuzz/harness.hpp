// What the fuzz targets check, as plain functions: libFuzzer's entry points (fuzz_*.cpp) call them, and so
// does fuzz_replay, which runs the seed corpora and every crash ever found (tests/fuzz/regressions/) in
// the ordinary test suite, with any compiler.
//
// A case is acceptable when einc answers with a result or an einc::Error. Anything else is a bug and
// aborts the process (libFuzzer then saves the input): an InternalError, any other exception, a result
// that differs from the reference interpreter's, or - caught by the sanitizers and libFuzzer's timeout -
// a crash, undefined behaviour, a leak or a hang.
//
// The pattern target reads a small text format, so that seeds and regressions are readable:
//
//   reduce mean f32 compact        line 1: the operation, then any of: a reduction, a dtype, `compact`
//   b (h 2) -> b h                 line 2: the pattern, any bytes but a newline
//   3x4 5                          line 3: the operands' shapes (`scalar` for 0-d)
//   h=2 w=3                        line 4: axis sizes given by name
//   2x3 -1                         line 5: unpack's packed shapes
//
// Anything unreadable in lines 1 and 3-5 is skipped, never an error: the fuzzer explores the pattern and
// the numbers. Operands small enough are run - each on a layout chosen from a hash of the case
// (permuted, padded, broadcast or reversed strides) - through a compiled Program, the plan cache and
// Program::run into caller outputs, and compared with the reference interpreter and the plan interpreter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compiler/call.hpp"
#include "compiler/dtype.hpp"

namespace einc::fuzz {

struct PatternCase {
    Call call;
    DType dtype = DType::f32;
    std::vector<Shape> shapes;
};

// Reads the text format above (never throws).
PatternCase read_pattern_case(std::span<const std::uint8_t> bytes);
// The text format of a case (what the seed generator writes).
std::string write_pattern_case(const PatternCase& c);

// Parse, bind, plan, print and - when small - run and compare one case.
void check_pattern_case(std::span<const std::uint8_t> bytes);

// read_npy_bytes on any bytes: a tensor no larger than the file that writes back to the same tensor, or
// an einc::Error of kind `file`.
void check_npy_case(std::span<const std::uint8_t> bytes);

// Any text as an `einc aot` corpus (read_corpus_text): never an exception; each line an entry or one error
// located at fuzz.txt:line:column.
void check_corpus_case(std::span<const std::uint8_t> bytes);

}  // namespace einc::fuzz
