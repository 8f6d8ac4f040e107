#!/usr/bin/env bash
# Drafter trainings side by side on one several-GPU machine, on one pool: an A/B (or A/B/C...) of a
# training change with everything else equal (the pool, the warm start, the steps' clock, the
# held-out answers). The pool is generated once on all GPUs (train_chat --gpus N --stage generate),
# then every arm trains at once on its own GPUs (train_chat --gpus ARM_GPUS --stage train, each under
# its own torchrun), all from the same `gen/`. GPUs left over (e.g. GPU 3 with three one-GPU arms)
# are free for a bench beside the training. Needs python3 with torch (CUDA) + numpy and the gguf
# wheel from the bundle; no llama.cpp.
#
# Usage, from the project root on the GPU machine:
#   bash gpu/gpu_train_ab.sh start TARGET.gguf DATA_DIR   # both stages in the background (setsid)
#   bash gpu/gpu_train_ab.sh follow [N]                   # progress for up to N s (default 500)
#   bash gpu/gpu_train_ab.sh pack ARM                     # that arm's f16 shards + logs into $OUT
#   bash gpu/gpu_train_ab.sh status | stop
#   bash gpu/gpu_train_ab.sh eval [NAME=DRAFTER.gguf ...]  # every arm exported (q8_0) and benched on
#       the public prompts, one drafter per GPU at once, the extra drafters too (e.g. the warm start);
#       needs the CUDA engine in /tmp/lcp_site (gpu_ncu.sh restore); more drafters than GPUs share them
#       (at once: commit lengths compare, tok/s do not); EVAL_LIMIT (24) prompts per suite,
#       EVAL_SWEEP ("--sweep verify=chain,tree --sweep budget=7,15"); bench JSON + summary in $OUT
# Environment: GPUS (4), ARMS ("A B"), ARM_GPUS (GPUs per arm; default GPUS / arms), GEN_SECONDS
#   (240), TRAIN_SECONDS (600), COMMON (train_chat flags of every arm), ARM_A / ARM_B / ARM_C ...
#   (each arm's own flags, e.g. ARM_B="--ffn 4608"), RUN (/tmp/dflash-ab), BUNDLE, SHARE_GPUS (1: every
#   arm trains at once on the same ARM_GPUS GPUs, sharing them -- a one-GPU machine's A/B: each arm
#   gets part of the GPU, under the same clock, so the arms compare with each other, not with a
#   sitting that had a GPU per arm).
# $OUT after `pack X` (<= 8 files): drafter-NN.safetensors, drafter.json, train-log.txt,
#   run-summary.json, and (the first arm) gen-stats.json + logs.tgz. A wide drafter's shards may take
#   4-5 files, so each arm is packed by its own call.
set -u
B=${BUNDLE:-.gpu-bundle}; RUN=${RUN:-/tmp/dflash-ab}; OUT=${OUT:-/tmp/out}
G=${GPUS:-4}
# the arms of a started run are remembered, so that status and pack need not be told again
[ -z "${ARMS:-}" ] && [ -f "$RUN/arms" ] && ARMS=$(cat "$RUN/arms"); ARMS=${ARMS:-A B}
NA=$(echo $ARMS | wc -w); H=${ARM_GPUS:-$((G / NA))}
here=$(pwd)
export PYTHONPATH=/tmp/site:$here PYTHONUNBUFFERED=1

