# ran from the project root on the GPU machine as run.sh STEP ... (one H200, one held machine):
#   setup (tree + .gpu-bundle/whl + .gpu-keep-s56) | take (part.00 + .gpu-carry/w/data) |
#   take data train (part.01) | follow ... | eval | pack U | pack W
# (it ran as tmp_s58.sh at the project root; eval in the background, `OUT=/tmp/evo setsid nohup bash
#  tmp_s58.sh eval`, followed from two calls, then `pack U`: U's train log is in logs.tgz)
# issue 27: blocks where the engine opens them. Two arms on one pool, sharing the one GPU, both warm
# starts from the shipped drafter at sitting 12's rate (5e-5), both keeping the step with the most
# held-out accepted drafts per step of the engine's walk (train_chat --select walk, the new default):
#   U  anchors at random positions, as every sitting before;
#   W  half of each sequence's 32 anchors along the drafter's own walk (--walk-anchors 0.5).
#   setup    the wheels; the shipped drafter to /tmp/dr/d8.gguf; the kept CUDA build (0001-0012,
#            0015-0019) restored into /tmp/lcp_site
#   data     the prepared prompts (train-drafter --stage prepare) to /tmp/data/data
#   train    gpu_train_ab.sh start: pool GEN s, then arms U and W at once for TRAIN s
#   eval     both arms exported (q8_0); then d8, U and W at once on the GPU: dflash-studio bench on
#            each full public suite, 1 rep, blocks of 10, AR / chain 7 (commit lengths compare; the
#            three processes share the GPU, so their tok/s do not)
#   pack X   arm X's shards and logs into $OUT
set -u
W=${W:-/tmp/w}; B=.gpu-bundle; RUN=/tmp/dflash-ab
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd58 PYTHONUNBUFFERED=1
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p $W /tmp/dr /tmp/keep $OUT
for s in "$@"; do case $s in
  setup)
    cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf && sha256sum /tmp/dr/d8.gguf
    cp .gpu-keep-s56/lcp.tar.xz.* /tmp/keep/ && W=$W B=$B bash gpu/gpu_ncu.sh restore /tmp/keep | tail -2
    python3 -c "import json; d=json.load(open('/tmp/lcp_site/llama_cpp/dflash_build_info.json')); print([p['name'] for p in d.get('patches', [])])"
    python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))" ;;
  take) bash gpu/gpu_carry.sh take s48 ;;
  data) rm -rf /tmp/data && mkdir -p /tmp/data && cp -r .gpu-carry/w/data /tmp/data/ && ls /tmp/data/data ;;
  train)
    BUNDLE=$B GPUS=1 SHARE_GPUS=1 ARMS="U W" ARM_GPUS=1 GEN_SECONDS=${GEN:-120} TRAIN_SECONDS=${TRAIN:-480} RUN=$RUN \
      COMMON="--max-new 256 --every-temperature --temperatures 0,0.5,0.8,1.0 --seed 58 --init /tmp/dr/d8.gguf \
      --lr 5e-5 --warmup 0.05 --patience 0 --select walk" ARM_W="--walk-anchors 0.5" \
      bash gpu/gpu_train_ab.sh start $T /tmp/data/data ;;
  follow) RUN=$RUN bash gpu/gpu_train_ab.sh follow ${FOLLOW:-540} ;;
  eval)
    for a in U W; do
      python3 -m engine_bridge.cli train-drafter --target $T --out /tmp/dr/$a.gguf --data-dir $RUN/data --run-dir $RUN/$a \
        --work $RUN/ex$a --stage export > $W/export-$a.log 2>&1; echo "export $a rc=$?"; sha256sum /tmp/dr/$a.gguf
    done
    mkdir -p $OUT/ev
    for d in d8 U W; do
      ( for S in mt-bench gsm8k humaneval; do
          timeout 400 python3 -m engine_bridge.cli bench --target $T --draft /tmp/dr/$d.gguf --suite $S --limit 200 --reps 1 \
            --round-prompts 10 --max-tokens 128 --sweep verify=chain --sweep budget=7 --json $OUT/ev/$d-$S.json \
            --md $OUT/ev/$d-$S.md > $OUT/ev/$d-$S.log 2>&1; echo "$d $S rc=$?"
        done ) &
    done; wait
    for d in d8 U W; do echo "== $d"; for S in mt-bench gsm8k humaneval; do grep -A4 "## Results" $OUT/ev/$d-$S.md | tail -2 | cut -c1-220; done; done
    (cd $OUT && tar czf ev.tgz ev && rm -rf ev) ;;
  pack) OUT=$OUT RUN=$RUN bash gpu/gpu_train_ab.sh pack ${2:-U} >/dev/null; ls -la $OUT ;;
  *) echo "unknown step $s" ;;
esac; done
exit 0
