#include "cli/cli.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <iostream>
#include <ostream>
#include <unistd.h>

#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/cpu/isa.hpp"

namespace einc::cli {
namespace {

constexpr const char* help_text = R"(einc - a compiler for tensor index notation (einops patterns and einsum)

usage: einc <command> [options]

commands:
  explain <op> <pattern> [<reduction>] [-a name=size]... <operand>...
        print the syntax tree, the bound expression and the plan of a call, with its cost
  run <op> <pattern> [<reduction>] [-a name=size]... <input.npy>... -o <output.npy>
        execute a call on .npy files and write the result(s)
  emit <op> <pattern> [<reduction>] [-a name=size]... <operand>... [--ptx] [--arch N]
        print the CUDA kernels the call's plan launches on a GPU (their source, or NVRTC's PTX)
  bench <op> <pattern> ... <operand>... [--repeat N] [--warmup N] [--backend cpu|cuda] [--json]
        time a call on random operands (or .npy data): median time, achieved FLOP/s and bandwidth,
        MFU and the fraction of memory bandwidth, against the --device model (on the CPU: local
        where this machine is calibrated, else cpu)
  roofline <call>... [--calls FILE] [--device NAME] [--measure | --timings FILE] [-o chart.svg]
        draw the roofline chart of some calls as SVG: one point per plan step where the cost model
        puts it, an achieved point beside it when timed; each <call> is one quoted argument
        ('einsum "i, i ->" 1000 1000'), or give one call unquoted
  calibrate [--quick] [--seconds N]
        measure this machine (memory bandwidth, f32/f64 GEMM peaks, threads, caches; about 10 s)
        and save it as the `local` device model, in $XDG_CONFIG_HOME/einc/ (or ~/.config/einc/)
  aot <corpus.txt> -o <dir> [--arch sm_80,sm_90] [--name NAME] [--no-ptx] [--jobs N] [--list]
        compile the kernels of a corpus of calls (one per line, as after `explain`; `?` for any size,
        --dtype a,b for several) ahead of time into a C++ source and header that embed them
  help  print this text

operations (as in einops):
  rearrange <pattern>              b (h w) c -> b h w c
  reduce <pattern> <reduction>     b c (h 2) (w 2) -> b c h w  mean   (sum mean max min prod any all)
  repeat <pattern>                 h w -> h w c  -a c=3
  einsum <pattern>                 b i d, b j d -> b i j   (any number of operands)
  pack <pattern>                   b * c   (one operand per tensor)
  unpack <pattern> --packed SHAPE...   b * c
  parse_shape <pattern>            b _ h w

operands:
  x.npy               a NumPy file (explain reads its dtype and shape; run its data)
  2x3x224x224         a tensor of that shape, row-major
  scalar              a 0-dim tensor
  (4,8):(1,4)         a layout: shape (4,8) with strides (1,4) in elements

options:
  -a, --axis NAME=SIZE   the size of an axis (repeatable)
  --dtype DTYPE          element type of the operands (default f32)
  --compact              read einsum's pattern as numpy/torch subscripts (`bid,bjd->bij`)
  --packed SHAPE         unpack: the shape of one packed part (repeatable; one length may be -1)
  --device NAME          cost model device: h100 (default; bench on cpu and roofline --measure: local
                         where calibrated, else cpu), h200, a100, cpu (einc's development machine),
                         local (this machine, as `einc calibrate` measured it)
  --view                 require every result to be a view of an input (zero-copy), or fail saying why
  --contiguous           never a view: materialise every result (bench then times the copy)
  --alpha X, --beta Y    store results as X * result + Y * out (run: out is read from -o and written back)
  --max-intermediate BYTES
                         einsum of 3+ operands: the cheapest contraction order whose intermediates
                         each fit in BYTES, or an error naming the smallest peak any order has
  --backward [G.npy]     the call's gradients: run writes the gradient of every input given the output's
                         (G.npy; once per output), explain prints the backward plans and the training
                         step's totals, bench times the backward, roofline draws its plans
  --json                 explain: print the plan and its costs as JSON; bench: one JSON object a line
  -o, --output FILE      run: where to write the result (unpack: once per part, or once: FILE_0.npy ...);
                         roofline: the SVG file (default: the SVG on standard output)
  --backend NAME         run, bench, roofline --measure: cpu (default) or cuda
  --print STAGES         explain: print only these of syntax,bound,plan
  --ptx                  emit: NVRTC's PTX instead of the CUDA source
  --arch N               emit --ptx: the GPU architecture (default 90, for sm_90)
  --repeat N             bench, roofline --measure: timed runs, the median is reported (default 10)
  --warmup N             bench, roofline --measure: untimed runs first (default 1)
  --calls FILE           roofline: calls, one per line as typed after `einc explain` (# comments)
  --measure              roofline: time each call on --backend and draw the achieved points
  --timings FILE         roofline: achieved points from `einc bench --json` output (one object a line)
  --quick                calibrate: small buffers and GEMMs, rough numbers in under a second
  --seconds N            calibrate: about how long to measure (default 10)
  -h, --help             this text
  --version              version and the features of this build

exit status: 0 success, 1 an error in the pattern or operands, 2 a usage error, 3 an einc bug
)";

std::string version_text() {
    return fmt::format("einc {}\nfeatures: CUDA {}, BLAS {}, DLPack {}, CPU kernels {}\n", EINC_VERSION,
                       EINC_HAS_CUDA ? "yes" : "no", EINC_HAS_BLAS ? "yes (" EINC_BLAS_VENDOR ")" : "no",
                       EINC_HAS_DLPACK ? "yes" : "no", cpu::kernel_isa());
}

// An argument as a shell reads it back: quoted where it has spaces or characters the shell would take.
std::string quoted(const std::string& arg) {
    if (!arg.empty() && arg.find_first_of(" \t'\"\\$`!*?<>|&;()[]{}~#") == std::string::npos) return arg;
    if (arg.find('\'') == std::string::npos) return "'" + arg + "'";
    std::string text = "\"";
    for (const char c : arg) {
        if (c == '"' || c == '\\' || c == '$' || c == '`') text += '\\';
        text += c;
    }
    return text + "\"";
}

// An einsum error whose pattern reads as numpy subscripts (Error::subscripts): the help is
// this command line with the pattern spelt out, ready to paste, or --compact.
std::string with_command_line(const Error& error, std::span<const std::string> args) {
    Diagnostic diagnostic = error.diagnostic();
    const Error::Subscripts& subscripts = error.subscripts();
    std::vector<std::string> line{"einc"};
    bool replaced = false;
    for (const std::string& arg : args) {
        const bool pattern = !replaced && arg == subscripts.written;
        line.push_back(quoted(pattern ? subscripts.reading : arg));
        replaced |= pattern;
    }
    diagnostic.help = fmt::format("numpy subscripts? one letter an axis, this is `{}`: {} (or add --compact)",
                                  subscripts.reading, fmt::join(line, " "));
    return render(diagnostic);
}

}  // namespace

int run(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
    try {
        if (args.empty()) {
            fmt::print(err, "{}", help_text);
            return exit_usage;
        }
        const std::string& command = args[0];
        const std::span<const std::string> rest = args.subspan(1);
        if (command == "-h" || command == "--help" || command == "help") {
            fmt::print(out, "{}", help_text);
            return exit_ok;
        }
        if (command == "--version" || command == "version") {
            fmt::print(out, "{}", version_text());
            return exit_ok;
        }
        for (const std::string& arg : rest)
            if (arg == "-h" || arg == "--help") {
                fmt::print(out, "{}", help_text);
                return exit_ok;
            }
        if (command == "explain") return explain(parse_call_args(rest), out, err);
        if (command == "run") return run_call(parse_call_args(rest), out);
        if (command == "emit") return emit(parse_call_args(rest), out);
        if (command == "bench") return bench(rest, out, err);
        if (command == "roofline") return roofline(rest, out, err);
        if (command == "calibrate") return calibrate(rest, out, err);
        if (command == "aot") return aot(rest, out, err, &err == &std::cerr && ::isatty(STDERR_FILENO));
        throw UsageError(fmt::format("unknown command '{}'", command));
    } catch (const UsageError& e) {
        fmt::print(err, "error: {}\n  (run `einc --help` for usage)\n", e.what());
        return exit_usage;
    } catch (const Error& e) {
        fmt::print(err, "{}", e.subscripts().reading.empty() ? e.what() : with_command_line(e, args));
        return e.kind() == ErrorKind::usage ? exit_usage : exit_error;
    } catch (const InternalError& e) {
        fmt::print(err, "{}\n", e.what());
        return exit_internal;
    } catch (const std::bad_alloc&) {
        fmt::print(err, "error: out of memory\n");
        return exit_error;
    } catch (const std::exception& e) {  // anything else is an einc bug: say so, never end the process
        fmt::print(err, "einc internal error: {} (please report this, with the command line)\n", e.what());
        return exit_internal;
    } catch (...) {
        fmt::print(err,
                   "einc internal error: an unknown exception (please report this, with the command line)\n");
        return exit_internal;
    }
}

}  // namespace einc::cli
