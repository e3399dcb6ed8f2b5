# Finds einc's dependencies, all from Debian packages (see README.md):
#   required: PEGTL 3.2 (tao-pegtl-dev), fmt (libfmt-dev); tests: doctest (doctest-dev)
#   optional: CBLAS (libopenblas-dev) for CPU GEMMs, the CUDA toolkit for the GPU backend
find_package(pegtl 3.2 REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)

# ---- CPU kernels for AVX2 (chosen at run time; see runtime/cpu/isa.hpp) ----
set(EINC_HAS_AVX2_KERNELS 0)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(EINC_HAS_AVX2_KERNELS 1)
endif()

# ---- DLPack (optional: einc::from_dlpack / to_dlpack) ----
find_package(dlpack CONFIG QUIET)
set(EINC_HAS_DLPACK 0)
if(dlpack_FOUND)
  set(EINC_HAS_DLPACK 1)
endif()

# ---- BLAS ----
set(EINC_HAS_BLAS 0)
set(EINC_BLAS_VENDOR "none")
if(NOT EINC_BLAS STREQUAL "OFF")
  find_package(OpenBLAS CONFIG QUIET)
  if(OpenBLAS_FOUND)
    add_library(einc_blas INTERFACE)
    target_include_directories(einc_blas SYSTEM INTERFACE ${OpenBLAS_INCLUDE_DIRS})
    target_link_libraries(einc_blas INTERFACE ${OpenBLAS_LIBRARIES})
    set(EINC_HAS_BLAS 1)
    set(EINC_BLAS_VENDOR "OpenBLAS")
  elseif(EINC_BLAS STREQUAL "ON")
    message(FATAL_ERROR "EINC_BLAS=ON but OpenBLAS was not found (apt-get install libopenblas-dev)")
  endif()
endif()
message(STATUS "einc: BLAS ${EINC_BLAS_VENDOR}")

# ---- CUDA ----
set(EINC_HAS_CUDA 0)
if(NOT EINC_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc AND TARGET CUDA::cublas)
    set(EINC_HAS_CUDA 1)
  elseif(EINC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "EINC_CUDA=ON but the CUDA toolkit (NVRTC, cuBLAS) was not found")
  endif()
endif()
message(STATUS "einc: CUDA ${EINC_HAS_CUDA}")
