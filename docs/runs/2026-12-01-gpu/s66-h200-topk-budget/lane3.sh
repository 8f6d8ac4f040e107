#!/usr/bin/env bash
# Sitting s66, the last call (run inline from /tmp/keep/lane3.sh): tree 7 with the drafter's top-k on
# the host and on the backend again, the order within each suite swapped (backend first), first 80.
set -u
cd "$1"; W=/tmp/w; R=$W/r3; mkdir -p $R; TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
for s in mt-bench gsm8k humaneval; do for side in backend host; do
  timeout 200 env DFLASH_TREE_TOP_K=$side python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $s \
    --limit 80 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=tree --sweep budget=7 \
    --out $R/bench-t7$side-$s.json --md $R/bench-t7$side-$s.md > $R/bench-t7$side-$s.log 2>&1
  echo "[$(date -u +%H:%M:%S)] r3 $side $s rc=$?" >> $W/progress.log
done; done; touch $W/lane3.done
