#!/usr/bin/env bash
# Sitting s65 on one nvidia-h200 (2026-12-01; no x2 was lent): issue 28, then issue 30, one after the
# other on the one GPU (nothing else runs on it while the patch's phases and the bench are timed).
#   first: patch 0024 (a one-pass top-k for k <= 32, docs/design/pending-patches/), built with 0001-0023
#     check  gpu/gpu_top_k_check.sh: the kernel's ids against a host reference, its time against the sort
#     stk    phases per side, DFLASH_SMALL_TOP_K 0 / 1 (gpu_fuse_ab.py, alternating rounds), the
#            drafter's top-k candidates and the greedy tokens compared
#     bench  tree 15 and auto on the public sets (first BENCH_N), 0024 on, one process per suite
#   then: the 1.5B drafter's third sitting
#     gen    the 1.5B answers for GEN s (seed 65), joined with s61's pool (--earlier)
#     train  warm start from s63's f16 shards (--init), TRAIN s
#     eval   export, then the public prompts (first EVAL_N per suite), commit lengths
# Calls: 1 setup (.gpu-bundle, .gpu-carry/wq, .gpu-carry/pool15; the shipped drafter in the tree, the
#        large files hidden: gpu_carry.sh hide), `take s48` x2, `take qwen15` x23, `run65.sh init`
#        with .gpu-carry/initA then .gpu-carry/initB (s63's shards in two halves), `follow N` until
#        "all done", `shards` (the new f16 shards) and `pool` (the joined pool, for the next sitting).
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; RUN=/tmp/dflash-train
T=/tmp/t/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
GEN=${GEN:-180}; TRAIN=${TRAIN:-360}; EVAL_N=${EVAL_N:-16}; BENCH_N=${BENCH_N:-80}
P24=docs/design/pending-patches/0024-small-top-k.patch
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t /tmp/init /tmp/old15
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  # the build script and the series + 0024 kept in /tmp: a later call's tree no longer holds the copy
  rm -rf /tmp/keep; mkdir -p /tmp/keep/packaging; cp -r $B/whl /tmp/keep/
  cp -r packaging/*.sh packaging/*.py packaging/patches /tmp/keep/packaging/; cp $P24 /tmp/keep/packaging/patches/
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash /tmp/keep/packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels /tmp/keep/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  cp resources/models/smollm2/drafter.gguf $DS
  mkdir -p $RUN; cp -r .gpu-carry/wq/data $RUN/data
  bash gpu/gpu_carry.sh take pool15 && tar xf /tmp/t/pool.tar -C /tmp/old15 && ls -la /tmp/old15/gen
  cp -r gpu/tmp_x gpu/top_k_check.cu gpu/gpu_top_k_check.sh $P24 /tmp/keep/
  setsid bash $0 run < /dev/null > $W/run.log 2>&1 &
  setsid bash $0 lane0 < /dev/null > $W/lane0.log 2>&1 &
  say "setup: build, run and lane0 started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
init)
  for d in .gpu-carry/initA .gpu-carry/initB; do [ -d $d ] && cp $d/* /tmp/init/; done; ls /tmp/init; tail -n 3 $W/progress.log ;;
run)  # the 1.5B, once lane0 is done
  while [ ! -f $T.ok ] || [ ! -f $W/lane0.done ]; do sleep 3; done
  say "gen: $GEN s"
  python3 -m engine_bridge.training.train_chat --target $T --data $RUN/data --out $RUN/shard-0 --stage generate \
    --gen-seconds $GEN --seed 65 > $R/gen.log 2>&1
  python3 -m engine_bridge.training.shards --out $RUN $RUN/shard-0 --earlier /tmp/old15 > $R/merge.log 2>&1
  say "gen done rc=$?: $(tail -n 1 $R/merge.log)"; touch $W/gen.done
  python3 /tmp/keep/tmp_x/check_pool.py $RUN $T --drop > $R/check_pool.txt 2>&1; say "check: $(head -n 1 $R/check_pool.txt)"
  while [ ! -f /tmp/init/drafter.json ] || [ "$(ls /tmp/init/drafter-*.safetensors | wc -l)" -lt 5 ]; do sleep 3; done
  say "train: $TRAIN s, --init /tmp/init (s63)"
  python3 -m engine_bridge.training.train_chat --target $T --data $RUN/data --out $RUN \
    --stage train --layers 1 --ffn 3072 --init /tmp/init --seconds $TRAIN --lr 4e-4 --warmup 0.05 \
    --seed 65 > $RUN/stdout.log 2>&1
  say "train rc=$?: $(grep 'train: done' $RUN/train-log.txt | tail -n 1 | cut -c1-160)"
  while ! grep -q "^done rc=0" $W/lcp_build.log; do sleep 5; done
  python3 -m engine_bridge.cli train-drafter --target $T --out $R/d15.gguf --data-dir $RUN/data --run-dir $RUN \
    --work $R/work --stage export > $R/export.log 2>&1; say "export rc=$?"
  for c in chat math code; do
    python3 -m engine_bridge.training.evaluate_chat --target $T --draft $R/d15.gguf \
      --public --categories $c --n-per-category $EVAL_N --budgets 7,15 --tree-budgets 15 --max-tokens 128 \
      --json $R/eval15-$c.json > $R/eval15-$c.log 2>&1 &
  done
  wait; say "eval15 done"
  for c in chat math code; do grep '^|' $R/eval15-$c.log; done > $R/eval15.md
  touch $W/run.done; say "run done" ;;
lane0)  # patch 0024 on the default pair
  bash /tmp/keep/gpu_top_k_check.sh /tmp/keep/0024-small-top-k.patch > $R/topk_check.txt 2>&1
  say "topk check rc=$?: $(tail -n 1 $R/topk_check.txt)"
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane0.done; exit 1; }
  python3 -c "import json,glob; print(json.load(open(glob.glob('/tmp/lcp_site/**/build-info.json',recursive=True)[0]))['patches'])" \
      > $R/patches.txt 2>&1 || true
  while [ ! -f $TS.ok ]; do sleep 3; done
  say "stk: phases, DFLASH_SMALL_TOP_K 0 / 1"
  timeout 480 python3 gpu/gpu_fuse_ab.py --env DFLASH_SMALL_TOP_K --tag stk --sides 0,1 --rounds 3 \
      --target $TS --draft $DS --out $R/stk > $R/stk.log 2>&1; say "stk rc=$?"
  for side in 1; do
    for s in mt-bench gsm8k humaneval; do
      timeout 240 env DFLASH_SMALL_TOP_K=$side python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $s \
        --limit $BENCH_N --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=tree,auto --sweep budget=15 \
        --out $R/bench-k$side-$s.json --md $R/bench-k$side-$s.md > $R/bench-k$side-$s.log 2>&1
      say "bench small_top_k=$side $s rc=$?"
    done
  done
  touch $W/lane0.done; say "lane0 done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && ! { [ -f $W/run.done ] && [ -f $W/lane0.done ]; }; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; grep -h 'train: step' $RUN/train-log.txt 2>/dev/null | tail -n 3 | cut -c1-200
  grep -v "^check" $R/topk_check.txt 2>/dev/null | tail -n 5; grep -c "^check.*ok$" $R/topk_check.txt 2>/dev/null
  [ -f $R/stk/stk_report.md ] && head -n 40 $R/stk/stk_report.md
  for f in $R/bench-k*.md; do [ -f $f ] && { echo "== $f"; grep '^|' $f | head -n 6; }; done
  cat $R/eval15.md 2>/dev/null
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  cp $RUN/train-log.txt $RUN/run-summary.json $RUN/gen/gen-stats.json $OUT/ 2>/dev/null
  tar czf $OUT/r65.tgz --exclude='*.npz' --exclude='*.gguf' --exclude='*.safetensors' --exclude='work' -C $W \
      r progress.log run.log lane0.log lcp_build.log 2>/dev/null; ls -la $OUT ;;
shards)  # the trained drafter's f16 shards back (a shard over 15 MiB in parts), for the next warm start
  mkdir -p $OUT; cp $RUN/drafter-*.safetensors $RUN/drafter.json $OUT/
  for f in $OUT/*; do [ "$(stat -c %s "$f")" -gt 15728640 ] && split -b 15M -d "$f" "$f.part" && rm "$f"; done
  ls -la $OUT ;;
pool)  # the joined pool (s61 + s65) back in 15 MiB parts, for the next sitting's --earlier-pool
  tar cf /tmp/pool65.tar -C $RUN gen/responses.npz gen/gen-stats.json && ls -la /tmp/pool65.tar
  OUT=$OUT bash gpu/gpu_carry.sh give /tmp/pool65.tar pool65 0 ;;
esac
