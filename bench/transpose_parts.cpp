// What bounds a transpose the caches hold: cpu_bench's `a b c -> c b a` of 128x128x64 f32 (4 MB) beside
// memcpy of the same bytes and beside its own memory traffic taken apart, all by turns in one process:
//   transpose      einc's call (kind direct: register blocks read straight from the source)
//   reads alone    the source's lines in the kernel's order (strips of 16 c; for each b, a line of each a)
//   writes alone   the destination in the kernel's order (16 rows of a strip, 32 bytes to each in turn)
//   writes in order  the destination written front to back
// Each as the fraction of memcpy's speed (memcpy's time / its time), the medians of 41 rounds.
//
//   transpose_parts
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <vector>

#include "bench/bench_common.hpp"
#include "einc/einc.hpp"
#include "runtime/cpu/parallel.hpp"

namespace {

using einc::bench::median;
using einc::bench::seconds_of;

// Half of [0, n) to each of two threads, as the kernels split their strips.
void on_two_threads(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& part) {
    einc::cpu::parallel_for(2, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) part(n * t / 2, n * (t + 1) / 2);
    });
}

}  // namespace

int main() {
    constexpr std::int64_t A = 128, B = 128, C = 64, strip = 16, block = 8;
    const einc::Tensor x = einc::Tensor::empty(einc::DType::f32, {A, B, C});
    auto* source = static_cast<float*>(x.data());
    for (std::int64_t i = 0; i < A * B * C; ++i) source[i] = static_cast<float>(i % 1000);
    const einc::Program transpose = einc::compile(einc::Op::rearrange, "a b c -> c b a")
                                        .bind({x.view()}, einc::Options{.contiguous = true});
    einc::Tensor y = einc::Tensor::empty(einc::DType::f32, {C, B, A}),
                 copy = einc::Tensor::empty(einc::DType::f32, {A, B, C});
    auto* destination = static_cast<float*>(y.data());
    const std::vector<einc::Input> inputs{x};
    const std::vector<einc::TensorView> outputs{y.view()};
    volatile float sink = 0;

    const std::vector<std::pair<std::string, std::function<void()>>> works{
        {"memcpy",
         [&] {
             on_two_threads(A * B * C, [&](std::int64_t begin, std::int64_t end) {
                 std::memcpy(static_cast<float*>(copy.data()) + begin, source + begin,
                             static_cast<std::size_t>(end - begin) * sizeof(float));
             });
         }},
        {"transpose", [&] { transpose.run(inputs, outputs); }},
        {"reads alone",
         [&] {
             on_two_threads(C, [&](std::int64_t c_begin, std::int64_t c_end) {
                 float sum[strip] = {};
                 for (std::int64_t c0 = c_begin; c0 < c_end; c0 += strip)
                     for (std::int64_t b = 0; b < B; ++b)
                         for (std::int64_t a = 0; a < A; ++a)
                             for (std::int64_t k = 0; k < strip; ++k)
                                 sum[k] += source[(a * B + b) * C + c0 + k];
                 sink = sink + sum[0];
             });
         }},
        {"writes alone",
         [&] {
             on_two_threads(C, [&](std::int64_t c_begin, std::int64_t c_end) {
                 for (std::int64_t c0 = c_begin; c0 < c_end; c0 += strip)
                     for (std::int64_t b = 0; b < B; ++b)
                         for (std::int64_t a0 = 0; a0 < A; a0 += block)
                             for (std::int64_t c = c0; c < c0 + strip; ++c)
                                 std::fill_n(destination + (c * B + b) * A + a0, block, 1.0f);
             });
         }},
        {"writes in order",
         [&] {
             on_two_threads(A * B * C, [&](std::int64_t begin, std::int64_t end) {
                 std::fill(destination + begin, destination + end, 1.0f);
             });
         }},
    };
    std::vector<std::vector<double>> seconds(works.size());
    for (int round = 0; round < 41; ++round)
        for (std::size_t w = 0; w < works.size(); ++w) {
            works[w].second();  // warm: the caches hold what it touches
            seconds[w].push_back(seconds_of(works[w].second));
        }
    const double memcpy_seconds = median(seconds[0]);
    fmt::print("a b c -> c b a, {}x{}x{} f32 ({} MB), {} threads, medians of 41 rounds by turns\n", A, B, C,
               A * B * C * 4 >> 20, einc::cpu::thread_count());
    for (std::size_t w = 0; w < works.size(); ++w)
        fmt::print("  {:<16} {:8.1f} us  {:.2f} of memcpy's speed\n", works[w].first,
                   median(seconds[w]) * 1e6, memcpy_seconds / median(seconds[w]));
    return 0;
}
