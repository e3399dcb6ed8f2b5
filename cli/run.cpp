// `einc run`: executes a call on .npy files, on the CPU or a GPU, and writes the results as .npy files.
#include <fmt/ostream.h>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/backend.hpp"
#include "runtime/gradient.hpp"
#include "runtime/npy.hpp"
#include "runtime/program.hpp"
#if EINC_HAS_CUDA
#include "cuda/cuda.hpp"
#endif

namespace einc::cli {
namespace {

// Where result k goes: the k-th -o, or for several results and one -o, FILE_k.npy.
std::string output_path(const CallArgs& args, std::size_t k, std::size_t results) {
    if (args.outputs.size() == results) return args.outputs[k];
    std::string base = args.outputs.front();
    if (base.ends_with(".npy")) base.resize(base.size() - 4);
    return fmt::format("{}_{}.npy", base, k);
}

// The inputs read from their files, on `device`; and the results brought back to the host.
std::vector<Tensor> to_device(const std::vector<Tensor>& host, Device device) {
    if (device == Device::cpu) return host;
    std::vector<Tensor> moved;
#if EINC_HAS_CUDA
    for (const Tensor& tensor : host) moved.push_back(cuda::to_device(tensor));
#endif
    return moved;
}
Tensor to_host(const Tensor& result) {
#if EINC_HAS_CUDA
    if (result.view().device == Device::cuda) return cuda::to_host(result);
#endif
    return result;
}

// run --backward: the gradient of every input given the outputs' gradients, written as the results are.
int run_backward(const CallArgs& args, const std::vector<Tensor>& operands, Device device,
                 std::ostream& out) {
    std::vector<Tensor> gradients;
    for (const std::string& path : args.output_gradients) gradients.push_back(read_npy(path));
    gradients = to_device(gradients, device);
    std::vector<TensorView> views, gradient_views;
    for (const Tensor& operand : operands) views.push_back(operand.view());
    for (const Tensor& g : gradients) gradient_views.push_back(g.view());
    const Gradient gradient = [&] {
        try {
            return einc::gradient(Expression(args.call), views, gradient_views);
        } catch (Error& e) {
            // No gradient for these inputs: say which files they are.
            if (e.kind() == ErrorKind::unsupported && operands.size() == args.operands.size())
                for (std::size_t k = 0; k < operands.size(); ++k)
                    e.note(fmt::format("input {} is {} ({})", k, args.operands[k].text,
                                       describe(operands[k].view())));
            throw;
        }
    }();
    const std::vector<Input> inputs(operands.begin(), operands.end()),
        output_gradients(gradients.begin(), gradients.end());
    const std::vector<Tensor> results = gradient.run(inputs, output_gradients);
    if (args.outputs.size() != 1 && args.outputs.size() != results.size())
        throw UsageError(fmt::format("{} -o given for the gradients of {}", args.outputs.size(),
                                     counted(static_cast<std::int64_t>(results.size()), "input")));
    for (std::size_t k = 0; k < results.size(); ++k) {
        const std::string path = output_path(args, k, results.size());
        write_npy(path, to_host(results[k]).view());
        fmt::print(out, "wrote {}: {} {} (the gradient of input {}{})\n", path, name_of(results[k].dtype()),
                   format_shape(results[k].shape()), k, device == Device::cuda ? ", on the GPU" : "");
    }
    return exit_ok;
}

// The results; with --beta, accumulated into the -o files as they are: out = alpha * result + beta * out.
std::vector<Tensor> run_accumulating(const CallArgs& args, const Program& program,
                                     std::span<const Input> inputs, Device device) {
    if (args.beta == 0) return program.run(inputs);
    const std::vector<TensorSpec>& specs = program.plan().outputs;
    if (args.outputs.size() != specs.size())
        throw UsageError(fmt::format("--beta accumulates into the -o files: give one for each of the {}",
                                     counted(static_cast<std::int64_t>(specs.size()), "result")));
    std::vector<Tensor> outputs;
    std::vector<TensorView> views;
    for (std::size_t k = 0; k < specs.size(); ++k) {
        Tensor out = read_npy(args.outputs[k]);
        if (out.dtype() != specs[k].dtype || out.shape() != specs[k].shape)
            throw Error(ErrorKind::shape,
                        fmt::format("--beta accumulates into {}, which is {} {}; the result is {} {}",
                                    args.outputs[k], name_of(out.dtype()), format_shape(out.shape()),
                                    name_of(specs[k].dtype), format_shape(specs[k].shape)));
        outputs.push_back(to_device({out}, device).front());
        views.push_back(outputs.back().view());
    }
    program.run(inputs, views);
    return outputs;
}

}  // namespace

Device execution_device(const std::string& backend) {
    if (backend.empty() || backend == "cpu") return Device::cpu;
    if (backend != "cuda") throw UsageError(fmt::format("unknown backend '{}' (cpu, cuda)", backend));
    if (gpu_backend() == nullptr)
        throw Error(ErrorKind::unsupported,
                    "--backend cuda needs einc's GPU backend, which this build does not have")
            .help("build einc with the CUDA toolkit (EINC_CUDA=ON) and run on a machine with an NVIDIA GPU; "
                  "--backend cpu runs on the CPU");
#if EINC_HAS_CUDA
    if (!cuda::available())
        throw Error(ErrorKind::device, "--backend cuda: this machine has no usable NVIDIA GPU and driver")
            .help("run on a machine with an NVIDIA GPU, or on the CPU with --backend cpu");
#endif
    return Device::cuda;
}

int run_call(const CallArgs& args, std::ostream& out) {
    for (const OperandArg& operand : args.operands)
        if (!operand.is_file) throw UsageError(fmt::format("run needs .npy inputs, got '{}'", operand.text));
    const bool parse_shape = args.call.op == Op::parse_shape;  // prints the sizes; writes nothing
    if (args.outputs.empty() && !parse_shape) throw UsageError("run needs an output: -o result.npy");
    if (!args.outputs.empty() && parse_shape)
        throw UsageError("parse_shape prints the axis sizes and writes no file: drop -o");
    const Device device = execution_device(args.backend);
    const LoadedOperands loaded = load_operands(args);
    const std::vector<Tensor> operands = to_device(loaded.files, device);
    if (args.backward) {
        if (args.output_gradients.empty())
            throw UsageError("run --backward needs the output's gradient: --backward grad.npy");
        return run_backward(args, operands, device, out);
    }
    const std::vector<Input> inputs(operands.begin(), operands.end());
    std::vector<TensorView> views;
    for (const Tensor& operand : operands) views.push_back(operand.view());
    const Program program = Expression(args.call).bind(views, options_of(args));
    const std::vector<Tensor> results = run_accumulating(args, program, inputs, device);
    if (parse_shape) {
        std::vector<std::string> sizes;
        for (const AxisSize& size : parsed_shape(program.bound()))
            sizes.push_back(fmt::format("{}={}", size.name, size.size));
        fmt::print(out, "{}\n", sizes.empty() ? "(no named axes)" : fmt::format("{}", fmt::join(sizes, " ")));
        return exit_ok;
    }
    if (args.outputs.size() != 1 && args.outputs.size() != results.size())
        throw UsageError(fmt::format("{} -o given for {}", args.outputs.size(),
                                     counted(static_cast<std::int64_t>(results.size()), "result")));
    for (std::size_t k = 0; k < results.size(); ++k) {
        const std::string path = output_path(args, k, results.size());
        write_npy(path, to_host(results[k]).view());
        const auto source = program.plan().view_source(k);
        fmt::print(out, "wrote {}: {} {} ({}{})\n", path, name_of(results[k].dtype()),
                   format_shape(results[k].shape()),
                   source ? fmt::format("a view of input {}: no data moved before writing", *source)
                          : counted(static_cast<std::int64_t>(program.plan().steps.size()), "step"),
                   device == Device::cuda ? ", on the GPU" : "");
    }
    if (args.call.op == Op::pack) {  // what unpack needs to split it again
        std::vector<std::string> parts, flags;
        for (const Shape& shape : packed_shapes(program.bound())) {
            parts.push_back(format_shape(shape));
            flags.push_back("--packed " + format_shape(shape));
        }
        fmt::print(out, "packed shapes: {} (unpack with {})\n", fmt::join(parts, ", "),
                   fmt::join(flags, " "));
    }
    return exit_ok;
}

}  // namespace einc::cli
