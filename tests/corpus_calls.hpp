// The calls of the test corpus (`$ einc explain ...` lines of tests/corpus), as calls with operand
// layouts: the codegen test compiles their kernels, the GPU test and the emulator run them.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "compiler/call.hpp"
#include "compiler/plan.hpp"
#include "runtime/tensor.hpp"

namespace einc::testing {

struct CorpusCall {
    std::string line;  // the command line, for messages
    Call call;
    std::vector<TensorSpec> specs;  // the operands' dtype, shape and strides
};

// Every corpus call that einc accepts with operands of `dtype` (rejected lines, and dtypes an operation
// does not take, are left out). A --dtype on the line is overridden.
std::vector<CorpusCall> corpus_calls(const std::string& corpus_directory, DType dtype);

// An operand for a corpus call: host storage holding -1, 0 and 1 at random (sums of them stay exact in
// every float dtype, so executors agree however they order their additions), and a view of it laid out
// as `spec`, strides of any sign: the storage is exactly the elements the view reaches.
struct CorpusOperand {
    Tensor storage;
    TensorView view;
};
CorpusOperand filled(const TensorSpec& spec, std::mt19937& rng);

}  // namespace einc::testing
