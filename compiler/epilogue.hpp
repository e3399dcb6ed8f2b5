// What a step does with its result before storing it in an output: out = alpha * result + beta * out,
// as BLAS's GEMM does. Computed in the step's accumulator, then converted to the output's dtype; with
// beta == 0 the output is never read (BLAS semantics: whatever it held, NaN included, does not leak).
#pragma once

namespace einc {

struct Epilogue {
    double alpha = 1.0, beta = 0.0;
    bool identity() const { return alpha == 1.0 && beta == 0.0; }
    bool reads_output() const { return beta != 0.0; }
    friend bool operator==(const Epilogue&, const Epilogue&) = default;
};

}  // namespace einc
