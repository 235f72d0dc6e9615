#!/bin/bash
# Images per second of tessera's sample ResNet against PyTorch (Debian's
# python3-torch 1.13, CPU) on the same model, input and batch, side by side:
# the variants alternate, ROUNDS times, and each prints the median img/s of
# its timed steps (steps 4.. of a run; wall clock), the best step, and the
# median images per CPU-second of the process (rank 0 for tessera; all
# threads for torch, spin-waiting included). Optional; not part of CI.
#
#   benchmarks/resnet_vs_torch.sh BUILD_DIR [ROUNDS] [BATCH] [DEPTH] [WIDTH] [STEPS]
#
# Variants (2 cores):
#   tessera-1r     1 rank, OpenBLAS 1 thread (direct convolution kernels where the CPU has AVX2 or AVX-512)
#   tessera-1r-im2col  the same with TSR_RESNET_DIRECT=0 (every convolution im2col + OpenBLAS SGEMM)
#   tessera-1r-2t  1 rank, OpenBLAS 2 threads
#   tessera-2r     2 ranks (data parallel), OpenBLAS 1 thread each
#   torch-1t       torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1
#   torch-2t       torch.set_num_threads(2), OPENBLAS_NUM_THREADS=2, OMP_WAIT_POLICY=PASSIVE
#                  (the best single-process setting: apps-baseline-and-data.md)
set -eu
build=${1:?usage: resnet_vs_torch.sh BUILD_DIR [ROUNDS] [BATCH] [DEPTH] [WIDTH] [STEPS]}
rounds=${2:-3} batch=${3:-128} depth=${4:-20} width=${5:-16} steps=${6:-12}
here=$(cd "$(dirname "$0")" && pwd)
prog=$build/apps/resnet/tessera_resnet
mpiexec=$(grep -m1 '^MPIEXEC_EXECUTABLE' "$build/CMakeCache.txt" | cut -d= -f2)
extra=()
[[ $mpiexec == *openmpi* ]] && extra=(--oversubscribe)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limit=$((batch * (steps + 1)))

tessera() {  # ranks blas-threads [direct: 1 (default) or 0]
  TSR_RESNET_DIRECT=${3:-1} OPENBLAS_NUM_THREADS=$2 OMP_NUM_THREADS=1 "$mpiexec" -n "$1" "${extra[@]}" "$prog" --depth "$depth" \
    --width "$width" --batch "$batch" --steps "$steps" --train-limit "$limit" --test-limit 500 \
    --optimizer sgd --quiet --no-report --csv "$tmp/t" > /dev/null
  # median img/s of steps 4..
  /usr/bin/python3 -c "
import csv, statistics
rows = list(csv.DictReader(open('$tmp/t_steps.csv')))[3:]
r = [float(x['images_per_s']) for x in rows]
c = [float(x['images_per_cpu_s']) for x in rows]
print(f'{statistics.median(r):.1f} (best {max(r):.1f}); {statistics.median(c):.1f} img/cpu-s (rank 0)')"
}
torch() {  # threads
  local env=(OPENBLAS_NUM_THREADS=1)
  [ "$1" -gt 1 ] && env=(OPENBLAS_NUM_THREADS="$1" OMP_WAIT_POLICY=PASSIVE)
  env "${env[@]}" /usr/bin/python3 "$here/resnet_torch.py" speed --depth "$depth" --width "$width" \
    --batch "$batch" --steps $((steps - 3)) --threads "$1" |
    sed -n 's/.*median [0-9.]* ms\/step (\([0-9.]*\) img\/s), min [0-9.]* ms\/step (\([0-9.]*\) img\/s).*; \([0-9.]*\) img\/cpu-s/\1 (best \2); \3 img\/cpu-s/p'
}

echo "ResNet-$depth width $width, batch $batch, 28x28x1, $steps steps per run, $rounds rounds; $(nproc) cores;" \
     "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  echo "round $r: tessera-1r     $(tessera 1 1)"
  echo "round $r: torch-1t       $(torch 1)"
  echo "round $r: tessera-2r     $(tessera 2 1)"
  echo "round $r: torch-2t       $(torch 2)"
  echo "round $r: tessera-1r-2t  $(tessera 1 2)"
  echo "round $r: tessera-1r-im2col $(tessera 1 1 0)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
