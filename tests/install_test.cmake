# einc as another project uses it: installed into a fresh prefix, found with find_package(einc), its
# einc_add_kernels() compiling the example's kernels ahead of time; the example then runs with EINC_JIT=0.
#   cmake -DBUILD=<einc build dir> -DSOURCE=<einc source dir> -DWORK=<scratch dir> [-DAOT_CACHE_DIR=...]
#         [-Dfmt_DIR=... -Dpegtl_DIR=... -Ddlpack_DIR=...] -P install_test.cmake
# The *_DIR given (where einc's build found its dependencies) are passed on to the consumer; so is
# AOT_CACHE_DIR, the build's cache of modules compiled by `einc aot` (the build compiled the same
# corpus for its own copy of the example, so the consumer's `einc aot` finds every module there).
file(REMOVE_RECURSE "${WORK}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${out}")
  endif()
  message(STATUS "ok: ${ARGN}")
  string(REGEX MATCH "[0-9]+ of [0-9]+ modules from the cache[^\n]*" cache "${out}")
  if(cache)
    message(STATUS "  einc aot: ${cache}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD}" --prefix "${WORK}/prefix")
set(dependencies "")
foreach(package fmt pegtl dlpack)
  if(${package}_DIR)
    list(APPEND dependencies "-D${package}_DIR=${${package}_DIR}")
  endif()
endforeach()
if(AOT_CACHE_DIR)
  list(APPEND dependencies "-DEINC_AOT_CACHE_DIR=${AOT_CACHE_DIR}")
endif()
# (Hopper's kernels alone, as einc's build compiles them: all of them in its cache)
run(${CMAKE_COMMAND} -S "${SOURCE}/examples/aot" -B "${WORK}/build" -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release
  -DVIT_ARCHS=90 -DVIT_PTX=OFF ${dependencies})
run(${CMAKE_COMMAND} --build "${WORK}/build")
run(${CMAKE_COMMAND} -E env EINC_JIT=0 "${WORK}/build/vit_kernels")
