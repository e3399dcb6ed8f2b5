// The contraction-order search on networks read from stdin, one a line:
//   name | size size ... | axis axis ... ; axis ... ; ... | output axes
// (axes are indices into the sizes). Prints, a line each, the name, the search, the FLOPs (opt_einsum's
// count), the largest intermediate, the pairs, and the planning time: the median of repeated calls of
// contraction_order(), warm. bench/contraction_order.py writes the networks and reads the answers.
#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/contraction_order.hpp"

namespace {

std::vector<std::string> split(const std::string& text, char at) {
    std::vector<std::string> parts;
    std::stringstream in(text);
    for (std::string part; std::getline(in, part, at);) parts.push_back(part);
    if (!text.empty() && text.back() == at) parts.emplace_back();  // (getline drops a last empty part)
    return parts;
}

template <typename T>
std::vector<T> numbers(const std::string& text) {
    std::vector<T> out;
    std::stringstream in(text);
    for (long long v; in >> v;) out.push_back(static_cast<T>(v));
    return out;
}

std::string_view name_of(einc::PathSearch search) {
    switch (search) {
    case einc::PathSearch::exhaustive: return "exhaustive";
    case einc::PathSearch::dynamic_programming: return "dp";
    case einc::PathSearch::greedy: return "greedy";
    case einc::PathSearch::random_greedy: return "random-greedy";
    case einc::PathSearch::chosen: return "chosen";
    }
    return "";
}

}  // namespace

int main() {
    for (std::string line; std::getline(std::cin, line);) {
        const std::vector<std::string> fields = split(line, '|');
        if (fields.size() != 4) continue;
        const auto sizes = numbers<std::int64_t>(fields[1]);
        std::vector<std::vector<einc::AxisId>> operands;
        for (const std::string& operand : split(fields[2], ';'))
            operands.push_back(numbers<einc::AxisId>(operand));
        const auto output = numbers<einc::AxisId>(fields[3]);
        einc::ContractionPath path = einc::contraction_order(operands, output, sizes);
        // Repeated until 0.2 s or 50 calls have passed (at least 3): the median.
        std::vector<double> seconds;
        const auto begin = std::chrono::steady_clock::now();
        while (seconds.size() < 3 ||
               (seconds.size() < 50 &&
                std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() < 0.2)) {
            const auto start = std::chrono::steady_clock::now();
            path = einc::contraction_order(operands, output, sizes);
            seconds.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        std::sort(seconds.begin(), seconds.end());
        std::vector<std::string> pairs;
        for (const auto& [i, j] : path.pairs) pairs.push_back(fmt::format("{} {}", i, j));
        fmt::print("{}|{}|{:.17g}|{:.17g}|{}|{:.6g}\n", fields[0], name_of(path.search), path.optimized_flops,
                   path.largest_intermediate, fmt::join(pairs, ","), seconds[seconds.size() / 2]);
        std::fflush(stdout);
    }
}
