// `einc run`: .npy files in, the call run on the CPU or on a GPU, .npy files out - each result checked
// against the reference interpreter; and a GPU asked for where none is usable is a clear error. `einc
// bench` on operands laid out by strides.
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sstream>
#include <unistd.h>

#include "cli/cli.hpp"
#include "compiler/bind.hpp"
#include "einc_build_info.hpp"
#include "runtime/backend.hpp"
#include "runtime/npy.hpp"
#include "tests/cli_capture.hpp"
#include "tests/reference/reference.hpp"
#if EINC_HAS_CUDA
#include "cuda/cuda.hpp"
#endif

using namespace einc;
namespace fs = std::filesystem;

namespace {

using Result = testing::CliResult;
using testing::einc_cli;

struct TempDir {
    fs::path path = fs::temp_directory_path() / fmt::format("einc-run-test-{}", ::getpid());
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::vector<double> counting(std::size_t n) {
    std::vector<double> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<double>(i % 7) - 3;
    return values;
}

bool gpu_usable() {
#if EINC_HAS_CUDA
    return cuda::available();
#else
    return false;
#endif
}

// Runs `op pattern [reduction] inputs... -o out` with `backend` and checks each result file against the
// reference interpreter's evaluation of the same call.
void check_run(const TempDir& dir, const std::string& backend, const Call& call,
               const std::vector<Tensor>& inputs, std::size_t results) {
    std::vector<std::string> args{"run", std::string(name_of(call.op)), call.pattern};
    if (call.reduction != Reduction::none) args.emplace_back(name_of(call.reduction));
    for (const Shape& shape : call.packed_shapes) args.insert(args.end(), {"--packed", format_shape(shape)});
    std::vector<Shape> shapes;
    std::vector<TensorView> views;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const std::string path = dir / fmt::format("{}-in{}.npy", backend, i);
        write_npy(path, inputs[i].view());
        args.push_back(path);
        shapes.push_back(inputs[i].shape());
        views.push_back(inputs[i].view());
    }
    const std::string output = dir / fmt::format("{}-out.npy", backend);
    args.insert(args.end(), {"-o", output, "--backend", backend});
    const Result result = einc_cli(args);
    INFO(result.out, result.err);
    REQUIRE(result.status == cli::exit_ok);
    const std::vector<Tensor> expected = reference::evaluate(bind(call, shapes), views);
    REQUIRE(expected.size() == results);
    for (std::size_t k = 0; k < results; ++k) {
        const std::string path = results == 1 ? output : dir / fmt::format("{}-out_{}.npy", backend, k);
        CHECK(result.out.find("wrote " + path) != std::string::npos);
        const Tensor written = read_npy(path);
        CHECK(written.dtype() == expected[k].dtype());
        CHECK(written.shape() == expected[k].shape());
        CHECK(reference::values_of(written.view()) == reference::values_of(expected[k].view()));
    }
}

}  // namespace

TEST_CASE("run: results written as .npy files equal the reference, on the CPU and, where there is one, on "
          "the GPU") {
    TempDir dir;
    const Tensor x = reference::make_tensor(DType::f32, {2, 3, 4}, counting(24));
    const Tensor w = reference::make_tensor(DType::f32, {4, 5}, counting(20));
    const Tensor packed = reference::make_tensor(DType::bf16, {2, 9}, counting(18));
    const Tensor counts = reference::make_tensor(DType::i64, {4, 5}, counting(20));
    const Tensor pixels = reference::make_tensor(DType::i8, {2, 3, 4}, counting(24));
    // complex128: (re, im) pairs of small integers, whose sums and products are exact in any order
    const Tensor za = reference::make_tensor(DType::c128, {3, 4}, counting(24));
    const Tensor zb = reference::make_tensor(DType::c128, {4, 5}, counting(40));
    std::vector<std::string> backends{"cpu"};
    if (gpu_usable()) backends.emplace_back("cuda");
    for (const std::string& backend : backends) {
        CAPTURE(backend);
        check_run(dir, backend, Call{Op::rearrange, "a b c -> c (a b)", Reduction::none, {}, false, {}}, {x},
                  1);
        check_run(dir, backend, Call{Op::rearrange, "a b c -> b a c", Reduction::none, {}, false, {}}, {x},
                  1);  // a view
        check_run(dir, backend, Call{Op::reduce, "a b c -> a c", Reduction::max, {}, false, {}}, {x}, 1);
        check_run(dir, backend, Call{Op::einsum, "a b c, c d -> a d b", Reduction::none, {}, false, {}},
                  {x, w}, 1);
        check_run(dir, backend, Call{Op::unpack, "a *", Reduction::none, {}, false, {{4}, {5}}}, {packed}, 2);
        // f32 with i64: f64 (numpy's promotion); the mean of i8: f64
        check_run(dir, backend, Call{Op::einsum, "a b c, c d -> a d b", Reduction::none, {}, false, {}},
                  {x, counts}, 1);
        check_run(dir, backend, Call{Op::reduce, "a b c -> a c", Reduction::mean, {}, false, {}}, {pixels},
                  1);
        check_run(dir, backend, Call{Op::einsum, "a b, b c -> a c", Reduction::none, {}, false, {}}, {za, zb},
                  1);
        check_run(dir, backend, Call{Op::einsum, "b a, b c -> c a", Reduction::none, {}, false, {}}, {zb, zb},
                  1);
        check_run(dir, backend, Call{Op::reduce, "a b -> b", Reduction::sum, {}, false, {}}, {za}, 1);
        check_run(dir, backend, Call{Op::einsum, "a b, a -> a b", Reduction::none, {}, false, {}},
                  {zb, reference::make_tensor(DType::c64, {4}, counting(8))}, 1);  // c128 with c64
    }
    if (backends.size() == 1) MESSAGE("no usable GPU: einc run --backend cuda was not run");
}

