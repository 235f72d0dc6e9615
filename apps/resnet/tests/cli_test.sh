#!/bin/bash
# The command line of tessera_resnet under MPI: bad configurations exit with
# 2 and a message naming the option on every rank; a tiny valid run trains,
# prints the test accuracy and the accounting report, and writes its CSVs.
#   cli_test.sh OUTDIR DATADIR MPIEXEC NP-FLAG [PREFLAGS...] -- PROGRAM
set -u
out=$1 data=$2
shift 2
launch=()
while [ "$1" != "--" ]; do launch+=("$1"); shift; done
shift
prog=$1
mkdir -p "$out"
fail=0
bad() {  # bad EXPECTED-TEXT ARGS...
  local want=$1
  shift
  local log rc n
  log=$("${launch[@]}" 2 "$prog" "$@" 2>&1)
  rc=$?
  n=$(printf '%s\n' "$log" | grep -c "tessera_resnet (rank [01]): .*$want")
  if [ "$rc" -ne 2 ] || [ "$n" -ne 2 ]; then
    echo "FAILED: '$*' gave exit $rc and $n of 2 rank messages containing '$want':"
    printf '%s\n' "$log" | head -5
    fail=1
  else
    echo "ok: '$*' -> exit 2 on both ranks: $(printf '%s\n' "$log" | grep -m1 'rank 0')"
  fi
}
bad "unknown option '--bogus'" --bogus
bad "--depth 9: must be 6n+2" --depth 9
bad "--batch 0: must be at least 1" --batch 0
bad "--micro 3 .* is not a multiple of the 2 ranks" --batch 3
bad "--micro 48: must divide --batch 64" --batch 64 --micro 48
bad "--optimizer 'adam': must be lars or sgd" --optimizer adam
bad "--lr 'x': not a number" --lr x
bad "--epochs needs a value" --epochs

# A tiny run: 6 steps of ResNet-8 on 2 ranks, CSVs and the report.
log=$("${launch[@]}" 2 "$prog" --data "$data" --depth 8 --width 8 --batch 32 --micro 16 --train-limit 96 \
      --test-limit 100 --epochs 2 --sync-bn --dist sharded --csv "$out/tiny" 2>&1)
rc=$?
steps=$(($(wc -l < "$out/tiny_steps.csv") - 1))
epochs=$(($(wc -l < "$out/tiny_epochs.csv") - 1))
if [ "$rc" -ne 0 ] || [ "$steps" -ne 6 ] || [ "$epochs" -ne 2 ] ||
   ! printf '%s\n' "$log" | grep -q '^final: test accuracy 0\.[0-9]* (loss' ||
   ! printf '%s\n' "$log" | grep -q 'tessera accounting' ||
   ! printf '%s\n' "$log" | grep -q 'forward_backward'; then
  echo "FAILED: tiny run (exit $rc, $steps step rows, $epochs epoch rows)"
  printf '%s\n' "$log" | tail -20
  fail=1
else
  echo "ok: tiny run: $(printf '%s\n' "$log" | grep '^final')"
fi
# Missing data: a clear message, exit 1.
log=$("${launch[@]}" 1 "$prog" --data "$out/nowhere" --steps 1 2>&1)
rc=$?
if [ "$rc" -eq 0 ] || ! printf '%s\n' "$log" | grep -q "cannot open $out/nowhere/train-images-idx3-ubyte.gz"; then
  echo "FAILED: missing data (exit $rc)"; printf '%s\n' "$log" | head -5; fail=1
else
  echo "ok: missing data -> exit $rc: $(printf '%s\n' "$log" | grep -m1 'cannot open')"
fi
exit $fail
