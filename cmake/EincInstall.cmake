# Installs einc as a CMake package: headers, libraries, the `einc` tool and einc_add_kernels(), so that
# another project can write
#
#   find_package(einc REQUIRED)
#   target_link_libraries(app PRIVATE einc::einc)
#   einc_add_kernels(TARGET app CORPUS kernels.txt ARCHS 80 90)
#
# The public headers alone (EincPublicHeaders.cmake) go to <prefix>/include/einc/, as in the tree; users'
# include path is <prefix>/include, so that every einc header is <einc/...>.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EINC_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/einc")
set(einc_exported einc einc_grammar einc_compiler einc_runtime einc_tool)
if(EINC_HAS_CUDA)
  list(APPEND einc_exported einc_cuda)
endif()
set_target_properties(einc_tool PROPERTIES EXPORT_NAME einc_tool)
target_include_directories(einc_grammar PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS ${einc_exported} EXPORT eincTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(header IN LISTS EINC_PUBLIC_HEADERS)
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/einc/${folder})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/einc/einc.hpp ${PROJECT_BINARY_DIR}/generated/einc_build_info.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/einc)
install(EXPORT eincTargets NAMESPACE einc:: DESTINATION ${EINC_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/eincConfig.cmake.in ${PROJECT_BINARY_DIR}/eincConfig.cmake
  INSTALL_DESTINATION ${EINC_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/eincConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/eincConfig.cmake ${PROJECT_BINARY_DIR}/eincConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/EincAddKernels.cmake DESTINATION ${EINC_INSTALL_CMAKEDIR})