// bench fills a buffer of random data that a layout's strides address; negative strides reach below the
// view's first element, so that buffer must start at the lowest offset (it once came out negative).
TEST_CASE("bench: operands laid out with negative strides, on the CPU and, where there is one, on the GPU") {
    std::vector<std::string> backends{"cpu"};
    if (gpu_usable()) backends.emplace_back("cuda");
    for (const std::string& backend : backends) {
        CAPTURE(backend);
        for (const std::vector<std::string>& call : std::vector<std::vector<std::string>>{
                 {"rearrange", "a b -> (b a)", "(3,4):(-4,1)"},
                 {"reduce", "a b -> a", "sum", "(5,6):(1,-5)"},
                 {"einsum", "i j, j -> i", "(3,4):(-1,-3)", "(4):(-1)"},
             }) {
            std::vector<std::string> args{"bench"};
            args.insert(args.end(), call.begin(), call.end());
            args.insert(args.end(), {"--repeat", "1", "--warmup", "0", "--backend", backend});
            const Result result = einc_cli(args);
            CHECK_MESSAGE(result.status == cli::exit_ok, fmt::format("{}", fmt::join(args, " ")), "\n",
                          result.err);
        }
    }
}

TEST_CASE("run: --backend cuda without a usable GPU is an error that says so, and writes nothing") {
    if (gpu_usable()) {
        MESSAGE("a GPU is usable here: the no-GPU error is not checked");
        return;
    }
    TempDir dir;
    write_npy(dir / "x.npy", reference::make_tensor(DType::f32, {2, 3}, counting(6)).view());
    const Result result =
        einc_cli({"run", "rearrange", "a b -> b a", dir / "x.npy", "-o", dir / "y.npy", "--backend", "cuda"});
    CHECK(result.status == cli::exit_error);
    CHECK(result.err.find(gpu_backend()
                              ? "--backend cuda: this machine has no usable NVIDIA GPU and driver"
                              : "--backend cuda needs einc's GPU backend, which this build does not have") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(dir / "y.npy"));
    CHECK(einc_cli({"run", "rearrange", "a b -> b a", dir / "x.npy", "-o", dir / "y.npy", "--backend", "tpu"})
              .status == cli::exit_usage);
}

