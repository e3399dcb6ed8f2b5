// doctest's main, run in a configuration directory of the tests' own (tests/environment.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/environment.hpp"

int main(int argc, char** argv) {
    const einc::testing::IsolatedConfigHome config;
    doctest::Context context(argc, argv);
    return context.run();
}
