# Install rules, exported CMake package Tributary::tributary, and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS tributary EXPORT TributaryTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})  # where the headers below go, prefix-relative
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
# The .pc finds the prefix from its own location (pkg-config's ${pcfiledir}), so an install with
# `cmake --install --prefix P`, or a moved one, is found where it lies, not where configure said.
set(TRIB_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${TRIB_PC_DIR}")
  set(TRIB_PC_PREFIX ${CMAKE_INSTALL_PREFIX})  # a libdir outside the prefix cannot move with it
else()
  file(RELATIVE_PATH TRIB_PC_UP /prefix/${TRIB_PC_DIR} /prefix)
  string(REGEX REPLACE "/$" "" TRIB_PC_UP "${TRIB_PC_UP}")
  set(TRIB_PC_PREFIX "\${pcfiledir}/${TRIB_PC_UP}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(TRIB_PC_${dir} ${CMAKE_INSTALL_${dir}})
  else()
    set(TRIB_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
configure_file(cmake/tributary.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tributary.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tributary.pc DESTINATION ${TRIB_PC_DIR})
