# Test helpers.
#
# tsr_add_mpi_test(NAME n SOURCES s... RANKS 1 2 4 8 [LIBS l...] [TIMEOUT sec] [LABELS l...])
#   Builds one GoogleTest executable with the MPI test main and registers one
#   CTest test per rank count, n_np<N>, launched through mpiexec, with
#   PROCESSORS and TIMEOUT set so that a hang fails fast. Labels "mpi", plus
#   "slow" at 8 ranks or more, plus LABELS.
# tsr_add_unit_test(NAME n SOURCES s... [LIBS l...])
#   A serial GoogleTest executable (no mpiexec), label "unit".

set(TSR_TEST_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_mpi_yield_when_idle=1
  OMPI_MCA_rmaps_base_oversubscribe=1
  OPENBLAS_NUM_THREADS=1
  OMP_NUM_THREADS=1)

# Open MPI refuses more ranks than cores without --oversubscribe.
set(TSR_MPIEXEC_PREFLAGS ${MPIEXEC_PREFLAGS})
if(TSR_MPI_VENDOR STREQUAL "openmpi")
  list(APPEND TSR_MPIEXEC_PREFLAGS --oversubscribe)
endif()
set(TSR_TEST_TIMEOUT 120 CACHE STRING "Default timeout (s) of one multi-rank test")

function(tsr_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;RANKS;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${TSR_TEST_TIMEOUT})
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE tsr_test_main ${T_LIBS})
  foreach(n IN LISTS T_RANKS)
    add_test(NAME ${T_NAME}_np${n}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${TSR_MPIEXEC_PREFLAGS}
              $<TARGET_FILE:${T_NAME}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
    # 8 oversubscribed ranks on a small machine take long: label them "slow"
    # so that `ctest -LE slow` gives a quick pass.
    set(labels mpi ${T_LABELS})
    if(n GREATER_EQUAL 8)
      list(APPEND labels slow)
    endif()
    set_tests_properties(${T_NAME}_np${n} PROPERTIES
      PROCESSORS ${n} TIMEOUT ${T_TIMEOUT} LABELS "${labels}"
      ENVIRONMENT "${TSR_TEST_ENV}")
  endforeach()
endfunction()

function(tsr_add_unit_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest GTest::gtest_main tessera_warnings ${T_LIBS})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT 60 LABELS "unit" ENVIRONMENT "${TSR_TEST_ENV}")
endfunction()

# tsr_add_cuda_test(NAME n SOURCES s... RANKS 1 2 ... [LIBS l...] [TIMEOUT sec] [LABELS l...])
#   A GPU test (issue 17, docs/GPU.md): like tsr_add_mpi_test, built with
#   tests/device/device_main.cpp, label "cuda" (not "mpi"). Where no CUDA
#   device is visible every rank exits with 77 after printing why (rank 0),
#   which CTest reports as skipped (SKIP_RETURN_CODE 77). Only in builds with
#   TSR_WITH_CUDA.
set(TSR_CUDA_TEST_MAIN ${CMAKE_CURRENT_LIST_DIR}/../tests/device/device_main.cpp)
function(tsr_add_cuda_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;RANKS;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${TSR_TEST_TIMEOUT})
  endif()
  add_executable(${T_NAME} ${T_SOURCES} ${TSR_CUDA_TEST_MAIN})
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest MPI::MPI_CXX tessera_warnings CUDA::cudart ${T_LIBS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  if(TARGET cuda_tests)  # every cuda test at once (.ci/run, tests/device/run.sh)
    add_dependencies(cuda_tests ${T_NAME})
  endif()
  foreach(n IN LISTS T_RANKS)
    add_test(NAME ${T_NAME}_np${n}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${TSR_MPIEXEC_PREFLAGS}
              $<TARGET_FILE:${T_NAME}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
    set_tests_properties(${T_NAME}_np${n} PROPERTIES
      PROCESSORS ${n} TIMEOUT ${T_TIMEOUT} LABELS "cuda;${T_LABELS}" SKIP_RETURN_CODE 77
      ENVIRONMENT "${TSR_TEST_ENV}")
  endforeach()
endfunction()
