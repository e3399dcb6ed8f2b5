// `einc aot`: compiles the kernels of a corpus of calls ahead of time. Every kernel the corpus's plans may
// launch is compiled with NVRTC to a cubin per architecture (and to PTX for newer GPUs), and embedded in a
// C++ source that registers them with einc when the program starts - so the program runs those calls on
// a GPU with no NVRTC at all.
//
//   einc aot kernels.txt -o build/kernels --arch sm_80,sm_90 [--name NAME] [--no-ptx] [--jobs N] [--list]
//            [--cache-dir DIR | --no-cache]
//
// Each NVRTC run goes through the kernel disk cache (cuda/kernel_cache.hpp: keyed by the module's
// source, name, options, architecture, output kind and NVRTC version; corrupt or foreign files are
// recompiled), so that rebuilding with an unchanged corpus - or the same corpus in another build -
// compiles nothing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <fstream>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>

#include "cli/aot_corpus.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "compiler/codegen.hpp"
#include "einc_build_info.hpp"
#if EINC_HAS_CUDA
#include "cuda/kernel_cache.hpp"
#endif

namespace einc::cli {
namespace {

namespace fs = std::filesystem;

struct AotOptions {
    fs::path corpus;
    fs::path output;
    std::vector<int> archs{80, 90};
    std::string name = "einc_kernels";
    bool ptx = true;
    bool list = false;
    std::optional<fs::path> cache_dir;  // default: the kernel cache's (EINC_CACHE_DIR, ...)
    bool cache = true;
    unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
};

// "sm_80,sm_90", "80,90" or "compute_90" -> {80, 90}.
std::vector<int> parse_archs(const std::string& text) {
    std::vector<int> archs;
    std::stringstream list(text);
    for (std::string item; std::getline(list, item, ',');) {
        std::string digits = item;
        for (const char* prefix : {"sm_", "compute_"})
            if (digits.starts_with(prefix)) digits = digits.substr(std::string_view(prefix).size());
        if (digits.empty() || digits.size() > 3 ||
            digits.find_first_not_of("0123456789") != std::string::npos || std::stoi(digits) < 50)
            throw UsageError(fmt::format("'{}' is not a GPU architecture (write sm_80, sm_90, ...)", item));
        archs.push_back(std::stoi(digits));
    }
    if (archs.empty()) throw UsageError("--arch needs at least one architecture (sm_80,sm_90)");
    std::sort(archs.begin(), archs.end());
    archs.erase(std::unique(archs.begin(), archs.end()), archs.end());
    return archs;
}

AotOptions parse_aot_options(std::span<const std::string> args) {
    AotOptions options;
    bool has_output = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        const auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(fmt::format("option {} needs a value", arg));
            return args[++i];
        };
        if (arg == "-o" || arg == "--output")
            options.output = value(), has_output = true;
        else if (arg == "--arch")
            options.archs = parse_archs(value());
        else if (arg == "--name")
            options.name = value();
        else if (arg == "--no-ptx")
            options.ptx = false;
        else if (arg == "--list")
            options.list = true;
        else if (arg == "--cache-dir")
            options.cache_dir = value();
        else if (arg == "--no-cache")
            options.cache = false;
        else if (arg == "--jobs" || arg == "-j") {
            const std::string& n = value();
            if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos ||
                std::stoi(n) == 0)
                throw UsageError(fmt::format("--jobs takes a number of threads, not '{}'", n));
            options.jobs = static_cast<unsigned>(std::stoi(n));
        } else if (arg.starts_with("-"))
            throw UsageError(fmt::format("unknown option '{}' for aot", arg));
        else if (options.corpus.empty())
            options.corpus = arg;
        else
            throw UsageError(fmt::format("aot takes one corpus file; '{}' is a second", arg));
    }
    if (options.corpus.empty())
        throw UsageError("missing the corpus file: einc aot kernels.txt -o DIR --arch sm_80,sm_90");
    if (!options.cache && options.cache_dir)
        throw UsageError("--no-cache and --cache-dir contradict each other: give one");
    if (!has_output && !options.list)
        throw UsageError("missing -o DIR: where to write the generated source and header");
    const bool identifier =
        !options.name.empty() && !std::isdigit(static_cast<unsigned char>(options.name[0])) &&
        std::all_of(options.name.begin(), options.name.end(),
                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!identifier)
        throw UsageError(fmt::format(
            "--name '{}' must be a C++ identifier (it names the namespace and the files)", options.name));
    return options;
}

