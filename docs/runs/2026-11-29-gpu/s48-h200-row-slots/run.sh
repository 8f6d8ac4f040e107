# ran from the project root on the GPU machine as tmp_s48.sh STEP ... (one H200, one held machine):
#   take build | take | take wait slots | keepout ab0 ab16 | ab16 ab0 | ledger; then, inline, the ledger
#   with DFLASH_ROW_SLOTS=0 and 16 (st0.tgz: gpu_auto_steps.py ... --json $OUT/st0/humaneval-s$S.json)
# issue 28/29, patch 0017 (a graph slot per verify width): its GPU A/B. Steps:
#   build            wheels + the engine built with packaging/patches/ (0001-0012, 0015-0017) in the background
#   wait             until the build is done; then the build packed for later sittings ($W/keep)
#   slots            benchmarks/bench_row_slots.py on the GPU (slots on / off alternating, one process)
#   ab SIDE...       dflash-studio bench, HumanEval full set, 1 rep, blocks of 10, AR / chain 7 / auto,
#                    one process per DFLASH_ROW_SLOTS side in the order given (ABBA over two calls)
#   ledger           gpu/gpu_auto_steps.py on HumanEval (164 prompts, 2 rounds) with the slots on
#   keepout          the packed build into $OUT
set -u
W=${W:-/tmp/w}; B=.gpu-bundle
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd48 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p $W /tmp/dr $OUT; [ -f $D ] || cp resources/models/smollm2/drafter.gguf $D
for s in "$@"; do case $s in
  build)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl
    rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W; ls packaging/patches/
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
        --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
        > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
    sleep 2; echo "build started" ;;
  wait)
    t0=$SECONDS; while ! tail -n 1 $W/lcp_build.log 2>/dev/null | grep -q "^done rc="; do sleep 5; [ $((SECONDS - t0)) -gt 500 ] && break; done
    tail -n 3 $W/lcp_build.log | cut -c1-300; grep -q "^done rc=0" $W/lcp_build.log || { cp $W/lcp_build.log $OUT/; exit 1; }
    cat /tmp/lcp_site/llama_cpp/dflash_build_info.json | head -c 1500; echo
    rm -rf $W/keep; mkdir -p $W/keep
    (cd /tmp/lcp_site && tar cf - --exclude='*.so' --exclude='*.so.0' llama_cpp llama_cpp_python-*.dist-info) \
      | xz -T0 -6 | split -b 15M -d - $W/keep/lcp.tar.xz.; ls -la $W/keep ;;
  slots)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
    timeout 150 python3 benchmarks/bench_row_slots.py --target $T --draft $D --gpu-layers -1 --rounds 9 2>&1 | tee $OUT/row_slots.txt | tail -8 ;;
  ab0|ab16)
    S=${s#ab}; mkdir -p $OUT/ab; N=$OUT/ab/he-s$S-$(date +%H%M%S)
    DFLASH_ROW_SLOTS=$S timeout 280 python3 -m engine_bridge.cli bench --target $T --draft $D --suite humaneval --limit 200 --reps 1 \
      --round-prompts 10 --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 \
      --json $N.json --md $N.md > $N.log 2>&1
    echo "side $S rc=$?"; grep -A6 "## Results" $N.md | cut -c1-220 ;;
  ledger)
    mkdir -p $OUT/st
    DFLASH_ROW_SLOTS=16 timeout 220 python3 gpu/gpu_auto_steps.py --target $T --draft $D --suite humaneval --prompts 164 --rounds 2 \
      --json $OUT/st/humaneval.json > $OUT/st/humaneval.txt 2>&1; echo "ledger rc=$?"; tail -25 $OUT/st/humaneval.txt ;;
  keepout) cp $W/keep/* $OUT/ && ls -la $OUT ;;
  take) bash gpu/gpu_carry.sh take s ;;
esac; done
[ -d $OUT/ab ] && (cd $OUT && tar czf ab-$(date +%H%M%S).tgz ab && rm -rf ab)
[ -d $OUT/st ] && (cd $OUT && tar czf st.tgz st && rm -rf st)
exit 0
