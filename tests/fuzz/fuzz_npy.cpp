// libFuzzer target: any bytes through read_npy_bytes (see harness.hpp).
#include "tests/fuzz/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    einc::fuzz::check_npy_case({data, size});
    return 0;
}
