#!/usr/bin/env bash
# Sitting s66 on one nvidia-h200 (2026-12-01): issue 28 on the default pair (the machine had lost
# issue 30's pool and warm-start shards with the last checkout, so no 1.5B training this time).
#   check  gpu/gpu_top_k_check.sh: 0024 + pending 0025 (a row in parts), ids vs a host stable sort,
#          times of sort / one block a row / parts
#   split  gpu_fuse_ab.py --env DFLASH_TOP_K_SPLIT --sides 0,1 (0025 off / on), 4 rounds, equality
#   prof   tree_prof.py: host functions of tree-15 and chain-7 steps (cProfile), 9 real prompts x 3
#   t7     bench tree 7, DFLASH_TREE_TOP_K host / backend, first 80 of each public suite (decides
#          drafter.BACKEND_TOP_K_MIN_BUDGET, 12 today)
# Calls: setup (.gpu-bundle, .gpu-carry/next, s48 MANIFEST + part.00; large tracked files hidden),
#        `take s48` with part.01, then `follow N` until "lane done".
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle
TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
BENCH_N=${BENCH_N:-80}
P25=docs/design/pending-patches/0025-top-k-row-parts.patch
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
bench() {  # bench SIDE_ENV TAG SUITE SWEEP...
  local envv=$1 tag=$2 s=$3; shift 3
  timeout 240 env $envv python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $s \
    --limit $BENCH_N --reps 1 --round-prompts 10 --max-tokens 128 "$@" \
    --out $R/bench-$tag-$s.json --md $R/bench-$tag-$s.md > $R/bench-$tag-$s.log 2>&1
  say "bench $tag $s rc=$?"
}
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf /tmp/keep; mkdir -p /tmp/keep/packaging; cp -r $B/whl /tmp/keep/
  cp -r packaging/*.sh packaging/*.py packaging/patches /tmp/keep/packaging/; cp $P25 /tmp/keep/packaging/patches/
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash /tmp/keep/packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels /tmp/keep/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  cp resources/models/smollm2/drafter.gguf $DS
  cp -r .gpu-carry/next /tmp/keep/next
  bash gpu/gpu_carry.sh take s48
  setsid bash /tmp/keep/next/run66.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: build and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  bash gpu/gpu_top_k_check.sh > $R/topk_check.txt 2>&1
  say "topk check rc=$?: $(tail -n 1 $R/topk_check.txt)"
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  python3 -c "import json,glob; print(json.load(open(glob.glob('/tmp/lcp_site/**/build-info.json',recursive=True)[0]))['patches'])" \
      > $R/patches.txt 2>&1 || true
  while [ ! -f $TS.ok ]; do sleep 3; done
  say "split: phases, DFLASH_TOP_K_SPLIT 0 / 1"
  timeout 420 python3 gpu/gpu_fuse_ab.py --env DFLASH_TOP_K_SPLIT --tag split --sides 0,1 --rounds 4 \
      --target $TS --draft $DS --out $R/split > $R/split.log 2>&1; say "split rc=$?"
  for m in "tree 15" "chain 7"; do
    set -- $m
    timeout 180 python3 /tmp/keep/next/tree_prof.py $TS $DS $R/prof-$1$2 $1 $2 > $R/prof-$1$2.log 2>&1
    say "prof $1 $2 rc=$?: $(tail -n 1 $R/prof-$1$2.log | cut -c1-200)"
  done
  for s in mt-bench gsm8k humaneval; do
    for side in host backend; do
      bench DFLASH_TREE_TOP_K=$side t7$side $s --sweep verify=tree --sweep budget=7
    done
  done
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; cat $R/patches.txt 2>/dev/null
  grep -v "^check" $R/topk_check.txt 2>/dev/null | tail -n 12; grep -c "ok$" $R/topk_check.txt 2>/dev/null
  [ -f $R/split/split_report.md ] && head -n 40 $R/split/split_report.md
  for f in $R/prof-*.json; do [ -f $f ] && { echo "== $f"; cat $f; }; done
  for f in $R/bench-*.md; do [ -f $f ] && { echo "== $f"; grep '^|' $f | head -n 6; }; done
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r66.tgz -C $W r progress.log lane.log lcp_build.log 2>/dev/null; ls -la $OUT ;;
esac
