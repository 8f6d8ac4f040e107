# ran from the project root on the GPU machine as tmp_s50.sh STEP ... (one H200, one held machine):
#   restore take | take | take diag | b29 mt-bench gsm8k | b29 humaneval
# restore   the kept build of the whole series with 0017 (.gpu-keep-s48), no rebuild
# diag      issue 28: why a request's first two steps cost ~1.2 ms more than steady ones; gpu_auto_steps.py
#           (chain 7 and auto, 40 HumanEval prompts, 1 round) with DFLASH_GRAPH_STATS=1 (patch 0001: per
#           graph shape the replays, captures, direct runs and the first node whose properties changed)
# b29 S...  issue 29: dflash-studio bench on the full public set S, 2 reps in blocks of 10, AR, chain 7, auto
set -u
W=${W:-/tmp/w}
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd50 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p $W /tmp/dr $OUT
[ -f $D ] || { [ -f resources/models/smollm2/drafter.gguf ] && cp resources/models/smollm2/drafter.gguf $D; }
step=""; for s in "$@"; do case $s in
  restore) W=$W bash gpu/gpu_ncu.sh restore .gpu-keep-s48 | tail -2 ;;
  take) bash gpu/gpu_carry.sh take s ;;
  diag)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
    mkdir -p $OUT/diag
    DFLASH_GRAPH_STATS=1 timeout 150 python3 gpu/gpu_auto_steps.py --target $T --draft $D --suite humaneval --prompts 40 --rounds 1 \
      --json $OUT/diag/he40.json > $OUT/diag/he40.txt 2>&1; echo "diag rc=$?"
    grep -v dflash_graph_stats $OUT/diag/he40.txt | tail -12
    grep dflash_graph_stats $OUT/diag/he40.txt | sort -k2 -n -r | cut -c1-230 | head -40 ;;
  b29) step=b29 ;;
  *) if [ "$step" = b29 ]; then
       mkdir -p $OUT/b29; N=$OUT/b29/$s
       timeout 450 python3 -m engine_bridge.cli bench --target $T --draft $D --suite $s --limit 200 --reps 2 \
         --round-prompts 10 --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 --json $N.json --md $N.md > $N.log 2>&1
       echo "$s rc=$?"; grep -A6 "## Results" $N.md | cut -c1-260
     else echo "unknown step $s"; fi ;;
esac; done
[ -d $OUT/diag ] && (cd $OUT && tar czf diag.tgz diag && rm -rf diag)
[ -d $OUT/b29 ] && (cd $OUT && tar czf b29-$(date +%H%M%S).tgz b29 && rm -rf b29)
exit 0
