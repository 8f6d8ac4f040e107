#!/usr/bin/env bash
# A sitting of issue 28 (and 27) on one GPU and the default pair, after s73 (docs/runs/2026-12-07-gpu/
# s73-h100-inject-slots/, run74.sh as run): AR runs are on for a GPU target now, and chain steps on a GPU
# get patch 0029's inject slots (s73: chain 5 1.0142x, tree 15 0.9885x). This sitting repeats the chain
# A/B, counts the CUDA graphs of the inject with and without slots (why tree lost), and runs the
# HumanEval bench that s72 and s73 did not finish, with the new defaults.
# What it measures, in this order (each later part is skipped when the lane runs out of time; PARTS
# picks some, default "inject bench gstats"):
#   depth  our AR against llama-bench at the same context depth (s70's part), with the engine's AR
#          one call a token (DFLASH_AR_RUN=0) and in runs (1, forced on the GPU) alternating rep by rep:
#          `llama-bench -p 0 -n 128 -d 0,128,256` and our AR from prompts of 1 / 128 / 256 tokens
#   ab     DFLASH_AR_RUN 0 / 1 on public prompts: AR, the first AB_PROMPTS (40) prompts of each public
#          suite, 2 rounds, one process, the side that goes first alternating (gpu/gpu_request_ab.py)
#   inject DFLASH_INJECT_SLOTS 0 / 16 (patch 0029: a graph slot per inject length) on the same prompts,
#          chain 5 (the GPU's default; INJECT_MODES, default "chain 5"), 2 rounds, one process a mode
#   bench  `dflash-studio bench` on the public sets in BENCH (default: HumanEval 164, which s72 did not
#          finish): AR, chain 5, chain 15, tree 5 and tree 15, one process a suite
#   gstats gstats.py (beside this script): DFLASH_GRAPH_STATS=1 (patch 0001's CUDA-graph counts, printed at
#          exit) and the inject's time a step, chain 5 and tree 15, slots 0 / 16 / 0 / 16, a process each
# Before the first call, here:
#   mkdir -p .gpu-carry/next && cp docs/runs/next/run74.sh docs/runs/next/gstats.py .gpu-carry/next/
#   PART_MIB=40 bash gpu/gpu_carry.sh split SmolLM2-135M-Instruct.Q4_1.gguf s48   (3 parts)
#   the bundle (.gpu-bundle: bash ../shared/gpu/make-offline-bundle.sh, its vocab GGUFs moved out)
#   bash gpu/gpu_carry.sh hide
# Calls: setup (.gpu-bundle, .gpu-carry/next, .gpu-carry/s48/MANIFEST), then `take s48` with part.00,
#   part.01, part.02 one per call, then `follow 560` until "lane done"; give the machine back at once.
#   After the sitting, here: bash gpu/gpu_carry.sh unhide.
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; K=/tmp/keep
TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
BIN=$W/peer/llama.cpp/build/bin
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$K/src PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
left() { echo $(( ${LANE_END:-0} - $(date +%s) )); }   # seconds the lane has left
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf $K; mkdir -p $K/src; cp -r $B/whl $B/peer-llama.cpp.tgz $K/
  cp -r engine_bridge benchmarks gpu packaging resources pyproject.toml $K/src/
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash $K/src/packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $K/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  cp resources/models/smollm2/drafter.gguf $DS
  cp -r .gpu-carry/next $K/next
  bash gpu/gpu_carry.sh take s48
  LANE_END=$(( $(date +%s) + ${LANE_SECONDS:-900} )) setsid bash $K/next/run74.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: build and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  cd $K/src || exit 1
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  P=" ${PARTS:-inject bench gstats} "
  if [[ $P == *" depth "* ]]; then
    ENGINE_LIB=/tmp/lcp_site/llama_cpp/lib bash gpu/gpu_peer_tools.sh $K/peer-llama.cpp.tgz $W/peer 16 > $W/peer_tools.log 2>&1
    say "peer tools rc=$? $(tail -n 1 $W/peer_tools.log)"
  fi
  while [ ! -f $TS.ok ]; do sleep 3; done
  if [[ $P == *" depth "* ]] && [ -x $BIN/llama-bench ]; then
    timeout 120 $BIN/llama-bench -m $TS -p 0 -n 128 -d 0,128,256 -ngl 99 -fa 1 -r 5 -o json > $R/llama-bench-depth.json 2> $R/llama-bench-depth.err
    say "llama-bench depth rc=$?"
  fi
  [[ $P == *" depth "* ]] && timeout 300 python3 - "$TS" "$DS" > $R/ar-depth.txt 2>&1 <<'PY'
