# ran from the project root on the GPU machine as tmp_s54.sh STEP ... (one H200, one held machine)
# the calls, in order: take dr | take build | take ft | wait keep | ab:humaneval | ab:mt-bench ab:gsm8k (NP=200:
#   all 80 MT-Bench; GSM8K: the first 100 of the test split, the suite as shipped) | ab:humaneval again
# issues 27-29 and 28: the first token from the prefill (branch first-token-prefill, 03ab0a0) against
# the start before, both in ONE process (gpu/gpu_first_token_ab.py, DFLASH_FIRST_TOKEN read per
# request, the side that goes first alternating), on a CUDA build of the whole shipped series
# (0001-0012, 0015-0019) made in this sitting and kept for the next (lcp.tar.xz.* into $OUT).
#   take   the target over three calls (.gpu-carry/s36, 36 MiB parts)
#   dr     the shipped drafter to /tmp/dr/d8.gguf
#   build  a CUDA build of packaging/patches to /tmp/lcp_site, in the background (16 jobs)
#   wait   until it is done; the patches it holds
#   keep   the build packed in 15 MiB xz parts into $OUT/keep
#   ft     the branch's engine_bridge/gpu/benchmarks (git archive, .gpu-carry/ft.tgz) to /tmp/ft
#   ab:S   gpu_first_token_ab.py on suite S (first ${NP:-200} prompts), AR / chain 7 / auto, 1 round
set -u
W=${W:-/tmp/w}; B=.gpu-bundle; ROOT=$PWD
export DFLASH_FA_ALL_QUANTS=0 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p $W /tmp/dr $OUT
for s in "$@"; do case $s in
  take) bash gpu/gpu_carry.sh take s36 | tail -2 ;;
  dr) cp resources/models/smollm2/drafter.gguf $D && sha256sum $D ;;
  build)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl
    rm -rf $W/src && mkdir -p $W/src && tar xzf $B/lcp-*.tgz -C $W/src; ls packaging/patches/ | tail -3
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
        --python python3 --source $W/src/lcp --wheels $B/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
        > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
    sleep 2; echo "build started" ;;
  wait)
    t0=$SECONDS; while ! tail -n 1 $W/lcp_build.log 2>/dev/null | grep -q "^done rc="; do sleep 5; [ $((SECONDS - t0)) -gt 500 ] && break; done
    tail -n 2 $W/lcp_build.log | cut -c1-300; grep -q "^done rc=0" $W/lcp_build.log || { tail -c 20000 $W/lcp_build.log > $OUT/lcp_build.log; exit 1; }
    python3 -c "import json; d=json.load(open('/tmp/lcp_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])])"
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader ;;
  keep)
    rm -rf $W/keep; mkdir -p $W/keep $OUT/keep
    (cd /tmp/lcp_site && tar cf - --exclude='*.so' --exclude='*.so.0' llama_cpp llama_cpp_python-*.dist-info) \
      | xz -T0 -6 | split -b 15M -d - $W/keep/lcp.tar.xz.
    cp $W/keep/* $OUT/keep/ && ls -la $OUT/keep ;;
  ft) rm -rf /tmp/ft && mkdir -p /tmp/ft && tar xzf .gpu-carry/ft.tgz -C /tmp/ft && ln -sfn $PWD/resources /tmp/ft/resources && ls /tmp/ft ;;
  ab:*)
    S=${s#ab:}; mkdir -p $OUT/ab; N=$OUT/ab/$S
    ( cd /tmp/ft && PYTHONPATH=/tmp/lcp_site:/tmp/site:/tmp/ft DFLASH_DATA_DIR=/tmp/dd54 timeout ${TO:-280} python3 gpu/gpu_first_token_ab.py \
        --target $T --draft $D --suite $S --prompts ${NP:-200} --rounds 1 --max-tokens 128 --json $N.json > $N.txt 2>&1 ); echo "ab $S rc=$? $(date +%T)"
    grep -v "^llama\|^load\|^print_info\|^\s*$" $N.txt | tail -12 | cut -c1-250 ;;
  *) echo "unknown step $s" ;;
esac; done
[ -d $OUT/ab ] && (cd $OUT && tar czf ab-$(date +%H%M%S).tgz ab && rm -rf ab)
exit 0
