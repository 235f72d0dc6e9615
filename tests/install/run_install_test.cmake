# Install test driver (cmake -P), registered by tests/install/CMakeLists.txt.
#
#  1. cmake --install <build> --prefix <work>/prefix, and check the layout.
#  2. Configure and build consumer/ (find_package(tessera CONFIG REQUIRED),
#     tessera::tessera; also the README snippets) and consumer_c_only/ (a
#     project without C++) against that prefix with the build's own
#     compilers, MPI wrappers and mpiexec.
#  3. Build consumer.c and consumer.cpp with the MPI compiler wrappers and
#     `pkg-config --cflags --libs tessera` (--static for a static tessera),
#     PKG_CONFIG_PATH pointing into the prefix. (No -Werror here: Open MPI's
#     C++ binding headers warn under -Wextra when included with -I.)
#  4. Run everything under mpiexec on 2 ranks; the consumers must print OK,
#     the snippets and the installed demo must exit 0.
#
# Inputs (-D): TSR_BUILD_DIR TSR_SOURCE_DIR TSR_WORK_DIR TSR_SHARED TSR_APPS
# TSR_GENERATOR TSR_C_COMPILER TSR_CXX_COMPILER MPI_C_COMPILER MPI_CXX_COMPILER
# MPIEXEC_EXECUTABLE MPIEXEC_NUMPROC_FLAG TSR_MPIEXEC_PREFLAGS
# TSR_MPIEXEC_POSTFLAGS (lists joined with '|') TSR_PKG_CONFIG.
cmake_minimum_required(VERSION 3.20)

