# ran from the project root on the GPU machine as run.sh STEP ... (one H200, one held machine):
# (it ran as tmp_s52.sh, first_steps.py as tmp_first.py, both at the project root)
#   take setup | take | take train keep0 | restore | follow | eval | pack
# issue 27: a warm start from the shipped drafter with the trainer's fixed anchors (a request's first
# block, opened at the prompt's last token, trained since 2026-11-29), sitting 11 arm B's rate (5e-5),
# one arm on the whole GPU; then both drafters on the full public sets.
#   setup    the gguf wheel; the shipped drafter to /tmp/dr/d8.gguf; the prepared data to /tmp/data
#   train    gpu_train_ab.sh start: pool GEN s, then arm F for TRAIN s
#   keep0/restore  the kept CUDA build of 0001-0012,0015-0018 (.gpu-keep-s51), its parts over two calls
#   follow   until the run ends (at most 540 s per call)
#   eval     arm F exported (q8_0) to /tmp/dr/f.gguf; then per drafter (d8, f), at once: the first
#            steps (20 prompts per suite, 24 tokens), and dflash-studio bench on each full suite, 1 rep,
#            blocks of 10, AR / chain 7
#   pack     arm F's shards and logs into $OUT (the q8_0 GGUF is exported again here, byte for byte)
set -u
W=${W:-/tmp/w}; B=.gpu-bundle; RUN=/tmp/dflash-ab
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd52 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p $W /tmp/dr /tmp/keep $OUT
for s in "$@"; do case $s in
  take) bash gpu/gpu_carry.sh take s ;;
  setup)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl
    cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf && sha256sum /tmp/dr/d8.gguf
    rm -rf /tmp/data && mkdir -p /tmp/data && cp -r .gpu-carry/w/data /tmp/data/ && ls /tmp/data/data | head ;;
  train)
    BUNDLE=$B GPUS=1 ARMS="F" ARM_GPUS=1 GEN_SECONDS=${GEN:-150} TRAIN_SECONDS=${TRAIN:-840} RUN=$RUN \
      COMMON="--max-new 256 --every-temperature --temperatures 0,0.5,0.8,1.0 --seed 12 --init /tmp/dr/d8.gguf \
      --lr 5e-5 --warmup 0.05 --patience 0" bash gpu/gpu_train_ab.sh start $T /tmp/data/data ;;
  keep0) cp .gpu-keep-s51/lcp.tar.xz.00 /tmp/keep/ ;;
  restore)
    cp .gpu-keep-s51/lcp.tar.xz.0[12] /tmp/keep/ && W=$W bash gpu/gpu_ncu.sh restore /tmp/keep | tail -3
    python3 -c "import json; d=json.load(open('/tmp/lcp_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])])" ;;
  follow) RUN=$RUN bash gpu/gpu_train_ab.sh follow ${FOLLOW:-540} ;;
  eval)
    python3 -m engine_bridge.cli train-drafter --target $T --out /tmp/dr/f.gguf --data-dir $RUN/data --run-dir $RUN/F \
      --work $RUN/exF --stage export > $W/export.log 2>&1; echo "export rc=$?"; tail -2 $W/export.log; sha256sum /tmp/dr/f.gguf
    mkdir -p $OUT/ev
    for d in d8 f; do
      ( timeout 100 python3 first_steps.py $T /tmp/dr/$d.gguf 20 99 > $OUT/ev/first-$d.txt 2>&1
        for S in mt-bench gsm8k humaneval; do
          timeout 300 python3 -m engine_bridge.cli bench --target $T --draft /tmp/dr/$d.gguf --suite $S --limit 200 --reps 1 \
            --round-prompts 10 --max-tokens 128 --sweep verify=chain --sweep budget=7 --json $OUT/ev/$d-$S.json \
            --md $OUT/ev/$d-$S.md > $OUT/ev/$d-$S.log 2>&1; echo "$d $S rc=$?"
        done ) &
    done; wait
    for d in d8 f; do echo "== $d"; grep -v "^llama\|^load" $OUT/ev/first-$d.txt | tail -3; for S in mt-bench gsm8k humaneval; do grep -A4 "## Results" $OUT/ev/$d-$S.md | tail -2 | cut -c1-220; done; done
    (cd $OUT && tar czf ev.tgz ev && rm -rf ev) ;;
  pack)
    OUT=$OUT RUN=$RUN bash gpu/gpu_train_ab.sh pack F >/dev/null; sha256sum /tmp/dr/f.gguf; ls -la $OUT ;;
  *) echo "unknown step $s" ;;
esac; done
exit 0
