// libFuzzer target: any text as an `einc aot` corpus through read_corpus_text (see harness.hpp).
#include "tests/fuzz/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    einc::fuzz::check_corpus_case({data, size});
    return 0;
}
