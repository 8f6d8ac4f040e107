# ran from the project root on the GPU machine as tmp_s55.sh STEP ... (one H200, one held machine)
# the calls, in order: take dr | take k | take k restore gs | ex:mt-bench ex:gsm8k | ex:humaneval |
#   fa:mt-bench fa:gsm8k fa:humaneval (TO=200: fa:humaneval was cut by its limit, rc 124)
# issue 29 after the merge of the first token from the prefill (main d02d297): is an exact verify
# still AR's on the GPU (the replays follow the new start; CPU tests cannot show a missed one, the
# CPU's kernels are batch-invariant)? And issue 28: why a request's first one-row decode after its
# prefill costs ~3x a steady decode (3.7-4.5 against 1.1-1.2 ms in s54's A/B), graph statistics.
#   take      the target over three calls (.gpu-carry/s36, 36 MiB parts)
#   dr        the shipped drafter to /tmp/dr/d8.gguf
#   k         the kept build's parts carried in this call (.gpu-keep-s54, made in s54) to /tmp/keep
#   restore   installs them (gpu_ncu.sh restore) to /tmp/lcp_site
#   ex:S      dflash-studio bench --exact on the full public set S: AR, chain 7, tree 7, auto, one rep
#   fa:S      the same without --exact (the fast verify)
#   gs        gpu_first_token_ab.py AR only, 40 HumanEval prompts, DFLASH_GRAPH_STATS=1 (counts at exit)
set -u
W=${W:-/tmp/w}; B=.gpu-bundle
export DFLASH_FA_ALL_QUANTS=0 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
mkdir -p $W /tmp/dr /tmp/keep $OUT
for s in "$@"; do case $s in
  take) bash gpu/gpu_carry.sh take s36 | tail -2 ;;
  dr) cp resources/models/smollm2/drafter.gguf $D && sha256sum $D ;;
  k) cp .gpu-keep-s54/lcp.tar.xz.* /tmp/keep/ && ls /tmp/keep ;;
  restore)
    W=$W B=$B bash gpu/gpu_ncu.sh restore /tmp/keep | tail -2
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
    python3 -c "import json; d=json.load(open('/tmp/lcp_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])][-3:])" ;;
  ex:*|fa:*)
    S=${s#*:}; X=--exact; [ ${s%%:*} = fa ] && X=; mkdir -p $OUT/ex; N=$OUT/ex/${s%%:*}-$S
    PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_DATA_DIR=/tmp/dd55 timeout ${TO:-250} python3 -m engine_bridge.cli bench \
      --target $T --draft $D $X --suite $S --limit 200 --reps 1 --max-tokens 128 \
      --sweep verify=chain,tree,auto --sweep budget=7 --json $N.json --md $N.md > $N.log 2>&1; echo "$s rc=$? $(date +%T)"
    grep -A6 "## Results" $N.md | cut -c1-200; grep -i "identical\|parted\|diverg" $N.md | head -8 | cut -c1-250 ;;
  gs)
    mkdir -p $OUT/ex
    PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_DATA_DIR=/tmp/dd55 DFLASH_GRAPH_STATS=1 timeout 200 python3 gpu/gpu_first_token_ab.py \
      --target $T --draft $D --suite humaneval --prompts 40 --rounds 1 --modes ar > $OUT/ex/gs.txt 2>&1; echo "gs rc=$?"
    grep -v "^llama\|^load\|^print_info" $OUT/ex/gs.txt | tail -30 | cut -c1-250 ;;
  *) echo "unknown step $s" ;;
esac; done
[ -d $OUT/ex ] && (cd $OUT && tar czf ex-$(date +%H%M%S).tgz ex && rm -rf ex)
exit 0
