# ran from the project root on the GPU machine as tmp_s46f.sh
# issue 29: auto against AR and chain 7 after this session's fixes, 40 prompts per public suite, 2 reps (one H200)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd6 PYTHONUNBUFFERED=1
mkdir -p $OUT/au /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
for S in mt-bench gsm8k humaneval; do
  timeout ${T_S:-150} python3 -m engine_bridge.cli bench --target $T --draft $D --suite $S --limit ${LIM:-40} --reps 2 \
    --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 --json $OUT/au/$S.json --md $OUT/au/$S.md > $OUT/au/$S.log 2>&1
  echo "$S rc=$?"; grep -A6 "## Results" $OUT/au/$S.md | cut -c1-200
done
cd $OUT && tar czf au.tgz au && rm -rf au
