#!/usr/bin/env bash
# A short sitting (~13 min held) on one H100/H200, prepared on 2026-12-07 and not run: no machine started
# in that session's 14 attempts, which with 7 refused calls took ~26 of its 30 device minutes. Pending
# patch 0032 and shipped 0031 on a real K-quant target, the Qwen2.5-Coder-0.5B-Instruct Q4_K_M (every matrix Q4_K / Q6_K / Q8_0),
# with a random drafter (gpu_synth_drafter.py: its drafts are all rejected, so every committed token of a
# chain-7 run is a verify's pick among 8 rows, the rows 0031 puts on tensor cores).
# Since sitting s81, 0032 splits only from K >= 8192: no matrix of the 0.5B (K <= 4864) splits, so step 2
# below is a null A/B there; steps 1 and 3 judge 0031.
#   setup  the engine with 0001-0032 (0032's switch off except where a row says) in the background;
#          mmvq_ab (0032-mmvq_ab.cu, built here with nvcc 13.0 against 0001-0032): MMVQ / 0031 / 0031 + split,
#          each kernel alone, on the GPU while it is idle
#   lane   1. bench (x AR, the judge on every parting) chain 7 against AR, first 10 prompts of HumanEval,
#             GSM8K, MT-Bench, 0031 on (the default); 2. gpu_fuse_ab.py DFLASH_MMVQ_MMA_SPLIT 0/1 (phases,
#             logits); 3. the same benches with DFLASH_MMVQ_MMA=0; 4. gpu_fuse_ab.py DFLASH_MMVQ_MMA 0/1
# Before the first call, here:
#   bash ../shared/gpu/make-offline-bundle.sh   (.gpu-bundle)
#   the patched tree (0001-0031 + this folder's 0032) unpacked from .gpu-bundle/lcp-*.tgz, then in its
#   vendor/llama.cpp: nvcc -O3 -std=c++17 -arch=sm_90 -I<dir of 0032-stub-cublas_v2.h renamed cublas_v2.h>
#   -Iggml/include -Iggml/src -Iggml/src/ggml-cuda -DGGML_USE_CUDA -o .gpu-carry/mma/mmvq_ab32 0032-mmvq_ab.cu
#   mkdir -p .gpu-carry/next && cp docs/design/pending-patches/0032-{run-q05.sh,mmvq-mma-split-k.patch} .gpu-carry/next/
#   (then in .gpu-carry/next: mv 0032-run-q05.sh run82.sh)
#   dflash-studio fetch-model qwen2.5-coder-0.5b && PART_MIB=57 bash gpu/gpu_carry.sh split \
#       ~/.local/share/dflash-studio/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf q05      (9 parts)
#   bash gpu/gpu_carry.sh hide; bash gpu/gpu_carry.sh hide resources/models/smollm2/drafter.gguf \
#       docs/screenshot.png docs/pairing-report.png                        (the tree then carries 6.5 MB)
# Calls: `bash .gpu-carry/next/run82.sh setup` (carry .gpu-bundle, .gpu-carry/next, .gpu-carry/mma), then
#   `bash gpu/gpu_carry.sh take q05` once a part, `bash /tmp/k/run.sh start`, `bash /tmp/k/run.sh follow N`.
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; K=/tmp/k
T=/tmp/t/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; D=/tmp/t/d05.gguf
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$K/src PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
bench() {  # SUITE TAG [ENV...]
  local s=$1 tag=$2; shift 2
  timeout 300 env "$@" python3 -m engine_bridge.cli bench --target $T --draft $D --suite $s --limit 10 --reps 1 \
    --max-tokens 128 --sweep verify=chain --budget 7 --out $R/bench-$tag-$s.json --md $R/bench-$tag-$s.md \
    > $R/bench-$tag-$s.log 2>&1
  say "bench $tag $s rc=$?"
}
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf $K; mkdir -p $K/src; cp -r $B/whl $K/
  cp -r engine_bridge benchmarks gpu packaging resources pyproject.toml $K/src/
  cp .gpu-carry/next/0032-mmvq-mma-split-k.patch $K/src/packaging/patches/
  cp .gpu-carry/next/run82.sh $K/run.sh; cp .gpu-carry/mma/mmvq_ab32 $K/mmvq_ab32
  setsid bash -c "SECONDS=0; cd $K/src && PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $K/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  say "setup: engine build started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt
  SECONDS=0; timeout 200 $K/mmvq_ab32 time > $R/mmvq_ab32.txt 2>&1; say "mmvq_ab rc=$? in $SECONDS s"
  mkdir -p $OUT; cp $R/mmvq_ab32.txt $W/env.txt $OUT/; cat $R/mmvq_ab32.txt | cut -c1-230 ;;
start)
  [ -f $T.ok ] || { echo "target not joined"; exit 1; }
  setsid bash $K/run.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "lane started" ;;
lane)
  cd $K/src || exit 1
  python3 gpu/gpu_synth_drafter.py $T $D --ffn 2048 --target-layers 2,7,12,17,22 > $R/synth.log 2>&1; say "synth rc=$?"
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 3; done
  say "engine build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  for s in humaneval gsm8k mt-bench; do bench $s mma1 DFLASH_MMVQ_MMA_SPLIT=0; done
  timeout 420 python3 gpu/gpu_fuse_ab.py --target $T --draft $D --out $R/ab_split --env DFLASH_MMVQ_MMA_SPLIT \
    --tag split --sides 0,1 --rounds 2 > $R/ab_split.txt 2>&1; say "fuse ab split rc=$?"
  for s in humaneval gsm8k mt-bench; do bench $s mma0 DFLASH_MMVQ_MMA=0; done
  timeout 420 env DFLASH_MMVQ_MMA_SPLIT=0 python3 gpu/gpu_fuse_ab.py --target $T --draft $D --out $R/ab_mma \
    --env DFLASH_MMVQ_MMA --tag mma --sides 0,1 --rounds 2 > $R/ab_mma.txt 2>&1; say "fuse ab mma rc=$?"
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 5; done
  cat $W/progress.log; tail -n 1 $W/lcp_build.log
  for f in $R/bench-*.md; do [ -f $f ] && { echo "== $f"; grep -E "^\| (ar|c0) |break-even|near|part" $f | cut -c1-250; }; done
  for f in $R/ab_split.txt $R/ab_mma.txt; do [ -f $f ] && { echo "== $f"; grep -vE "^\s*$" $f | head -40 | cut -c1-230; }; done
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r82.tgz --exclude='*.npz' --exclude='*.npy' -C $W r progress.log lane.log lcp_build.log env.txt 2>/dev/null
  ls -la $OUT ;;
esac
