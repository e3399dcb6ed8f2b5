# Installs einc as a CMake package: headers, libraries, the `einc` tool and einc_add_kernels(), so that
# another project can write
#
#   find_package(einc REQUIRED)
#   target_link_libraries(app PRIVATE einc::einc)
#   einc_add_kernels(TARGET app CORPUS kernels.txt ARCHS 80 90)
#
# Headers go to <prefix>/include/einc/ (einc.hpp, and grammar/ compiler/ runtime/ cuda/ as in the tree).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EINC_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/einc")
set(einc_exported einc einc_grammar einc_compiler einc_runtime einc_warnings einc_tool)
if(EINC_HAS_CUDA)
  list(APPEND einc_exported einc_cuda)
endif()
if(EINC_HAS_BLAS)
  list(APPEND einc_exported einc_blas)
endif()
set_target_properties(einc_tool PROPERTIES EXPORT_NAME einc_tool)
target_include_directories(einc_grammar PUBLIC
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/einc>)

install(TARGETS ${einc_exported} EXPORT eincTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(folder grammar compiler runtime cuda)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/einc/${folder}
    FILES_MATCHING PATTERN "*.hpp")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/einc/einc.hpp ${PROJECT_BINARY_DIR}/generated/einc_build_info.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/einc)
install(EXPORT eincTargets NAMESPACE einc:: DESTINATION ${EINC_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/eincConfig.cmake.in ${PROJECT_BINARY_DIR}/eincConfig.cmake
  INSTALL_DESTINATION ${EINC_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/eincConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/eincConfig.cmake ${PROJECT_BINARY_DIR}/eincConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/EincAddKernels.cmake DESTINATION ${EINC_INSTALL_CMAKEDIR})