// Kernels are compiled a module at a time: one NVRTC run (and one module load) serves many of them.
constexpr std::size_t kernels_per_module = 16;

// One binary to make: a module of kernels for an architecture, as a cubin or as PTX.
struct Binary {
    std::size_t module = 0;
    std::vector<std::string> kernels;
    std::string source;
    int arch = 0;
    bool ptx = false;
    std::vector<std::byte> bytes;
    std::string file_name() const {
        return fmt::format("module{}.{}_{}.{}", module, ptx ? "compute" : "sm", arch, ptx ? "ptx" : "cubin");
    }
};

// Progress on standard error: a bar redrawn in place on a terminal, a line every tenth otherwise.
class Progress {
public:
    Progress(std::ostream& err, std::size_t total, bool terminal)
        : err_(err), total_(total), terminal_(terminal) {}
    void done(const std::string& what, std::size_t count = 1) {
        std::lock_guard lock(mutex_);
        const std::size_t before = done_;
        done_ += count;
        if (terminal_) {
            constexpr std::size_t width = 30;
            const std::size_t filled = done_ * width / total_;
            fmt::print(err_, "\r  [{}{}] {}/{} {:<60.60}", std::string(filled, '='),
                       std::string(width - filled, ' '), done_, total_, what);
            if (done_ == total_) fmt::print(err_, "\r{:<110}\r", "");
            err_.flush();
        } else if (done_ * 10 / total_ != before * 10 / total_ || done_ == total_) {
            fmt::print(err_, "einc aot: {}/{} modules compiled\n", done_, total_);
        }
    }

private:
    std::ostream& err_;
    std::mutex mutex_;
    std::size_t total_, done_ = 0;
    bool terminal_;
};

// One NVRTC run: a module for an architecture, as a cubin and, for the newest with PTX asked for, the PTX
// of the same compile (the PTX a compute_<arch> compile gives, without compiling twice).
struct Compilation {
    std::size_t cubin = 0;           // index into the binaries
    std::optional<std::size_t> ptx;  // also this binary's PTX
};

struct CompileReport {
    std::size_t from_cache = 0;  // binaries
    fs::path cache_dir;          // empty: no cache
};

// Compiles every binary on `jobs` threads, through the disk cache; the first failure is rethrown.
CompileReport compile_all(std::vector<Binary>& binaries, const std::vector<Compilation>& compilations,
                          const AotOptions& options, Progress& progress) {
#if EINC_HAS_CUDA
    CompileReport report;
    if (options.cache) report.cache_dir = options.cache_dir.value_or(cuda::kernel_cache_directory());
    std::atomic<std::size_t> next{0}, from_cache{0};
    std::mutex failure_mutex;
    std::exception_ptr failure;
    const auto work = [&] {
        for (std::size_t i; (i = next++) < compilations.size();) {
            try {
                const Compilation& c = compilations[i];
                Binary& cubin = binaries[c.cubin];
                cuda::CachedCompile compiled = cuda::compile_cached(
                    report.cache_dir, cubin.source, fmt::format("einc_aot_module{}", cubin.module),
                    cubin.arch, c.ptx.has_value());
                cubin.bytes = std::move(compiled.compiled.binary);
                if (c.ptx) binaries[*c.ptx].bytes = std::move(compiled.compiled.ptx);
                const std::size_t made = c.ptx ? 2 : 1;
                if (compiled.from_cache) from_cache += made;
                progress.done(cubin.file_name(), made);
            } catch (...) {
                std::lock_guard lock(failure_mutex);
                if (!failure) failure = std::current_exception();
                next = compilations.size();
            }
        }
    };
    std::vector<std::jthread> threads;
    for (unsigned t = 1; t < std::min<std::size_t>(options.jobs, compilations.size()); ++t)
        threads.emplace_back(work);
    work();
    threads.clear();
    if (failure) std::rethrow_exception(failure);
    report.from_cache = from_cache;
    return report;
#else
    (void)binaries, (void)compilations, (void)options, (void)progress;
    throw Error(ErrorKind::unsupported,
                "einc aot compiles kernels with NVRTC, and this build of einc has no CUDA")
        .help("build einc with the CUDA toolkit (EINC_CUDA=ON); `einc aot --list` shows the kernels without "
              "compiling");
#endif
}

