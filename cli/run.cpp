// `einc run`: executes a call on .npy files and writes the results as .npy files.
#include <fmt/ostream.h>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/npy.hpp"
#include "runtime/program.hpp"

namespace einc::cli {
namespace {

// Where result k goes: the k-th -o, or for several results and one -o, FILE_k.npy.
std::string output_path(const CallArgs& args, std::size_t k, std::size_t results) {
    if (args.outputs.size() == results) return args.outputs[k];
    std::string base = args.outputs.front();
    if (base.ends_with(".npy")) base.resize(base.size() - 4);
    return fmt::format("{}_{}.npy", base, k);
}

}  // namespace

int run_call(const CallArgs& args, std::ostream& out) {
    for (const OperandArg& operand : args.operands)
        if (!operand.is_file) throw UsageError(fmt::format("run needs .npy inputs, got '{}'", operand.text));
    if (args.outputs.empty()) throw UsageError("run needs an output: -o result.npy");
    if (args.backend != "cpu" && args.backend != "cuda") throw UsageError(fmt::format("unknown backend '{}' (cpu, cuda)", args.backend));
    if (args.backend == "cuda")
        throw Error(ErrorKind::unsupported, "einc run --backend cuda needs the GPU backend, which this build does not have")
            .help("build einc with CUDA, on a machine with an NVIDIA GPU");
    const LoadedOperands loaded = load_operands(args);
    const Program program = Expression(args.call).bind(loaded.views, Options{.contiguous = false, .require_view = args.view});
    std::vector<Input> inputs(loaded.files.begin(), loaded.files.end());
    const std::vector<Tensor> results = program.run(inputs);
    if (args.outputs.size() != 1 && args.outputs.size() != results.size())
        throw UsageError(fmt::format("{} -o given for {} results", args.outputs.size(), results.size()));
    for (std::size_t k = 0; k < results.size(); ++k) {
        const std::string path = output_path(args, k, results.size());
        write_npy(path, results[k].view());
        const auto source = program.plan().view_source(k);
        fmt::print(out, "wrote {}: {} {} ({})\n", path, name_of(results[k].dtype()), format_shape(results[k].shape()),
                   source ? fmt::format("a view of input {}: no data moved before writing", *source)
                          : fmt::format("{} step{}", program.plan().steps.size(), program.plan().steps.size() == 1 ? "" : "s"));
    }
    return exit_ok;
}

}  // namespace einc::cli
