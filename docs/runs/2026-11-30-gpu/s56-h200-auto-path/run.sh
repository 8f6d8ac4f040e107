# ran from the project root on the GPU machine as tmp_s56.sh STEP ... (one H200, one held machine)
# issue 29: why auto's AR steps cost more than plain AR's on the GPU (s55: fast auto on MT-Bench
# 0.90x AR; its runs that never speculated took 1.27-1.41 ms a step against plain AR's 1.10), and
# whether the redecode feature path (extraction off on AR steps) removes it.
#   build   a CUDA build of packaging/patches (0001-0012, 0015-0019) to /tmp/lcp_site, background
#   dr      the shipped drafter to /tmp/dr/d8.gguf
#   take    the target over two calls (.gpu-carry/s48, 48 MiB parts)
#   wait    until the build is done; its patches; the GPU
#   keep    the build packed in 15 MiB xz parts into $OUT/keep (restore next time: gpu_ncu.sh restore)
#   ac:S:X  gpu/gpu_auto_ar_cost.py on suite S (first ${NP:-40} prompts), X = fast | exact
#   be:S:P  dflash-studio bench (fast) on all of suite S, rows AR and auto (budget 7), one rep,
#           DFLASH_AUTO_FEATURES=P (host | redecode); one process each
#   k / restore  the kept build (.gpu-keep-s56, packed by keep in the first machine) carried and installed
#   ph:S:P  gpu_auto_ar_cost.py --phases P (comma-separated) on suite S
#   cal:X   dflash-studio calibrate --json (X = fast | exact), a fresh data folder
set -u
W=${W:-/tmp/w}; B=.gpu-bundle
export DFLASH_FA_ALL_QUANTS=0 PYTHONUNBUFFERED=1
export PYTHONPATH=/tmp/lcp_site:/tmp/site:.
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p $W /tmp/dr $OUT
for s in "$@"; do case $s in
  take) bash gpu/gpu_carry.sh take s48 | tail -2 ;;
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
  ac:*)
    a=${s#ac:}; S=${a%%:*}; X=${a#*:}; F=; [ $X = exact ] && F=--exact; mkdir -p $OUT/r; N=$OUT/r/ac-$S-$X
    DFLASH_DATA_DIR=/tmp/dd56-$X timeout ${TO:-250} python3 gpu/gpu_auto_ar_cost.py --target $T --draft $D \
      --suite $S --prompts ${NP:-40} --max-tokens 128 $F --json $N.json > $N.txt 2>&1; echo "$s rc=$? $(date +%T)"
    grep -v "^llama\|^load\|^print_info\|^\s*$\|^ggml\|^  Device" $N.txt | tail -22 | cut -c1-300 ;;
  be:*)
    a=${s#be:}; S=${a%%:*}; P=${a#*:}; mkdir -p $OUT/r; N=$OUT/r/be-$S-$P
    DFLASH_AUTO_FEATURES=$P DFLASH_DATA_DIR=/tmp/dd56-fast timeout ${TO:-250} python3 -m engine_bridge.cli bench \
      --target $T --draft $D --suite $S --limit 200 --reps 1 --max-tokens 128 \
      --sweep verify=auto --sweep budget=7 --json $N.json --md $N.md > $N.log 2>&1; echo "$s rc=$? $(date +%T)"
    grep -A4 "## Results" $N.md | tail -2 | cut -c1-200; grep -A4 "Step phases" $N.md | tail -2 ;;
  cal:*)
    X=${s#cal:}; F=; [ $X = exact ] && F=--exact; mkdir -p $OUT/r
    DFLASH_DATA_DIR=/tmp/dd56-cal-$X timeout 120 python3 -m engine_bridge.cli calibrate --target $T --draft $D $F --json \
      > $OUT/r/cal-$X.json 2> $OUT/r/cal-$X.err; echo "$s rc=$?"; head -c 1500 $OUT/r/cal-$X.json ;;
  k) mkdir -p /tmp/keep && cp .gpu-keep-s56/lcp.tar.xz.* /tmp/keep/ && ls /tmp/keep ;;
  restore)
    W=$W B=$B bash gpu/gpu_ncu.sh restore /tmp/keep | tail -2
    python3 -c "import json; d=json.load(open('/tmp/lcp_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])][-3:])" ;;
  ph:*)
    a=${s#ph:}; S=${a%%:*}; P=${a#*:}; mkdir -p $OUT/r; N=$OUT/r/ph-$S-$(echo $P | tr , -)
    DFLASH_DATA_DIR=/tmp/dd56-ph timeout ${TO:-280} python3 gpu/gpu_auto_ar_cost.py --target $T --draft $D \
      --suite $S --prompts ${NP:-40} --max-tokens 128 --phases $P > $N.txt 2>&1; echo "$s rc=$? $(date +%T)"
    grep "^phase" $N.txt | cut -c1-300 ;;
  *) echo "unknown step $s" ;;
esac; done
[ -d $OUT/r ] && (cd $OUT && tar czf r-$(date +%H%M%S).tgz r && rm -rf r)
exit 0
