// CUDA libraries opened at run time (dlopen) rather than linked, so that a program built with einc's CUDA
// backend starts where they are not installed, and maps them only when it first needs them.
#pragma once

#include <dlfcn.h>
#include <initializer_list>
#include <string>

namespace einc::cuda {

// A shared library opened once. `handle` is null when no candidate loaded; `tried` names them all.
struct SharedLibrary {
    void* handle = nullptr;
    std::string tried;
};

// Opens the library that the environment variable `override_variable` names, when it is set - that one
// only, never quietly another; otherwise the first of `names` that the dynamic loader finds, or failing
// that, the first of them in `toolkit_directory` (where the toolkit einc was built with keeps it).
SharedLibrary open_library(const char* override_variable, std::initializer_list<const char*> names,
                           const char* toolkit_directory);

// Sets `f` to the function `name` of `library`; false when the library lacks it.
template <typename F>
bool find_function(const SharedLibrary& library, const char* name, F& f) {
    f = reinterpret_cast<F>(dlsym(library.handle, name));
    return f != nullptr;
}

}  // namespace einc::cuda
