#!/usr/bin/env bash
# The LAMB claim in miniature (issue 12): a fixed token budget trained at
# batch 16, 64 and 256 with LAMB and with AdamW (LAMB without layer
# adaptation), the learning rate scaled by sqrt(batch / 16) from each
# optimizer's batch-16 rate, linear warmup over the first 10 % of the steps
# and cosine decay; the validation loss at the end of each run.
#
#   benchmarks/gpt_lamb_study.sh BUILD_DIR OUT_DIR [TOKENS=1048576] [RANKS=1]
#
# Writes OUT_DIR/<opt>_b<batch>.csv (the loss curves), OUT_DIR/lamb_study.csv
# (optimizer,batch,steps,lr,val_loss) and, where matplotlib is installed,
# OUT_DIR/lamb_study.png (benchmarks/plot_lamb_study.py). The model is small
# (2 layers, width 128, 4 heads, seq 128) so that the six runs take minutes.
# The runs alternate the optimizers batch by batch.
set -euo pipefail
build=${1:?usage: gpt_lamb_study.sh BUILD_DIR OUT_DIR [TOKENS] [RANKS]}
out=${2:?usage: gpt_lamb_study.sh BUILD_DIR OUT_DIR [TOKENS] [RANKS]}
tokens=${3:-1048576}
ranks=${4:-1}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gpt=$build/apps/gpt/tessera-gpt
[[ -x $gpt ]] || { echo "gpt_lamb_study.sh: $gpt not built" >&2; exit 2; }
mpiexec=$(grep -m1 '^MPIEXEC_EXECUTABLE' "$build/CMakeCache.txt" | cut -d= -f2)
extra=()
[[ $mpiexec == *openmpi* ]] && extra=(--oversubscribe)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
seq=128
model=(--layers 2 --width 128 --heads 4 --seq $seq)
mkdir -p "$out"
table=$out/lamb_study.csv
echo "optimizer,batch,steps,lr,val_loss" > "$table"
for batch in 16 64 256; do
  steps=$((tokens / (batch * seq)))
  (( steps >= 10 )) || { echo "gpt_lamb_study.sh: $tokens tokens give $steps steps at batch $batch; raise TOKENS" >&2; exit 2; }
  for opt in lamb adamw; do
    base=$([[ $opt == lamb ]] && echo 2e-2 || echo 2e-3)
    lr=$(python3 -c "import math; print('%.4g' % ($base * math.sqrt($batch / 16)))")
    csv=$out/${opt}_b${batch}.csv
    t0=$(date +%s)
    "$mpiexec" -n "$ranks" "${extra[@]}" "$gpt" "${model[@]}" --batch "$batch" --steps "$steps" \
      --optimizer "$opt" --lr "$lr" --warmup $((steps / 10)) --dp "$ranks" \
      --eval-batches 32 --log-every $((steps / 4)) --sample 0 --no-report --csv "$csv" > "$out/${opt}_b${batch}.log" 2>&1 \
      || { echo "run $opt batch $batch failed:"; tail -5 "$out/${opt}_b${batch}.log"; exit 1; }
    val=$(sed -n 's/^validation loss \([0-9.]*\).*/\1/p' "$out/${opt}_b${batch}.log" | tail -1)
    printf '%-6s batch %4d  %5d steps  lr %-8s  validation loss %s  (%d s)\n' "$opt" "$batch" "$steps" "$lr" "$val" $(( $(date +%s) - t0 ))
    echo "$opt,$batch,$steps,$lr,$val" >> "$table"
  done
done
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$here/plot_lamb_study.py" "$table" "$out/lamb_study.png"
fi
