// Runs the test corpus: every `$ einc ...` line in tests/corpus/**/*.txt is an einc command line; the
// lines after it, up to the next `$` line, are what it must print (stdout, then stderr, then
// `[exit N]` when N != 0). Lines starting with `#` are comments.
//
//   corpus_runner <corpus-dir>             check every case, print a diff for each failure
//   corpus_runner <corpus-dir> --update    rewrite the expected blocks with what einc prints now
//
// The commands run in-process through einc::cli::run, so the corpus costs milliseconds.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli.hpp"
#include "tests/environment.hpp"
#include "tests/shell_words.hpp"

namespace fs = std::filesystem;

namespace {

struct Case {
    std::string command;  // after "$ einc "
    std::size_t line = 0;
    std::string expected;
};

struct CorpusFile {
    std::vector<std::string> preamble;  // comments before the first case
    std::vector<Case> cases;
};

CorpusFile read_corpus(const fs::path& path) {
    std::ifstream in(path);
    CorpusFile file;
    std::string line;
    std::size_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        if (line.rfind("$ einc ", 0) == 0) {
            file.cases.push_back(Case{line.substr(7), number, {}});
        } else if (file.cases.empty()) {
            file.preamble.push_back(line);
        } else {
            file.cases.back().expected += line + "\n";
        }
    }
    for (Case& c : file.cases)  // blank lines between cases are for reading, not expected output
        while (c.expected.size() >= 2 && c.expected.ends_with("\n\n")) c.expected.pop_back();
    return file;
}

std::string run_case(const Case& c) {
    const auto args = einc::testing::shell_words(c.command);
    if (!args) throw std::runtime_error("a quote is never closed in: " + c.command);
    std::ostringstream out, err;
    const int status = einc::cli::run(*args, out, err);
    std::string result = out.str() + err.str();
    if (status != 0) result += "[exit " + std::to_string(status) + "]\n";
    return result;
}

void write_corpus(const fs::path& path, const CorpusFile& file, const std::vector<std::string>& outputs) {
    std::ofstream out(path);
    for (const std::string& line : file.preamble) out << line << "\n";
    for (std::size_t i = 0; i < file.cases.size(); ++i) {
        out << "$ einc " << file.cases[i].command << "\n" << outputs[i];
        if (i + 1 < file.cases.size()) out << "\n";
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: corpus_runner <corpus-dir> [--update]\n";
        return 2;
    }
    // CPU schedules depend on the machine: the goldens are for 2 threads and the baseline kernels, wherever
    // they are checked.
    ::setenv("EINC_NUM_THREADS", "2", 1);
    ::setenv("EINC_CPU_ISA", "baseline", 1);
    // Nor a GPU where there is one (explain compares with the machine's own device where none is named),
    // nor may a calibration saved in the developer's home change what the cases print.
    ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
    const einc::testing::IsolatedConfigHome config;
    const fs::path root = argv[1];
    const bool update = argc > 2 && std::string(argv[2]) == "--update";
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(root))
        if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
    std::sort(files.begin(), files.end());

    std::size_t total = 0, failed = 0, accepted = 0, rejected = 0;
    for (const fs::path& path : files) {
        const CorpusFile file = read_corpus(path);
        std::vector<std::string> outputs;
        for (const Case& c : file.cases) {
            outputs.push_back(run_case(c));
            ++total;
            (outputs.back().find("[exit ") == std::string::npos ? accepted : rejected) += 1;
            if (!update && outputs.back() != c.expected) {
                ++failed;
                std::cout << "FAIL " << path.string() << ":" << c.line << ": einc " << c.command
                          << "\n--- expected\n"
                          << c.expected << "--- actual\n"
                          << outputs.back() << "---\n";
            }
        }
        if (update) write_corpus(path, file, outputs);
    }
    std::cout << (update ? "updated " : "checked ") << total << " cases in " << files.size() << " files ("
              << accepted << " accepted, " << rejected << " rejected)";
    if (!update) std::cout << ": " << failed << " failed";
    std::cout << "\n";
    return failed == 0 && total > 0 ? 0 : 1;
}
