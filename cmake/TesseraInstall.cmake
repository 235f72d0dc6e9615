# Install rules: the library, the public headers (an explicit list), the CMake
# package (find_package(tessera CONFIG) -> tessera::tessera) and tessera.pc.
# Included once from the top-level CMakeLists.txt, after every target exists.
# tests/install checks all of it from the installed tree, shared and static.
set(TSR_PUBLIC_HEADERS
  ${PROJECT_SOURCE_DIR}/include/tessera/tessera.h
  ${PROJECT_SOURCE_DIR}/include/tessera/tessera.hpp
  ${PROJECT_SOURCE_DIR}/include/tessera/optimizer.h
  ${PROJECT_SOURCE_DIR}/include/tessera/optimizer.hpp
  ${PROJECT_SOURCE_DIR}/include/tessera/attention.h
  ${PROJECT_SOURCE_DIR}/include/tessera/attention.hpp
  ${PROJECT_SOURCE_DIR}/include/tessera/gemm.h
  ${PROJECT_SOURCE_DIR}/include/tessera/gemm.hpp
  ${PROJECT_SOURCE_DIR}/include/tessera/energy.h
  ${PROJECT_SOURCE_DIR}/include/tessera/energy.hpp
  ${PROJECT_SOURCE_DIR}/include/tessera/io.h
  ${PROJECT_SOURCE_DIR}/include/tessera/io.hpp
  ${PROJECT_SOURCE_DIR}/include/tessera/device.h
  ${PROJECT_SOURCE_DIR}/include/tessera/device.hpp
  ${TSR_GENERATED_INCLUDE}/tessera/tsr_version.h
  ${TSR_GENERATED_INCLUDE}/tessera/tsr_config.h)
install(FILES ${TSR_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera)

# ------------------------------------------------------------- the library ---
set(TSR_INSTALL_TARGETS tessera)
get_target_property(_tsr_link_libs tessera LINK_LIBRARIES)
if(NOT _tsr_link_libs)
  set(_tsr_link_libs "")
endif()
if(NOT BUILD_SHARED_LIBS AND "tessera_warnings" IN_LIST _tsr_link_libs)
  # A static library exports its private link dependencies ($<LINK_ONLY:...>),
  # so a target it links directly must be in the export set too.
  list(APPEND TSR_INSTALL_TARGETS tessera_warnings)
endif()
# The PMPI tool (always a shared library: LD_PRELOAD it or link it before
# the MPI library), as tessera::pmpi; and the shipped energy profile.
list(APPEND TSR_INSTALL_TARGETS tessera_pmpi)
install(FILES ${PROJECT_SOURCE_DIR}/lib/energy/profiles/default-2025.json
  DESTINATION ${CMAKE_INSTALL_DATADIR}/tessera/profiles)
install(TARGETS ${TSR_INSTALL_TARGETS} EXPORT tesseraTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Libraries a static libtessera.a needs besides MPI and the C++ runtime: the
# ones libtessera links only inside the build tree ($<BUILD_INTERFACE:...>, so
# they are not exported), as absolute paths. A shared libtessera records them
# itself (DT_NEEDED).
set(TSR_STATIC_EXTRA_LIBS "")
if(TSR_HAVE_HDF5)
  list(APPEND TSR_STATIC_EXTRA_LIBS ${HDF5_C_LIBRARIES})
endif()
if(TSR_HAVE_OPENMP)
  list(APPEND TSR_STATIC_EXTRA_LIBS ${OpenMP_CXX_LIBRARIES})
endif()
if(TSR_HAVE_NCCL)  # the device transport (lib/device_transport.cpp)
  list(APPEND TSR_STATIC_EXTRA_LIBS ${TSR_NCCL_LIBRARY})
endif()
if(TSR_HAVE_CUDA)  # the CUDA runtime (shared libcudart: its own dependencies come with it)
  list(APPEND TSR_STATIC_EXTRA_LIBS ${CUDA_cudart_LIBRARY})
endif()
string(JOIN ";" _tsr_link_str ${_tsr_link_libs})
if(_tsr_link_str MATCHES "tessera_cblas|BLAS::BLAS")
  list(APPEND TSR_STATIC_EXTRA_LIBS ${BLAS_LIBRARIES})
endif()
# A static HDF5 or BLAS found in the build (e.g. libdl.a from h5pcc) is fine to
# list: the consumer's linker resolves it like any archive.

# ----------------------------------------------------------- CMake package ---
set(TSR_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
install(EXPORT tesseraTargets NAMESPACE tessera:: DESTINATION ${TSR_CMAKE_DIR})
if(BUILD_SHARED_LIBS)
  set(TSR_CONFIG_SHARED 1)
else()
  set(TSR_CONFIG_SHARED 0)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tesseraConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tesseraConfig.cmake INSTALL_DESTINATION ${TSR_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tesseraConfig.cmake ${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
  DESTINATION ${TSR_CMAKE_DIR})

# -------------------------------------------------------------- pkg-config ---
# Requires.private names the MPI's own .pc where the build machine has one
# (Open MPI: ompi-c, MPICH: mpich); consumers compile with the MPI compiler
# wrapper either way. Libs.private lists what a static link needs
# (pkg-config --static): the C++ runtime (libtessera is C++ inside) and the
# libraries above.
set(TSR_PC_MPI "")
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  if(TSR_MPI_VENDOR STREQUAL "mpich")
    set(_tsr_pc_mpi_name mpich)
  elseif(TSR_MPI_VENDOR STREQUAL "openmpi")
    set(_tsr_pc_mpi_name ompi-c)
  else()
    set(_tsr_pc_mpi_name "")
  endif()
  if(_tsr_pc_mpi_name)
    pkg_check_modules(_TSR_PC_MPI QUIET ${_tsr_pc_mpi_name})
    if(_TSR_PC_MPI_FOUND)
      set(TSR_PC_MPI "Requires.private: ${_tsr_pc_mpi_name}")
    endif()
  endif()
endif()
set(TSR_PC_LIBS_PRIVATE "-lstdc++")
foreach(lib IN LISTS CMAKE_DL_LIBS)  # dlopen of NVML (energy meters)
  string(APPEND TSR_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
foreach(lib IN LISTS TSR_STATIC_EXTRA_LIBS)
  string(APPEND TSR_PC_LIBS_PRIVATE " ${lib}")
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TSR_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(TSR_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TSR_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(TSR_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# The prefix is written at install time, so that `cmake --install --prefix P`
# produces a tessera.pc for P: @TSR_PC_PREFIX@ survives this configure step
# and install(CODE) substitutes it.
set(TSR_PC_PREFIX "@TSR_PC_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/cmake/tessera.pc.in ${PROJECT_BINARY_DIR}/tessera.pc.in @ONLY)
install(CODE "
  set(TSR_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/tessera.pc.in\" \"${PROJECT_BINARY_DIR}/pkgconfig/tessera.pc\" @ONLY)
")
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
