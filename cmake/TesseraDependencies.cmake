# Finds tessera's dependencies the standard way and sets TSR_HAVE_* and
# TSR_MPI_VENDOR. Included once from the top-level CMakeLists.txt.

# ---- MPI: FindMPI. Pick the MPI with MPI_C_COMPILER / MPI_CXX_COMPILER /
# MPIEXEC_EXECUTABLE (all three, see README "Choosing Open MPI or MPICH").
find_package(MPI 3.0 REQUIRED COMPONENTS C CXX)
set(TSR_MPI_VENDOR "unknown")
include(CheckSymbolExists)
set(CMAKE_REQUIRED_INCLUDES ${MPI_C_INCLUDE_DIRS})
check_symbol_exists(OPEN_MPI "mpi.h" TSR_MPI_IS_OPENMPI)
check_symbol_exists(MPICH_VERSION "mpi.h" TSR_MPI_IS_MPICH)
unset(CMAKE_REQUIRED_INCLUDES)
if(TSR_MPI_IS_OPENMPI)
  set(TSR_MPI_VENDOR "openmpi")
elseif(TSR_MPI_IS_MPICH)
  set(TSR_MPI_VENDOR "mpich")
endif()

# ---- nlohmann-json (header-only; energy profiles and JSON reports). Used
# privately: installed headers do not include it.
find_package(nlohmann_json 3.2 REQUIRED)

# ---- BLAS through CBLAS (OpenBLAS preferred).
if(NOT DEFINED BLA_VENDOR)
  set(BLA_VENDOR OpenBLAS)
endif()
find_package(BLAS)
if(NOT BLAS_FOUND)
  unset(BLA_VENDOR)
  find_package(BLAS REQUIRED)
endif()
find_path(TSR_CBLAS_INCLUDE_DIR NAMES cblas.h PATH_SUFFIXES openblas)
if(NOT TSR_CBLAS_INCLUDE_DIR)
  message(FATAL_ERROR "cblas.h not found: install a CBLAS (Debian: libopenblas-dev) "
                      "or set TSR_CBLAS_INCLUDE_DIR")
endif()
add_library(tessera_cblas INTERFACE)
target_include_directories(tessera_cblas INTERFACE $<BUILD_INTERFACE:${TSR_CBLAS_INCLUDE_DIR}>)
target_link_libraries(tessera_cblas INTERFACE BLAS::BLAS)

# ---- Parallel HDF5, built for the same MPI.
set(TSR_HAVE_HDF5 0)
if(NOT TSR_WITH_HDF5 STREQUAL "OFF")
  set(HDF5_PREFER_PARALLEL TRUE)
  if(NOT HDF5_C_COMPILER_EXECUTABLE AND TSR_MPI_VENDOR STREQUAL "mpich")
    # Debian installs one h5pcc per MPI; the unsuffixed one follows the
    # alternatives system (usually Open MPI).
    find_program(HDF5_C_COMPILER_EXECUTABLE NAMES h5pcc.mpich)
  elseif(NOT HDF5_C_COMPILER_EXECUTABLE AND TSR_MPI_VENDOR STREQUAL "openmpi")
    find_program(HDF5_C_COMPILER_EXECUTABLE NAMES h5pcc.openmpi h5pcc)
  endif()
  find_package(HDF5 COMPONENTS C)
  set(_tsr_hdf5_ok FALSE)
  if(HDF5_FOUND AND HDF5_IS_PARALLEL)
    set(_tsr_hdf5_ok TRUE)
    # Refuse an HDF5 built for the other MPI (it links and then crashes).
    string(JOIN ";" _tsr_h5paths ${HDF5_C_LIBRARIES} ${HDF5_C_INCLUDE_DIRS})
    if(TSR_MPI_VENDOR STREQUAL "mpich" AND _tsr_h5paths MATCHES "openmpi")
      set(_tsr_hdf5_ok FALSE)
    elseif(TSR_MPI_VENDOR STREQUAL "openmpi" AND _tsr_h5paths MATCHES "mpich")
      set(_tsr_hdf5_ok FALSE)
    endif()
  endif()
  if(_tsr_hdf5_ok)
    set(TSR_HAVE_HDF5 1)
    add_library(tessera_hdf5 INTERFACE)
    target_include_directories(tessera_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS})
    target_link_libraries(tessera_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
    target_compile_definitions(tessera_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})
  elseif(TSR_WITH_HDF5 STREQUAL "ON")
    message(FATAL_ERROR "TSR_WITH_HDF5=ON but no parallel HDF5 built for ${TSR_MPI_VENDOR} "
                        "was found (Debian: libhdf5-openmpi-dev or libhdf5-mpich-dev)")
  else()
    message(STATUS "tessera: no parallel HDF5 for ${TSR_MPI_VENDOR}: files use the MPI-IO binary format")
  endif()
endif()

# ---- CUDA and NCCL (off by default).
set(TSR_HAVE_CUDA 0)
set(TSR_HAVE_NCCL 0)
if(TSR_WITH_CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(TSR_HAVE_CUDA 1)
endif()
if(TSR_WITH_NCCL)
  find_path(TSR_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(TSR_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME PATH_SUFFIXES lib lib64)
  if(NOT TSR_NCCL_INCLUDE_DIR OR NOT TSR_NCCL_LIBRARY)
    message(FATAL_ERROR "TSR_WITH_NCCL=ON but nccl.h / libnccl were not found (set NCCL_HOME)")
  endif()
  set(TSR_HAVE_NCCL 1)
endif()
