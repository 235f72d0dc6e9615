#!/usr/bin/env bash
# tessera-gpt against the PyTorch baseline (benchmarks/gpt_torch.py), the
# same model (4 layers, width 256, 4 heads, seq 128, batch 16), alternating
# the variants for ROUNDS rounds of STEPS steps each; prints every run's
# median step time (first step excluded) and, at the end, the median over
# rounds per variant. Needs python3-torch (optional) for the torch rows.
#
#   benchmarks/gpt_compare.sh BUILD_DIR [ROUNDS=3] [STEPS=8]
set -euo pipefail
build=${1:?usage: gpt_compare.sh BUILD_DIR [ROUNDS] [STEPS]}
rounds=${2:-3}
steps=${3:-8}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gpt=$build/apps/gpt/tessera-gpt
mpiexec=$(grep -m1 '^MPIEXEC_EXECUTABLE' "$build/CMakeCache.txt" | cut -d= -f2)
extra=()
[[ $mpiexec == *openmpi* ]] && extra=(--oversubscribe)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
common=(--steps "$steps" --sample 0 --no-report --eval-batches 1 --log-every 1000 --optimizer adamw)
declare -A runs
run() {  # name command...
  local name=$1; shift
  local out ms
  out=$("$@" 2>&1) || { echo "$name: failed"; echo "$out" | tail -5; return; }
  ms=$(echo "$out" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | tail -1)
  printf '%-34s %8s ms\n' "$name" "$ms"
  runs[$name]="${runs[$name]:-} $ms"
}
for ((r = 1; r <= rounds; ++r)); do
  echo "--- round $r ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
  run "tessera 1 rank, 2 BLAS threads" env OPENBLAS_NUM_THREADS=2 "$gpt" "${common[@]}"
  run "torch 1 proc, 2 threads, PASSIVE" env OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=2 \
      /usr/bin/python3 "$here/gpt_torch.py" --threads 2 --steps "$steps" --quiet
  run "tessera DP 2 (1 thread each)" env OPENBLAS_NUM_THREADS=1 "$mpiexec" -n 2 "${extra[@]}" "$gpt" "${common[@]}" --dp 2
  run "torch DDP 2 x 1 thread (gloo)" env OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \
      /usr/bin/python3 "$here/gpt_torch.py" --threads 1 --ddp 2 --steps "$steps" --quiet
  run "tessera TP 2 (1 thread each)" env OPENBLAS_NUM_THREADS=1 "$mpiexec" -n 2 "${extra[@]}" "$gpt" "${common[@]}" --tp 2
  run "tessera SP 2 (1 thread each)" env OPENBLAS_NUM_THREADS=1 "$mpiexec" -n 2 "${extra[@]}" "$gpt" "${common[@]}" --sp 2
  run "tessera 1 rank, 1 BLAS thread" env OPENBLAS_NUM_THREADS=1 "$gpt" "${common[@]}"
  run "torch 1 proc, 1 thread" env OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 \
      /usr/bin/python3 "$here/gpt_torch.py" --threads 1 --steps "$steps" --quiet
done
echo "--- median over rounds (ms per step; 42.7 GFLOP per step)"
for name in "${!runs[@]}"; do
  printf '%-34s %s\n' "$name" "$(echo ${runs[$name]} | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "median %.0f ms  min %.0f ms  (%d runs)  %.1f GFLOP/s", m, a[1], NR, 42.7/(m/1000)}')"
done | sort
