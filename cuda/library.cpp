#include "cuda/library.hpp"

#include <cstdlib>
#include <vector>

namespace einc::cuda {

SharedLibrary open_library(const char* override_variable, std::initializer_list<const char*> names,
                           const char* toolkit_directory) {
    std::vector<std::string> candidates;
    if (const char* path = std::getenv(override_variable); path && *path) {
        candidates.emplace_back(path);
    } else {
        for (const char* name : names) candidates.emplace_back(name);
        for (const char* name : names) candidates.push_back(std::string(toolkit_directory) + "/" + name);
    }
    SharedLibrary library;
    for (const std::string& candidate : candidates) {
        library.tried += (library.tried.empty() ? "" : ", ") + candidate;
        if ((library.handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    }
    return library;
}

}  // namespace einc::cuda