// Bytes as the body of a C++ string literal, in lines: printable characters as themselves, the rest as
// octal escapes (three digits where a digit follows, so that it is not read as part of the escape).
std::string string_literal_lines(std::span<const std::byte> bytes) {
    std::string out = "    \"";
    std::size_t line = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        const bool next_is_digit =
            i + 1 < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[i + 1]));
        std::string piece;
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\' && c != '?')
            piece = static_cast<char>(c);
        else if (c == '\n')
            piece = "\\n";
        else
            piece = next_is_digit ? fmt::format("\\{:03o}", c) : fmt::format("\\{:o}", c);
        out += piece;
        line += piece.size();
        if (line >= 100 && i + 1 < bytes.size()) {
            out += "\"\n    \"";
            line = 0;
        }
    }
    return out + "\"";
}

std::string cpp_string(std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string arch_summary(const AotOptions& o) {
    std::vector<std::string> names;
    for (const int arch : o.archs) names.push_back(fmt::format("sm_{}", arch));
    std::string text = fmt::format("{} (cubins)", fmt::join(names, ", "));
    if (o.ptx) text += fmt::format(" and compute_{} (PTX, for newer GPUs)", o.archs.back());
    return text;
}

void write_file(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw Error(ErrorKind::file, fmt::format("cannot write {}", path.string()));
}

std::string header_text(const AotOptions& o, std::size_t calls, std::size_t kernels, std::size_t binaries) {
    return fmt::format(R"(// Generated by `einc aot {corpus}` (einc {version}): do not edit.
// {kernels} kernels compiled ahead of time for {archs}, for the {calls} calls
// of the corpus. Linking {name}.cpp registers them with einc when the program starts: einc then runs
// those calls on a GPU without compiling anything (and with EINC_JIT=0, a call that needs another kernel
// is an error naming it).
#pragma once

#include <cstddef>

namespace einc_aot::{name} {{

struct Call {{
    const char* location;  // corpus file:line
    const char* text;      // the line
}};

inline constexpr std::size_t call_count = {calls};
inline constexpr std::size_t kernel_count = {kernels};
inline constexpr std::size_t binary_count = {binaries};
inline constexpr int architectures[] = {{{arch_list}}};  // the cubins' sm_<arch>
extern const Call calls[call_count];

// Registers the embedded binaries with einc (done at start-up; calling it again does nothing).
void register_kernels();

}}  // namespace einc_aot::{name}
)",
                       fmt::arg("corpus", o.corpus.filename().string()), fmt::arg("version", EINC_VERSION),
                       fmt::arg("kernels", kernels), fmt::arg("archs", arch_summary(o)),
                       fmt::arg("arch_list", fmt::join(o.archs, ", ")), fmt::arg("calls", calls),
                       fmt::arg("name", o.name), fmt::arg("binaries", binaries));
}

