# Install rules, exported CMake package Tributary::tributary, and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS tributary EXPORT TributaryTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/tributary DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/tributary/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tributary)
install(EXPORT TributaryTargets NAMESPACE Tributary:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tributary)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/TributaryConfig.cmake.in
  "@PACKAGE_INIT@\ninclude(\"\${CMAKE_CURRENT_LIST_DIR}/TributaryTargets.cmake\")\n")
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/TributaryConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/TributaryConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tributary)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/TributaryConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/TributaryConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/TributaryConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tributary)
configure_file(cmake/tributary.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tributary.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tributary.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
