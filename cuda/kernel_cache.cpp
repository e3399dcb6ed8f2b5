#include "cuda/kernel_cache.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <unistd.h>
#include <unordered_map>

#include "cuda/driver.hpp"
#include "cuda/nvrtc.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/kernel_registry.hpp"

namespace einc::cuda {
namespace {

std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t hash = 0xcbf29ce484222325ull) {
    for (const std::byte b : bytes) hash = (hash ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ull;
    return hash;
}

std::uint64_t fnv1a(std::string_view text) {
    return fnv1a(std::as_bytes(std::span(text.data(), text.size())));
}

constexpr char magic[8] = {'E', 'I', 'N', 'C', 'K', 'R', 'N', '1'};

struct Stats {
    std::atomic<std::uint64_t> memory_hits{0}, ahead_of_time{0}, disk_hits{0}, compiled{0}, disk_rejected{0},
        disk_write_failures{0};
} stats;

struct Loaded {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
};

std::mutex mutex;
std::unordered_map<std::string, Loaded> loaded;                  // "<device>|<arch>|<name>"
std::map<std::pair<int, const void*>, CUmodule> shared_modules;  // (device, binary) of ahead-of-time modules

bool jit_enabled() {
    const char* value = std::getenv("EINC_JIT");
    return !(value && std::string_view(value) == "0");
}

// A kernel's binary: a module of its own (compiled now or read from the disk cache), or a module compiled
// ahead of time that holds many kernels and is loaded once per device.
struct KernelBinary {
    std::vector<std::byte> own;
    std::span<const std::byte> shared;  // static data of a generated source
};

// The binary of a kernel for `arch`: ahead of time, from the disk cache, or compiled now.
KernelBinary binary_of(const KernelSignature& signature, int arch) {
    const std::string name = signature.name();
    if (const std::optional<AheadOfTimeKernel> ahead = find_ahead_of_time(name, arch)) {
        ++stats.ahead_of_time;
        return {{}, ahead->binary};
    }
    if (!jit_enabled())
        throw Error(
            ErrorKind::device,
            fmt::format(
                "kernel {} for sm_{} was not compiled ahead of time, and EINC_JIT=0 forbids compiling it now",
                name, arch))
            .help("add the call that needs it to your einc aot corpus, or unset EINC_JIT to compile it at "
                  "run time");
    CachedCompile cached = compile_cached(kernel_cache_directory(), kernel_source(signature), name, arch);
    ++(cached.from_cache ? stats.disk_hits : stats.compiled);
    if (cached.rejected) ++stats.disk_rejected;
    if (cached.write_failed) ++stats.disk_write_failures;
    return {std::move(cached.compiled.binary), {}};
}

}  // namespace

std::string cache_key(const std::string& source, const std::string& name, int arch, std::string_view output) {
    // The name is NVRTC's file name, which -lineinfo writes into the binary.
    return fmt::format("{:016x}:{}|{}|{}|sm_{}|nvrtc {}|{}", fnv1a(source), source.size(), name,
                       fmt::join(compile_options(arch), " "), arch, nvrtc_version(), output);
}

std::filesystem::path cache_file_name(const std::string& key, std::string_view output) {
    return fmt::format("{:016x}.{}", fnv1a(key), output);
}

CachedCompile compile_cached(const std::filesystem::path& directory, const std::string& source,
                             const std::string& name, int arch, bool with_ptx) {
    std::vector<std::string_view> outputs{"cubin"};
    if (with_ptx) outputs.push_back("ptx");
    std::vector<std::string> keys;
    std::vector<std::filesystem::path> files;
    for (const std::string_view output : outputs) {
        keys.push_back(cache_key(source, name, arch, output));
        if (!directory.empty()) files.push_back(directory / cache_file_name(keys.back(), output));
    }
    CachedCompile result;
    if (!files.empty()) {
        std::vector<std::vector<std::byte>> found;
        for (std::size_t i = 0; i < files.size(); ++i) {
            if (!std::filesystem::exists(files[i])) break;
            std::optional<std::vector<std::byte>> payload = read_cache_file(files[i], keys[i]);
            if (!payload) {
                result.rejected = true;
                break;
            }
            found.push_back(std::move(*payload));
        }
        if (found.size() == files.size()) {
            result.compiled.binary = std::move(found[0]);
            if (with_ptx) result.compiled.ptx = std::move(found[1]);
            result.from_cache = true;
            return result;
        }
    }
    result.compiled = with_ptx ? compile_with_ptx(source, name, arch) : compile(source, name, arch);
    if (!files.empty()) {
        bool written = write_cache_file(files[0], keys[0], result.compiled.binary);
        if (with_ptx) written = write_cache_file(files[1], keys[1], result.compiled.ptx) && written;
        if (written)
            trim_cache_directory(directory, cache_max_files());
        else
            result.write_failed = true;
    }
    return result;
}

std::vector<std::byte> cache_file_bytes(const std::string& key, std::span<const std::byte> payload) {
    const auto key_size = static_cast<std::uint32_t>(key.size());
    const auto payload_size = static_cast<std::uint64_t>(payload.size());
    const std::uint64_t checksum = fnv1a(payload);
    std::vector<std::byte> bytes(sizeof magic + sizeof key_size + key.size() + sizeof payload_size +
                                 sizeof checksum + payload.size());
    std::size_t at = 0;
    const auto append = [&](const void* data, std::size_t size) {
        if (size > 0) std::memcpy(bytes.data() + at, data, size);
        at += size;
    };
    append(magic, sizeof magic);
    append(&key_size, sizeof key_size);
    append(key.data(), key.size());
    append(&payload_size, sizeof payload_size);
    append(&checksum, sizeof checksum);
    append(payload.data(), payload.size());
    return bytes;
}

std::optional<std::vector<std::byte>> read_cache_file(const std::filesystem::path& path,
                                                      const std::string& key) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto* first = reinterpret_cast<const std::byte*>(contents.data());
    const std::vector<std::byte> bytes(first, first + contents.size());
    std::size_t at = 0;
    const auto take = [&](void* out, std::size_t size) {
        if (bytes.size() - at < size) return false;
        std::memcpy(out, bytes.data() + at, size);
        at += size;
        return true;
    };
    char file_magic[8];
    std::uint32_t key_size = 0;
    if (!take(file_magic, sizeof file_magic) || std::memcmp(file_magic, magic, sizeof magic) != 0)
        return std::nullopt;
    if (!take(&key_size, sizeof key_size) || key_size != key.size()) return std::nullopt;
    std::string file_key(key_size, '\0');
    if (!take(file_key.data(), key_size) || file_key != key) return std::nullopt;
    std::uint64_t payload_size = 0, checksum = 0;
    if (!take(&payload_size, sizeof payload_size) || !take(&checksum, sizeof checksum)) return std::nullopt;
    if (bytes.size() - at != payload_size) return std::nullopt;
    std::vector<std::byte> payload(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.end());
    if (fnv1a(payload) != checksum) return std::nullopt;
    return payload;
}

