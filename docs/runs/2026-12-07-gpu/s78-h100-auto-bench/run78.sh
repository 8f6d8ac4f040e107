#!/usr/bin/env bash
# Sitting s78 (2026-12-07): auto with this session's calibration warm-up (prior off, the defaults of
# 96839c7) against chain 5, the GPU default, in `dflash-studio bench` on the first 40 prompts of each
# public suite (AR, chain 5 and auto rows in turn on blocks of 10 prompts). Measurement only.
# Before the first call, here: bundle, SmolLM2 parts (.gpu-carry/s48), then
#   mkdir -p .gpu-carry/next && cp docs/runs/2026-12-07-gpu/s78-h100-auto-bench/run78.sh .gpu-carry/next/
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
  LANE_END=$(( $(date +%s) + ${LANE_SECONDS:-900} )) setsid bash $K/next/run78.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: build and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  cd $K/src || exit 1
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  while [ ! -f $TS.ok ]; do sleep 3; done
  for s in ${SUITES:-mt-bench gsm8k humaneval}; do
    [ $(left) -gt 60 ] || continue
    timeout $(( $(left) - 10 )) python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $s \
      --limit ${LIMIT:-40} --reps 1 --max-tokens 128 --sweep verify=chain,auto --budget 5 --round-prompts 10 \
      --md $R/bench-$s.md --out $R/bench-$s.json --quiet > $R/bench-$s.log 2>&1
    say "bench $s rc=$?"
  done
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; tail -n 3 $W/peer_tools.log 2>/dev/null
  for s in mt-bench gsm8k humaneval; do grep -E "^\| (ar|c0|c1) \|" $R/bench-$s.md 2>/dev/null | head -6 | cut -c1-200; done
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r78.tgz --exclude='*.npz' -C $W r progress.log lane.log lcp_build.log peer_tools.log 2>/dev/null; ls -la $OUT ;;
esac