std::string source_text(const AotOptions& o, const Corpus& corpus, const std::vector<Binary>& binaries) {
    std::string text = fmt::format(R"(// Generated by `einc aot {}` (einc {}): do not edit.
#include "{}.hpp"

#include <span>

#include <einc/runtime/kernel_registry.hpp>

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Woverlength-strings"  // the binaries are long string literals
#endif

namespace einc_aot::{} {{
namespace {{

)",
                                   o.corpus.filename().string(), EINC_VERSION, o.name, o.name);
    for (std::size_t m = 0; m < binaries.size(); ++m) {
        if (m > 0 && binaries[m].module == binaries[m - 1].module) continue;
        text += fmt::format("const char* const module{}_kernels[] = {{\n", binaries[m].module);
        for (const std::string& kernel : binaries[m].kernels) text += fmt::format("    \"{}\",\n", kernel);
        text += "};\n\n";
    }
    for (std::size_t i = 0; i < binaries.size(); ++i)
        text += fmt::format("// {}, {} bytes\nalignas(64) const char binary_{}[] =\n{};\n\n",
                            binaries[i].file_name(), binaries[i].bytes.size(), i,
                            string_literal_lines(binaries[i].bytes));
    text += "struct Binary {\n    std::span<const char* const> kernels;\n    int arch;\n    "
            "einc::BinaryFormat format;\n"
            "    const char* data;\n    std::size_t size;\n};\n\nconst Binary binaries[] = {\n";
    for (std::size_t i = 0; i < binaries.size(); ++i)
        text += fmt::format("    {{module{}_kernels, {}, einc::BinaryFormat::{}, binary_{}, {}}},\n",
                            binaries[i].module, binaries[i].arch, binaries[i].ptx ? "ptx" : "cubin", i,
                            binaries[i].bytes.size());
    text += "};\n\n}  // namespace\n\nconst Call calls[call_count] = {\n";
    for (const CorpusEntry& entry : corpus.entries)
        text += fmt::format("    {{{}, {}}},\n", cpp_string(entry.location), cpp_string(entry.text));
    text += fmt::format(R"(}};

void register_kernels() {{
    static const bool registered = [] {{
        for (const Binary& b : binaries)
            for (const char* kernel : b.kernels)
                einc::register_ahead_of_time({{kernel, b.arch, b.format, std::span(reinterpret_cast<const std::byte*>(b.data), b.size)}});
        return true;
    }}();
    (void)registered;
}}

namespace {{
const bool registered_at_start_up = (register_kernels(), true);
}}  // namespace

}}  // namespace einc_aot::{}
)",
                        o.name);
    return text;
}

std::string byte_size(std::size_t bytes) {
    return bytes >= (1u << 20) ? fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1u << 20))
                               : fmt::format("{:.0f} KiB", static_cast<double>(bytes) / 1024);
}

}  // namespace

