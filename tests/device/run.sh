#!/usr/bin/env bash
# tests/device/run.sh: every GPU test and benchmark of tessera in one command
# (issue 17, docs/GPU.md "The device script"). Run from anywhere on a machine
# with a CUDA GPU, the CUDA toolkit (nvcc), NCCL and an MPI:
#
#   tests/device/run.sh            # summary in build-device/summary.md
#   OUT=/some/dir tests/device/run.sh   # summary in $OUT/summary.md (+ logs)
#
# Steps: configure (Release, CUDA + NCCL, sm_90 unless CUDA_ARCH says
# otherwise, Open MPI or MPICH: whichever mpicc/mpiexec is found), build the
# library, the `cuda` tests and the GPU benchmarks (-j all cores), run
# `ctest -L cuda` (every cuda test at each of its rank counts: 1 rank, and
# several ranks sharing the one GPU, which NCCL refuses, so those cases need
# a CUDA-aware MPI and skip without one), run the benchmarks, write the
# summary (pass/skip/fail per test, benchmark figures). Without mpiexec the
# test executables run directly at 1 rank (MPI singleton). Meant to finish
# in under 8 minutes on an H200 (TSR_DEVICE_BUDGET_S, default 450 s, bounds
# the build; each test and benchmark has its own timeout).
#
# Environment: OUT (summary folder), BUILD (build folder, default
# <repo>/build-device), CUDA_ARCH (default 90), JOBS (default nproc),
# TSR_DEVICE_BUDGET_S, TSR_DEVICE_TEST_TIMEOUT (s per test, 240), TSR_DEVICE_BENCH_TIMEOUT (s per
# benchmark, 180), TSR_DEVICE_SKIP_BUILD=1 (run the build already in BUILD,
# made elsewhere: configure and build are skipped).
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD:-$repo/build-device}
out=${OUT:-$build}
arch=${CUDA_ARCH:-90}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
budget=${TSR_DEVICE_BUDGET_S:-450}
t0=$(date +%s)
mkdir -p "$build" "$out/logs"
summary=$out/summary.md
elapsed() { echo $(( $(date +%s) - t0 )); }
note() { printf '[run.sh %4ss] %s\n' "$(elapsed)" "$*"; }

# ----------------------------------------------------------------------------
# GPU benchmarks: one entry per benchmark, "target|arguments" (the program
# is <build>/benchmarks/<target> or wherever the target's file lands; its
# whole output goes to the summary). The compute session (gpukern) adds its
# GEMM, LAMB/LARS and attention benchmarks HERE.
# ------------------------------------------------- GPU benchmarks (list) ---
GPU_BENCHES=(
  # cuBLAS local GEMM and tsr_gemm on device buffers (--dgemm) vs plain cuBLAS (target >= 0.80), LAMB step vs
  # cudaMemcpy D2D in the same run (target >= 0.80), the LAMB kernel configurations against the same copy
  # (--lamb-variants), attention block TFLOP/s, tsr ring attention on device tensors at 1 rank vs the block
  # (benchmarks/bench_cuda.cpp)
  "bench_cuda|--reps 9 --gemm 4096,8192 --dgemm 4096,8192 --lamb 1e7,1e8 --lamb-variants all --attn 4096,8192 --ring 4096,8192"
)
# ----------------------------------------------------------------------------

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# Several ranks on the one GPU need a CUDA-aware MPI (NCCL refuses them):
# where Open MPI says it was built with CUDA, tell tessera so (its
# compile-time check may not know).
if [ -z "${TSR_CUDA_AWARE_MPI:-}" ] && command -v ompi_info >/dev/null &&
   ompi_info --parsable --all 2>/dev/null | grep -q 'mpi_built_with_cuda_support:value:true'; then
  export TSR_CUDA_AWARE_MPI=1
fi

{
  echo "# tessera device run"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -4 | tr '\n' ';' || echo 'nvidia-smi not found')"
  echo "- nvcc: $( (command -v nvcc >/dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -1)"
  echo "- MPI: $( (mpiexec --version 2>/dev/null || echo 'no mpiexec') | head -1); TSR_CUDA_AWARE_MPI=${TSR_CUDA_AWARE_MPI:-unset}"
  echo "- NCCL: $(grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH)' /usr/local/cuda/include/nccl.h /usr/include/nccl.h 2>/dev/null | awk '{printf "%s ", $3}')"
} > "$summary"

nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [ -z "$nvcc" ] && [ "${TSR_DEVICE_SKIP_BUILD:-0}" != 1 ]; then
  echo "- RESULT: no CUDA toolkit (nvcc not found): nothing built" >> "$summary"
  note "no nvcc"; cat "$summary"; exit 1
fi

# MPI: the compiler wrappers and launcher that are installed.
mpi_args=()
if command -v mpicc >/dev/null && command -v mpicxx >/dev/null; then
  mpi_args+=("-DMPI_C_COMPILER=$(command -v mpicc)" "-DMPI_CXX_COMPILER=$(command -v mpicxx)")
fi
mpiexec=$(command -v mpiexec || command -v mpirun || true)
if [ -n "$mpiexec" ]; then mpi_args+=("-DMPIEXEC_EXECUTABLE=$mpiexec"); fi

# ------------------------------------------------------ configure and build ---
if [ "${TSR_DEVICE_SKIP_BUILD:-0}" = 1 ]; then
  # A build made elsewhere (a login node with the same toolkit): run what is
  # in $BUILD as it is; the libraries it needs must be on LD_LIBRARY_PATH.
  note "TSR_DEVICE_SKIP_BUILD=1: using the build in $build"
  echo "- build: prebuilt ($build), not rebuilt here" >> "$summary"
  built_benches=()
  for b in "${GPU_BENCHES[@]}"; do built_benches+=("${b%%|*}"); done
else
# ------------------------------------------------------ configure and build ---
note "configure ($build, sm_$arch)"
if ! timeout $(( budget / 3 )) cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release \
     -DTSR_WITH_CUDA=ON -DTSR_WITH_NCCL=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
     -DTSR_WITH_HDF5=OFF -DTSR_WITH_SCALAPACK=OFF -DTSR_BUILD_APPS=OFF -DTSR_BUILD_BENCHMARKS=ON \
     "${mpi_args[@]}" > "$out/logs/configure.log" 2>&1; then
  # Benchmarks need Google Benchmark: retry without them.
  if ! timeout $(( budget / 3 )) cmake -S "$repo" -B "$build" -DTSR_BUILD_BENCHMARKS=OFF \
       > "$out/logs/configure2.log" 2>&1; then
    echo "- RESULT: configure failed (logs/configure.log, logs/configure2.log):" >> "$summary"
    echo '```' >> "$summary"; tail -25 "$out/logs/configure2.log" >> "$summary"; echo '```' >> "$summary"
    note "configure failed"; cat "$summary"; exit 1
  fi
  echo "- note: configured without benchmarks (Google Benchmark missing?)" >> "$summary"
fi
targets=(tessera cuda_tests)
bench_targets=()
for b in "${GPU_BENCHES[@]}"; do bench_targets+=("${b%%|*}"); done
note "build ${targets[*]} ${bench_targets[*]} (-j$jobs)"
if ! timeout $(( budget - $(elapsed) > 60 ? budget - $(elapsed) : 60 )) \
     cmake --build "$build" -j "$jobs" --target "${targets[@]}" > "$out/logs/build.log" 2>&1; then
  echo "- RESULT: build failed (logs/build.log):" >> "$summary"
  echo '```' >> "$summary"; grep -E 'error|Error' "$out/logs/build.log" | head -30 >> "$summary"; echo '```' >> "$summary"
  note "build failed"; cat "$summary"; exit 1
fi
built_benches=()
for t in "${bench_targets[@]}"; do
  if cmake --build "$build" -j "$jobs" --target "$t" >> "$out/logs/build-bench.log" 2>&1; then built_benches+=("$t")
  else echo "- benchmark $t: build failed (logs/build-bench.log)" >> "$summary"; fi
done
echo "- build: done at $(elapsed) s" >> "$summary"
fi

