# ran from the project root on the GPU machine as tmp_s47c.sh (its GSM8K half failed on an empty AR list, fixed after; no data)
# issue 29: where auto's time goes against chain 7's on HumanEval, step by step (one H200)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd9 PYTHONUNBUFFERED=1
mkdir -p $OUT/st /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout ${T_H:-200} python3 gpu/gpu_auto_steps.py --target $T --draft $D --suite humaneval --prompts 164 --rounds 2 \
  --json $OUT/st/humaneval.json > $OUT/st/humaneval.txt 2>&1; echo "humaneval rc=$?"; cat $OUT/st/humaneval.txt | tail -20
timeout ${T_G:-90} python3 gpu/gpu_auto_steps.py --target $T --draft $D --suite gsm8k --prompts 100 --rounds 1 \
  --json $OUT/st/gsm8k.json > $OUT/st/gsm8k.txt 2>&1; echo "gsm8k rc=$?"; cat $OUT/st/gsm8k.txt | tail -20
cd $OUT && tar czf st.tgz st && rm -rf st
