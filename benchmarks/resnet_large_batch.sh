#!/bin/bash
# The large-batch experiment of the sample ResNet: a fixed epoch budget at
# batch 128, 1024 and 4096 (4096 by gradient accumulation over micro-batches
# of 1024), LARS against SGD with momentum, learning rate scaled with the
# batch (defaults of tessera_resnet: SGD 0.1*B/128, LARS 2*sqrt(B/128)) and
# warmup; prints a table of test accuracy against batch size and, where
# matplotlib is installed, plots it (PNG). Optional; not part of CI.
#
#   benchmarks/resnet_large_batch.sh BUILD_DIR OUT_DIR [EPOCHS] [DEPTH] [WIDTH] [RANKS] [PARALLEL] [TRAIN_LIMIT]
#
# PARALLEL runs go at once (each on RANKS ranks); TRAIN_LIMIT: the first N
# training images (0: all 60,000).
set -eu
build=${1:?usage: resnet_large_batch.sh BUILD_DIR OUT_DIR [EPOCHS] [DEPTH] [WIDTH] [RANKS] [PARALLEL]}
out=${2:?OUT_DIR}
epochs=${3:-2} depth=${4:-8} width=${5:-8} ranks=${6:-1} parallel=${7:-2} limit=${8:-0}
prog=$build/apps/resnet/tessera_resnet
mpiexec=$(grep -m1 '^MPIEXEC_EXECUTABLE' "$build/CMakeCache.txt" | cut -d= -f2)
extra=()
[[ $mpiexec == *openmpi* ]] && extra=(--oversubscribe)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mkdir -p "$out"
runs=()
for b in 128 1024 4096; do
  for o in sgd lars; do runs+=("$o $b"); done
done
run() {
  local o=$1 b=$2 micro=$2 warm=0
  [ "$b" -gt 1024 ] && micro=1024
  [ "$b" -gt 128 ] && warm=0.5
  "$mpiexec" -n "$ranks" "${extra[@]}" "$prog" --depth "$depth" --width "$width" --batch "$b" --micro "$micro" \
    --optimizer "$o" --epochs "$epochs" --warmup "$warm" --eval-every 1 --train-limit "$limit" --csv "$out/${o}_$b" \
    > "$out/${o}_$b.log" 2>&1
}
i=0
[ "${TSR_SUMMARY_ONLY:-0}" = 1 ] && runs=()  # only tabulate and plot existing results
for r in "${runs[@]}"; do
  run $r &
  i=$((i + 1))
  if [ $((i % parallel)) -eq 0 ]; then wait; fi
done
wait
/usr/bin/python3 - "$out" <<'PY'
import csv, sys, os
out = sys.argv[1]
rows = []
for b in (128, 1024, 4096):
    line = [str(b)]
    for o in ("sgd", "lars"):
        f = f"{out}/{o}_{b}_epochs.csv"
        r = list(csv.DictReader(open(f))) if os.path.exists(f) else []
        acc = float(r[-1]["test_acc"]) if r else float("nan")
        ips = sum(float(x["images_per_s"]) for x in r) / len(r) if r else float("nan")
        line += [f"{acc:.4f}", f"{ips:.0f}"]
        rows.append((o, b, acc))
    print("| " + " | ".join(line) + " |")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for o, lab in (("sgd", "SGD + momentum"), ("lars", "LARS")):
        pts = [(b, a) for oo, b, a in rows if oo == o]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=lab)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("test accuracy")
    ax.set_title("Fashion-MNIST, fixed epoch budget")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/large_batch.png", dpi=120)
    print(f"plot: {out}/large_batch.png")
    # Training loss against images seen, every run.
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for o in ("sgd", "lars"):
        for b in (128, 1024, 4096):
            f = f"{out}/{o}_{b}_steps.csv"
            if not os.path.exists(f):
                continue
            r = list(csv.DictReader(open(f)))
            ax.plot([int(x["step"]) * b for x in r], [float(x["loss"]) for x in r],
                    "-" if o == "lars" else "--", label=f"{o.upper()} {b}")
    ax.set_xlabel("training images seen")
    ax.set_ylabel("training loss")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{out}/large_batch_loss.png", dpi=120)
    print(f"plot: {out}/large_batch_loss.png")
except ImportError:
    print("matplotlib not installed: no plot")
PY