# ------------------------------------------------------------------- tests ---
echo >> "$summary"
echo "## cuda tests" >> "$summary"
echo >> "$summary"
echo "| test | result | seconds |" >> "$summary"
echo "|---|---|---|" >> "$summary"
npass=0 nskip=0 nfail=0
# A prebuilt build's CTest files name the paths of the machine that built it:
# run its test executables directly there.
if [ -n "$mpiexec" ] && [ "${TSR_DEVICE_SKIP_BUILD:-0}" != 1 ]; then
  note "ctest -L cuda"
  (cd "$build" && ctest -L cuda --timeout "${TSR_DEVICE_TEST_TIMEOUT:-240}" --output-on-failure) > "$out/logs/ctest.log" 2>&1
  # "  1/3 Test #1: name ....   Passed    1.23 sec" / "***Skipped" / "***Failed" / "***Timeout"
  while read -r name result secs; do
    case $result in
      Passed) npass=$((npass + 1)); r=pass ;;
      Skipped) nskip=$((nskip + 1)); r=skip ;;
      *) nfail=$((nfail + 1)); r="FAIL ($result)" ;;
    esac
    echo "| $name | $r | $secs |" >> "$summary"
  done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.+ *(\*\*\*)?([A-Za-z]+).* ([0-9.]+) sec.*/\1 \3 \4/p' \
             "$out/logs/ctest.log")
else
  note "no mpiexec: each cuda test executable at 1 rank, directly"
  while IFS= read -r exe; do
    name=$(basename "$exe")
    s0=$(date +%s)
    timeout "${TSR_DEVICE_TEST_TIMEOUT:-240}" "$exe" > "$out/logs/$name.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - s0 ))
    case $rc in
      0) npass=$((npass + 1)); r=pass ;;
      77) nskip=$((nskip + 1)); r=skip ;;
      *) nfail=$((nfail + 1)); r="FAIL (exit $rc)" ;;
    esac
    echo "| $name (1 rank, no mpiexec) | $r | $secs |" >> "$summary"
  done < <(find "$build/tests/device" "$build/tests/cuda" -maxdepth 1 -type f -executable -name 'test_*' 2>/dev/null | sort)
fi
{
  echo
  echo "- tests: $npass passed, $nskip skipped, $nfail failed (logs/ctest.log)"
  # Why tests or cases skipped (the tests print the library's message).
  grep -hE '^SKIP:|\[  SKIPPED \]|Skipped$|skipped:' "$out"/logs/*.log "$build/Testing/Temporary/LastTest.log" \
    2>/dev/null | sed -E 's/^[0-9]+: //' | sort | uniq -c | head -20 |
    sed 's/^/    /'
} >> "$summary"
if [ "$nfail" -gt 0 ]; then
  echo '```' >> "$summary"
  grep -E '\[  FAILED  \]|Failure|rank [0-9]+\]' "$out/logs/ctest.log" 2>/dev/null | head -40 >> "$summary"
  echo '```' >> "$summary"
fi

# -------------------------------------------------------------- benchmarks ---
echo >> "$summary"
echo "## GPU benchmarks" >> "$summary"
if [ "${#GPU_BENCHES[@]}" -eq 0 ]; then echo "(none listed in GPU_BENCHES)" >> "$summary"; fi
for b in "${GPU_BENCHES[@]}"; do
  t=${b%%|*}
  args=${b#*|}
  [ "$args" = "$b" ] && args=""
  exe=$(find "$build" -type f -executable -name "$t" | head -1)
  echo >> "$summary"
  echo "### $t $args" >> "$summary"
  if [ -z "$exe" ]; then echo "(not built)" >> "$summary"; continue; fi
  note "benchmark $t"
  # shellcheck disable=SC2086
  timeout "${TSR_DEVICE_BENCH_TIMEOUT:-180}" "$exe" $args > "$out/logs/$t.log" 2>&1
  rc=$?
  echo '```' >> "$summary"
  tail -60 "$out/logs/$t.log" >> "$summary"
  echo '```' >> "$summary"
  echo "(exit $rc)" >> "$summary"
done

echo >> "$summary"
echo "- total: $(elapsed) s" >> "$summary"
note "summary: $summary"
cat "$summary"
[ "$nfail" -eq 0 ]
