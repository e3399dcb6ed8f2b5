// libFuzzer target: pattern text, operation, shapes and axis sizes through parse, bind, plan and - for
// small operands - the CPU executor, checked against the reference interpreter (see harness.hpp).
#include "tests/fuzz/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    einc::fuzz::check_pattern_case({data, size});
    return 0;
}
