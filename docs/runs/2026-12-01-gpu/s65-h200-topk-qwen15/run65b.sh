#!/usr/bin/env bash
# Sitting s65, added while it ran: after lane0, patch 0024's phases again on the default pair (4 rounds,
# no equality runs), then on the 1.5B pair (s63's drafter exported, 152k vocabulary: a 3x longer sort),
# then the 1.5B's generation and training (run65.sh run, shorter clocks).
set -u
W=/tmp/w; R=$W/r; RUN=/tmp/dflash-train
T=/tmp/t/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
while [ ! -f $W/lane0.done ]; do sleep 3; done
say "stk2: default pair, 4 rounds"
timeout 300 python3 gpu/gpu_fuse_ab.py --env DFLASH_SMALL_TOP_K --tag stk2 --sides 0,1 --rounds 4 --no-eq \
  --target $TS --draft $DS --out $R/stk2 > $R/stk2.log 2>&1; say "stk2 rc=$?"
python3 -m engine_bridge.cli train-drafter --target $T --out $R/d63.gguf --data-dir $RUN/data --run-dir /tmp/init \
  --work $R/work63 --stage export > $R/export63.log 2>&1; say "export63 rc=$?"
if [ -f $R/d63.gguf ]; then
  say "q15: the 1.5B pair, 3 rounds"
  timeout 420 python3 gpu/gpu_fuse_ab.py --env DFLASH_SMALL_TOP_K --tag q15 --sides 0,1 --rounds 3 \
    --target $T --draft $R/d63.gguf --out $R/q15 > $R/q15.log 2>&1; say "q15 rc=$?"
fi
GEN=${GEN:-150} TRAIN=${TRAIN:-300} setsid bash gpu/tmp_x/run65.sh run < /dev/null > $W/run2.log 2>&1 &
say "mid done: run started"
