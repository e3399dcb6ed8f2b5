// The epilogue of a step that writes an output (compiler/epilogue.hpp), as the CPU kernels apply it:
// out = alpha * value + beta * out in the step's accumulator A, then converted to the output's dtype.
// Kernels branch on it once per call: the identity keeps their own store loops; Reads (beta != 0) is a
// template argument, so that beta == 0 never loads the output (NaN there must not leak, as in BLAS).
#pragma once

#include <cstdint>
#include <type_traits>

#include "compiler/epilogue.hpp"
#include "runtime/cpu/element.hpp"

namespace einc::cpu {

template <typename A>
struct Scale {
    A alpha, beta;
    bool reads;  // beta != 0: the output's old value is read
    explicit Scale(const Epilogue& e)
        : alpha(in_accumulator(e.alpha)), beta(in_accumulator(e.beta)), reads(e.reads_output()) {}
    // Integer accumulators wrap modulo 2^64, as the folds do; alpha and beta are whole numbers there
    // (checked when the plan is made).
    static A in_accumulator(double x) {
        if constexpr (std::is_integral_v<A>)
            return static_cast<A>(static_cast<std::int64_t>(x));
        else
            return static_cast<A>(x);
    }
};

// Calls f with std::true_type where the epilogue reads the output, std::false_type otherwise.
template <typename A, typename F>
inline void with_reads(const Scale<A>& scale, F&& f) {
    if (scale.reads)
        f(std::true_type{});
    else
        f(std::false_type{});
}

// Stores alpha * value (+ beta * the element there, with Reads) at `at`, an element of dtype Out.
template <DType Out, bool Reads, typename A>
inline void store_scaled(std::byte* at, A value, const Scale<A>& scale) {
    using S = storage_t<Out>;
    A v = scale.alpha * value;
    if constexpr (Reads) v = v + scale.beta * static_cast<A>(Element<Out>::load(load_at<S>(at)));
    store_at<S>(at, Element<Out>::store(convert<compute_t<Out>>(v)));
}

}  // namespace einc::cpu
