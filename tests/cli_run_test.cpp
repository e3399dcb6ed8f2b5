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
