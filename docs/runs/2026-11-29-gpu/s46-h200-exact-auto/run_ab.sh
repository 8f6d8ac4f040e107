# ran from the project root on the GPU machine as tmp_*.sh (run_ab.sh was tmp_ab.sh)
# ran from the project root on the GPU machine as tmp_*.sh (run_ab.sh was tmp_ab.sh; m4 kvdiff.py was tmp_kvdiff.py)
# issue 29: auto's follow-up probe A/B with the exact verify, the MT-Bench chat in rounds (one H200)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd PYTHONUNBUFFERED=1
mkdir -p $OUT/ab /tmp/ab
k=0
for v in ${SIDES:-0 default}; do
  k=$((k+1))
  if [ $v = 0 ]; then export DFLASH_AUTO_REQUEST_PROBE=0; else unset DFLASH_AUTO_REQUEST_PROBE; fi
  timeout ${T_AB:-280} python3 benchmarks/bench_long_chat.py --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf \
    --draft /tmp/dr/d8.gguf --gpu-layers 99 --prompts ${P:-mt-bench} --mode auto --turns 30 --windows 512 \
    --ar --rounds ${ROUNDS:-2} --json /tmp/ab/auto-exact-rp-$v-$k.json > /tmp/ab/auto-exact-rp-$v-$k.txt 2>&1
  echo "side $v rc=$?"; tail -n 9 /tmp/ab/auto-exact-rp-$v-$k.txt | cut -c1-200
done
cp /tmp/ab/* $OUT/ab/
