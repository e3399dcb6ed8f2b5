#include "cuda/nvrtc.hpp"

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <nvrtc.h>

#include "cuda/library.hpp"
#include "einc_toolkit_paths.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::cuda {
namespace {

// The NVRTC entry points einc uses, looked up once.
struct Nvrtc {
    SharedLibrary library;
    decltype(&::nvrtcVersion) version = nullptr;
    decltype(&::nvrtcCreateProgram) create = nullptr;
    decltype(&::nvrtcCompileProgram) compile = nullptr;
    decltype(&::nvrtcGetProgramLogSize) log_size = nullptr;
    decltype(&::nvrtcGetProgramLog) log = nullptr;
    decltype(&::nvrtcGetCUBINSize) cubin_size = nullptr;
    decltype(&::nvrtcGetCUBIN) cubin = nullptr;
    decltype(&::nvrtcGetPTXSize) ptx_size = nullptr;
    decltype(&::nvrtcGetPTX) ptx = nullptr;
    decltype(&::nvrtcDestroyProgram) destroy = nullptr;
    decltype(&::nvrtcGetErrorString) error_string = nullptr;
    bool loaded = false;  // the library and every entry point
};

const Nvrtc& nvrtc() {
    static const Nvrtc loaded = [] {
        Nvrtc n;
        n.library = open_library("EINC_NVRTC", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
                                 toolkit::nvrtc_directory);
        const SharedLibrary& l = n.library;
        n.loaded =
            l.handle && find_function(l, "nvrtcVersion", n.version) &&
            find_function(l, "nvrtcCreateProgram", n.create) &&
            find_function(l, "nvrtcCompileProgram", n.compile) &&
            find_function(l, "nvrtcGetProgramLogSize", n.log_size) &&
            find_function(l, "nvrtcGetProgramLog", n.log) &&
            find_function(l, "nvrtcGetCUBINSize", n.cubin_size) &&
            find_function(l, "nvrtcGetCUBIN", n.cubin) && find_function(l, "nvrtcGetPTXSize", n.ptx_size) &&
            find_function(l, "nvrtcGetPTX", n.ptx) && find_function(l, "nvrtcDestroyProgram", n.destroy) &&
            find_function(l, "nvrtcGetErrorString", n.error_string);
        return n;
    }();
    return loaded;
}

const Nvrtc& require() {
    const Nvrtc& n = nvrtc();
    if (!n.loaded)
        throw Error(ErrorKind::device,
                    "NVRTC is not available: einc cannot compile GPU kernels on this machine")
            .note(fmt::format("tried: {}", n.library.tried))
            .help("install the CUDA toolkit's NVRTC (or set EINC_NVRTC to libnvrtc.so), or build the kernels "
                  "ahead of time with `einc aot`");
    return n;
}

}  // namespace

bool nvrtc_available() {
    return nvrtc().loaded;
}

std::string nvrtc_version() {
    const Nvrtc& n = nvrtc();
    int major = 0, minor = 0;
    if (!n.loaded || n.version(&major, &minor) != NVRTC_SUCCESS) return {};
    return fmt::format("{}.{}", major, minor);
}

std::string cuda_include_directory() {
    std::vector<std::string> candidates;
    for (const char* variable : {"CUDA_HOME", "CUDA_PATH"})
        if (const char* root = std::getenv(variable); root && *root)
            candidates.push_back(std::string(root) + "/include");
    for (const char* dir : toolkit::include_directories) candidates.emplace_back(dir);
    for (const std::string& dir : candidates)
        if (std::filesystem::exists(std::filesystem::path(dir) / "cuda_runtime.h")) return dir;
    return {};
}

std::vector<std::string> compile_options(int arch, bool ptx) {
    std::vector<std::string> options{fmt::format("--gpu-architecture={}_{}", ptx ? "compute" : "sm", arch),
                                     "--std=c++17", "-default-device", "-lineinfo"};
    static const std::string include = cuda_include_directory();
    if (!include.empty()) options.push_back("-I" + include);
    return options;
}

namespace {

// ptx: PTX only (compute_<arch>); otherwise a cubin, and with also_ptx the PTX behind it.
CompiledKernel run_nvrtc(const std::string& source, const std::string& name, int arch, bool ptx,
                         bool also_ptx) {
    const Nvrtc& n = require();
    nvrtcProgram program = nullptr;
    const std::string file = name + ".cu";
    if (const nvrtcResult r = n.create(&program, source.c_str(), file.c_str(), 0, nullptr, nullptr);
        r != NVRTC_SUCCESS)
        throw Error(ErrorKind::device,
                    fmt::format("NVRTC could not create a program for {}: {}", name, n.error_string(r)));
    struct Destroy {
        const Nvrtc& n;
        nvrtcProgram* program;
        ~Destroy() { n.destroy(program); }
    } destroy{n, &program};

    const std::vector<std::string> options = compile_options(arch, ptx);
    std::vector<const char*> pointers;
    for (const std::string& option : options) pointers.push_back(option.c_str());
    const nvrtcResult result = n.compile(program, static_cast<int>(pointers.size()), pointers.data());
    CompiledKernel compiled;
    std::size_t log_size = 0;
    if (n.log_size(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
        compiled.log.resize(log_size);
        n.log(program, compiled.log.data());
        compiled.log.resize(log_size - 1);
    }
    if (result != NVRTC_SUCCESS)
        throw Error(ErrorKind::device, fmt::format("NVRTC failed to compile {} for sm_{}: {}", name, arch,
                                                   n.error_string(result)))
            .note(compiled.log.empty() ? std::string("(no log)") : compiled.log)
            .help("this is an einc bug in a generated kernel: please report it with the log");
    const auto output = [&](bool as_ptx) {
        std::size_t size = 0;
        if ((as_ptx ? n.ptx_size(program, &size) : n.cubin_size(program, &size)) != NVRTC_SUCCESS)
            throw Error(ErrorKind::device,
                        fmt::format("NVRTC produced no {} for {}", as_ptx ? "PTX" : "cubin", name));
        std::vector<std::byte> bytes(size);
        const nvrtcResult got = as_ptx ? n.ptx(program, reinterpret_cast<char*>(bytes.data()))
                                       : n.cubin(program, reinterpret_cast<char*>(bytes.data()));
        if (got != NVRTC_SUCCESS)
            throw Error(ErrorKind::device, fmt::format("NVRTC could not return the binary of {}", name));
        return bytes;
    };
    compiled.binary = output(ptx);
    if (also_ptx) compiled.ptx = output(true);
    return compiled;
}

}  // namespace

CompiledKernel compile(const std::string& source, const std::string& name, int arch, bool ptx) {
    return run_nvrtc(source, name, arch, ptx, false);
}

CompiledKernel compile_with_ptx(const std::string& source, const std::string& name, int arch) {
    return run_nvrtc(source, name, arch, false, true);
}

}  // namespace einc::cuda
