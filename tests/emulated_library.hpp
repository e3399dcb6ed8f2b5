// The generated GPU kernels of a set, compiled for the host against the emulator (tests/emulation) into
// one shared library and opened: how every emulation test runs kernels without a GPU.
//
// Compiling is most of those tests' time (over half under the sanitizers), and the Release and the
// sanitized suites compile the same sources, so each library is kept in a cache that every build of the
// machine shares (in the temporary directory, a folder per user), keyed by the whole input: compiler,
// flags, the emulator's headers and the source. The library is the same code either way: the emulator and
// the kernels are never instrumented (each suite compiles them with EINC_EMULATION_COMPILER, -O1).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/kernel_abi.hpp"

namespace einc::testing {

class EmulatedLibrary {
public:
    using Invoke =
        void (*)(void** arguments);  // a kernel's arguments: &params, then a pointer to each buffer

    // `prelude`: code between the emulator's header and the kernels (a tracing layer).
    explicit EmulatedLibrary(const std::vector<KernelSignature>& kernels, std::string_view prelude = "");
    ~EmulatedLibrary();
    EmulatedLibrary(const EmulatedLibrary&) = delete;
    EmulatedLibrary& operator=(const EmulatedLibrary&) = delete;

    // A function of the emulator or the prelude (the test fails if the library lacks it).
    template <typename Function>
    Function function(const char* name) const {
        return reinterpret_cast<Function>(symbol(name));
    }
    // What launches `kernel`.
    Invoke invoker(const KernelSignature& kernel) const;

private:
    void* symbol(const char* name) const;

    void* handle_ = nullptr;
    std::map<std::string, Invoke> invokers_;
};

}  // namespace einc::testing
