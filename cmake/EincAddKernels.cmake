# einc_add_kernels: compiles the kernels a program's einc calls need ahead of time, into the program.
#
#   einc_add_kernels(TARGET app CORPUS kernels.txt ARCHS 80 90 [NAME app_kernels] [NO_PTX] [CACHE_DIR dir])
#
# Runs `einc aot` on CORPUS at build time (again whenever the corpus changes): every kernel those calls
# may launch is compiled with NVRTC to a cubin for each of ARCHS (and to PTX for the newest, so newer GPUs
# run them too, unless NO_PTX), and embedded in a generated C++ source that is added to TARGET. The
# program then registers them when it starts and runs those calls on a GPU with no NVRTC at all (set
# EINC_JIT=0 to make any other kernel an error). The generated header, NAME.hpp, lists the calls.
# Building needs the CUDA toolkit's NVRTC (einc aot runs it); running the program does not.
# Each module compiled is kept in einc's kernel disk cache, so an unchanged module is never compiled
# twice: in CACHE_DIR, else in ${EINC_AOT_CACHE_DIR} where that is set, else where einc caches its JIT
# kernels (EINC_CACHE_DIR, default ~/.cache/einc/kernels).
function(einc_add_kernels)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "NO_PTX" "TARGET;CORPUS;NAME;CACHE_DIR" "ARCHS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "einc_add_kernels: unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_TARGET OR NOT TARGET ${ARG_TARGET})
    message(FATAL_ERROR "einc_add_kernels: TARGET must name a target (got '${ARG_TARGET}')")
  endif()
  if(NOT ARG_CORPUS)
    message(FATAL_ERROR "einc_add_kernels: CORPUS names the file of calls (one per line, as after `einc explain`)")
  endif()
  if(NOT ARG_ARCHS)
    set(ARG_ARCHS 80 90)
  endif()
  if(NOT ARG_NAME)
    string(MAKE_C_IDENTIFIER "${ARG_TARGET}_kernels" ARG_NAME)
  endif()
  if(NOT TARGET einc::einc_tool)
    message(FATAL_ERROR "einc_add_kernels: the einc command-line tool (einc::einc_tool) is not available")
  endif()

  get_filename_component(corpus "${ARG_CORPUS}" ABSOLUTE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/einc_aot/${ARG_NAME}")
  list(TRANSFORM ARG_ARCHS PREPEND "sm_" OUTPUT_VARIABLE archs)
  list(JOIN archs "," archs)
  set(ptx_flag "")
  if(ARG_NO_PTX)
    set(ptx_flag "--no-ptx")
  endif()
  if(NOT ARG_CACHE_DIR AND EINC_AOT_CACHE_DIR)
    set(ARG_CACHE_DIR "${EINC_AOT_CACHE_DIR}")
  endif()
  set(cache_flag "")
  if(ARG_CACHE_DIR)
    set(cache_flag --cache-dir "${ARG_CACHE_DIR}")
  endif()
  add_custom_command(
    OUTPUT "${dir}/${ARG_NAME}.cpp" "${dir}/${ARG_NAME}.hpp"
    COMMAND einc::einc_tool aot "${corpus}" -o "${dir}" --name "${ARG_NAME}" --arch "${archs}" ${ptx_flag} ${cache_flag}
    DEPENDS "${corpus}" einc::einc_tool
    COMMENT "einc aot: compiling the kernels of ${ARG_CORPUS} for ${archs}"
    VERBATIM)
  target_sources(${ARG_TARGET} PRIVATE "${dir}/${ARG_NAME}.cpp")
  target_include_directories(${ARG_TARGET} PRIVATE "${dir}")
  target_link_libraries(${ARG_TARGET} PRIVATE einc::einc)
endfunction()
