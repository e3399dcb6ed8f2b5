// Environment variables the tests set: a configuration directory of their own, so that a calibration
// saved in the developer's home (~/.config/einc) never changes which device model `einc bench` and
// `einc roofline --measure` use; and variables set for one test and restored after it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unistd.h>
#include <utility>

namespace einc::testing {

// Sets `name` to `value` (unsets it for nullopt) until the end of the scope, then restores it.
class ScopedEnvironment {
public:
    ScopedEnvironment(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
        if (const char* old = std::getenv(name_.c_str())) old_ = old;
        if (value)
            ::setenv(name_.c_str(), value->c_str(), 1);
        else
            ::unsetenv(name_.c_str());
    }
    ~ScopedEnvironment() {
        if (old_)
            ::setenv(name_.c_str(), old_->c_str(), 1);
        else
            ::unsetenv(name_.c_str());
    }
    ScopedEnvironment(const ScopedEnvironment&) = delete;
    ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

private:
    std::string name_;
    std::optional<std::string> old_;
};

// A new empty directory under the system's temporary directory, removed with everything in it at the
// end of the scope.
class TemporaryDirectory {
public:
    explicit TemporaryDirectory(const std::string& prefix) {
        std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
        if (::mkdtemp(pattern.data()) == nullptr)
            throw std::runtime_error("cannot make a directory like " + pattern);
        path_ = pattern;
    }
    ~TemporaryDirectory() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TemporaryDirectory(const TemporaryDirectory&) = delete;
    TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// XDG_CONFIG_HOME pointing at an empty temporary directory while it lives: einc finds no calibration.
class IsolatedConfigHome {
public:
    IsolatedConfigHome()
        : directory_("einc-config"), variable_("XDG_CONFIG_HOME", directory_.path().string()) {}
    const std::filesystem::path& path() const { return directory_.path(); }

private:
    TemporaryDirectory directory_;
    ScopedEnvironment variable_;
};

}  // namespace einc::testing
