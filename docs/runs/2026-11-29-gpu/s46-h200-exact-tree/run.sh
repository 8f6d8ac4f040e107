# ran from the project root on the GPU machine as tmp_s46e.sh
# issue 29: the exact tree on the full public sets after the chain-rows rule (an exact GPU tree reads only
# its seeded chain's rows): AR and tree 15 (and tree 7) in one process per suite, one H200
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd5 PYTHONUNBUFFERED=1
mkdir -p $OUT/et /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
for S in mt-bench gsm8k humaneval; do
  timeout ${T_S:-170} python3 -m engine_bridge.cli bench --target $T --draft $D --exact --suite $S --limit 200 --reps 1 \
    --max-tokens 128 --sweep verify=tree --sweep budget=${B:-7,15} --json $OUT/et/$S.json --md $OUT/et/$S.md > $OUT/et/$S.log 2>&1
  echo "$S rc=$?"; grep -A6 "## Results" $OUT/et/$S.md | cut -c1-220
done
cd $OUT && tar czf et.tgz et && rm -rf et
