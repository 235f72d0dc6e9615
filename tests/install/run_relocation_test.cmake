# Relocation and feature-query test (cmake -P), registered by
# tests/install/CMakeLists.txt as install_relocated.
#
#  1. cmake --install <build> --prefix <work>/staged/tessera, then move the
#     whole tree to <work>/moved/tessera-moved (the staged path is gone).
#  2. bin/tessera-config from the moved tree: --prefix is the new path,
#     --version, --features (== the build's), --has, --mpi, a bad option
#     exits with 2; a C program built with the MPI C wrapper and
#     `tessera-config --cflags --libs` runs on 2 ranks.
#  3. The moved CMake package: consumer_c_only configures against the moved
#     prefix only (tessera_DIR inside it; tessera_FEATURES == the build's),
#     builds and runs on 2 ranks.
#  4. tessera.pc through `pkg-config --define-prefix`: prefix is the new
#     path; consumer.c built with it runs on 2 ranks.
#
# Inputs (-D): TSR_BUILD_DIR TSR_SOURCE_DIR TSR_WORK_DIR TSR_SHARED
# TSR_VERSION TSR_MPI_VENDOR TSR_FEATURES (joined with '|') TSR_GENERATOR
# TSR_C_COMPILER MPI_C_COMPILER MPIEXEC_EXECUTABLE MPIEXEC_NUMPROC_FLAG
# TSR_MPIEXEC_PREFLAGS TSR_MPIEXEC_POSTFLAGS TSR_PKG_CONFIG.
cmake_minimum_required(VERSION 3.20)
foreach(v TSR_BUILD_DIR TSR_WORK_DIR TSR_VERSION MPI_C_COMPILER MPIEXEC_EXECUTABLE TSR_PKG_CONFIG)
  if(NOT ${v})
    message(FATAL_ERROR "run_relocation_test.cmake: -D${v}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" preflags "${TSR_MPIEXEC_PREFLAGS}")
string(REPLACE "|" ";" postflags "${TSR_MPIEXEC_POSTFLAGS}")
string(REPLACE "|" " " features "${TSR_FEATURES}")
if(NOT MPIEXEC_NUMPROC_FLAG)
  set(MPIEXEC_NUMPROC_FLAG -n)
endif()
set(here "${CMAKE_CURRENT_LIST_DIR}")
file(REMOVE_RECURSE "${TSR_WORK_DIR}")
file(MAKE_DIRECTORY "${TSR_WORK_DIR}/staged" "${TSR_WORK_DIR}/moved")
set(staged "${TSR_WORK_DIR}/staged/tessera")
set(prefix "${TSR_WORK_DIR}/moved/tessera-moved")

# run(<step> <expected exit code> <command...>): output in run_out, log in <work>/<step>.log.
macro(run step expect)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE run_rc OUTPUT_VARIABLE run_out ERROR_VARIABLE run_err
                  TIMEOUT 300)
  file(WRITE "${TSR_WORK_DIR}/${step}.log" "${ARGN}\n${run_out}${run_err}")
  if(NOT "${run_rc}" STREQUAL "${expect}")
    message(FATAL_ERROR "[${step}] exit ${run_rc}, expected ${expect}: ${ARGN}\n${run_out}${run_err}")
  endif()
  string(STRIP "${run_out}" run_out)
  message(STATUS "[${step}] passed")
endmacro()
macro(expect_eq step got want)
  if(NOT "${got}" STREQUAL "${want}")
    message(FATAL_ERROR "[${step}] gave '${got}', expected '${want}'")
  endif()
endmacro()
macro(mpirun2 step exe)
  run(${step} 0 ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${preflags} ${exe} ${postflags})
  if(NOT run_out MATCHES "(^|\n)OK$")
    message(FATAL_ERROR "[${step}] did not print OK:\n${run_out}")
  endif()
endmacro()

# ------------------------------------------------ 1. install, then move ---
run(install 0 ${CMAKE_COMMAND} --install "${TSR_BUILD_DIR}" --prefix "${staged}")
file(RENAME "${staged}" "${prefix}")
file(REMOVE_RECURSE "${TSR_WORK_DIR}/staged")
file(GLOB_RECURSE pcfile LIST_DIRECTORIES false "${prefix}/*/pkgconfig/tessera.pc")
get_filename_component(pcdir "${pcfile}" DIRECTORY)
get_filename_component(libdir "${pcdir}" DIRECTORY)

# ------------------------------------------------------ 2. tessera-config ---
set(cfg "${prefix}/bin/tessera-config")
if(NOT EXISTS "${cfg}")
  message(FATAL_ERROR "not installed: bin/tessera-config")
