# The public headers: what <einc/einc.hpp>, <einc/cuda/cuda.hpp> and <einc/runtime/kernel_registry.hpp>
# need, and nothing else (no PEGTL, no CUDA header, no kernel internals). Installed as they lie in the
# tree, under <prefix>/include/einc/, they include each other by relative path, so that users include them
# as <einc/...> with only <prefix>/include on their path. The build tree mirrors the installed layout with
# symbolic links in ${PROJECT_BINARY_DIR}/include/einc, for programs built in one tree with einc.
set(EINC_PUBLIC_HEADERS
  grammar/diagnostic.hpp grammar/syntax.hpp
  compiler/bound.hpp compiler/call.hpp compiler/cost.hpp compiler/dtype.hpp compiler/epilogue.hpp compiler/gradient.hpp compiler/kernel_abi.hpp compiler/layout.hpp
  compiler/plan.hpp compiler/reduction.hpp compiler/schedule.hpp compiler/shape.hpp compiler/small_vector.hpp
  runtime/api.hpp runtime/calibration.hpp runtime/dims.hpp runtime/dlpack.hpp runtime/gradient.hpp runtime/kernel_registry.hpp runtime/npy.hpp runtime/plan_cache.hpp
  runtime/program.hpp runtime/tensor.hpp runtime/threads.hpp
  cuda/cuda.hpp)

set(EINC_PUBLIC_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
function(einc_mirror original link)
  get_filename_component(directory "${EINC_PUBLIC_INCLUDE_DIR}/einc/${link}" DIRECTORY)
  file(MAKE_DIRECTORY "${directory}")
  file(CREATE_LINK "${original}" "${EINC_PUBLIC_INCLUDE_DIR}/einc/${link}" SYMBOLIC)
endfunction()
foreach(header IN LISTS EINC_PUBLIC_HEADERS)
  einc_mirror(${PROJECT_SOURCE_DIR}/${header} ${header})
endforeach()
einc_mirror(${PROJECT_SOURCE_DIR}/include/einc/einc.hpp einc.hpp)
einc_mirror(${PROJECT_BINARY_DIR}/generated/einc_build_info.hpp einc_build_info.hpp)