import json, os, statistics, sys
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
target, draft = sys.argv[1], sys.argv[2]
with Engine.load(EngineConfig(target=target, draft=draft), preflight=PAIR_PREFLIGHT) as eng:
    base = eng.tokenize("The history of the city begins with a small settlement on the river, where traders met.")
    out = {}
    for depth in (1, 128, 256):
        toks = (base * (depth // len(base) + 1))[:depth]
        ts = {"0": [], "1": []}
        for rep in range(7):  # the first pair is a warm-up; the side that goes first alternates
            for side in ("0", "1") if rep % 2 == 0 else ("1", "0"):
                os.environ["DFLASH_AR_RUN"] = side
                eng.reset()
                r = eng.generate(toks, GenerationSettings(mode="ar", max_tokens=128, stop_at_eog=False))
                if rep:
                    ts[side].append(r.summary.tok_per_s)
        out[depth] = ts
        for side in ("0", "1"):
            print(f"depth {depth} AR_RUN={side}: AR {statistics.median(ts[side]):.1f} tok/s (runs {', '.join(f'{t:.1f}' for t in ts[side])})")
    print("RESULT " + json.dumps(out))
PY
  say "ar depth rc=$?"
  if [[ $P == *" ab "* ]]; then
    timeout $(( $(left) > 320 ? 300 : $(left) - 20 )) python3 gpu/gpu_request_ab.py --target $TS --draft $DS \
      --env DFLASH_AR_RUN --sides 0,1 --prompts ${AB_PROMPTS:-40} --rounds 2 --modes ar \
      --json $R/ab-ar-run.json > $R/ab-ar-run.txt 2>&1
    say "ab ar-run rc=$?"
  fi
  IFS=, read -ra INJECTS <<< "${INJECT_MODES:-chain 5}"
  for mb in "${INJECTS[@]}"; do
    set -- $mb
    [[ $P == *" inject "* ]] && [ $(left) -gt 150 ] || continue
    timeout $(( $(left) > 320 ? 300 : $(left) - 20 )) python3 gpu/gpu_request_ab.py --target $TS --draft $DS \
      --env DFLASH_INJECT_SLOTS --sides 0,16 --prompts ${AB_PROMPTS:-40} --rounds 2 --modes $1 --budget $2 \
      --json $R/ab-inject-$1$2.json > $R/ab-inject-$1$2.txt 2>&1
    say "ab inject $1 $2 rc=$?"
  done
  IFS=, read -ra BENCHES <<< "${BENCH:-humaneval 164}"
  for s in "${BENCHES[@]}"; do
    [[ $P == *" bench "* ]] || continue
    set -- $s
    [ $(left) -lt 120 ] && { say "skip bench $1: $(left) s left"; continue; }
    timeout $(( $(left) - 20 )) python3 -m engine_bridge.cli bench --target $TS --draft $DS \
      --suite $1 --limit $2 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=chain,tree --sweep budget=5,15 \
      --out $R/bench-$1.json --md $R/bench-$1.md > $R/bench-$1.log 2>&1
    say "bench $1 rc=$?"
  done
  for mb in "chain 5" "tree 15"; do
    set -- $mb
    for s in 0 16 0 16; do
      [[ $P == *" gstats "* ]] && [ $(left) -gt 40 ] || continue
      DFLASH_INJECT_SLOTS=$s DFLASH_GRAPH_STATS=1 timeout $(( $(left) > 120 ? 100 : $(left) - 20 )) python3 $K/next/gstats.py \
        $TS $DS $1 $2 > $R/gstats-$s-$1$2.log 2>&1
      say "gstats $1 $2 slots $s rc=$? $(grep SLOTS= $R/gstats-$s-$1$2.log)"
    done
  done
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; tail -n 3 $W/peer_tools.log 2>/dev/null
  grep -h -E '"n_depth"|"avg_ts"' $R/llama-bench-depth.json 2>/dev/null; grep depth $R/ar-depth.txt 2>/dev/null
  grep -hE "^\|" $R/ab-*.txt 2>/dev/null
  for f in $R/bench-*.md; do [ -f $f ] && { echo "== $f"; grep -E '^\| (ar|c[0-9]+|t[0-9]+) \|' $f | cut -d'|' -f2,3,5,8,12,13,16; }; done
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r74.tgz --exclude='*.npz' -C $W r progress.log lane.log lcp_build.log peer_tools.log 2>/dev/null; ls -la $OUT ;;
esac