foreach(v TSR_BUILD_DIR TSR_SOURCE_DIR TSR_WORK_DIR MPI_C_COMPILER MPI_CXX_COMPILER MPIEXEC_EXECUTABLE)
  if(NOT ${v})
    message(FATAL_ERROR "run_install_test.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT TSR_PKG_CONFIG)
  message(FATAL_ERROR "pkg-config was not found when tessera was configured (Debian: apt-get install pkg-config)")
endif()
string(REPLACE "|" ";" preflags "${TSR_MPIEXEC_PREFLAGS}")
string(REPLACE "|" ";" postflags "${TSR_MPIEXEC_POSTFLAGS}")
if(NOT MPIEXEC_NUMPROC_FLAG)
  set(MPIEXEC_NUMPROC_FLAG -n)
endif()

set(here "${CMAKE_CURRENT_LIST_DIR}")
set(prefix "${TSR_WORK_DIR}/prefix")
file(REMOVE_RECURSE "${TSR_WORK_DIR}")
file(MAKE_DIRECTORY "${TSR_WORK_DIR}")

# run(<step name> <command...>): runs a command (10 min at most), logs its
# output to <work>/<step>.log and stops the test if it fails. Output: run_out.
macro(run step)
  message(STATUS "[${step}] ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE run_rc OUTPUT_VARIABLE run_out ERROR_VARIABLE run_out
                  TIMEOUT 600)
  file(WRITE "${TSR_WORK_DIR}/${step}.log" "${run_out}")
  if(NOT run_rc EQUAL 0)
    message(FATAL_ERROR "[${step}] failed (${run_rc}):\n${run_out}")
  endif()
endmacro()

# mpirun(<step name> <expect OK: TRUE/FALSE> <program> [args...])
macro(mpirun step expect_ok exe)
  run(${step} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${preflags} ${exe} ${postflags} ${ARGN})
  if(${expect_ok} AND NOT run_out MATCHES "(^|\n)OK\r?\n")
    message(FATAL_ERROR "[${step}] did not print OK:\n${run_out}")
  endif()
  message(STATUS "[${step}] passed")
endmacro()

# ------------------------------------------------------------- 1. install ---
run(install ${CMAKE_COMMAND} --install "${TSR_BUILD_DIR}" --prefix "${prefix}")
file(GLOB_RECURSE pcfile LIST_DIRECTORIES false "${prefix}/*/tessera.pc")
file(GLOB_RECURSE configfile LIST_DIRECTORIES false "${prefix}/*/tesseraConfig.cmake")
if(NOT pcfile OR NOT configfile)
  message(FATAL_ERROR "the install tree lacks tessera.pc or tesseraConfig.cmake:\n${run_out}")
endif()
get_filename_component(pcdir "${pcfile}" DIRECTORY)
get_filename_component(libdir "${pcdir}" DIRECTORY)
foreach(h tessera.h tessera.hpp optimizer.h optimizer.hpp attention.h attention.hpp gemm.h gemm.hpp
          energy.h energy.hpp device.h device.hpp tsr_version.h tsr_config.h)
  if(NOT EXISTS "${prefix}/include/tessera/${h}")
    message(FATAL_ERROR "not installed: include/tessera/${h}")
  endif()
endforeach()
if(TSR_SHARED)
  set(libfile "${libdir}/libtessera.so")
else()
  set(libfile "${libdir}/libtessera.a")
endif()
if(NOT EXISTS "${libfile}")
  message(FATAL_ERROR "not installed: ${libfile}")
endif()
if(TSR_APPS AND NOT EXISTS "${prefix}/bin/tessera_demo")
  message(FATAL_ERROR "not installed: bin/tessera_demo")
endif()
set(pmpifile "${libdir}/libtessera-pmpi.so")
foreach(f "${pmpifile}" "${prefix}/share/tessera/profiles/default-2025.json")
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# ----------------------------------------------------- 2. CMake consumer ---
set(cbuild "${TSR_WORK_DIR}/cmake-consumer")
set(gen "")
if(TSR_GENERATOR)
  set(gen -G "${TSR_GENERATOR}")
endif()
set(compilers "")
if(TSR_C_COMPILER)
  list(APPEND compilers "-DCMAKE_C_COMPILER=${TSR_C_COMPILER}")
endif()
if(TSR_CXX_COMPILER)
  list(APPEND compilers "-DCMAKE_CXX_COMPILER=${TSR_CXX_COMPILER}")
endif()
run(consumer-configure ${CMAKE_COMMAND} -S "${here}/consumer" -B "${cbuild}" ${gen} ${compilers}
    "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    "-DMPI_C_COMPILER=${MPI_C_COMPILER}" "-DMPI_CXX_COMPILER=${MPI_CXX_COMPILER}"
    "-DMPIEXEC_EXECUTABLE=${MPIEXEC_EXECUTABLE}" "-DTSR_SNIPPET_DIR=${here}/snippets")
file(STRINGS "${cbuild}/CMakeCache.txt" found_dir REGEX "^tessera_DIR:")
string(REGEX REPLACE "^tessera_DIR:[A-Z]+=" "" found_dir "${found_dir}")
file(REAL_PATH "${found_dir}" found_dir)
file(REAL_PATH "${prefix}" real_prefix)
string(FIND "${found_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "the consumer found tessera in ${found_dir}, not in ${real_prefix}")
endif()
run(consumer-build ${CMAKE_COMMAND} --build "${cbuild}" -j 2)

# The same C program from a project that enables only C.
set(c_only_build "${TSR_WORK_DIR}/cmake-consumer-c-only")
set(c_compiler "")
if(TSR_C_COMPILER)
  set(c_compiler "-DCMAKE_C_COMPILER=${TSR_C_COMPILER}")
endif()
run(consumer-c-only-configure ${CMAKE_COMMAND} -S "${here}/consumer_c_only" -B "${c_only_build}" ${gen}
    ${c_compiler} "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    "-DMPI_C_COMPILER=${MPI_C_COMPILER}" "-DMPIEXEC_EXECUTABLE=${MPIEXEC_EXECUTABLE}")
run(consumer-c-only-build ${CMAKE_COMMAND} --build "${c_only_build}")

# ------------------------------------------------- 3. pkg-config consumer ---
set(pc_static "")
if(NOT TSR_SHARED)
  set(pc_static --static)  # Libs.private: the C++ runtime, HDF5, ...
endif()
run(pkg-config ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pcdir}"
    ${TSR_PKG_CONFIG} ${pc_static} --cflags --libs tessera)
string(STRIP "${run_out}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run(pkg-config-prefix ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pcdir}"
    ${TSR_PKG_CONFIG} --variable=prefix tessera)
string(STRIP "${run_out}" pc_prefix)
if(NOT pc_prefix STREQUAL prefix)
  message(FATAL_ERROR "tessera.pc says prefix=${pc_prefix}, installed into ${prefix}")
endif()
set(pbuild "${TSR_WORK_DIR}/pkgconfig-consumer")
file(MAKE_DIRECTORY "${pbuild}")
run(pkgconfig-build-c ${MPI_C_COMPILER} -std=c99 -Wall -Wextra "${here}/consumer/consumer.c"
    -o "${pbuild}/consumer_c" ${pc_flags} "-Wl,-rpath,${libdir}")
run(pkgconfig-build-cxx ${MPI_CXX_COMPILER} -std=c++17 -Wall -Wextra "${here}/consumer/consumer.cpp"
    -o "${pbuild}/consumer_cxx" ${pc_flags} "-Wl,-rpath,${libdir}")

# --------------------------------------------------------------- 4. runs ---
mpirun(run-cmake-c TRUE "${cbuild}/consumer_c")
mpirun(run-cmake-cxx TRUE "${cbuild}/consumer_cxx")
mpirun(run-cmake-c-only TRUE "${c_only_build}/consumer_c_only")
mpirun(run-pkgconfig-c TRUE "${pbuild}/consumer_c")
mpirun(run-pkgconfig-cxx TRUE "${pbuild}/consumer_cxx")
mpirun(run-snippet-c FALSE "${cbuild}/snippet_c")
mpirun(run-snippet-cxx FALSE "${cbuild}/snippet_cxx")
if(TSR_APPS)
  mpirun(run-installed-demo FALSE "${prefix}/bin/tessera_demo")
endif()
# The installed PMPI tool on the pkg-config C consumer (an ordinary MPI
# program as far as the tool is concerned), with the installed profile.
run(run-installed-pmpi ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${preflags} env
    "LD_PRELOAD=${pmpifile}" "TSR_ENERGY_PROFILE=${prefix}/share/tessera/profiles/default-2025.json"
    "${pbuild}/consumer_c" ${postflags})
if(NOT run_out MATCHES "tessera energy report: 2 rank\\(s\\)" OR NOT run_out MATCHES "libtessera-pmpi"
   OR NOT run_out MATCHES "(^|\n)OK\r?\n")
  message(FATAL_ERROR "[run-installed-pmpi] no energy report from the installed libtessera-pmpi.so:\n${run_out}")
endif()
message(STATUS "[run-installed-pmpi] passed")
message(STATUS "install test passed (shared ${TSR_SHARED}): CMake and pkg-config consumers print OK")