TEST_CASE("run: parse_shape prints the axis sizes and writes nothing; pack prints what unpack needs") {
    TempDir dir;
    write_npy(dir / "x.npy", reference::make_tensor(DType::f32, {2, 3, 4}, counting(24)).view());
    Result result = einc_cli({"run", "parse_shape", "a _ c", dir / "x.npy"});
    CHECK(result.status == cli::exit_ok);
    CHECK(result.out == "a=2 c=4\n");
    result = einc_cli({"run", "parse_shape", "_ _ _", dir / "x.npy"});
    CHECK(result.out == "(no named axes)\n");
    result = einc_cli({"run", "parse_shape", "a b c", dir / "x.npy", "-o", dir / "y.npy"});
    CHECK(result.status == cli::exit_usage);
    CHECK(result.err.find("parse_shape prints the axis sizes and writes no file: drop -o") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(dir / "y.npy"));

    // pack, then unpack with the flags it printed: the parts come back.
    write_npy(dir / "v.npy", reference::make_tensor(DType::f32, {2}, counting(2)).view());
    write_npy(dir / "s.npy", reference::make_tensor(DType::f32, {}, {5}).view());
    result = einc_cli({"run", "pack", "a *", dir / "x.npy", dir / "v.npy", "-o", dir / "p.npy"});
    REQUIRE(result.status == cli::exit_ok);
    CHECK(result.out.find("packed shapes: 3x4, scalar (unpack with --packed 3x4 --packed scalar)\n") !=
          std::string::npos);
    result = einc_cli({"run", "unpack", "a *", "--packed", "3x4", "--packed", "scalar", dir / "p.npy", "-o",
                       dir / "u.npy"});
    INFO(result.err);
    REQUIRE(result.status == cli::exit_ok);
    CHECK(reference::values_of(read_npy(dir / "u_0.npy").view()) == counting(24));
    CHECK(reference::values_of(read_npy(dir / "u_1.npy").view()) == counting(2));
    result = einc_cli({"run", "pack", "*", dir / "s.npy", dir / "v.npy", "-o", dir / "q.npy"});
    CHECK(result.out.find("packed shapes: scalar, 2 (unpack with --packed scalar --packed 2)\n") !=
          std::string::npos);
}

// What C++ has and the CLI had not: --alpha/--beta accumulating into the -o file, and a list of inputs
// stacked along a new first axis for rearrange, reduce and repeat (as einops takes a list of tensors).
TEST_CASE("run: --alpha/--beta accumulate into the -o file; several inputs are stacked as a list") {
    TempDir dir;
    const std::vector<double> x_values = counting(6), w_values = counting(12);
    write_npy(dir / "x.npy", reference::make_tensor(DType::f64, {2, 3}, x_values).view());
    write_npy(dir / "w.npy", reference::make_tensor(DType::f64, {3, 4}, w_values).view());
    std::vector<double> y_values(8);
    for (std::size_t i = 0; i < y_values.size(); ++i) y_values[i] = 10.0 * static_cast<double>(i);
    write_npy(dir / "y.npy", reference::make_tensor(DType::f64, {2, 4}, y_values).view());
    Result result = einc_cli({"run", "einsum", "i j, j k -> i k", dir / "x.npy", dir / "w.npy", "-o",
                              dir / "y.npy", "--alpha", "2", "--beta", "0.5"});
    INFO(result.err);
    REQUIRE(result.status == cli::exit_ok);
    const std::vector<double> written = reference::values_of(read_npy(dir / "y.npy").view());
    REQUIRE(written.size() == 8);
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t k = 0; k < 4; ++k) {
            double product = 0;
            for (std::size_t j = 0; j < 3; ++j) product += x_values[i * 3 + j] * w_values[j * 4 + k];
            CHECK(written[i * 4 + k] == 2 * product + 0.5 * y_values[i * 4 + k]);
        }
    // --beta reads the output: it must be there, of the result's shape
    result = einc_cli({"run", "einsum", "i j, j k -> i k", dir / "x.npy", dir / "w.npy", "-o", dir / "x.npy",
                       "--beta", "1"});
    CHECK(result.status == cli::exit_error);
    CHECK(result.err.find("--beta accumulates into " + dir / "x.npy" +
                          ", which is f64 2x3; the result is f64 2x4") != std::string::npos);
    CHECK(einc_cli({"run", "einsum", "i j, j k -> i k", dir / "x.npy", dir / "w.npy", "-o", dir / "z.npy",
                    "--beta", "1"})
              .status == cli::exit_error);  // no such file
    CHECK(einc_cli({"run", "einsum", "i j, j k -> i k", dir / "x.npy", dir / "w.npy", "-o", dir / "z.npy",
                    "--beta", "one"})
              .status == cli::exit_usage);

    // three 2x3 inputs: rearrange sees one 3x2x3 tensor
    write_npy(dir / "a.npy", reference::make_tensor(DType::f64, {2, 3}, counting(6)).view());
    result = einc_cli({"run", "rearrange", "n h w -> h (n w)", dir / "a.npy", dir / "x.npy", dir / "a.npy",
                       "-o", dir / "row.npy"});
    INFO(result.err);
    REQUIRE(result.status == cli::exit_ok);
    const Tensor row = read_npy(dir / "row.npy");
    CHECK(row.shape() == Shape{2, 9});
    const std::vector<double> values = reference::values_of(row.view());
    for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t n = 0; n < 3; ++n)
            for (std::size_t w = 0; w < 3; ++w) CHECK(values[h * 9 + n * 3 + w] == x_values[h * 3 + w]);
    result =
        einc_cli({"run", "reduce", "n h w -> h w", "sum", dir / "a.npy", dir / "w.npy", "-o", dir / "s.npy"});
    CHECK(result.status == cli::exit_error);
    CHECK(result.err.find("reduce stacks its 2 operands along a new first axis, as einops stacks a list, but "
                          "operand 1 is f64 3x4 and operand 0 f64 2x3") != std::string::npos);
}

