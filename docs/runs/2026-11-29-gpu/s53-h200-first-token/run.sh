# ran from the project root on the GPU machine as tmp_s53.sh STEP (this file; first_steps.py of
# s52-h200-first-block as tmp_first.py) ... (one H200, one held machine):
#   the calls, in order: take dr | take build19 | take keep0 | restore ft fmain fft wait19 main:mt-bench
#   ft:mt-bench | ft:gsm8k main:gsm8k | l19:2 l19:1 | l19:1 l19:2, then main:humaneval ft:humaneval in
#   the same call (cut by the call's limit during ft:humaneval: b-humaneval-main-cut.tgz has main's)
# issue 27/28/29: the first token from the prefill's last row (branch first-token-prefill) against
# main, the same kept CUDA build (0001-0012, 0015-0018, .gpu-keep-s51), the shipped drafter.
#   take      the target over three calls (.gpu-carry/s36, 36 MiB parts)
#   dr        the shipped drafter to /tmp/dr/d8.gguf
#   keep0/restore  the kept build's parts over two calls; restore installs it
#   ft        the branch's engine_bridge/gpu/benchmarks (git archive, .gpu-carry/ft.tgz) to /tmp/ft
#   build19   a CUDA build of packaging/patches with pending 0019 copied in, to /tmp/lcp19_site, in the
#             background (16 jobs); wait19: until it is done
#   fmain/fft what a request's first chain-7 steps commit (first 20 prompts per suite, 24 tokens), code V
#   l19:W     0019's ledger (gpu_auto_steps.py, chain 7 and auto, 164 HumanEval prompts, graph stats)
#             with DFLASH_ROW_SLOT_WAYS=W; a19:W: bench chain 7 on all 164, 1 rep, with W
#   b V:S     dflash-studio bench on the full public set S with code V (main: this tree; ft: the
#             branch), 2 reps in blocks of 10, AR / chain 7 / auto, one process; its own data dir
set -u
W=${W:-/tmp/w}; B=.gpu-bundle; ROOT=$PWD
export DFLASH_FA_ALL_QUANTS=0 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p $W /tmp/dr /tmp/keep $OUT
for s in "$@"; do case $s in
  take) bash gpu/gpu_carry.sh take s36 | tail -2 ;;
  dr) cp resources/models/smollm2/drafter.gguf $D && sha256sum $D ;;
  keep0) cp .gpu-keep-s51/lcp.tar.xz.00 /tmp/keep/ ;;
  restore)
    cp .gpu-keep-s51/lcp.tar.xz.0[12] /tmp/keep/ && W=$W B=$B bash gpu/gpu_ncu.sh restore /tmp/keep | tail -2
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
    python3 -c "import json; d=json.load(open('/tmp/lcp_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])])" ;;
  ft) rm -rf /tmp/ft && mkdir -p /tmp/ft && tar xzf .gpu-carry/ft.tgz -C /tmp/ft && ln -sfn $PWD/resources /tmp/ft/resources && ls /tmp/ft ;;
  b) ;;
  build19)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl
    rm -rf /tmp/w19 && mkdir -p /tmp/w19 && tar xzf $B/lcp-*.tgz -C /tmp/w19; ls packaging/patches/ | tail -3
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
        --python python3 --source /tmp/w19/lcp --wheels $B/whl --target /tmp/lcp19_site --arch 90 --jobs 16 \
        > /tmp/w19/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> /tmp/w19/lcp_build.log" < /dev/null > /dev/null 2>&1 &
    sleep 2; echo "build started" ;;
  wait19)
    t0=$SECONDS; while ! tail -n 1 /tmp/w19/lcp_build.log 2>/dev/null | grep -q "^done rc="; do sleep 5; [ $((SECONDS - t0)) -gt 500 ] && break; done
    tail -n 2 /tmp/w19/lcp_build.log | cut -c1-300; grep -q "^done rc=0" /tmp/w19/lcp_build.log || { tail -c 20000 /tmp/w19/lcp_build.log > $OUT/lcp_build.log; exit 1; }
    python3 -c "import json; d=json.load(open('/tmp/lcp19_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])])" ;;
  l19:*|a19:*)
    w=${s#*:}; mkdir -p $OUT/r19; N=$OUT/r19/he-w$w-$(date +%H%M%S)
    if [ ${s%%:*} = l19 ]; then
      PYTHONPATH=/tmp/lcp19_site:/tmp/site:. DFLASH_DATA_DIR=/tmp/dd53-19 DFLASH_ROW_SLOT_WAYS=$w DFLASH_GRAPH_STATS=1 timeout 200 \
        python3 gpu/gpu_auto_steps.py --target $T --draft $D --suite humaneval --prompts 164 --rounds 1 --json $N.json > $N.txt 2>&1
      echo "ledger ways=$w rc=$?"; grep -v dflash_graph_stats $N.txt | sed -n 2,6p | cut -c1-250
    else
      PYTHONPATH=/tmp/lcp19_site:/tmp/site:. DFLASH_DATA_DIR=/tmp/dd53-19 DFLASH_ROW_SLOT_WAYS=$w timeout 250 python3 -m engine_bridge.cli bench \
        --target $T --draft $D --suite humaneval --limit 200 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=chain \
        --sweep budget=7 --json $N.json --md $N.md > $N.log 2>&1
      echo "side ways=$w rc=$?"; grep -A5 "## Results" $N.md | tail -2 | cut -c1-200
    fi ;;
  fmain|fft)
    V=${s#f}; mkdir -p $OUT/b; P=/tmp/lcp_site:/tmp/site:.; [ $V = ft ] && P=/tmp/lcp_site:/tmp/site:/tmp/ft
    ( [ $V = ft ] && cd /tmp/ft; PYTHONPATH=$P timeout 150 python3 $ROOT/tmp_first.py $T $D ${FN:-20} 99 > $OUT/b/first-$V.txt 2>&1 ); echo "first $V rc=$?"
    grep -v "^llama\|^load" $OUT/b/first-$V.txt | tail -3 | cut -c1-250 ;;
  main:*|ft:*)
    V=${s%%:*}; S=${s#*:}; mkdir -p $OUT/b; N=$OUT/b/$V-$S
    if [ $V = main ]; then P=/tmp/lcp_site:/tmp/site:.; else P=/tmp/lcp_site:/tmp/site:/tmp/ft; fi
    ( cd $([ $V = main ] && echo . || echo /tmp/ft) && PYTHONPATH=$P DFLASH_DATA_DIR=/tmp/dd53-$V timeout 500 python3 -m engine_bridge.cli bench \
        --target $T --draft $D --suite $S --limit ${LIMIT:-200} --reps ${REPS:-2} --round-prompts 10 --max-tokens ${MAXT:-128} \
        --sweep verify=chain,auto --sweep budget=7 --json $N.json --md $N.md > $N.log 2>&1 ); echo "$V $S rc=$? $(date +%T)"
    grep -A6 "## Results" $N.md | cut -c1-260 ;;
  *) echo "unknown step $s" ;;
esac; done
[ -d $OUT/b ] && (cd $OUT && tar czf b-$(date +%H%M%S).tgz b && rm -rf b)
[ -d $OUT/r19 ] && (cd $OUT && tar czf r19-$(date +%H%M%S).tgz r19 && rm -rf r19)
exit 0
