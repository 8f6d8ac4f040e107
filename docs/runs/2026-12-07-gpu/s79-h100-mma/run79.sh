#!/usr/bin/env bash
# Sitting s79 (2026-12-07): pending patch 0031 (Q4_K / Q6_K products of 2-16 columns on int8 tensor
# cores, docs/design/pending-patches/) built into the CUDA engine and A/B'd by its switch
# DFLASH_MMVQ_MMA (0 = upstream's MMVQ / MMQ, 1 = the tensor-core kernel) on the two K-quant shapes of
# issue 28 / 30, random weights written and quantised to Q4_K_M on the machine (gpu/gpu_models.py,
# llama-quantize from the bundle's llama.cpp tree built for the CPU):
#   q15c: the Qwen2.5-Coder-1.5B-Instruct shape, with issue 30's drafter shape;
#   q8b:  the Qwen3-8B shape, with a 5-layer f16 drafter.
# Per shape: gpu_verify_rows.py (a verify of 1-16 rows, a process per side, two rounds alternating),
# then gpu_fuse_ab.py --env DFLASH_MMVQ_MMA (phases, the logits and greedy tokens of both sides).
# First the kernel alone (mma_test, built here with nvcc: docs/runs/.../s79-h100-mma/mma_test.cu).
# Before the first call, here: cp /tmp/vocabout/ggml-vocab-qwen2.gguf .gpu-bundle/ (gpu_models' vocab),
#   mkdir -p .gpu-carry/next .gpu-carry/mma && cp THIS .gpu-carry/next/ && cp mma_test .gpu-carry/mma/
# Calls: setup (.gpu-bundle, .gpu-carry/next, .gpu-carry/mma), then `follow [secs]` until "lane done".
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; K=/tmp/keep; M=/tmp/m
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$K/src PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
waitdone() { while ! grep -q "^done rc=" $1 2>/dev/null; do sleep 3; done; tail -n 1 $1; }
case ${1:-} in
setup)
  mkdir -p $W $R $M
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf $K; mkdir -p $K/src; cp -r $B/whl $K/
  cp -r engine_bridge benchmarks gpu packaging resources pyproject.toml $K/src/
  cp docs/design/pending-patches/0031-*.patch $K/src/packaging/patches/
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash $K/src/packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $K/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  rm -rf $W/llama.cpp; tar xzf $B/peer-llama.cpp.tgz -C $W
  setsid bash -c "SECONDS=0; cd $W/llama.cpp && cmake -B build-cpu -G Ninja -DGGML_CUDA=off -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
      > $W/quant_build.log 2>&1 && cmake --build build-cpu -j 6 --target llama-quantize >> $W/quant_build.log 2>&1; \
      echo \"done rc=\$? secs=\$SECONDS\" >> $W/quant_build.log" < /dev/null > /dev/null 2>&1 &
  setsid bash -c "SECONDS=0; cd $K/src && python3 gpu/gpu_models.py $M $PWD/$B --pairs q15c,q8b > $W/models.log 2>&1; \
      echo \"done rc=\$? secs=\$SECONDS\" >> $W/models.log" < /dev/null > /dev/null 2>&1 &
  cp -r .gpu-carry/next $K/next; cp .gpu-carry/mma/mma_test $K/
  setsid bash $K/next/run79.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: engine build, llama-quantize build, models and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  cd $K/src || exit 1
  $K/mma_test time > $R/mma_test.txt 2>&1; say "mma_test rc=$? ($(grep -c 'bad' $R/mma_test.txt) lines with bad)"
  say "llama-quantize build: $(waitdone $W/quant_build.log)"
  Q=$W/llama.cpp/build-cpu/bin/llama-quantize
  for P in q15c q8b; do
    while ! grep -q "^$P pair written" $W/models.log 2>/dev/null; do
      tail -n 1 $W/models.log 2>/dev/null | grep -q "^done rc=" && break; sleep 3; done
    SECONDS=0; $Q $M/$P-target-f16.gguf $M/$P-target.gguf Q4_K_M 16 > $R/quant_$P.log 2>&1
    say "quantise $P rc=$? in $SECONDS s: $(ls -la $M/$P-target.gguf 2>&1 | awk '{print $5}') bytes"; rm -f $M/$P-target-f16.gguf
  done
  say "engine build: $(waitdone $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  for P in ${SHAPES:-q15c q8b}; do
    T=$M/$P-target.gguf; D=$M/$P-dflash.gguf
    for round in 1 2; do
      for side in $( [ $round = 1 ] && echo "0 1" || echo "1 0"); do
        timeout 300 env DFLASH_MMVQ_MMA=$side python3 gpu/gpu_verify_rows.py --target $T --draft $D --rows 1,2,4,8,9,12,16 \
          --iters 20 --rounds 2 --label $P-$side --json $R/vrows_${P}_${side}_$round.json > $R/vrows_${P}_${side}_$round.txt 2>&1
        say "vrows $P side $side round $round rc=$?"
      done
    done
    timeout 900 python3 gpu/gpu_fuse_ab.py --target $T --draft $D --out $R/ab_$P --env DFLASH_MMVQ_MMA --tag mma \
      --sides 0,1 --rounds 2 > $R/ab_$P.txt 2>&1
    say "fuse ab $P rc=$?"
  done
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log $W/quant_build.log $W/models.log
  grep -h "n=8\|CHECK" $R/mma_test.txt 2>/dev/null | cut -c1-220
  for f in $R/vrows_*.txt; do [ -f $f ] && tail -n 8 $f; done
  grep -hE "^\||^[a-z]" $R/ab_*.txt 2>/dev/null | head -80
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r79.tgz -C $W r progress.log lane.log lcp_build.log models.log quant_build.log 2>/dev/null; ls -la $OUT ;;
esac