// Errors in the order a user needs them: no gradient for bool inputs comes first (naming the file), not
// what the output's gradient should be; an einsum typed as numpy subscripts gets the command to paste.
TEST_CASE("run: the errors a numpy user meets first say what was meant") {
    TempDir dir;
    write_npy(dir / "b.npy", reference::make_tensor(DType::boolean, {2, 2}, {1, 0, 1, 1}).view());
    write_npy(dir / "g.npy", reference::make_tensor(DType::f32, {2}, {1, 1}).view());
    Result result = einc_cli({"run", "reduce", "a b -> a", "any", dir / "b.npy", "--backward", dir / "g.npy",
                              "-o", dir / "d.npy"});
    CHECK(result.status == cli::exit_error);
    CHECK(result.err.find("gradients are defined for floating and complex dtypes; the inputs are bool") !=
          std::string::npos);
    CHECK(result.err.find("note: input 0 is " + dir / "b.npy" + " (bool (2,2):(2,1) on cpu)") !=
          std::string::npos);
    CHECK(result.err.find("must be bool") == std::string::npos);

    write_npy(dir / "x.npy", reference::make_tensor(DType::f32, {2, 3}, counting(6)).view());
    write_npy(dir / "w.npy", reference::make_tensor(DType::f32, {3, 4}, counting(12)).view());
    result = einc_cli({"run", "einsum", "ij,jk->ik", dir / "x.npy", dir / "w.npy", "-o", dir / "y.npy"});
    CHECK(result.status == cli::exit_error);
    INFO(result.err);
    CHECK(result.err.find("output axis 'ik' appears in no operand") != std::string::npos);
    CHECK(result.err.find(
              "help: numpy subscripts? one letter an axis, this is `i j, j k -> i k`: einc run einsum "
              "'i j, j k -> i k' " +
              dir / "x.npy" + " " + dir / "w.npy" + " -o " + dir / "y.npy" + " (or add --compact)") !=
          std::string::npos);
    // pasted, it runs
    result =
        einc_cli({"run", "einsum", "i j, j k -> i k", dir / "x.npy", dir / "w.npy", "-o", dir / "y.npy"});
    CHECK(result.status == cli::exit_ok);
}

TEST_CASE("run, explain: --dtype beside a .npy operand of another dtype is an error, not ignored") {
    TempDir dir;
    write_npy(dir / "x.npy", reference::make_tensor(DType::f32, {2, 3}, counting(6)).view());
    for (const std::string command : {"run", "explain"}) {
        CAPTURE(command);
        const auto call = [&](std::vector<std::string> dtype) {
            std::vector<std::string> words{command, "rearrange", "a b -> b a", dir / "x.npy"};
            words.insert(words.end(), dtype.begin(), dtype.end());
            if (command == "run") words.insert(words.end(), {"-o", dir / "y.npy"});
            return einc_cli(words);
        };
        const Result result = call({"--dtype", "f16"});
        CHECK(result.status == cli::exit_usage);
        CHECK(result.err.find("error: --dtype f16 does not apply to " + dir / "x.npy" +
                              ", which holds f32") != std::string::npos);
        CHECK(result.err.find("help: a .npy operand keeps its own dtype") != std::string::npos);
        CHECK(!fs::exists(dir / "y.npy"));
        // the file's own dtype, named or not, is accepted
        CHECK(call({"--dtype", "float32"}).status == cli::exit_ok);
        CHECK(call({}).status == cli::exit_ok);
        fs::remove(dir / "y.npy");
    }
}
