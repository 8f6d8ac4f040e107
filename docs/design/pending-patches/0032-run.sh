#!/usr/bin/env bash
# The sitting that measures pending patch 0032 (and judges 0031 on a real K-quant target), prepared on
# 2026-12-07 and not run yet; copy it to docs/runs/<date>/<sitting>/ once it has run. On one GPU:
#   1. the engine with 0001-0031 and 0032 (copied from docs/design/pending-patches/ into the build's
#      packaging/patches/);
#   2. mmvq_ab (docs/design/pending-patches/0032-mmvq_ab.cu, built there against the same patched tree):
#      MMVQ / 0031 / 0031 + split, each kernel alone;
#   3. the split in the engine: gpu_verify_rows.py and gpu_fuse_ab.py --env DFLASH_MMVQ_MMA_SPLIT on the
#      random q15c and q8b Q4_K_M targets (gpu_models.py + llama-quantize there), as s79 did for 0031;
#   4. 0031's losslessness on the real Qwen2.5-Coder-1.5B-Instruct Q4_K_M (every matrix a K-quant),
#      carried in parts, with a random drafter of issue 30's shape (gpu_synth_drafter.py; its drafts are
#      all rejected, so every committed token is a verify's pick of 8 rows): `dflash-studio bench`'s
#      judge on chain 7 against AR, `DFLASH_MMVQ_MMA` 1 (the default) and 0, first 10 prompts a suite.
# Before the first call, here (a new checkout has none of it):
#   bash ../shared/gpu/make-offline-bundle.sh ...   (.gpu-bundle; then cp ggml-vocab-qwen2.gguf into it)
#   dflash-studio fetch-model qwen2.5-coder-1.5b && PART_MIB=40 bash gpu/gpu_carry.sh split \
#       ~/.local/share/dflash-studio/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf q15
#   mkdir -p .gpu-carry/next && cp docs/design/pending-patches/0032-run.sh .gpu-carry/next/run.sh
#   bash gpu/gpu_carry.sh hide
# Calls: setup (.gpu-bundle, .gpu-carry/next, .gpu-carry/q15/MANIFEST + its first part), then
#   `bash gpu/gpu_carry.sh take q15` once a part (`gpu_carry.sh calls q15` lists them), then
#   `bash .gpu-carry/next/run.sh follow [secs]` until "lane done". PARTS (default "kernel split real")
#   picks steps 2, 3 and 4.
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; K=/tmp/keep; M=/tmp/m
T15=/tmp/t/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$K/src PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
waitdone() { while ! grep -q "^done rc=" $1 2>/dev/null; do sleep 3; done; tail -n 1 $1; }
P=" ${PARTS:-kernel split real} "
case ${1:-} in
setup)
  mkdir -p $W $R $M
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf $K; mkdir -p $K/src; cp -r $B/whl $K/
  cp -r engine_bridge benchmarks gpu packaging resources pyproject.toml $K/src/
  cp docs/design/pending-patches/0032-*.patch $K/src/packaging/patches/
  cp docs/design/pending-patches/0032-mmvq_ab.cu $K/; mkdir -p $K/stub
  cp docs/design/pending-patches/0032-stub-cublas_v2.h $K/stub/cublas_v2.h
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash $K/src/packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $K/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  rm -rf $W/llama.cpp; tar xzf $B/peer-llama.cpp.tgz -C $W
  python3 $K/src/packaging/apply_patches.py $W/llama.cpp --patches $K/src/packaging/patches > $W/peer_patches.log 2>&1
  setsid bash -c "SECONDS=0; cd $W/llama.cpp && cmake -B build-cpu -G Ninja -DGGML_CUDA=off -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
      > $W/quant_build.log 2>&1 && cmake --build build-cpu -j 4 --target llama-quantize >> $W/quant_build.log 2>&1; \
      echo \"done rc=\$? secs=\$SECONDS\" >> $W/quant_build.log" < /dev/null > /dev/null 2>&1 &
  setsid bash -c "SECONDS=0; cd $W/llama.cpp && nvcc -O3 -std=c++17 -arch=sm_90 -I$K/stub -Iggml/include -Iggml/src \
      -Iggml/src/ggml-cuda -DGGML_USE_CUDA -o $K/mmvq_ab $K/0032-mmvq_ab.cu > $W/mmvq_ab_build.log 2>&1; \
      echo \"done rc=\$? secs=\$SECONDS\" >> $W/mmvq_ab_build.log" < /dev/null > /dev/null 2>&1 &
  setsid bash -c "SECONDS=0; cd $K/src && python3 gpu/gpu_models.py $M $PWD/$B --pairs q15c,q8b > $W/models.log 2>&1; \
      echo \"done rc=\$? secs=\$SECONDS\" >> $W/models.log" < /dev/null > /dev/null 2>&1 &
  cp -r .gpu-carry/next $K/next
  [ -f .gpu-carry/q15/MANIFEST ] && bash gpu/gpu_carry.sh take q15
  setsid bash $K/next/run.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: engine, llama-quantize and mmvq_ab builds, models and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  cd $K/src || exit 1
  if [[ $P == *" kernel "* ]]; then
    say "mmvq_ab build: $(waitdone $W/mmvq_ab_build.log)"
    timeout 300 $K/mmvq_ab time > $R/mmvq_ab.txt 2>&1; say "mmvq_ab rc=$?"
  fi
  if [[ $P == *" split "* ]]; then
    say "llama-quantize build: $(waitdone $W/quant_build.log)"
    Q=$W/llama.cpp/build-cpu/bin/llama-quantize
    for S in q15c q8b; do
      while ! grep -q "^$S pair written" $W/models.log 2>/dev/null; do
        tail -n 1 $W/models.log 2>/dev/null | grep -q "^done rc=" && break; sleep 3; done
      SECONDS=0; $Q $M/$S-target-f16.gguf $M/$S-target.gguf Q4_K_M 16 > $R/quant_$S.log 2>&1
      say "quantise $S rc=$? in $SECONDS s"; rm -f $M/$S-target-f16.gguf
    done
  fi
  say "engine build: $(waitdone $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  if [[ $P == *" split "* ]]; then
    for S in q15c q8b; do
      for round in 1 2; do
        for side in $( [ $round = 1 ] && echo "0 1" || echo "1 0"); do
          timeout 300 env DFLASH_MMVQ_MMA_SPLIT=$side python3 gpu/gpu_verify_rows.py --target $M/$S-target.gguf \
            --draft $M/$S-dflash.gguf --rows 1,4,8,12,16 --iters 20 --rounds 2 --label $S-$side \
            > $R/vrows_${S}_${side}_$round.txt 2>&1
          say "vrows $S split $side round $round rc=$?"
        done
      done
      timeout 600 python3 gpu/gpu_fuse_ab.py --target $M/$S-target.gguf --draft $M/$S-dflash.gguf --out $R/ab_$S \
        --env DFLASH_MMVQ_MMA_SPLIT --tag split --sides 0,1 --rounds 2 > $R/ab_$S.txt 2>&1
      say "fuse ab $S rc=$?"
    done
  fi
  if [[ $P == *" real "* ]]; then
    while [ ! -f $T15.ok ]; do sleep 5; done
    python3 gpu/gpu_synth_drafter.py $T15 /tmp/t/d15.gguf > $R/synth.log 2>&1; say "synth drafter rc=$?"
    for mma in 1 0; do
      for suite in humaneval gsm8k mt-bench; do
        timeout 600 env DFLASH_MMVQ_MMA=$mma python3 -m engine_bridge.cli bench --target $T15 --draft /tmp/t/d15.gguf \
          --suite $suite --limit 10 --reps 1 --max-tokens 128 --sweep verify=chain --budget 7 \
          > $R/bench_${suite}_mma$mma.txt 2>&1
        say "bench $suite mma $mma rc=$?"
      done
    done
  fi
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log $W/quant_build.log $W/models.log $W/mmvq_ab_build.log
  grep -h "n=8" $R/mmvq_ab.txt 2>/dev/null | cut -c1-240
  grep -hE "^\|" $R/ab_*.txt 2>/dev/null | head -40
  grep -hiE "near-tie|parted|x AR|tok/s" $R/bench_*.txt 2>/dev/null | head -40
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r.tgz --exclude='*.npz' --exclude='*.npy' -C $W r progress.log lane.log lcp_build.log models.log \
    quant_build.log mmvq_ab_build.log 2>/dev/null; ls -la $OUT ;;
esac
