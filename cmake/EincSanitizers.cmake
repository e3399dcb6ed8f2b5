# Sanitizer and fuzzing builds (see docs/reliability.md). Both instrument every target of the build,
# einc's libraries and its tests alike, so they are meant for build folders of their own:
#
#   EINC_SANITIZE=address,undefined   AddressSanitizer + UndefinedBehaviorSanitizer (GCC or Clang)
#   EINC_SANITIZE=thread              ThreadSanitizer (GCC or Clang)
#   EINC_FUZZ=ON                      libFuzzer targets in tests/fuzz (Clang only: CMAKE_CXX_COMPILER=clang++);
#                                     usually together with EINC_SANITIZE=address,undefined
#
# Every sanitizer report is fatal (-fno-sanitize-recover), so a test run that triggers one fails.
set(EINC_SANITIZE "" CACHE STRING "Sanitizers to build with, as -fsanitize takes them (e.g. address,undefined or thread); empty: none")
option(EINC_FUZZ "Build the libFuzzer targets (needs Clang)" OFF)

if(EINC_SANITIZE)
  if(EINC_SANITIZE MATCHES "thread" AND EINC_SANITIZE MATCHES "address")
    message(FATAL_ERROR "EINC_SANITIZE: ThreadSanitizer and AddressSanitizer cannot be combined")
  endif()
  add_compile_options(-fsanitize=${EINC_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${EINC_SANITIZE})
  message(STATUS "einc: sanitizers ${EINC_SANITIZE}")
endif()

# The AVX2 kernels are the baseline kernels' source compiled again with -mavx2; instrumented, they
# double the longest compile of the build for no new code, so instrumented builds run the baseline.
if(EINC_SANITIZE OR EINC_FUZZ)
  set(EINC_HAS_AVX2_KERNELS 0)
endif()

if(EINC_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "EINC_FUZZ=ON needs Clang with libFuzzer: -DCMAKE_CXX_COMPILER=clang++ (apt-get install clang libclang-rt-14-dev)")
  endif()
  # Coverage instrumentation everywhere; only the fuzz targets link libFuzzer itself (its main).
  add_compile_options(-fsanitize=fuzzer-no-link)
  add_link_options(-fsanitize=fuzzer-no-link)
  message(STATUS "einc: libFuzzer targets")
endif()
