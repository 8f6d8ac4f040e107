# ran from the project root on the GPU machine as tmp_s51.sh STEP ... (one H200, one held machine):
#   build take | take | take wait | ledger 1 0 1 0 | ab 1 0 | keepout
# issue 28, patch 0018 (a CUDA graph per KV length): its GPU A/B in one build.
#   build      wheels + the engine built with packaging/patches/ (0001-0012, 0015-0018) in the background
#   wait       until the build is done; then the build packed for later sittings ($W/keep)
#   ledger S.. gpu/gpu_auto_steps.py (all 164 HumanEval prompts, 1 round, chain 7 and auto alternating)
#              with DFLASH_GRAPH_STATS=1, one process per DFLASH_CUDA_GRAPH_PER_KV side in the order given
#   ab S..     dflash-studio bench, HumanEval full set, 1 rep, blocks of 10, AR / chain 7, one process per side
#   keepout    the packed build into $OUT
set -u
W=${W:-/tmp/w}; B=.gpu-bundle
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd51 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p $W /tmp/dr $OUT
[ -f $D ] || { [ -f resources/models/smollm2/drafter.gguf ] && cp resources/models/smollm2/drafter.gguf $D; }
step=""; for s in "$@"; do case $s in
  build)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl
    rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W; ls packaging/patches/
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
        --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
        > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
    sleep 2; echo "build started" ;;
  take) bash gpu/gpu_carry.sh take s ;;
  wait)
    t0=$SECONDS; while ! tail -n 1 $W/lcp_build.log 2>/dev/null | grep -q "^done rc="; do sleep 5; [ $((SECONDS - t0)) -gt 500 ] && break; done
    tail -n 3 $W/lcp_build.log | cut -c1-300; grep -q "^done rc=0" $W/lcp_build.log || { tail -c 20000 $W/lcp_build.log > $OUT/lcp_build.log; grep -n "error" $W/lcp_build.log | head -20; exit 1; }
    python3 -c "import json; d=json.load(open('/tmp/lcp_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])])"
    rm -rf $W/keep; mkdir -p $W/keep
    (cd /tmp/lcp_site && tar cf - --exclude='*.so' --exclude='*.so.0' llama_cpp llama_cpp_python-*.dist-info) \
      | xz -T0 -6 | split -b 15M -d - $W/keep/lcp.tar.xz.; ls -la $W/keep ;;
  ledger|ab) step=$s ;;
  keepout) cp $W/keep/* $OUT/ && ls -la $OUT ;;
  [01])
    if [ "$step" = ledger ]; then
      mkdir -p $OUT/st; N=$OUT/st/he-kv$s-$(date +%H%M%S)
      DFLASH_CUDA_GRAPH_PER_KV=$s DFLASH_GRAPH_STATS=1 timeout 150 python3 gpu/gpu_auto_steps.py --target $T --draft $D --suite humaneval \
        --prompts 164 --rounds 1 --json $N.json > $N.txt 2>&1; echo "ledger kv=$s rc=$?"; grep -v dflash_graph_stats $N.txt | sed -n 2,5p
    elif [ "$step" = ab ]; then
      mkdir -p $OUT/ab; N=$OUT/ab/he-kv$s-$(date +%H%M%S)
      DFLASH_CUDA_GRAPH_PER_KV=$s timeout 250 python3 -m engine_bridge.cli bench --target $T --draft $D --suite humaneval --limit 200 --reps 1 \
        --round-prompts 10 --max-tokens 128 --sweep verify=chain --sweep budget=7 --json $N.json --md $N.md > $N.log 2>&1
      echo "side kv=$s rc=$?"; grep -A5 "## Results" $N.md | tail -2 | cut -c1-200
    fi ;;
  *) echo "unknown step $s" ;;
esac; done
[ -d $OUT/st ] && (cd $OUT && tar czf st-$(date +%H%M%S).tgz st && rm -rf st)
[ -d $OUT/ab ] && (cd $OUT && tar czf ab-$(date +%H%M%S).tgz ab && rm -rf ab)
exit 0
