# ran from the project root on the GPU machine as tmp_s47a.sh SUITE:SECONDS ... (mt-bench:230 gsm8k:300, then humaneval:540)
# issue 29: auto against AR and chain 7 on the full public sets, 2 reps, rows in rounds (one H200)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd7 PYTHONUNBUFFERED=1
mkdir -p $OUT/af /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for SS in "$@"; do
  S=${SS%%:*}; SEC=${SS##*:}
  timeout $SEC python3 -m engine_bridge.cli bench --target $T --draft $D --suite $S --limit 200 --reps 2 \
    --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 --json $OUT/af/$S.json --md $OUT/af/$S.md > $OUT/af/$S.log 2>&1
  echo "$S rc=$?"; grep -A6 "## Results" $OUT/af/$S.md | cut -c1-220
done
cd $OUT && tar czf af-$(echo "$@" | tr ' :' '_-').tgz af && rm -rf af
