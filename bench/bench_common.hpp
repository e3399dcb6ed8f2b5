// What the CPU and GPU benchmarks share: their command line, the Python baselines' timings, JSON text.
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace einc::bench {

// The median of some timings (the upper one of an even count).
inline double median(std::vector<double> seconds) {
    std::nth_element(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2),
                     seconds.end());
    return seconds[seconds.size() / 2];
}

// Wall seconds of one call of `work`.
inline double seconds_of(const std::function<void()>& work) {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Arguments {
    bool quick = false;  // a quarter of the sizes, fewer repeats
    std::string json_path, markdown_path;
};

// `<program> [--quick] [--json FILE] [--markdown FILE]`; nothing (after printing the usage) otherwise.
inline std::optional<Arguments> parse_arguments(int argc, char** argv, const char* program) {
    Arguments parsed;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--quick")
            parsed.quick = true;
        else if (arg == "--json" && i + 1 < argc)
            parsed.json_path = argv[++i];
        else if (arg == "--markdown" && i + 1 < argc)
            parsed.markdown_path = argv[++i];
        else {
            fmt::print(stderr, "usage: {} [--quick] [--json FILE] [--markdown FILE]\n", program);
            return std::nullopt;
        }
    }
    return parsed;
}

// Seconds per named case, as a baseline script in bench/ prints them ("<name> <seconds>" lines), from one
// python3 process; empty when Python or the library it times is absent.
inline std::map<std::string, double> python_timings(const std::string& script, bool quick) {
    const std::string command =
        fmt::format("python3 {}/{} {} 2>/dev/null", EINC_BENCH_DIR, script, quick ? "--quick" : "");
    std::map<std::string, double> timings;
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return timings;
    char line[512];
    while (std::fgets(line, sizeof line, pipe)) {
        char name[256];
        double seconds = 0;
        if (std::sscanf(line, "%255s %lf", name, &seconds) == 2) timings[name] = seconds;
    }
    pclose(pipe);
    return timings;
}

// A baseline script in bench/ run as a server (`--serve`): a case's key and a number of runs sent on its
// standard input, the median seconds per call of those runs (after one untimed) read back, so that the
// baseline times each case in the same minute as einc - or, by `run`, a run at a time, in turns with einc's.
// Every time is 0 where Python, the library it times or the case is missing.
class PythonPeer {
public:
    PythonPeer(const std::string& script, bool quick) {
        std::signal(SIGPIPE,
                    SIG_IGN);  // a script that has exited is a write error, not the end of the benchmark
        int to_child[2], from_child[2];
        if (pipe(to_child) != 0) return;
        if (pipe(from_child) != 0) {
            close(to_child[0]);
            close(to_child[1]);
            return;
        }
        const std::string path = fmt::format("{}/{}", EINC_BENCH_DIR, script);
        pid_ = fork();
        if (pid_ == 0) {
            dup2(to_child[0], STDIN_FILENO);
            dup2(from_child[1], STDOUT_FILENO);
            const int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) dup2(devnull, STDERR_FILENO);
            for (const int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
            execlp("python3", "python3", path.c_str(), "--serve", quick ? "--quick" : nullptr, nullptr);
            _exit(127);
        }
        close(to_child[0]);
        close(from_child[1]);
        if (pid_ < 0) {
            close(to_child[1]);
            close(from_child[0]);
            return;
        }
        to_ = fdopen(to_child[1], "w");
        from_ = fdopen(from_child[0], "r");
    }
    ~PythonPeer() {
        if (to_ != nullptr) std::fclose(to_);  // end of input: the script exits
        if (from_ != nullptr) std::fclose(from_);
        if (pid_ > 0) waitpid(pid_, nullptr, 0);
    }
    PythonPeer(const PythonPeer&) = delete;
    PythonPeer& operator=(const PythonPeer&) = delete;

    double seconds(const std::string& key, int runs) {
        if (to_ == nullptr || from_ == nullptr || key.empty()) return 0;
        char line[128];
        if (std::fprintf(to_, "%s %d\n", key.c_str(), runs) < 0 || std::fflush(to_) != 0 ||
            std::fgets(line, sizeof line, from_) == nullptr) {
            std::fclose(to_);  // the script is gone: no more questions
            to_ = nullptr;
            return 0;
        }
        return std::strtod(line, nullptr);
    }
    // One timed run of the case (after an untimed one) per call; nothing where the script is not running.
    // The script keeps a case's operands while the same key is asked for again.
    std::function<double()> run(const std::string& key) {
        if (to_ == nullptr || key.empty()) return {};
        return [this, key] { return seconds(key, 1); };
    }

private:
    pid_t pid_ = -1;
    std::FILE* to_ = nullptr;
    std::FILE* from_ = nullptr;
};

inline std::string json_escaped(const std::string& text) {
    std::string out;
    for (const char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

}  // namespace einc::bench
