#!/bin/bash
# 2026-11-28 sitting: (A) inject sync off (default) vs on, (B) tree seed 4 vs 8, (C) full public sets
cd /tmp/repo
export D=/tmp/dr/d8.gguf
W=/tmp/wA OUT=/tmp/outA STEPS=real REAL_N=12 REAL_SIDES="on sync1" \
  REAL_SWEEP="--sweep verify=chain,tree,auto --sweep budget=7,15" bash gpu/gpu_ncu.sh steps > /tmp/runA.log 2>&1
touch /tmp/A.done
W=/tmp/wB OUT=/tmp/outB STEPS=real REAL_N=12 REAL_SIDES="on seed8" \
  REAL_SWEEP="--sweep verify=tree --sweep budget=15" bash gpu/gpu_ncu.sh steps > /tmp/runB.log 2>&1
touch /tmp/B.done
mkdir -p /tmp/wC
export PYTHONPATH=/tmp/lcp_site:/tmp/site:/tmp/repo PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
for s in mt-bench gsm8k humaneval; do
  DFLASH_DATA_DIR=/tmp/dd timeout 600 python3 -m engine_bridge.cli bench --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf \
    --draft $D --suite $s --limit 200 --reps 1 --max-tokens 128 --sweep verify=chain,auto --sweep budget=7,15 \
    --json /tmp/wC/$s.json > /tmp/wC/$s.txt 2>&1
  echo "full $s rc=$?" >> /tmp/runC.log
done
touch /tmp/C.done
