# `cmake --install` puts the headers and an exported package so that find_package(ctnn) works.
include(CMakePackageConfigHelpers)

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ctnn EXPORT ctnnTargets)
install(EXPORT ctnnTargets NAMESPACE ctnn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctnn)
configure_package_config_file(cmake/ctnnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ctnnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctnn)
# Header-only: any architecture may use it.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ctnnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ctnnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ctnnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctnn)