endif()
run(config-prefix 0 "${cfg}" --prefix)
file(REAL_PATH "${prefix}" real_prefix)
expect_eq(config-prefix "${run_out}" "${real_prefix}")
run(config-version 0 "${cfg}" --version)
expect_eq(config-version "${run_out}" "${TSR_VERSION}")
run(config-features 0 "${cfg}" --features)
expect_eq(config-features "${run_out}" "${features}")
run(config-mpi 0 "${cfg}" --mpi)
expect_eq(config-mpi "${run_out}" "${TSR_MPI_VENDOR}")
if(TSR_SHARED)
  run(config-has-shared 0 "${cfg}" --has shared)
  run(config-has-static 1 "${cfg}" --has static)
else()
  run(config-has-static 0 "${cfg}" --has static)
  run(config-has-shared 1 "${cfg}" --has shared)
endif()
run(config-bad-option 2 "${cfg}" --no-such-option)
run(config-no-option 2 "${cfg}")
run(config-flags 0 "${cfg}" --cflags --libs)
separate_arguments(cfg_flags UNIX_COMMAND "${run_out}")
set(cbuild "${TSR_WORK_DIR}/config-consumer")
file(MAKE_DIRECTORY "${cbuild}")
run(config-build-c 0 ${MPI_C_COMPILER} -std=c99 "${here}/consumer/consumer.c" -o "${cbuild}/consumer_c"
    ${cfg_flags} "-Wl,-rpath,${libdir}")
mpirun2(config-run-c "${cbuild}/consumer_c")

# ------------------------------------------- 3. the moved CMake package ---
set(gen "")
if(TSR_GENERATOR)
  set(gen -G "${TSR_GENERATOR}")
endif()
set(c_compiler "")
if(TSR_C_COMPILER)
  set(c_compiler "-DCMAKE_C_COMPILER=${TSR_C_COMPILER}")
endif()
set(mbuild "${TSR_WORK_DIR}/cmake-consumer")
run(cmake-configure 0 ${CMAKE_COMMAND} -S "${here}/consumer_c_only" -B "${mbuild}" ${gen} ${c_compiler}
    "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    "-DMPI_C_COMPILER=${MPI_C_COMPILER}" "-DMPIEXEC_EXECUTABLE=${MPIEXEC_EXECUTABLE}")
file(STRINGS "${mbuild}/CMakeCache.txt" found_dir REGEX "^tessera_DIR:")
string(REGEX REPLACE "^tessera_DIR:[A-Z]+=" "" found_dir "${found_dir}")
file(REAL_PATH "${found_dir}" found_dir)
string(FIND "${found_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "the consumer found tessera in ${found_dir}, not in the moved ${real_prefix}")
endif()
# The package's tessera_FEATURES and tessera_WITH_FORTRAN (printed by the consumer).
if(NOT run_out MATCHES "tessera_FEATURES: \\[([^]\n]*)\\] tessera_WITH_FORTRAN: \\[([01])\\]")
  message(FATAL_ERROR "[cmake-configure] the consumer did not print tessera_FEATURES:\n${run_out}")
endif()
set(pkg_features "${CMAKE_MATCH_1}")
set(pkg_with_fortran "${CMAKE_MATCH_2}")
expect_eq(cmake-features "${pkg_features}" "${features}")
set(want_fortran 0)
if(features MATCHES "(^| )fortran( |$)")
  set(want_fortran 1)
endif()
expect_eq(cmake-with-fortran "${pkg_with_fortran}" "${want_fortran}")
run(cmake-build 0 ${CMAKE_COMMAND} --build "${mbuild}")
mpirun2(cmake-run "${mbuild}/consumer_c_only")

# ------------------------------------ 4. pkg-config with --define-prefix ---
run(pc-prefix 0 ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pcdir}" ${TSR_PKG_CONFIG} --define-prefix
    --variable=prefix tessera)
file(REAL_PATH "${run_out}" pc_prefix)
expect_eq(pc-prefix "${pc_prefix}" "${real_prefix}")
set(pc_static "")
if(NOT TSR_SHARED)
  set(pc_static --static)
endif()
run(pc-flags 0 ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pcdir}" ${TSR_PKG_CONFIG} --define-prefix ${pc_static}
    --cflags --libs tessera)
separate_arguments(pc_flags UNIX_COMMAND "${run_out}")
set(pbuild "${TSR_WORK_DIR}/pkgconfig-consumer")
file(MAKE_DIRECTORY "${pbuild}")
run(pc-build-c 0 ${MPI_C_COMPILER} -std=c99 "${here}/consumer/consumer.c" -o "${pbuild}/consumer_c"
    ${pc_flags} "-Wl,-rpath,${libdir}")
mpirun2(pc-run-c "${pbuild}/consumer_c")
message(STATUS "relocation test passed: ${prefix} (shared ${TSR_SHARED}, features: ${features})")
