# ran from the project root on the GPU machine as tmp_s57.sh STEP ... (one H200, one held machine)
# issue 29: auto against AR and chain 7 with the rows seconds apart (blocks of 10 prompts), after s56
# found the full sweep's 0.915x on MT-Bench to be auto's path plus rows run minutes apart.
#   k / restore  the kept build (.gpu-keep-s56) carried and installed to /tmp/lcp_site
#   dr      the shipped drafter to /tmp/dr/d8.gguf
#   take    the target over two calls (.gpu-carry/s48, 48 MiB parts)
#   bl:S:X  dflash-studio bench on all of suite S (GSM8K: the first 100), rows AR, chain 7, auto, in
#           blocks of 10 prompts (--round-prompts 10), one rep; X = fast | exact; $ENVV exported first
set -u
W=${W:-/tmp/w}; B=.gpu-bundle
export DFLASH_FA_ALL_QUANTS=0 PYTHONUNBUFFERED=1
export PYTHONPATH=/tmp/lcp_site:/tmp/site:.
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p $W /tmp/dr $OUT
for s in "$@"; do case $s in
  take) bash gpu/gpu_carry.sh take s48 | tail -2 ;;
  dr) cp resources/models/smollm2/drafter.gguf $D && sha256sum $D ;;
  k) mkdir -p /tmp/keep && cp .gpu-keep-s56/lcp.tar.xz.* /tmp/keep/ && ls /tmp/keep ;;
  restore)
    W=$W B=$B bash gpu/gpu_ncu.sh restore /tmp/keep 2>&1 | tail -1
    python3 -c "import json; d=json.load(open('/tmp/lcp_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])][-3:])"
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader ;;
  bl:*)
    a=${s#bl:}; S=${a%%:*}; X=${a#*:}; F=; [ $X = exact ] && F=--exact; mkdir -p $OUT/r; N=$OUT/r/bl-$S-$X${TAG:-}
    env ${ENVV:-} DFLASH_DATA_DIR=/tmp/dd57-$X timeout ${TO:-280} python3 -m engine_bridge.cli bench \
      --target $T --draft $D $F --suite $S --limit ${LIM:-200} --reps 1 --max-tokens 128 --round-prompts 10 \
      --sweep verify=chain,auto --sweep budget=7 --json $N.json --md $N.md > $N.log 2>&1; echo "$s rc=$? $(date +%T)"
    grep -A6 "## Results" $N.md | tail -3 | cut -c1-190 ;;
  *) echo "unknown step $s" ;;
esac; done
[ -d $OUT/r ] && (cd $OUT && tar czf r-$(date +%H%M%S).tgz r && rm -rf r)
exit 0
