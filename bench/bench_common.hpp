// What the CPU and GPU benchmarks share: their command line, the Python baselines' timings, JSON text.
#pragma once

#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <string>

namespace einc::bench {

struct Arguments {
    bool quick = false;  // a quarter of the sizes, fewer repeats
    std::string json_path, markdown_path;
};

// `<program> [--quick] [--json FILE] [--markdown FILE]`; nothing (after printing the usage) otherwise.
inline std::optional<Arguments> parse_arguments(int argc, char** argv, const char* program) {
    Arguments parsed;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--quick") parsed.quick = true;
        else if (arg == "--json" && i + 1 < argc) parsed.json_path = argv[++i];
        else if (arg == "--markdown" && i + 1 < argc) parsed.markdown_path = argv[++i];
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
    const std::string command = fmt::format("python3 {}/{} {} 2>/dev/null", EINC_BENCH_DIR, script, quick ? "--quick" : "");
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

inline std::string json_escaped(const std::string& text) {
    std::string out;
    for (const char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

}  // namespace einc::bench
