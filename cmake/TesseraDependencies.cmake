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

# ---- ScaLAPACK, built for the same MPI: the reference pdgemm of the GEMM
# tests and benchmark (libtessera itself does not link it; its BLACS calls
# are weak references). TSR_WITH_SCALAPACK: AUTO (default), ON (required),
# OFF. Debian installs one library per MPI (libscalapack-openmpi.so,
# libscalapack-mpich.so); its CMake package files cannot be used (both define
# the same target, and the import points at /usr/lib/libscalapack-*.so.2.2.1,
# which does not exist) and scalapack-mpich.pc names Open MPI's libmpi, so
# the library is found by name, with pkg-config's libdir as a hint.
set(TSR_HAVE_SCALAPACK 0)
if(NOT TSR_WITH_SCALAPACK STREQUAL "OFF")
  set(_tsr_sl_names scalapack)
  if(TSR_MPI_VENDOR STREQUAL "openmpi")
    set(_tsr_sl_names scalapack-openmpi scalapack)
  elseif(TSR_MPI_VENDOR STREQUAL "mpich")
    set(_tsr_sl_names scalapack-mpich scalapack)
  endif()
  find_package(PkgConfig QUIET)
  set(_tsr_sl_hint "")
  if(PKG_CONFIG_FOUND)
    list(GET _tsr_sl_names 0 _tsr_sl_pc)
    pkg_get_variable(_tsr_sl_hint ${_tsr_sl_pc} libdir)
  endif()
  find_library(TSR_SCALAPACK_LIBRARY NAMES ${_tsr_sl_names} HINTS ${_tsr_sl_hint}
               DOC "ScaLAPACK built for the chosen MPI (tests and benchmarks only)")
  set(_tsr_sl_ok FALSE)
  if(TSR_SCALAPACK_LIBRARY)
    set(_tsr_sl_ok TRUE)
    # Refuse a ScaLAPACK built for the other MPI (BLACS must match the MPI).
    if(TSR_MPI_VENDOR STREQUAL "mpich" AND TSR_SCALAPACK_LIBRARY MATCHES "openmpi")
      set(_tsr_sl_ok FALSE)
    elseif(TSR_MPI_VENDOR STREQUAL "openmpi" AND TSR_SCALAPACK_LIBRARY MATCHES "mpich")
      set(_tsr_sl_ok FALSE)
    endif()
  endif()
  if(_tsr_sl_ok)
    set(TSR_HAVE_SCALAPACK 1)
    add_library(tessera_scalapack_ref INTERFACE)
    target_link_libraries(tessera_scalapack_ref INTERFACE ${TSR_SCALAPACK_LIBRARY} BLAS::BLAS)
  elseif(TSR_WITH_SCALAPACK STREQUAL "ON")
    message(FATAL_ERROR "TSR_WITH_SCALAPACK=ON but no ScaLAPACK built for ${TSR_MPI_VENDOR} was found "
                        "(Debian: libscalapack-openmpi-dev or libscalapack-mpich-dev; or set TSR_SCALAPACK_LIBRARY)")
  else()
    message(STATUS "tessera: no ScaLAPACK for ${TSR_MPI_VENDOR}: the GEMM tests and benchmark skip the pdgemm comparison")
  endif()
endif()

# ---- COSMA (benchmark comparison only), when installed: find_package(cosma)
# (point CMAKE_PREFIX_PATH at it; it must be built for the same MPI). A COSMA
# built with COSMA_SCALAPACK=CUSTOM (and its COSTA) looks for a library named
# "scalapack": hand them the one found above.
set(TSR_HAVE_COSMA 0)
if(TSR_BUILD_BENCHMARKS)
  foreach(_tsr_v COSMA_SCALAPACK_LINK_LIBRARIES COSTA_SCALAPACK_LINK_LIBRARIES)
    if(TSR_HAVE_SCALAPACK AND NOT DEFINED ${_tsr_v})
      set(${_tsr_v} ${TSR_SCALAPACK_LIBRARY} CACHE FILEPATH "ScaLAPACK for COSMA's package")
    endif()
  endforeach()
  find_package(cosma CONFIG QUIET)
  if(cosma_FOUND)
    set(TSR_HAVE_COSMA 1)
    message(STATUS "tessera: bench_gemm compares with COSMA ${cosma_VERSION} (${cosma_DIR})")
  endif()
endif()

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

# ---- OpenMP for the optimizer kernels (threads across work items).
set(TSR_HAVE_OPENMP 0)
if(NOT TSR_WITH_OPENMP STREQUAL "OFF")
  find_package(OpenMP COMPONENTS CXX)
  if(OpenMP_CXX_FOUND)
    set(TSR_HAVE_OPENMP 1)
  elseif(TSR_WITH_OPENMP STREQUAL "ON")
    message(FATAL_ERROR "TSR_WITH_OPENMP=ON but the C++ compiler has no OpenMP (GCC: libgomp)")
  else()
    message(STATUS "tessera: no OpenMP: the optimizer kernels run on one thread")
  endif()
endif()

# ---- CUDA and NCCL (off by default).
set(TSR_HAVE_CUDA 0)
set(TSR_HAVE_NCCL 0)
if(TSR_WITH_CUDA)
  # sm_90 (H100/H200) machine code plus compute_90 PTX for newer devices;
  # override with -DCMAKE_CUDA_ARCHITECTURES=...
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
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