int aot(std::span<const std::string> args, std::ostream& out, std::ostream& err, bool err_is_terminal) {
    const auto start = std::chrono::steady_clock::now();
    const AotOptions options = parse_aot_options(args);
    const Corpus corpus = read_corpus(options.corpus);
    if (!corpus.errors.empty()) {
        for (const Error& e : corpus.errors) fmt::print(err, "{}", e.what());
        fmt::print(err, "einc aot: {} of {} calls in {} cannot be compiled; nothing was written\n",
                   corpus.errors.size(), corpus.errors.size() + corpus.entries.size(),
                   options.corpus.string());
        return exit_error;
    }
    if (corpus.entries.empty())
        throw Error(ErrorKind::file, fmt::format("{} has no calls", options.corpus.string()))
            .help("write one call per line, as after `einc explain`");
    const std::vector<KernelSignature> kernels = corpus_kernels(corpus);
    if (options.list) {
        for (const CorpusEntry& entry : corpus.entries) {
            fmt::print(out, "{}: {}\n", entry.location, entry.text);
            for (const KernelSignature& k : entry.kernels) fmt::print(out, "  {}\n", k.name());
            if (entry.kernels.empty()) fmt::print(out, "  no kernels: cuBLAS calls and views only\n");
        }
        fmt::print(out, "{}, {} distinct kernel{}\n",
                   counted(static_cast<std::int64_t>(corpus.entries.size()), "call"), kernels.size(),
                   kernels.size() == 1 ? "" : "s");
        return exit_ok;
    }

    std::vector<Binary> binaries;
    std::vector<Compilation> compilations;
    for (std::size_t first = 0, module = 0; first < kernels.size(); first += kernels_per_module, ++module) {
        Binary b{module, {}, {}, 0, false, {}};
        for (std::size_t k = first; k < std::min(first + kernels_per_module, kernels.size()); ++k) {
            b.kernels.push_back(kernels[k].name());
            b.source += kernel_source(kernels[k]);  // the shared prelude is include-guarded
        }
        for (const int arch : options.archs) {
            b.arch = arch;
            compilations.push_back({binaries.size(), std::nullopt});
            binaries.push_back(b);
        }
        if (options.ptx) {
            b.arch = options.archs.back(), b.ptx = true;
            compilations.back().ptx = binaries.size();
            binaries.push_back(b);
        }
    }
    fmt::print(err, "einc aot: {} of {} need {}: compiling {} of up to {} kernels for {} on {}\n",
               counted(static_cast<std::int64_t>(corpus.entries.size()), "call"), options.corpus.string(),
               counted(static_cast<std::int64_t>(kernels.size()), "kernel"),
               counted(static_cast<std::int64_t>(binaries.size()), "module"), kernels_per_module,
               arch_summary(options),
               counted(static_cast<std::int64_t>(std::min<std::size_t>(options.jobs, compilations.size())),
                       "thread"));
    Progress progress(err, binaries.size(), err_is_terminal);
    const CompileReport report = compile_all(binaries, compilations, options, progress);

    // The binaries as files too, for inspection (cuobjdump, nvdisasm), then the source and header.
    const fs::path binary_dir = options.output / (options.name + "_binaries");
    std::error_code error;
    fs::create_directories(binary_dir, error);
    if (error)
        throw Error(ErrorKind::file,
                    fmt::format("cannot create {}: {}", binary_dir.string(), error.message()));
    std::size_t total_bytes = 0;
    for (const Binary& b : binaries) {
        write_file(binary_dir / b.file_name(),
                   std::string(reinterpret_cast<const char*>(b.bytes.data()), b.bytes.size()));
        total_bytes += b.bytes.size();
    }
    write_file(options.output / (options.name + ".hpp"),
               header_text(options, corpus.entries.size(), kernels.size(), binaries.size()));
    write_file(options.output / (options.name + ".cpp"), source_text(options, corpus, binaries));

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(out, "einc aot: {} -> {} -> {} for {}: {} ({} a kernel per architecture), in {:.1f} s\n",
               counted(static_cast<std::int64_t>(corpus.entries.size()), "call"),
               counted(static_cast<std::int64_t>(kernels.size()), "kernel"),
               counted(static_cast<std::int64_t>(binaries.size()), "module"), arch_summary(options),
               byte_size(total_bytes),
               byte_size(total_bytes / kernels.size() / (options.archs.size() + (options.ptx ? 1 : 0))),
               seconds);
    fmt::print(out, "  wrote {} and {} (and the binaries under {})\n",
               (options.output / (options.name + ".hpp")).string(),
               (options.output / (options.name + ".cpp")).string(), binary_dir.string());
    if (report.cache_dir.empty())
        fmt::print(out, "  no disk cache: every module compiled\n");
    else
        fmt::print(out, "  {} of {} from the cache in {}\n", report.from_cache,
                   counted(static_cast<std::int64_t>(binaries.size()), "module"), report.cache_dir.string());
    return exit_ok;
}

}  // namespace einc::cli