bool write_cache_file(const std::filesystem::path& path, const std::string& key,
                      std::span<const std::byte> payload) {
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
    // Written whole to a name of its own, then renamed: readers see the old file or the new one.
    std::random_device random;
    const std::filesystem::path temporary =
        path.string() + fmt::format(".{}.{:08x}.tmp", ::getpid(), random());
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) return false;
        const std::vector<std::byte> bytes = cache_file_bytes(key, payload);
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!out) {
            std::filesystem::remove(temporary, error);
            return false;
        }
    }
    std::filesystem::rename(temporary, path, error);
    if (error) std::filesystem::remove(temporary, error);
    return !error;
}

std::size_t trim_cache_directory(const std::filesystem::path& directory, std::size_t max_files) {
    std::error_code error;
    std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
    for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end;
         it.increment(error)) {
        const std::filesystem::path extension = it->path().extension();
        if (extension != ".cubin" && extension != ".ptx")
            continue;  // temporaries of other writers, anything else
        const auto written = it->last_write_time(error);
        if (!error) files.emplace_back(written, it->path());
        error.clear();
    }
    if (files.size() <= max_files) return 0;
    std::sort(files.begin(), files.end());
    std::size_t removed = 0;
    for (std::size_t i = 0; i < files.size() - max_files; ++i)
        removed += std::filesystem::remove(files[i].second, error);
    return removed;
}

std::size_t cache_max_files() {
    const char* value = std::getenv("EINC_CACHE_MAX_FILES");
    std::size_t parsed = 0;
    if (value && std::from_chars(value, value + std::strlen(value), parsed).ec == std::errc{} && parsed > 0)
        return parsed;
    return 4096;
}

std::filesystem::path kernel_cache_directory() {
    if (const char* dir = std::getenv("EINC_CACHE_DIR"); dir && *dir) return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
        return std::filesystem::path(xdg) / "einc" / "kernels";
    if (const char* home = std::getenv("HOME"); home && *home)
        return std::filesystem::path(home) / ".cache" / "einc" / "kernels";
    return {};
}

CUfunction kernel_function(const KernelSignature& signature, int device, int arch) {
    const std::string name = signature.name();
    const std::string key = fmt::format("{}|{}|{}", device, arch, name);
    {
        std::lock_guard lock(mutex);
        if (const auto it = loaded.find(key); it != loaded.end()) {
            ++stats.memory_hits;
            return it->second.function;
        }
    }
    const KernelBinary binary = binary_of(signature, arch);  // outside the lock: may compile
    std::lock_guard lock(mutex);
    if (const auto it = loaded.find(key); it != loaded.end()) return it->second.function;  // loaded meanwhile
    Loaded entry;
    if (binary.shared.empty()) {
        check(driver().module_load_data(&entry.module, binary.own.data()), "cuModuleLoadData");
    } else {
        CUmodule& module = shared_modules[{device, binary.shared.data()}];
        if (!module)
            check(driver().module_load_data(&module, binary.shared.data()),
                  "cuModuleLoadData (a module compiled ahead of time)");
        entry.module = module;
    }
    check(driver().module_get_function(&entry.function, entry.module, name.c_str()), "cuModuleGetFunction");
    loaded.emplace(key, entry);
    return entry.function;
}

KernelCacheStats kernel_cache_stats() {
    return KernelCacheStats{stats.memory_hits, stats.ahead_of_time, stats.disk_hits,
                            stats.compiled,    stats.disk_rejected, stats.disk_write_failures};
}

}  // namespace einc::cuda
