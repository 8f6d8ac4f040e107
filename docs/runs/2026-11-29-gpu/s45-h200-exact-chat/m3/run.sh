# ran from the project root on the GPU machine as tmp_*.sh (run_ab.sh was tmp_ab.sh; m4 kvdiff.py was tmp_kvdiff.py)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd PYTHONUNBUFFERED=1
mkdir -p $OUT /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
lc="timeout 150 python3 benchmarks/bench_long_chat.py --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf --draft /tmp/dr/d8.gguf --gpu-layers 99 --prompts mt-bench --mode chain --turns ${TURNS:-14} --ar"
run() { local tag=$1; shift; echo "== $tag: $*"; env $ENVV $lc "$@" --json $OUT/lc-$tag.json > $OUT/lc-$tag.txt 2>&1; echo rc=$?; tail -n 3 $OUT/lc-$tag.txt; }
ENVV= run base --windows 512
ENVV= run fresh --windows 512 --fresh
ENVV= run arfrom11 --windows 512 --ar-from 11
ENVV=DFLASH_EXACT_FUSION=0 run nofuse --windows 512
ENVV= run w0 --windows 0
