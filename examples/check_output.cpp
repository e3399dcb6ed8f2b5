// The examples' test driver: runs an example and checks that every line of its expected-output file
// appears in what it printed, in order. Lines the file leaves out (timings, which vary) are not checked.
//
//   check_output EXPECTED.txt PROGRAM [ARGS...]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::cerr << "usage: check_output EXPECTED.txt PROGRAM [ARGS...]\n";
        return 2;
    }
    std::string command = argv[2];
    for (int i = 3; i < argc; ++i) command += std::string(" '") + argv[i] + "'";
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) {
        std::cerr << "cannot run " << command << "\n";
        return 1;
    }
    std::vector<std::string> printed;
    std::string line;
    for (int c; (c = std::fgetc(pipe)) != EOF;) {
        if (c != '\n') {
            line += static_cast<char>(c);
            continue;
        }
        printed.push_back(line);
        line.clear();
    }
    if (!line.empty()) printed.push_back(line);
    const int status = pclose(pipe);
    for (const std::string& p : printed) std::cout << p << "\n";
    if (status != 0) {
        std::cerr << "FAIL: " << command << " exited with status " << status << "\n";
        return 1;
    }

    std::ifstream expected_file(argv[1]);
    if (!expected_file) {
        std::cerr << "cannot read " << argv[1] << "\n";
        return 1;
    }
    std::size_t at = 0, checked = 0;
    for (std::string expected; std::getline(expected_file, expected); ++checked) {
        while (at < printed.size() && printed[at] != expected) ++at;
        if (at == printed.size()) {
            std::cerr << "FAIL: " << argv[1] << " line " << checked + 1
                      << " was not printed (in this order):\n  " << expected << "\n";
            return 1;
        }
        ++at;
    }
    std::cout << "ok: all " << checked << " expected lines of " << argv[1] << " were printed, in order\n";
    return 0;
}
