# ran from the project root on the GPU machine as tmp_s47b.sh SUITE:SECONDS ... (mt-bench:240 gsm8k:320, then humaneval:560)
# issue 29: auto against AR and chain 7 on the full public sets, 2 reps, rows in blocks of 10 prompts (one H200)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd8 PYTHONUNBUFFERED=1
mkdir -p $OUT/ab /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for SS in "$@"; do
  S=${SS%%:*}; SEC=${SS##*:}
  timeout $SEC python3 -m engine_bridge.cli bench --target $T --draft $D --suite $S --limit 200 --reps 2 --round-prompts ${RP:-10} \
    --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 --json $OUT/ab/$S.json --md $OUT/ab/$S.md > $OUT/ab/$S.log 2>&1
  echo "$S rc=$?"; grep -A6 "## Results" $OUT/ab/$S.md | cut -c1-220
done
cd $OUT && tar czf ab-$(echo "$@" | tr ' :' '_-').tgz ab && rm -rf ab
