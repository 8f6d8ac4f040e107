#!/usr/bin/env bash
# Issue 30's drafter sitting for one nvidia-h100-x1 (~25 min held), prepared on 2026-12-07 and not run: no
# machine started in that session's 14 attempts. The drafter for the real Qwen2.5-Coder-1.5B-Instruct
# Q4_K_M, trained from scratch (the earlier sittings' shards are gone), then the pair on the public prompts
# through our CUDA engine (0001-0031) with `dflash-studio bench` (x AR and the judge on every parting), 0031
# on and off; and pending patch 0032: its kernel alone against 0031 and MMVQ (mmvq_ab, built here with nvcc 13.0),
# and in the engine (built with 0001-0032, its switch off for every other row) on the real pair, split off / on.
# Before the first call, here (as for 0032-run-q05.sh in pending-patches/, with this script as
#   .gpu-carry/next/run81.sh and the 0032 patch beside it), and:
#   dflash-studio fetch-model qwen2.5-coder-1.5b && PART_MIB=57 bash gpu/gpu_carry.sh split \
#       ~/.local/share/dflash-studio/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf q15     (19 parts)
#   dflash-studio train-drafter --target <that file> --out /tmp/d15.gguf --work .gpu-carry/wq --stage prepare
#       (30 s: 34,794 training prompts, 367 validation, 5.9 MB)
# Calls: 1 setup (.gpu-bundle, .gpu-carry/wq, .gpu-carry/next, .gpu-carry/mma; the large tracked files hidden),
#   then `bash gpu/gpu_carry.sh take q15` once a part, then `bash /tmp/k/run.sh start`, then
#   `bash /tmp/k/run.sh follow N` until "lane done", then `bash /tmp/k/run.sh pack` (the f16 shards and the
#   logs) and `bash /tmp/k/run.sh pool` (the pool), for a warm start: train_chat --init, --earlier-pool.
#   GEN, TRAIN and N set the generation and training seconds and the prompts a suite.
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; K=/tmp/k; RUN=/tmp/dflash-train; E=/tmp/eval
T=/tmp/t/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
GEN=${GEN:-200}; TRAIN=${TRAIN:-480}; N=${N:-20}
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$K/src PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
case ${1:-} in
setup)
  mkdir -p $W $R $E /tmp/t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf $K; mkdir -p $K/src; cp -r $B/whl $K/
  cp -r engine_bridge benchmarks gpu packaging resources pyproject.toml $K/src/
  cp .gpu-carry/next/0032-mmvq-mma-split-k.patch $K/src/packaging/patches/
  cp .gpu-carry/next/run81.sh $K/run.sh; cp .gpu-carry/mma/mmvq_ab32 $K/mmvq_ab32; mkdir -p $RUN; cp -r .gpu-carry/wq/data $RUN/data
  setsid bash -c "SECONDS=0; cd $K/src && PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $K/whl --target /tmp/lcp_site --arch 90 --jobs 14 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  setsid bash -c "SECONDS=0; timeout 240 $K/mmvq_ab32 time > $R/mmvq_ab32.txt 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $R/mmvq_ab32.txt" \
      < /dev/null > /dev/null 2>&1 &
  say "setup: engine build and mmvq_ab started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
start)
  [ -f $T.ok ] || { echo "target not joined"; exit 1; }
  setsid bash $K/run.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "lane started (gen $GEN s, train $TRAIN s, bench first $N a suite)" ;;
lane)
  cd $K/src || exit 1
  export DFLASH_MMVQ_MMA_SPLIT=0  # the shipped 0031 path unless a row says otherwise (0032 is built in, pending)
  say "mmvq_ab: $(tail -n 1 $R/mmvq_ab32.txt)"
  python3 -m engine_bridge.training.train_chat --target $T --data $RUN/data --out $RUN --gen-seconds $GEN \
      --seconds $TRAIN --layers 1 --ffn 3072 > $RUN.log 2>&1
  say "train rc=$?: $(grep 'train: done' $RUN/train-log.txt | cut -c1-200)"
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 3; done
  say "engine build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  python3 -m engine_bridge.cli train-drafter --target $T --out $E/drafter.gguf --data-dir $RUN/data --run-dir $RUN \
      --work $E/work --stage export > $R/export.log 2>&1; say "export rc=$?"
  for s in humaneval gsm8k mt-bench; do
    timeout 420 python3 -m engine_bridge.cli bench --target $T --draft $E/drafter.gguf --suite $s --limit $N --reps 1 \
      --round-prompts 10 --max-tokens 128 --sweep verify=chain,tree --sweep budget=7,15 \
      --out $R/bench-$s.json --md $R/bench-$s.md > $R/bench-$s.log 2>&1
    say "bench $s rc=$?"
  done
  timeout 420 python3 gpu/gpu_fuse_ab.py --target $T --draft $E/drafter.gguf --out $R/ab_split --env DFLASH_MMVQ_MMA_SPLIT \
    --tag split --sides 0,1 --rounds 2 > $R/ab_split.txt 2>&1
  say "fuse ab split rc=$?"
  for s in humaneval gsm8k; do
    timeout 300 env DFLASH_MMVQ_MMA=0 python3 -m engine_bridge.cli bench --target $T --draft $E/drafter.gguf --suite $s \
      --limit $N --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=chain,tree --sweep budget=7,15 \
      --out $R/bench0-$s.json --md $R/bench0-$s.md > $R/bench0-$s.log 2>&1
    say "bench mma=0 $s rc=$?"
  done
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 1 $W/lcp_build.log; tail -n 3 $RUN/train-log.txt 2>/dev/null | cut -c1-220
  grep -h "n=8\|n=4 \|n=16" $R/mmvq_ab32.txt 2>/dev/null | cut -c1-200 | head -30
  grep -E "^\|" $R/ab_split.txt 2>/dev/null | head -16
  for f in $R/bench-*.md $R/bench0-*.md; do [ -f $f ] && { echo "== $f"; grep -E "^\|" $f | head -14; }; done ;;
pack)
  mkdir -p $OUT; rm -f $OUT/*
  cp $RUN/drafter-*.safetensors $OUT/ 2>/dev/null
  for f in $OUT/*; do [ "$(stat -c %s $f)" -gt 15728640 ] && split -b 15M -d $f $f.part && rm $f; done
  tar czf $OUT/r81.tgz -C / tmp/w/r tmp/w/progress.log tmp/w/lane.log tmp/w/lcp_build.log tmp/w/env.txt \
    ${RUN#/}/drafter.json ${RUN#/}/train-log.txt ${RUN#/}/run-summary.json ${RUN#/}/gen/gen-stats.json \
    ${RUN#/}/gen/magpie-samples.txt tmp/dflash-train.log 2>/dev/null
  ls -la $OUT ;;
pool)  # the target's conversations (the pool) in a call of their own: $OUT takes 8 files of <= 16 MiB
  mkdir -p $OUT; rm -f $OUT/*; cp $RUN/gen/responses.npz $RUN/gen/gen-stats.json $OUT/
  for f in $OUT/*; do [ "$(stat -c %s $f)" -gt 15728640 ] && split -b 15M -d $f $f.part && rm $f; done
  ls -la $OUT ;;
esac
