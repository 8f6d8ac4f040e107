# ran from the project root on the GPU machine as tmp_*.sh (tmp_ab.sh was ../../s45-h200-exact-chat/run_ab.sh, unchanged)
# issue 29: which path parts in the exact chat: tree alone (budgets 7, 15) and auto over 3 rounds (one H200)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd2 PYTHONUNBUFFERED=1
mkdir -p $OUT/lc /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
L="python3 benchmarks/bench_long_chat.py --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf --draft /tmp/dr/d8.gguf --gpu-layers 99 --prompts mt-bench --turns 30 --windows 512 --ar"
for b in 7 15; do
  timeout 100 $L --mode tree --budget $b --json $OUT/lc/tree$b.json > $OUT/lc/tree$b.txt 2>&1; echo "tree $b rc=$?"; tail -n 7 $OUT/lc/tree$b.txt
done
timeout 250 $L --mode auto --rounds 3 --json $OUT/lc/auto3.json > $OUT/lc/auto3.txt 2>&1; echo "auto rc=$?"; tail -n 9 $OUT/lc/auto3.txt
cd $OUT && tar czf lc.tgz lc && rm -rf lc
