// Where compiled kernels come from, fastest first:
//   1. memory: a function already loaded on this device (a hash lookup);
//   2. ahead of time: a cubin (or PTX) embedded by `einc aot` and registered at start-up
//      (runtime/kernel_registry.hpp);
//   3. disk: a cubin compiled earlier, under $EINC_CACHE_DIR (default $XDG_CACHE_HOME/einc/kernels or
//      ~/.cache/einc/kernels), keyed by the source's hash, the program's name, the NVRTC options, the
//      architecture, the NVRTC version and the output kind; written atomically (a temporary file
//      renamed), checked on reading - a corrupt or foreign file is recompiled and replaced, never
//      loaded; at most EINC_CACHE_MAX_FILES files (default 4096), the least recently written removed
//      first; `einc aot` keeps its modules (cubins and PTX) there too;
//   4. NVRTC, unless EINC_JIT=0 (then a miss is an error naming the kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda.h>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/codegen.hpp"
#include "cuda/nvrtc.hpp"

namespace einc::cuda {

// A loaded kernel, ready to launch on the device it was loaded for.
CUfunction kernel_function(const KernelSignature& signature, int device, int arch);

struct KernelCacheStats {
    std::uint64_t memory_hits = 0, ahead_of_time = 0, disk_hits = 0, compiled = 0;
    std::uint64_t disk_rejected = 0;  // corrupt or foreign files, recompiled
    std::uint64_t disk_write_failures = 0;
};
KernelCacheStats kernel_cache_stats();

// The directory of the disk cache (created on first write); empty when none can be determined.
std::filesystem::path kernel_cache_directory();

// The disk cache's file format, exposed for tests: a header (magic, key, payload size and checksum)
// and the payload. read_cache_file() returns nothing unless the file is intact and has this key.
std::vector<std::byte> cache_file_bytes(const std::string& key, std::span<const std::byte> payload);
std::optional<std::vector<std::byte>> read_cache_file(const std::filesystem::path& path,
                                                      const std::string& key);
bool write_cache_file(const std::filesystem::path& path, const std::string& key,
                      std::span<const std::byte> payload);

// An NVRTC compilation through the disk cache under `directory` (no cache when it is empty): a cubin
// for sm_<arch>, and with `with_ptx` its PTX too (compile_with_ptx). Each output is a file of its own,
// keyed by the source's hash and size, the program's name, NVRTC's options and version, and the output
// kind (cache_key); a missing, corrupt or foreign file means compiling again and replacing it. Both the
// JIT path and `einc aot` use it.
struct CachedCompile {
    CompiledKernel compiled;  // binary: the cubin; ptx: when asked for; log: empty when from the cache
    bool from_cache = false;
    bool rejected = false;      // a file was there, but corrupt or foreign
    bool write_failed = false;  // compiled, but could not be stored
};
CachedCompile compile_cached(const std::filesystem::path& directory, const std::string& source,
                             const std::string& name, int arch, bool with_ptx = false);

// The key of compile_cached()'s file for one output ("cubin" or "ptx"), and that file's name.
std::string cache_key(const std::string& source, const std::string& name, int arch, std::string_view output);
std::filesystem::path cache_file_name(const std::string& key, std::string_view output);

// The disk cache is bounded: after each write, the least recently written cubins beyond `max_files`
// (EINC_CACHE_MAX_FILES, default 4096 - some hundred megabytes; .cubin and .ptx files) are removed. Returns
// how many were.
std::size_t trim_cache_directory(const std::filesystem::path& directory, std::size_t max_files);
std::size_t cache_max_files();

}  // namespace einc::cuda
