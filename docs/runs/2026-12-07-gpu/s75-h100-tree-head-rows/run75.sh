#!/usr/bin/env bash
# A sitting of issue 28 on one GPU and the default pair, after s74 (docs/runs/2026-12-07-gpu/
# s74-h100-inject-gstats/): s74's CUDA-graph counts showed the tree's drafter block re-capturing its
# graph (129 of ~1,300 blocks) or running without one (150): a tree step read its head on the tree's
# depth, which follows the last commit, and the graph cache's key did not see the head's rows. The
# engine now runs the head on the budget's drafts every step (drafter.tree_head_rows;
# DFLASH_TREE_HEAD_ROWS=depth is the old rule). Parts (PARTS, default "head gstats slots"):
#   head   DFLASH_TREE_HEAD_ROWS depth / budget: AR and tree 15, the first AB_PROMPTS (40) prompts of
#          each public suite, 2 rounds, one process (gpu/gpu_request_ab.py)
#   gstats gstats.py: DFLASH_GRAPH_STATS=1 and the inject's and step's time, tree 15, depth / budget /
#          depth / budget, a process each
#   slots  DFLASH_INJECT_SLOTS 0 / 16 on tree 15 with the new head rows (s73: 0.9885x in one process;
#          s74's per-process gstats read the tree step faster with slots)
# Before the first call, here: as run74.sh (the bundle, `gpu_carry.sh split ... s48`, hide), with
#   mkdir -p .gpu-carry/next && cp docs/runs/next/run75.sh docs/runs/next/gstats.py .gpu-carry/next/
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
  LANE_END=$(( $(date +%s) + ${LANE_SECONDS:-900} )) setsid bash $K/next/run75.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: build and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  cd $K/src || exit 1
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  P=" ${PARTS:-head gstats slots} "
  while [ ! -f $TS.ok ]; do sleep 3; done
  if [[ $P == *" head "* ]]; then
    timeout $(( $(left) > 320 ? 300 : $(left) - 20 )) python3 gpu/gpu_request_ab.py --target $TS --draft $DS \
      --env DFLASH_TREE_HEAD_ROWS --sides depth,budget --prompts ${AB_PROMPTS:-40} --rounds 2 --modes ar,tree --budget 15 \
      --json $R/ab-head-rows.json > $R/ab-head-rows.txt 2>&1
    say "ab head rows rc=$?"
  fi
  for s in depth budget depth budget; do
    [[ $P == *" gstats "* ]] && [ $(left) -gt 40 ] || continue
    DFLASH_TREE_HEAD_ROWS=$s DFLASH_GRAPH_STATS=1 timeout $(( $(left) > 120 ? 100 : $(left) - 20 )) python3 $K/next/gstats.py \
      $TS $DS tree 15 > $R/gstats-$s-tree15.log 2>&1
    say "gstats tree 15 head $s rc=$? $(grep SLOTS= $R/gstats-$s-tree15.log) changed $(awk '/changed node/{s+=$2} END{print s+0}' $R/gstats-$s-tree15.log) direct $(awk '/direct /{s+=$2} END{print s+0}' $R/gstats-$s-tree15.log)"
  done
  if [[ $P == *" slots "* ]] && [ $(left) -gt 150 ]; then
    timeout $(( $(left) > 320 ? 300 : $(left) - 20 )) python3 gpu/gpu_request_ab.py --target $TS --draft $DS \
      --env DFLASH_INJECT_SLOTS --sides 0,16 --prompts ${AB_PROMPTS:-40} --rounds 2 --modes tree --budget 15 \
      --json $R/ab-inject-tree15.json > $R/ab-inject-tree15.txt 2>&1
    say "ab inject tree 15 rc=$?"
  fi
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; tail -n 3 $W/peer_tools.log 2>/dev/null
  grep -hE "^\|" $R/ab-*.txt 2>/dev/null
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r75.tgz --exclude='*.npz' -C $W r progress.log lane.log lcp_build.log peer_tools.log 2>/dev/null; ls -la $OUT ;;
esac
