# ran from the project root on the GPU machine as tmp_*.sh (run_ab.sh was tmp_ab.sh; m4 kvdiff.py was tmp_kvdiff.py)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd PYTHONUNBUFFERED=1
mkdir -p $OUT /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
kv="timeout 120 python3 tmp_kvdiff.py --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf --draft /tmp/dr/d8.gguf --gpu-layers 99"
for spec in "4 64 chain 1" "10 128 chain 1" "3 64 chain 0" "4 64 auto 1"; do
  set -- $spec; echo "== turns $1 tokens $2 mode $3 exact $4"
  $kv --turns $1 --tokens $2 --mode $3 --exact $4 2>&1 | grep -v "^llama\|^load" | tail -n 9 | cut -c1-700 | tee -a $OUT/kvdiff.txt
done
