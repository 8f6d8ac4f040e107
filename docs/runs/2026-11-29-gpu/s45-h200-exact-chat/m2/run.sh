# ran from the project root on the GPU machine as tmp_*.sh (run_ab.sh was tmp_ab.sh; m4 kvdiff.py was tmp_kvdiff.py)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd PYTHONUNBUFFERED=1
mkdir -p $OUT /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
for h in ${HIST:-0 2000}; do
  timeout 200 python3 benchmarks/bench_drift.py --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf --draft /tmp/dr/d8.gguf \
    --gpu-layers 99 --exact --per-category ${NPC:-2} --tokens ${NT:-48} --widths ${WID:-2,8,16} --history $h \
    --json $OUT/drift-exact-h$h${TAG:-}.json 2>/dev/null | tee $OUT/drift-exact-h$h${TAG:-}.txt
done
