#!/usr/bin/env bash
# Trains a DFlash drafter for a GGUF target on the GPU machine: the target's greedy responses to the
# prepared prompts (stage `prepare`, done on the CPU machine: a data folder of token ids), then the
# drafter (engine_bridge/training/train_chat.py). Needs only python3 with torch (CUDA) + numpy and
# the gguf wheel from .gpu-bundle/whl; no llama.cpp.
#
# Usage, from the project root on the GPU machine:
#   bash gpu/gpu_train.sh join [PARTS_GLOB] [DEST]   # cat .gpu-carry/smol.gguf.part* > /tmp/smol.gguf
#   bash gpu/gpu_train.sh start TARGET.gguf DATA_DIR # generate + train in the background (setsid)
#   bash gpu/gpu_train.sh follow [N]                 # progress for up to N s (default 500); packs $OUT when done
#   bash gpu/gpu_train.sh status | pack | stop
# Environment: GEN_SECONDS (180), TRAIN_SECONDS (540), RUN (/tmp/dflash-train), EXTRA (more
#   train_chat flags, e.g. "--layers 3 --batch 32"), GPUS (1; N > 1: each GPU generates one share of
#   the prompts for GEN_SECONDS, the shares join into one pool (engine_bridge.training.shards), and
#   torchrun trains on all N, --batch sequences per GPU). A second `start` after a stop resumes from
#   the last checkpoint (generated data are kept in $RUN/gen).
# $OUT after `pack` (<= 8 files, each < 16 MiB): drafter-NN.safetensors (f16 shards), drafter.json,
#   train-log.txt, gen-stats.json, run-summary.json, responses.npz (the generated token ids).
set -u
B=${BUNDLE:-.gpu-bundle}; RUN=${RUN:-/tmp/dflash-train}; OUT=${OUT:-/tmp/out}
here=$(pwd)
export PYTHONPATH=/tmp/site:$here PYTHONUNBUFFERED=1

say() { mkdir -p "$RUN"; echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$RUN/progress.log"; }

wheels() {
  python3 -c "import gguf" 2>/dev/null && return 0
  PYTHONPATH=/tmp/site python3 -c "import gguf" 2>/dev/null && return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl
}

case "${1:-}" in
  join)
    glob=${2:-.gpu-carry/smol.gguf.part}; dest=${3:-/tmp/smol.gguf}
    cat "$glob"* > "$dest.tmp" && mv "$dest.tmp" "$dest"
    ls -l "$dest"; sha256sum "$dest"
    ;;
  start)
    target=${2:?target GGUF}; data=${3:?prepared data folder}
    [ -f "$target" ] || { echo "no target $target"; exit 2; }
    [ -f "$data/meta.json" ] || { echo "no prepared data in $data (meta.json)"; exit 2; }
    wheels || { say "wheel install failed"; exit 1; }
    mkdir -p "$RUN"
    cp -r "$data" "$RUN/data.tmp" && rm -rf "$RUN/data" && mv "$RUN/data.tmp" "$RUN/data"
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader | tee -a "$RUN/progress.log"
    G=${GPUS:-1}
    say "start: target $target, data $data, gen ${GEN_SECONDS:-180} s, train ${TRAIN_SECONDS:-540} s, $G GPU(s)"
    args="--target $target --data $RUN/data --gen-seconds ${GEN_SECONDS:-180} --seconds ${TRAIN_SECONDS:-540} ${EXTRA:-}"
    # GPUS > 1: train_chat's --gpus (engine_bridge/training/launch.py) runs a generating process per
    # GPU, joins their shares into one pool, then torchrun over all of them (NVLink multicast off)
    setsid nohup python3 -m engine_bridge.training.train_chat $args --out "$RUN" --gpus "$G" \
      > "$RUN/stdout.log" 2>&1 < /dev/null &
    echo $! > "$RUN/pid"
    sleep 20; tail -5 "$RUN/stdout.log" | cut -c1-200
    ;;
  status)
    pid=$(cat "$RUN/pid" 2>/dev/null); if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "running (pid $pid)"; else echo "not running"; fi
    tail -5 "$RUN/stdout.log" 2>/dev/null
    ;;
  stop)
    pid=$(cat "$RUN/pid" 2>/dev/null); [ -n "$pid" ] && kill "$pid" && echo "stopped $pid"
    ;;
  follow)
    n=${2:-500}; t0=$(date +%s); pid=$(cat "$RUN/pid" 2>/dev/null)
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$n" ]; do sleep 10; done
    grep -v "^W1\|OMP_NUM_THREADS\|^\*\*\*" "$RUN/stdout.log" | tail -25
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "still running"; else bash "$0" pack; fi
    ;;
  pack)
    mkdir -p "$OUT"
    cp "$RUN"/drafter-*.safetensors "$RUN"/drafter.json "$OUT"/ 2>/dev/null
    cp "$RUN"/train-log.txt "$RUN"/run-summary.json "$OUT"/ 2>/dev/null
    cp "$RUN"/gen/gen-stats.json "$OUT"/ 2>/dev/null
    # the pool comes back when it fits (a file of at most 16 MiB); a several-GPU pool does not
    [ "$(stat -c %s "$RUN/gen/responses.npz" 2>/dev/null || echo 0)" -le 15728640 ] && cp "$RUN"/gen/responses.npz "$OUT"/
    tar czf "$OUT"/gen-logs.tgz -C "$RUN" $(cd "$RUN" && ls shard-*/train-log.txt shard-*/gen/gen-stats.json stdout.log progress.log 2>/dev/null) 2>/dev/null
    ls -l "$OUT"
    ;;
  *)
    sed -n 2,20p "$0"; exit 2
    ;;
esac
