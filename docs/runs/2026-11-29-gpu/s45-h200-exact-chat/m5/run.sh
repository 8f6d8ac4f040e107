# ran from the project root on the GPU machine as tmp_*.sh (run_ab.sh was tmp_ab.sh; m4 kvdiff.py was tmp_kvdiff.py)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd PYTHONUNBUFFERED=1
mkdir -p $OUT /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
timeout 150 python3 benchmarks/bench_long_chat.py --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf --draft /tmp/dr/d8.gguf \
  --gpu-layers 99 --prompts mt-bench --mode chain --turns 30 --windows 512 --ar --json $OUT/fix-chain-exact.json > $OUT/fix-chain-exact.txt 2>&1
echo "chain rc=$?"; tail -n 8 $OUT/fix-chain-exact.txt
SIDES="0 default 0 default" ROUNDS=2 T_AB=150 bash tmp_ab.sh > /tmp/ab.log 2>&1; grep -A8 "^side" /tmp/ab.log | grep "side\|whole\|identical"
cd /tmp/ab && tar czf $OUT/ab2.tgz auto-exact-rp-* && rm -rf $OUT/ab
