#!/usr/bin/env bash
# A sitting of issues 28/30's auto on one GPU and the default pair (2026-12-07, s77): the two auto
# changes of this session A/B'd per process against the rules before, with AR in the same processes:
#   warm:  DFLASH_CALIBRATION_WARM_TOKENS 1 (one dropped step, the rule before) vs 16 (the default now)
#   prior: DFLASH_AUTO_PRIOR_STEPS 0 (the measured acceptance alone, the rule before) vs 4 (the default)
# each `gpu_request_ab.py --per-process --modes ar,auto`, 40 prompts a suite, 2 rounds; then
#   pp:    the chain-5 per-process A/B of patch 0029's inject slots that did not fit s76.
# Before the first call, here: bundle, SmolLM2 parts (.gpu-carry/s48), then
#   mkdir -p .gpu-carry/next && cp docs/runs/2026-12-07-gpu/s77-h100-auto-calibration/run77.sh .gpu-carry/next/
# Calls: setup (.gpu-bundle, .gpu-carry/next, .gpu-carry/s48/MANIFEST), `take s48` x 3, then follow.
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; K=/tmp/keep
TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
BIN=$W/peer/llama.cpp/build/bin
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$K/src PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
left() { echo $(( ${LANE_END:-0} - $(date +%s) )); }   # seconds the lane has left
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf $K; mkdir -p $K/src; cp -r $B/whl $B/peer-llama.cpp.tgz $K/
  cp -r engine_bridge benchmarks gpu packaging resources pyproject.toml $K/src/
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash $K/src/packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $K/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  cp resources/models/smollm2/drafter.gguf $DS
  cp -r .gpu-carry/next $K/next
  bash gpu/gpu_carry.sh take s48
  LANE_END=$(( $(date +%s) + ${LANE_SECONDS:-900} )) setsid bash $K/next/run77.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: build and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  cd $K/src || exit 1
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  P=" ${PARTS:-warm prior pp} "
  while [ ! -f $TS.ok ]; do sleep 3; done
  for ab in "warm DFLASH_CALIBRATION_WARM_TOKENS 1,16" "prior DFLASH_AUTO_PRIOR_STEPS 0,4"; do
    set -- $ab
    [[ $P == *" $1 "* ]] && [ $(left) -gt 120 ] || continue
    timeout $(( $(left) - 10 )) python3 gpu/gpu_request_ab.py --target $TS --draft $DS --per-process \
      --env $2 --sides $3 --prompts ${AB_PROMPTS:-40} --rounds ${ROUNDS:-2} --modes ar,auto --budget 5 \
      --json $R/ab-$1.json > $R/ab-$1.txt 2>&1
    say "per-process $1 rc=$?"
  done
  if [[ $P == *" pp "* ]] && [ $(left) -gt 90 ]; then
    timeout $(( $(left) - 10 )) python3 gpu/gpu_request_ab.py --target $TS --draft $DS --per-process \
      --env DFLASH_INJECT_SLOTS --sides 0,16 --prompts ${AB_PROMPTS:-40} --rounds ${ROUNDS:-2} --modes chain --budget 5 \
      --json $R/pp-inject-chain5.json > $R/pp-inject-chain5.txt 2>&1
    say "per-process inject chain 5 rc=$?"
  fi
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; tail -n 3 $W/peer_tools.log 2>/dev/null
  grep -hE "^\|" $R/ab-*.txt $R/pp-*.txt 2>/dev/null; grep -h "calibrat" $R/*.txt 2>/dev/null | head
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r77.tgz --exclude='*.npz' -C $W r progress.log lane.log lcp_build.log peer_tools.log 2>/dev/null; ls -la $OUT ;;
esac
