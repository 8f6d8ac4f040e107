#!/usr/bin/env bash
# Sitting s66, added after the lane's tree-7 A/B (backend top-k won at budget 7): tree and auto at
# budgets 7 and 10 with DFLASH_TREE_TOP_K=backend, first 80 of each public suite, one process a suite.
set -u
W=/tmp/w; R=$W/r; TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
while [ ! -f $W/lane.done ]; do sleep 3; done
for s in gsm8k mt-bench humaneval; do
  timeout 200 env DFLASH_TREE_TOP_K=backend python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $s \
    --limit 80 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=tree,auto --sweep budget=7,10 \
    --out $R/bench-be-$s.json --md $R/bench-be-$s.md > $R/bench-be-$s.log 2>&1
  say "bench be $s rc=$?"
done
touch $W/lane2.done; say "lane2 done"
