// Whether this test executable is instrumented by a sanitizer (scripts/hardening builds the suite with
// AddressSanitizer + UndefinedBehaviorSanitizer, and the concurrency tests with ThreadSanitizer). There
// the code runs 6-15 times slower than in Release, so the broad randomised tests run a sample of their
// cases (sanitizer_sample): the sanitizers look for memory and threading errors, which a sample of the
// cases reaches as well; the Release suite runs them all.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define EINC_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EINC_TEST_SANITIZED 1
#endif

namespace einc::testing {

#if defined(EINC_TEST_SANITIZED)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif

// One case in sample_every runs: 4 in a sanitized build, all of them otherwise. Tests that count cases
// divide by it.
inline constexpr int sample_every = sanitized ? 4 : 1;

// The first case, then every sample_every-th after it.
template <class Case>
void sanitizer_sample(std::vector<Case>& cases) {
    std::vector<Case> kept;
    for (std::size_t i = 0; i < cases.size(); i += sample_every) kept.push_back(std::move(cases[i]));
    cases = std::move(kept);
}

}  // namespace einc::testing
