# The Fortran module `tessera` (lib/fortran, docs/FORTRAN.md): built when
# TSR_WITH_FORTRAN is ON, or AUTO (the default) and a Fortran compiler and the
# chosen MPI's Fortran support are found. Sets TSR_HAVE_FORTRAN and
# TSR_HAVE_FORTRAN_MPI_F08 (the module then takes type(MPI_Comm) too).
# Included once from the top-level CMakeLists.txt, after the library.
set(TSR_HAVE_FORTRAN 0)
set(TSR_HAVE_FORTRAN_MPI_F08 0)
if(NOT TSR_WITH_FORTRAN STREQUAL "OFF")
  include(CheckLanguage)
  check_language(Fortran)
  if(CMAKE_Fortran_COMPILER)
    enable_language(Fortran)
    if(NOT MPI_Fortran_COMPILER)
      # The wrapper that matches the C one (mpicc.openmpi -> mpif90.openmpi).
      string(REGEX REPLACE "mpicc" "mpif90" _tsr_mpif90 "${MPI_C_COMPILER}")
      if(EXISTS "${_tsr_mpif90}" OR _tsr_mpif90 MATCHES "^[^/]")
        find_program(MPI_Fortran_COMPILER NAMES ${_tsr_mpif90})
      endif()
    endif()
    find_package(MPI COMPONENTS Fortran)
    if(MPI_Fortran_FOUND)
      set(TSR_HAVE_FORTRAN 1)
      if(MPI_Fortran_HAVE_F08_MODULE)
        set(TSR_HAVE_FORTRAN_MPI_F08 1)
      endif()
    endif()
  endif()
  if(NOT TSR_HAVE_FORTRAN AND TSR_WITH_FORTRAN STREQUAL "ON")
    message(FATAL_ERROR "TSR_WITH_FORTRAN=ON but no Fortran compiler with the ${TSR_MPI_VENDOR} Fortran "
                        "bindings was found (Debian: gfortran; set MPI_Fortran_COMPILER=mpif90.${TSR_MPI_VENDOR})")
  endif()
endif()
if(TSR_HAVE_FORTRAN)
  add_subdirectory(${PROJECT_SOURCE_DIR}/lib/fortran ${PROJECT_BINARY_DIR}/lib/fortran)
endif()
message(STATUS "tessera Fortran module: ${TSR_HAVE_FORTRAN} (mpi_f08 ${TSR_HAVE_FORTRAN_MPI_F08})")
