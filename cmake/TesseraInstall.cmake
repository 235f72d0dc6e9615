# Install rules: the library, the public headers (an explicit list), the CMake
# package (find_package(tessera CONFIG) -> tessera::tessera) and tessera.pc.
set(TSR_PUBLIC_HEADERS
  ${PROJECT_SOURCE_DIR}/include/tessera/tessera.h
  ${PROJECT_SOURCE_DIR}/include/tessera/tessera.hpp
  ${TSR_GENERATED_INCLUDE}/tessera/tsr_version.h
  ${TSR_GENERATED_INCLUDE}/tessera/tsr_config.h)
install(FILES ${TSR_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera)

set(TSR_INSTALL_TARGETS tessera)
if(NOT BUILD_SHARED_LIBS)
  # A static libtessera carries its objects' private dependencies with it.
  list(APPEND TSR_INSTALL_TARGETS tessera_warnings)
endif()
install(TARGETS ${TSR_INSTALL_TARGETS} EXPORT tesseraTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(TSR_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
install(EXPORT tesseraTargets NAMESPACE tessera:: DESTINATION ${TSR_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tesseraConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tesseraConfig.cmake INSTALL_DESTINATION ${TSR_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tesseraConfig.cmake ${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
  DESTINATION ${TSR_CMAKE_DIR})

# pkg-config: Requires.private names the MPI's own .pc where it has one.
if(TSR_MPI_VENDOR STREQUAL "mpich")
  set(TSR_PC_MPI "mpich")
else()
  set(TSR_PC_MPI "ompi-c")
endif()
set(TSR_PC_LIBS_PRIVATE "")
if(TSR_HAVE_HDF5)
  foreach(lib ${HDF5_C_LIBRARIES})
    string(APPEND TSR_PC_LIBS_PRIVATE " ${lib}")
  endforeach()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tessera.pc.in ${PROJECT_BINARY_DIR}/tessera.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
