// The calls of the test corpus (`$ einc explain ...` lines of tests/corpus), as calls with operand
// layouts: the codegen test compiles their kernels, the GPU test runs them.
#pragma once

#include <string>
#include <vector>

#include "compiler/call.hpp"
#include "compiler/plan.hpp"

namespace einc::testing {

struct CorpusCall {
    std::string line;  // the command line, for messages
    Call call;
    std::vector<TensorSpec> specs;  // the operands' dtype, shape and strides
};

// Every corpus call that einc accepts with operands of `dtype` (rejected lines, and dtypes an operation
// does not take, are left out). A --dtype on the line is overridden.
std::vector<CorpusCall> corpus_calls(const std::string& corpus_directory, DType dtype);

}  // namespace einc::testing
