// EINC_NUM_THREADS, read when the CPU executor first needs its threads: each value is tried in a process of
// its own (the `einc` tool explaining a CPU schedule, which asks for the thread count), since a process
// reads it once.
#include <cstdio>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <string>
#include <sys/wait.h>

namespace {

struct Printed {
    int status = -1;   // the exit status; -1 if it did not exit
    std::string text;  // standard output and error
};

Printed explain_with_threads(const std::string& value) {
    const std::string command = fmt::format("EINC_NUM_THREADS='{}' '{}' explain reduce 'a b -> b' sum "
                                            "4096x4096 --print schedule --backend cpu 2>&1",
                                            value, EINC_TOOL);
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    Printed printed;
    for (int c; (c = std::fgetc(pipe)) != EOF;) printed.text += static_cast<char>(c);
    const int status = ::pclose(pipe);
    if (WIFEXITED(status)) printed.status = WEXITSTATUS(status);
    return printed;
}

}  // namespace

TEST_CASE("EINC_NUM_THREADS: a whole number from 1 to 1024 sets the CPU executor's threads") {
    for (const int threads : {1, 3}) {
        const Printed printed = explain_with_threads(std::to_string(threads));
        CHECK_MESSAGE(printed.status == 0, printed.text);
        CHECK_MESSAGE(printed.text.find(fmt::format("cpu: {} thread{},", threads, threads == 1 ? "" : "s")) !=
                          std::string::npos,
                      printed.text);
    }
    const Printed unset = explain_with_threads("");  // empty: as if unset, one thread per hardware thread
    CHECK_MESSAGE(unset.status == 0, unset.text);
}

TEST_CASE("EINC_NUM_THREADS: anything else is a usage error saying what was given and what is accepted") {
    for (const char* wrong : {"abc", "0", "-2", "1025", "4x", "2.5", "99999999999999999999"}) {
        CAPTURE(wrong);
        const Printed printed = explain_with_threads(wrong);
        CHECK_MESSAGE(printed.status == 2, printed.text);  // the CLI's exit status for a usage error
        CHECK_MESSAGE(printed.text.find(fmt::format(
                          "error: EINC_NUM_THREADS is '{}', not a number of threads from 1 to 1024",
                          wrong)) != std::string::npos,
                      printed.text);
        CHECK_MESSAGE(
            printed.text.find("help: set EINC_NUM_THREADS to a whole number from 1 to 1024, or unset it") !=
                std::string::npos,
            printed.text);
    }
}
