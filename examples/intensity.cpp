// Arithmetic intensity: FLOPs per byte moved decides whether a computation is limited by memory bandwidth
// or by arithmetic. A dot product, a matrix-vector product, a sum and a matrix-matrix product, classified
// against the H100's and the A100's roofs, then drawn on one roofline chart (intensity.svg).
#include <einc/einc.hpp>
#include <fmt/format.h>
#include <fstream>

#include "cli/roofline_chart.hpp"

namespace {

struct Case {
    const char* name;
    std::vector<std::string> call;  // as typed after `einc explain`
};

}  // namespace

int main() {
    const einc::DType dtype = einc::DType::bf16;
    const std::vector<Case> cases{
        {"dot product", {"einsum", "i, i ->", "16777216", "16777216"}},
        {"matrix-vector", {"einsum", "i j, j -> i", "8192x8192", "8192"}},
        {"sum of rows", {"reduce", "i j -> i", "sum", "8192x8192"}},
        {"matrix-matrix", {"einsum", "i k, k j -> i j", "8192x8192", "8192x8192"}},
    };
    const einc::DeviceModel& h100 = *einc::device_model_named("h100");
    const einc::DeviceModel& a100 = *einc::device_model_named("a100");

    fmt::print(
        "bf16; a computation is compute-bound when its intensity passes the ridge = peak / bandwidth:\n");
    for (const einc::DeviceModel* device : {&h100, &a100})
        fmt::print("  {}: {}/s / {}/s = ridge {:.3g} FLOP/B\n", device->key,
                   einc::format_flops(einc::peak_flops(*device, dtype)),
                   einc::format_bytes(device->bandwidth),
                   einc::peak_flops(*device, dtype) / device->bandwidth);
    fmt::print("\n{:<14} {:<18} {:>11} {:>10} {:>8}  {:<14} {}\n", "", "pattern", "FLOPs", "bytes", "FLOP/B",
               "on H100", "on A100");

    std::vector<einc::cli::CallArgs> calls;
    for (const Case& c : cases) {
        std::vector<std::string> words = c.call;
        words.insert(words.end(), {"--dtype", "bf16"});
        calls.push_back(einc::cli::parse_call_args(words));
        // The plan of the call on tensors of these shapes (no data is needed to plan).
        const einc::cli::CallArgs& args = calls.back();
        std::vector<einc::TensorView> views;
        for (const einc::cli::OperandArg& operand : args.operands)
            views.push_back(
                einc::TensorView{nullptr, dtype, operand.shape, einc::row_major_strides(operand.shape)});
        const einc::Program program = einc::Expression(args.call).bind(views);
        const einc::Cost& cost = program.plan().total;
        const auto bound = [&](const einc::DeviceModel& device) {
            return einc::roofline(cost, device, dtype).compute_bound ? "compute-bound" : "memory-bound";
        };
        fmt::print("{:<14} {:<18} {:>11} {:>10} {:>8.4g}  {:<14} {}\n", c.name, args.call.pattern,
                   einc::format_flops(cost.flops), einc::format_bytes(cost.bytes()), cost.intensity(),
                   bound(h100), bound(a100));
    }
    fmt::print(
        "\nwhy: a dot product reads 2 numbers (4 bytes) per multiply-add (2 FLOPs): 0.5 FLOP/B, whatever n "
        "is;\n"
        "a matrix-vector product reads each matrix element once for 2 FLOPs: about 1 FLOP/B;\n"
        "an n x n matrix product does 2n^3 FLOPs on 3n^2 elements: n/3 FLOP/B, so it grows with n.\n\n");

    const einc::cli::RooflineChart chart = einc::cli::roofline_chart(calls, h100);
    std::ofstream("intensity.svg") << einc::cli::render_svg(chart);
    fmt::print("wrote intensity.svg: the roofline of the H100 with these {} points (open it in a browser)\n",
               chart.points.size());
    std::string command = "einc roofline";
    for (const Case& c : cases) {
        command += fmt::format(" '{} \"{}\"", c.call[0], c.call[1]);
        for (std::size_t i = 2; i < c.call.size(); ++i) command += " " + c.call[i];
        command += "'";
    }
    fmt::print("the same chart from the command line:\n  {} --dtype bf16 --device h100 -o intensity.svg\n",
               command);
    return 0;
}
