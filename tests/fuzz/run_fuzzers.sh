#!/usr/bin/env bash
# Runs the fuzzers of a TSR_FUZZ=ON build (tests/fuzz/CMakeLists.txt), each
# for a fixed time, from its seed corpus (copied: new inputs stay in the work
# directory, never in the repository). Prints one line per fuzzer (executions,
# executions per second, corpus size) and PASSED or FAILED; exit status 1 if
# any fuzzer found a crash, a leak, a timeout or undefined behaviour: the
# input is kept as WORK/<reader>/crash-* (copy it to corpus/<reader>/ once
# fixed, as a regression input).
#
#   tests/fuzz/run_fuzzers.sh BUILD_DIR [SECONDS_EACH (60)] [READER...]
#
# READER: profile tsrbin rdb idx (the default: target fuzzers) or optstate
# (target fuzzers_mpi, the whole library instrumented; not in the default).
#
# Environment: TSR_FUZZ_WORK (default BUILD_DIR/fuzz-work, wiped first),
# TSR_FUZZ_JOBS (fuzzers run at once, default 1).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run_fuzzers.sh BUILD_DIR [SECONDS_EACH] [READER...]}
secs=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))
readers=("$@")
if ((${#readers[@]} == 0)); then readers=(profile tsrbin rdb idx); fi
work=${TSR_FUZZ_WORK:-$build/fuzz-work}
rm -rf "$work"
mkdir -p "$work"

run_one() {
  local r=$1 bin=$build/tests/fuzz/fuzz_$1 dir=$work/$1
  mkdir -p "$dir/corpus"
  if [ ! -x "$bin" ]; then
    echo "fuzz_$r: FAILED: $bin not built (cmake --build $build --target fuzzers)" > "$dir/result"
    return
  fi
  cp "$here/corpus/$r"/* "$dir/corpus/" 2>/dev/null
  local rc=0 extra=() asan=${ASAN_OPTIONS:-}
  # fuzz_optstate initialises MPI: MPI libraries keep memory to the end of
  # the process, which LeakSanitizer would report (per input and at exit).
  if [ "$r" = optstate ]; then
    extra=(-detect_leaks=0)
    asan=${asan:+$asan:}detect_leaks=0
  fi
  # -timeout: one input taking longer is a hang; -rss_limit_mb/-malloc_limit_mb:
  # one allocation or the process above 2 GiB is a failure (a header must not
  # make a reader allocate what the file cannot hold).
  ASAN_OPTIONS=$asan "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$dir/" "${extra[@]}" "$dir/corpus" > "$dir/log" 2>&1 || rc=$?
  local execs rate units crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  units=$(ls "$dir/corpus" | wc -l)
  crashes=$(ls "$dir" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | tr '\n' ' ')
  if [ "$rc" -eq 0 ] && [ -z "$crashes" ]; then
    printf 'fuzz_%-8s ok: %s executions in %ss (%s/s), corpus %s inputs\n' "$r" "${execs:-?}" "$secs" "${rate:-?}" "$units" \
      > "$dir/result"
  else
    printf 'fuzz_%-8s FAILED (exit %s): %s see %s/log\n' "$r" "$rc" "${crashes:-}" "$dir" > "$dir/result"
  fi
}

jobs=${TSR_FUZZ_JOBS:-1}
running=0
for r in "${readers[@]}"; do
  run_one "$r" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
for r in "${readers[@]}"; do
  cat "$work/$r/result"
  grep -q FAILED "$work/$r/result" && failed=1
done
if ((failed)); then
  for r in "${readers[@]}"; do
    grep -q FAILED "$work/$r/result" && { echo "--- fuzz_$r (last lines of $work/$r/log)"; tail -25 "$work/$r/log"; }
  done
  echo "FUZZ FAILED"
  exit 1
fi
echo "FUZZ PASSED"
