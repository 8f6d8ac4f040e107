#!/usr/bin/env bash
# Issue 27's ablation in one held GPU machine: what raises acceptance, one change at a time against
# our recipe. The target answers one pool of the shipped real prompts' train split once (greedy and
# sampled, Magpie requests, follow-ups: train_chat's generate stage), then every configuration trains
# from scratch on that pool for the same number of steps (the lr schedule follows the steps), several
# at once on the GPU, each scored on the same held-out answers (the val split of the training
# sources: accepted drafts per block and within the first 7 slots). No public benchmark is touched.
#
# Here, first (hide the three large GGUFs from the tree; each call carries at most 64 MiB):
#   split -b 30M -d -a 2 SmolLM2-135M-Instruct.Q4_1.gguf .gpu-carry/s/s.part    # done once
# Usage, from the project root on the GPU machine (carry .gpu-bundle/whl, .gpu-carry/w/data and parts):
#   bash gpu/gpu_ablate.sh part .gpu-carry/s/s.part00 [...]   # keep parts (and the data) in /tmp
#   bash gpu/gpu_ablate.sh start                               # join + sha256, generate, then the grid
#   bash gpu/gpu_ablate.sh follow 540                          # progress; the table + JSONs to $OUT
# Environment: GEN_SECONDS (200), ABL_STEPS (1500), MAXPAR (runs at once; 6 on >100 GB, else 4),
#   ONLY (space-separated configuration names: run just these), EXTRA (flags for every run), DEVICE
#   (cpu: a dry run here, e.g. GEN_SECONDS=20 ABL_STEPS=2 EXTRA="--batch 2 --max-new 16" DEVICE=cpu).
set -u
B=${BUNDLE:-.gpu-bundle}; T=/tmp/t; A=/tmp/abl; OUT=${OUT:-/tmp/out}
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
S=$T/SmolLM2-135M-Instruct.Q4_1.gguf
here=$(pwd)
export PYTHONPATH=/tmp/site:$here PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p $T $A "$OUT"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a $A/progress.log; }

# name | train_chat flags (one change against the recipe: 3 layers, 5 target layers, block 16,
# gamma 7, hard labels only, the whole pool)
CONFIGS="
recipe|
layers-5|--layers 5
layers-1|--layers 1
target-layers-3|--n-target-layers 3
target-layers-8|--n-target-layers 8
block-8|--block-size 8
flat-weights|--gamma 1000
kl-0.5|--kl 0.5
data-1/8|--train-frac 0.125
data-1/4|--train-frac 0.25
data-1/2|--train-frac 0.5
"

case "${1:-}" in
  part)
    shift
    python3 -c "import gguf" 2>/dev/null || PYTHONPATH=/tmp/site python3 -c "import gguf" 2>/dev/null ||
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl
    [ -f .gpu-carry/w/data/meta.json ] && rm -rf $A/data && cp -r .gpu-carry/w/data $A/data
    for p in "$@"; do cp "$p" $T/; done
    ls -la $T $A/data 2>/dev/null | tail -12 ;;
  start)
    [ -f $S ] || cat $T/s.part* > $S
    echo "$SHA  $S" | sha256sum -c - || exit 1
    [ -f $A/data/meta.json ] || { echo "no prepared data in $A/data (carry .gpu-carry/w/data with a part)"; exit 2; }
    gb=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
    par=${MAXPAR:-$([ "${gb%%.*}" -gt 100000 ] && echo 6 || echo 4)}
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a $A/progress.log
    cat > $A/driver.sh <<EOF
cd $here
echo "[\$(date -u +%H:%M:%S)] generate ${GEN_SECONDS:-200} s" >> $A/progress.log
python3 -m engine_bridge.training.train_chat --target $S --data $A/data --out $A/pool --stage generate \
    --gen-seconds ${GEN_SECONDS:-200} ${DEVICE:+--device $DEVICE} ${EXTRA:-} > $A/gen.log 2>&1 || { echo "generation failed" >> $A/progress.log; exit 1; }
echo "[\$(date -u +%H:%M:%S)] generated: \$(tail -1 $A/gen.log)" >> $A/progress.log
while IFS='|' read -r name flags; do
  [ -z "\$name" ] && continue
  [ -n "${ONLY:-}" ] && ! echo " ${ONLY:-} " | grep -q " \$name " && continue
  while [ \$(jobs -r | wc -l) -ge $par ]; do sleep 5; done
  d=$A/runs/\${name//\//_}; mkdir -p \$d; ln -sfn $A/pool/gen \$d/gen
  echo "[\$(date -u +%H:%M:%S)] start \$name (\$flags)" >> $A/progress.log
  ( python3 -m engine_bridge.training.train_chat --target $S --data $A/data --out \$d --stage train \
      --max-steps ${ABL_STEPS:-1500} --seconds 100000 --patience 0 --ckpt-every 100000 ${DEVICE:+--device $DEVICE} ${EXTRA:-} \$flags > \$d/stdout.log 2>&1
    echo "[\$(date -u +%H:%M:%S)] end \$name rc=\$?" >> $A/progress.log ) &
done <<'CFG'
$CONFIGS
CFG
wait
echo "[\$(date -u +%H:%M:%S)] all done" >> $A/progress.log
EOF
    setsid bash $A/driver.sh < /dev/null > $A/driver.log 2>&1 &
    say "started: $par at once, ${ABL_STEPS:-1500} steps each"; sleep 15; tail -3 $A/gen.log ;;
  follow)
    n=${2:-540}; t0=$(date +%s)
    while ! grep -q "all done\|generation failed" $A/progress.log && [ $(( $(date +%s) - t0 )) -lt "$n" ]; do sleep 10; done
    tail -4 $A/gen.log; cat $A/progress.log
    for d in $A/runs/*; do [ -f $d/stdout.log ] && echo "$(basename $d): $(grep 'train: step' $d/stdout.log | tail -1)"; done
    python3 - "$A" > "$OUT"/ablation.md <<'PY'
import json, sys
from pathlib import Path
a = Path(sys.argv[1])
print("| configuration | flags | steps | held-out accepted / block | within 7 slots | slot-1 acc | val loss | step/s |")
print("|---|---|---|---|---|---|---|---|")
rows = {}
for line in (a / "progress.log").read_text().splitlines():
    if " start " in line:
        name, flags = line.split(" start ", 1)[1].split(" (", 1)
        rows[name] = flags.rstrip(")")
for name, flags in rows.items():
    f = a / "runs" / name.replace("/", "_") / "run-summary.json"
    if not f.is_file():
        print(f"| {name} | {flags} | (running or failed) | | | | | |")
        continue
    t = json.loads(f.read_text()).get("train", {})
    rate = t.get("steps", 0) / max(t.get("seconds", 1), 1e-9)
    print(f"| {name} | {flags or '(recipe)'} | {t.get('steps')} | {t.get('val_accepted_per_block')} | "
          f"{t.get('val_accepted_first7')} | {t.get('val_slot_acc', [None])[0]} | {t.get('val_loss')} | {rate:.1f} |")
PY
    cat "$OUT"/ablation.md
    tar czf "$OUT"/ablation-logs.tgz -C / ${A#/}/progress.log ${A#/}/gen.log $(cd / && ls ${A#/}/pool/gen/gen-stats.json \
        ${A#/}/runs/*/run-summary.json ${A#/}/runs/*/stdout.log 2>/dev/null) ;;
  *) sed -n 2,17p "$0"; exit 2 ;;
esac
