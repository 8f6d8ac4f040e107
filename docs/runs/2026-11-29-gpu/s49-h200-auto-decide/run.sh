# ran from the project root on the GPU machine as tmp_s49.sh (after the kept build's restore and the target's carry)
# issue 29: auto's Python before (commit 7feacc3, in oldpy/) and after (73751d9: a decision every 4th step),
# gpu/gpu_auto_steps.py on all 164 HumanEval prompts, 2 rounds, chain 7 and auto alternating; sides new, old, new
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd49 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p /tmp/dr $OUT/st; [ -f $D ] || cp resources/models/smollm2/drafter.gguf $D
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
i=0
for side in ${SIDES:-new old new}; do
  i=$((i + 1)); S="--target $T --draft $D --suite humaneval --prompts 164 --rounds 2 --json $OUT/st/he-$i-$side.json"
  if [ $side = old ]; then
    DFLASH_RESOURCES=$PWD/resources PYTHONPATH=/tmp/lcp_site:/tmp/site timeout 110 python3 oldpy/gpu/gpu_auto_steps.py $S > $OUT/st/he-$i-$side.txt 2>&1
  else
    timeout 110 python3 gpu/gpu_auto_steps.py $S > $OUT/st/he-$i-$side.txt 2>&1
  fi
  echo "$i $side rc=$?"; sed -n 2,6p $OUT/st/he-$i-$side.txt
done
cd $OUT && tar czf st49.tgz st && rm -rf st
# then, inline (the last 190 s of device time): the bench, HumanEval first 100 prompts, 1 rep, blocks of 10
# timeout 140 python3 -m engine_bridge.cli bench --target $T --draft $D --suite humaneval --limit 100 --reps 1 --round-prompts 10 \
#   --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 --json $OUT/he100.json --md $OUT/he100.md