say() { mkdir -p "$RUN"; echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$RUN/progress.log"; }

case "${1:-}" in
  start)
    target=${2:?target GGUF}; data=${3:?prepared data folder}
    [ -f "$target" ] || { echo "no target $target"; exit 2; }
    [ -f "$data/meta.json" ] || { echo "no prepared data in $data (meta.json)"; exit 2; }
    [ "$H" -ge 1 ] && { [ $((H * NA)) -le "$G" ] || [ "${SHARE_GPUS:-0}" = 1 ]; } \
      || { echo "$NA arms of $H GPUs do not fit in $G GPUs (SHARE_GPUS=1: every arm on the same ones)"; exit 2; }
    python3 -c "import gguf" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --target /tmp/site "$B"/whl/*.whl || { say "wheel install failed"; exit 1; }
    mkdir -p "$RUN"; echo "$ARMS" > "$RUN/arms"
    cp -r "$data" "$RUN/data.tmp" && rm -rf "$RUN/data" && mv "$RUN/data.tmp" "$RUN/data"
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$RUN/progress.log"
    say "start: $G GPUs, gen ${GEN_SECONDS:-240} s, train ${TRAIN_SECONDS:-600} s per arm on $H GPUs"
    say "common: ${COMMON:-}"
    # one background job: the pool, then every arm at once; each step's exit status goes to the log
    {
      echo "set -u"
      echo "cd \"$here\""
      echo "tc=\"python3 -m engine_bridge.training.train_chat --target $target --data $RUN/data\""
      echo "\$tc --out $RUN/pool --gpus $G --stage generate --gen-seconds ${GEN_SECONDS:-240} ${COMMON:-} > $RUN/pool.log 2>&1"
      echo "echo \"pool exit \$?\" >> $RUN/progress.log"
      k=0
      for a in $ARMS; do
        v=ARM_$a; flags=${!v:-}
        devs=$(seq -s, $((k * H)) $((k * H + H - 1))); [ "${SHARE_GPUS:-0}" = 1 ] && devs=$(seq -s, 0 $((H - 1)))
        say "arm $a on GPUs $devs: $flags" >&2
        echo "mkdir -p $RUN/$a && ln -sfn $RUN/pool/gen $RUN/$a/gen"
        echo "CUDA_VISIBLE_DEVICES=$devs \$tc --out $RUN/$a --gpus $H --stage train --seconds ${TRAIN_SECONDS:-600} ${COMMON:-} $flags > $RUN/$a.log 2>&1 &"
        echo "p_$a=\$!"
        k=$((k + 1))
      done
      for a in $ARMS; do echo "wait \$p_$a; echo \"$a exit \$?\" >> $RUN/progress.log"; done
      echo "echo done >> $RUN/progress.log"
    } > "$RUN/job.sh"
    setsid nohup bash "$RUN/job.sh" > "$RUN/job.log" 2>&1 < /dev/null &
    echo $! > "$RUN/pid"
    sleep 20; tail -3 "$RUN/pool.log" 2>/dev/null | cut -c1-200
    ;;
  status)
    pid=$(cat "$RUN/pid" 2>/dev/null); if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "running (pid $pid)"; else echo "not running"; fi
    cat "$RUN/progress.log" 2>/dev/null | tail -5
    for f in pool $ARMS; do echo "-- $f"; grep -v "^W1\|OMP_NUM_THREADS\|^\*\*\*" "$RUN/$f.log" 2>/dev/null | tail -3 | cut -c1-220; done
    ;;
  stop)
    pid=$(cat "$RUN/pid" 2>/dev/null); [ -n "$pid" ] && kill -- -"$pid" 2>/dev/null; pkill -f "engine_bridge.training.train_chat" ; echo stopped
    ;;
  follow)
    n=${2:-500}; t0=$(date +%s); pid=$(cat "$RUN/pid" 2>/dev/null)
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$n" ]; do sleep 10; done
    bash "$0" status
    ;;
  pack)
    arm=${2:?an arm: one of $ARMS}; mkdir -p "$OUT"
    cp "$RUN/$arm"/drafter-*.safetensors "$RUN/$arm"/drafter.json "$OUT"/ 2>/dev/null
    cp "$RUN/$arm"/train-log.txt "$OUT"/ 2>/dev/null
    cp "$RUN/$arm"/run-summary.json "$OUT"/ 2>/dev/null
    if [ "$arm" = "${ARMS%% *}" ]; then
      cp "$RUN"/pool/gen/gen-stats.json "$OUT"/ 2>/dev/null
      tar czf "$OUT"/logs.tgz -C "$RUN" $(cd "$RUN" && ls progress.log job.sh pool.log $(for a in $ARMS; do echo $a.log $a/train-log.txt $a/run-summary.json; done) pool/shard-*/gen/gen-stats.json 2>/dev/null) 2>/dev/null
    fi
    ls -l "$OUT"
    ;;
  eval)
    shift; mkdir -p "$OUT" "$RUN/eval"; k=0; pids=""
    # one drafter per GPU; more drafters than GPUs share them (run at once: their commit lengths
    # compare, their tok/s do not -- a one-GPU machine's eval, sitting 12)
    NG=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU"); [ "$NG" -ge 1 ] || NG=1
    T=$(sed -n 's/.*--target \([^ ]*\) .*/\1/p' "$RUN/job.sh" | head -n 1)
    [ -f "$T" ] || { echo "no started run in $RUN (its job.sh names the target)"; exit 2; }
    for a in $ARMS "$@"; do
      case "$a" in
        *=*) name=${a%%=*}; d=${a#*=} ;;
        *) name=$a; d=$RUN/eval/$a.gguf
           PYTHONPATH=/tmp/lcp_site:/tmp/site:$here python3 -m engine_bridge.cli train-drafter --target "$T" --out "$d" \
             --data-dir "$RUN/data" --run-dir "$RUN/$a" --work "$RUN/eval/ex$a" --stage export > "$RUN/eval/export-$a.log" 2>&1 \
             || { echo "export of $a failed: $(tail -n 3 $RUN/eval/export-$a.log)"; continue; } ;;
      esac
      ( for S in mt-bench gsm8k humaneval; do
          CUDA_VISIBLE_DEVICES=$((k % NG)) PYTHONPATH=/tmp/lcp_site:/tmp/site:$here DFLASH_FA_ALL_QUANTS=0 timeout 500 \
            python3 -m engine_bridge.cli bench --target "$T" --draft "$d" --ngl 99 --suite $S --limit ${EVAL_LIMIT:-24} \
            --reps 1 --max-tokens 128 ${EVAL_SWEEP:---sweep verify=chain,tree --sweep budget=7,15} --quiet \
            --out "$RUN/eval/$name-$S.json" > "$RUN/eval/$name-$S.log" 2>&1
        done ) &
      pids="$pids $!"; k=$((k + 1))
    done
    for p in $pids; do wait $p; done
    python3 - "$RUN/eval" <<'PY' | tee "$OUT/eval.md"
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    name, suite = os.path.basename(f)[:-5].split("-", 1)
    d = json.load(open(f))
    for r in d.get("rows", []):
        rows.setdefault((name, suite), []).append(f"{r.get('label', '?')}: {r.get('mean_commit_len', 0):.2f} ({r.get('speedup', 0):.2f}x)")
for (name, suite), cells in sorted(rows.items()):
    print(f"| {name} | {suite} | " + " | ".join(cells) + " |")
PY
    tar czf "$OUT/eval.tgz" --exclude='*.gguf' --exclude='ex*' -C "$RUN" eval
    ;;
  *)
    sed -n 2,20p "$0"; exit 2
    ;;
esac
