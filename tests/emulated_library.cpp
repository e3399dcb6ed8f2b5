#include "tests/emulated_library.hpp"

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "compiler/codegen.hpp"
#include "tests/environment.hpp"

namespace einc::testing {
namespace {

namespace fs = std::filesystem;

// -O0: the emulated kernels run two blocks or a sample of them, so compiling is nearly all their cost;
// the four emulation tests, cold, took 71 s of CPU at -O0 against 115 s at -O1 (g++ 12, 2 cores).
constexpr std::string_view flags = "-std=c++20 -O0 -shared -fPIC -pthread -w";
constexpr std::size_t kept_libraries = 64;

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// What a library is compiled from: the compiler (its path, size and time, so that an upgraded compiler
// misses), the flags, every file of the emulator and the source.
std::string cache_key(const std::string& source) {
    std::error_code error;
    const fs::path compiler = fs::canonical(EINC_EMULATION_COMPILER, error);
    const auto size = fs::file_size(compiler, error);
    const auto time = fs::last_write_time(compiler, error).time_since_epoch().count();
    std::string key = fmt::format("{} {} {}\n{}\n", compiler.string(), size, time, flags);
    std::vector<fs::path> headers;
    for (const fs::directory_entry& entry : fs::directory_iterator(EINC_EMULATION_DIR))
        headers.push_back(entry.path());
    std::sort(headers.begin(), headers.end());
    for (const fs::path& header : headers)
        key += fmt::format("{}\n{}\n", header.filename().string(), read_file(header));
    return key + source;
}

std::string hash_of(std::string_view text) {  // FNV-1a (the key is compared in full on a hit)
    std::uint64_t hash = 0xcbf29ce484222325;
    for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3;
    return fmt::format("{:016x}", hash);
}

// The cache's folder, made if need be; none unless this user alone owns and may write it (its libraries
// are loaded into the test: another user's could run anything).
std::optional<fs::path> cache_directory() {
    const fs::path directory = fs::temp_directory_path() / fmt::format("einc-emulation-{}", ::getuid());
    std::error_code error;
    if (fs::create_directory(directory, error)) fs::permissions(directory, fs::perms::owner_all, error);
    struct stat status {};
    if (::lstat(directory.c_str(), &status) != 0 || !S_ISDIR(status.st_mode) || status.st_uid != ::getuid() ||
        (status.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return std::nullopt;
    return directory;
}

// Copies the cached library of `key` to `library`; false if there is none.
bool from_cache(const std::string& key, const fs::path& library) {
    const std::optional<fs::path> directory = cache_directory();
    if (!directory) return false;
    const fs::path cached = *directory / (hash_of(key) + ".so");
    std::error_code error;
    if (!fs::exists(cached, error) || read_file(fs::path(cached).replace_extension(".key")) != key)
        return false;
    if (!fs::copy_file(cached, library, error)) return false;
    fs::last_write_time(cached, fs::file_time_type::clock::now(), error);  // recently used
    return true;
}

// Keeps `library` under `key`: each file written beside its place and renamed into it, so that another
// test process never reads half of one. Failures are ignored (the cache only saves time).
void store(const std::string& key, const fs::path& library) {
    const std::optional<fs::path> directory = cache_directory();
    if (!directory) return;
    std::error_code error;
    const fs::path cached = *directory / (hash_of(key) + ".so"),
                   key_file = fs::path(cached).replace_extension(".key");
    const std::string partial = fmt::format(".partial.{}", ::getpid());
    std::ofstream(key_file.string() + partial, std::ios::binary) << key;
    fs::rename(key_file.string() + partial, key_file, error);
    if (error) return;
    fs::copy_file(library, cached.string() + partial, fs::copy_options::overwrite_existing, error);
    if (error) return;
    fs::rename(cached.string() + partial, cached, error);
    // At most kept_libraries, the least recently used removed first.
    std::vector<std::pair<fs::file_time_type, fs::path>> libraries;
    for (const fs::directory_entry& entry : fs::directory_iterator(*directory, error))
        if (entry.path().extension() == ".so")
            libraries.emplace_back(entry.last_write_time(error), entry.path());
    if (libraries.size() <= kept_libraries) return;
    std::sort(libraries.begin(), libraries.end());
    for (std::size_t i = 0; i + kept_libraries < libraries.size(); ++i) {
        fs::remove(libraries[i].second, error);
        fs::remove(fs::path(libraries[i].second).replace_extension(".key"), error);
    }
}

}  // namespace

EmulatedLibrary::EmulatedLibrary(const std::vector<KernelSignature>& kernels, std::string_view prelude) {
    std::string source = "#include \"einc_emulation.hpp\"\n" + std::string(prelude);
    for (const KernelSignature& k : kernels) {
        source += kernel_source(k);
        const std::vector<std::string> types = kernel_pointer_types(k);
        std::string call = fmt::format("{}(*static_cast<einc_params*>(a[0])", k.name());
        for (std::size_t i = 0; i < types.size(); ++i)
            call += fmt::format(", *static_cast<{}*>(a[{}])", types[i], i + 1);
        source += fmt::format("extern \"C\" void invoke_{}(void** a) {{ {}); }}\n", k.name(), call);
    }
    // A folder of its own per library (dlopen hands back the library already open under the same path),
    // removed however this ends.
    const TemporaryDirectory dir("einc-emulation");
    const fs::path library = dir.path() / "kernels.so";
    const std::string key = cache_key(source);
    if (from_cache(key, library)) handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
        std::ofstream(dir.path() / "kernels.cpp") << source;
        const std::string command =
            fmt::format("{} {} -I{} {} -o {}", EINC_EMULATION_COMPILER, flags, EINC_EMULATION_DIR,
                        (dir.path() / "kernels.cpp").string(), library.string());
        REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
        handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
        REQUIRE_MESSAGE(handle_ != nullptr, dlerror());
        store(key, library);
    }
    for (const KernelSignature& k : kernels)
        invokers_[k.name()] = function<Invoke>(fmt::format("invoke_{}", k.name()).c_str());
}

EmulatedLibrary::~EmulatedLibrary() {
    if (handle_) dlclose(handle_);
}

void* EmulatedLibrary::symbol(const char* name) const {
    void* const found = dlsym(handle_, name);
    REQUIRE_MESSAGE(found != nullptr, name);
    return found;
}

EmulatedLibrary::Invoke EmulatedLibrary::invoker(const KernelSignature& kernel) const {
    return invokers_.at(kernel.name());
}

}  // namespace einc::testing
