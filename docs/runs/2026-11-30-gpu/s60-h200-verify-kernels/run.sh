#!/usr/bin/env bash
# Pending patch 0022 (DFLASH_VERIFY_KERNELS) on one GPU machine: build the series + 0022, then
# phases per side (gpu_fuse_ab.py) at a short and a long context, then the bench per side.
# (It built the first version of 0022, docs/design/pending-patches/0022-verify-kernels.patch at commit
# 99bcefa, with the warps as "w"; the shipped packaging/patches/0022-verify-vec-attention.patch keeps "a".)
#   call 1 (.gpu-bundle carried): bash gpu/tmp_x/run22.sh setup
#   calls 2-3 (.gpu-carry/s48 parts):  bash gpu/gpu_carry.sh take s48
#   then: bash gpu/tmp_x/run22.sh start; bash gpu/tmp_x/run22.sh follow 500
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/t/drafter.gguf
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t; cp resources/models/smollm2/drafter.gguf $D
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  cp docs/design/pending-patches/0022-verify-kernels.patch packaging/patches/
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  say "setup: build started"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt ;;
start)
  cp docs/design/pending-patches/0022-verify-kernels.patch packaging/patches/ 2>/dev/null
  setsid bash $0 run < /dev/null > $W/run.log 2>&1 &
  say "run started" ;;
run)
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || exit 1
  while [ ! -f $T.ok ]; do sleep 5; done
  python3 -c "import json,glob; print(json.load(open(glob.glob('/tmp/lcp_site/**/build-info.json',recursive=True)[0]))['patches'])" \
      > $R/patches.txt 2>&1 || true
  say "phases, short context"
  timeout 420 python3 gpu/gpu_fuse_ab.py --env DFLASH_VERIFY_KERNELS --tag vk --sides 0,w,a,wa --rounds 2 \
      --target $T --draft $D --out $R/vk > $R/vk.log 2>&1; say "vk rc=$?"
  say "phases, long context (2000 tokens; 'a' at any length)"
  DFLASH_VERIFY_VEC_KV=100000 timeout 300 python3 gpu/gpu_fuse_ab.py --env DFLASH_VERIFY_KERNELS --tag vkl \
      --sides 0,a,wa --rounds 2 --context 2000 --no-eq --target $T --draft $D --out $R/vkl > $R/vkl.log 2>&1
  say "vkl rc=$?"
  mkdir -p $R/real
  for suite in mt-bench gsm8k humaneval; do
    for side in 0 default; do
      e="DFLASH_DATA_DIR=/tmp/dd_$side"; [ $side = 0 ] && e="$e DFLASH_VERIFY_KERNELS=0"
      timeout 200 env $e python3 -m engine_bridge.cli bench --target $T --draft $D --suite $suite --limit ${REAL_N:-30} \
        --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 \
        --json $R/real/$suite-$side.json > $R/real/$suite-$side.txt 2>&1
      say "real $suite $side rc=$?"
    done
  done
  say "all done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && ! grep -q "all done\|rc=[1-9]" $W/progress.log; do sleep 10; done
  cat $W/progress.log; tail -n 3 $W/lcp_build.log
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  [ -f $R/vk/vk_report.md ] && cat $R/vk/vk_report.md
  [ -f $R/vkl/vkl_report.md ] && cat $R/vkl/vkl_report.md
  tar czf $OUT/r22.tgz -C $W r progress.log run.log lcp_build.log 2>/dev/null; ls -la $OUT ;;
esac
