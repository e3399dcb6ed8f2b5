// The kernel caches, as far as they work without a GPU: the disk cache's file format (a corrupt or
// foreign file is never taken for a kernel), atomic writes, unwritable directories, the directory's
// resolution.
#include <chrono>
#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <unistd.h>

#include "cuda/kernel_cache.hpp"

using namespace einc;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> bytes(std::string_view text) {
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    return {p, p + text.size()};
}

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("einc_cache_test_" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};

void write_raw(const fs::path& path, const std::vector<std::byte>& data) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace

TEST_CASE("kernel cache: a file written is read back with its key, and only with it") {
    TempDir dir;
    const fs::path file = dir.path / "k.cubin";
    const std::vector<std::byte> payload = bytes("\x7f"
                                                 "ELF cubin bytes");
    REQUIRE(cuda::write_cache_file(file, "key-1", payload));
    CHECK(cuda::read_cache_file(file, "key-1") == payload);
    CHECK_FALSE(cuda::read_cache_file(file, "key-2"));  // foreign: another kernel, option set or NVRTC
    for (const auto& entry : fs::directory_iterator(dir.path))
        CHECK(entry.path().extension() == ".cubin");  // no temporaries left
}

TEST_CASE("kernel cache: corrupt, truncated and foreign files are rejected, never loaded") {
    TempDir dir;
    const fs::path file = dir.path / "k.cubin";
    const std::vector<std::byte> good = cuda::cache_file_bytes("key", bytes("payload of the kernel"));
    std::vector<std::byte> flipped = good;
    flipped.back() ^= std::byte{1};
    write_raw(file, flipped);
    CHECK_FALSE(cuda::read_cache_file(file, "key"));  // checksum
    for (std::size_t cut = 0; cut < good.size(); ++cut) {
        write_raw(file,
                  std::vector<std::byte>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)));
        REQUIRE_FALSE(cuda::read_cache_file(file, "key"));
    }
    std::vector<std::byte> longer = good;
    longer.push_back(std::byte{0});
    write_raw(file, longer);
    CHECK_FALSE(cuda::read_cache_file(file, "key"));
    write_raw(file, bytes("not an einc cache file at all"));
    CHECK_FALSE(cuda::read_cache_file(file, "key"));
    CHECK_FALSE(cuda::read_cache_file(dir.path / "missing.cubin", "key"));
}

TEST_CASE("kernel cache: an unwritable directory is a failed write, not a crash") {
    CHECK_FALSE(cuda::write_cache_file("/proc/einc/k.cubin", "key", bytes("x")));
    TempDir dir;
    const fs::path blocked = dir.path / "file-not-dir";
    write_raw(blocked, bytes("x"));
    CHECK_FALSE(cuda::write_cache_file(blocked / "k.cubin", "key", bytes("x")));
}

TEST_CASE("kernel cache: the disk cache keeps the most recently written files, up to its bound") {
    TempDir dir;
    const auto now = fs::file_time_type::clock::now();
    const auto cubin = [&](int i) { return dir.path / fmt::format("k{}.cubin", i); };
    for (int i = 0; i < 6; ++i) {
        const fs::path file = cubin(i);
        REQUIRE(cuda::write_cache_file(file, "key", bytes("x")));
        fs::last_write_time(file, now - std::chrono::hours(6 - i));  // k0 the oldest
    }
    write_raw(dir.path / "k9.cubin.123.tmp", bytes("another writer's temporary"));
    CHECK(cuda::trim_cache_directory(dir.path, 10) == 0);
    CHECK(cuda::trim_cache_directory(dir.path, 4) == 2);
    for (int i = 0; i < 6; ++i) CHECK_MESSAGE(fs::exists(cubin(i)) == (i >= 2), i);
    CHECK(fs::exists(dir.path / "k9.cubin.123.tmp"));
    CHECK(cuda::trim_cache_directory(dir.path / "missing", 1) == 0);
    setenv("EINC_CACHE_MAX_FILES", "7", 1);
    CHECK(cuda::cache_max_files() == 7);
    setenv("EINC_CACHE_MAX_FILES", "lots", 1);
    CHECK(cuda::cache_max_files() == 4096);
    unsetenv("EINC_CACHE_MAX_FILES");
}

TEST_CASE("kernel cache: the directory follows EINC_CACHE_DIR, then XDG_CACHE_HOME, then HOME") {
    const auto save = [](const char* name) {
        const char* v = std::getenv(name);
        return v ? std::optional<std::string>(v) : std::nullopt;
    };
    const auto cache = save("EINC_CACHE_DIR"), xdg = save("XDG_CACHE_HOME"), home = save("HOME");
    setenv("EINC_CACHE_DIR", "/tmp/einc-a", 1);
    CHECK(cuda::kernel_cache_directory() == fs::path("/tmp/einc-a"));
    unsetenv("EINC_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
    CHECK(cuda::kernel_cache_directory() == fs::path("/tmp/xdg/einc/kernels"));
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/someone", 1);
    CHECK(cuda::kernel_cache_directory() == fs::path("/home/someone/.cache/einc/kernels"));
    const auto restore = [](const char* name, const std::optional<std::string>& v) {
        if (v)
            setenv(name, v->c_str(), 1);
        else
            unsetenv(name);
    };
    restore("EINC_CACHE_DIR", cache);
    restore("XDG_CACHE_HOME", xdg);
    restore("HOME", home);
}
