#!/usr/bin/env bash
# Sitting s63 on one nvidia-h200-x2 (2026-11-30): issue 28 and issue 30 side by side.
#   GPU 0 (once the 1.5B's generation is done): patch 0023 on the GPU, the default pair
#     bulk  phases per side, DFLASH_BULK_BATCH 0 / 1 (gpu_fuse_ab.py, alternating rounds)
#     bench the full public sets, AR / chain 7 / auto, one process per side and suite
#   both GPUs, then GPU 1: the 1.5B drafter's second sitting
#     gen   the 1.5B answers on both GPUs for GEN s (--shard K/2, seed 63), the shares joined with
#           sitting s61's pool (--earlier: its validation answers left out)
#     train one GPU, warm start from s61's f16 shards (--init), TRAIN s
#     eval  export, then the public prompts (first EVAL_N per suite), commit lengths, both GPUs
# Calls: 1 setup (.gpu-bundle, .gpu-carry/wq, .gpu-carry/pool15; the shipped drafter in the tree, the
#        large files hidden: gpu_carry.sh hide), 2-3 `bash gpu/gpu_carry.sh take s48`, 4-26 `take qwen15`,
#        27-28 `bash gpu/tmp_x/run63.sh init` (.gpu-carry/initA, initB: s61's shards in two halves), then
#        `bash gpu/tmp_x/run63.sh follow 540`, `follow 250`, and one call that packed r63.tgz and
#        `run63.sh shards` (the drafter's f16 shards, kept here in .gpu-carry/init-qwen15-s63/).
# What happened: a first machine ran this with GEN=200 TRAIN=660 and was lost mid-generation (no call
#   for > 30 s while check_pool.py was written here: the decontamination fingerprints had been hidden
#   with the large files, so its shares' Magpie requests went unchecked). The second machine ran it
#   again with the defaults below and the fingerprints back in the tree (its shares checked their
#   requests), and checked the joined pool with check_pool.py before training, s61's unchecked pool
#   included (0 hits in 3,518 entries). Its bench of side 0 on HumanEval did not finish before the
#   device time ran out. (It ran as gpu/tmp_x/run63.sh, moved here afterwards.)
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; RUN=/tmp/dflash-train
T=/tmp/t/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf
GEN=${GEN:-150}; TRAIN=${TRAIN:-300}; EVAL_N=${EVAL_N:-16}
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t /tmp/init /tmp/old15
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch 90 --jobs 24 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  cp resources/models/smollm2/drafter.gguf $DS
  mkdir -p $RUN; cp -r .gpu-carry/wq/data $RUN/data
  bash gpu/gpu_carry.sh take pool15 && tar xf /tmp/t/pool.tar -C /tmp/old15 && ls -la /tmp/old15/gen
  setsid bash $0 run < /dev/null > $W/run.log 2>&1 &
  setsid bash $0 lane0 < /dev/null > $W/lane0.log 2>&1 &
  say "setup: build, run and lane0 started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
init)
  for d in .gpu-carry/initA .gpu-carry/initB; do [ -d $d ] && cp $d/* /tmp/init/; done; ls /tmp/init ;;
run)  # the 1.5B: generation on both GPUs, training on GPU 1, then the evaluation on both
  while [ ! -f $T.ok ]; do sleep 3; done
  say "gen: 2 shares, $GEN s"
  for k in 0 1; do
    CUDA_VISIBLE_DEVICES=$k python3 -m engine_bridge.training.train_chat --target $T --data $RUN/data \
      --out $RUN/shard-$k --stage generate --shard $k/2 --gen-seconds $GEN --seed 63 > $R/gen$k.log 2>&1 &
  done
  wait
  python3 -m engine_bridge.training.shards --out $RUN $RUN/shard-0 $RUN/shard-1 --earlier /tmp/old15 > $R/merge.log 2>&1
  say "gen done rc=$?: $(tail -n 1 $R/merge.log)"; touch $W/gen.done
  # the Magpie requests checked against the evaluation sets (decontam.npz in the tree), hits dropped
  python3 gpu/tmp_x/check_pool.py $RUN $T --drop > $R/check_pool.txt 2>&1; say "check: $(head -n 1 $R/check_pool.txt)"
  while [ ! -f /tmp/init/drafter.json ] || [ "$(ls /tmp/init/drafter-*.safetensors | wc -l)" -lt 5 ]; do sleep 3; done
  say "train: GPU 1, $TRAIN s, --init /tmp/init"
  CUDA_VISIBLE_DEVICES=1 python3 -m engine_bridge.training.train_chat --target $T --data $RUN/data --out $RUN \
    --stage train --layers 1 --ffn 3072 --init /tmp/init --seconds $TRAIN --lr 4e-4 --warmup 0.05 \
    --seed 63 > $RUN/stdout.log 2>&1
  say "train rc=$?: $(grep 'train: done' $RUN/train-log.txt | tail -n 1 | cut -c1-160)"
  while ! grep -q "^done rc=0" $W/lcp_build.log; do sleep 5; done
  python3 -m engine_bridge.cli train-drafter --target $T --out $R/d15.gguf --data-dir $RUN/data --run-dir $RUN \
    --work $R/work --stage export > $R/export.log 2>&1; say "export rc=$?"
  i=1
  for c in chat math code; do
    CUDA_VISIBLE_DEVICES=$i python3 -m engine_bridge.training.evaluate_chat --target $T --draft $R/d15.gguf \
      --public --categories $c --n-per-category $EVAL_N --budgets 7,15 --tree-budgets 15 --max-tokens 128 \
      --json $R/eval15-$c.json > $R/eval15-$c.log 2>&1 &
  done
  wait; say "eval15 done"
  for c in chat math code; do grep '^|' $R/eval15-$c.log; done > $R/eval15.md
  say "all done" ;;
lane0)  # GPU 0 after the generation: 0023 on the default pair
  export CUDA_VISIBLE_DEVICES=0
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane0.done; exit 1; }
  python3 -c "import json,glob; print(json.load(open(glob.glob('/tmp/lcp_site/**/build-info.json',recursive=True)[0]))['patches'])" \
      > $R/patches.txt 2>&1 || true
  while [ ! -f $TS.ok ] || [ ! -f $W/gen.done ]; do sleep 3; done
  say "bulk: phases, DFLASH_BULK_BATCH 0 / 1"
  timeout 420 python3 gpu/gpu_fuse_ab.py --env DFLASH_BULK_BATCH --tag bulk --sides 0,1 --rounds 3 \
      --target $TS --draft $DS --out $R/bulk > $R/bulk.log 2>&1; say "bulk rc=$?"
  for side in 1 0; do
    for s in mt-bench gsm8k humaneval; do
      timeout 300 env DFLASH_BULK_BATCH=$side python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite $s \
        --limit 200 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 \
        --out $R/bench-b$side-$s.json --md $R/bench-b$side-$s.md > $R/bench-b$side-$s.log 2>&1
      say "bench bulk=$side $s rc=$?"
    done
  done
  touch $W/lane0.done; say "lane0 done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && ! grep -q "all done" $W/progress.log; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; grep -h 'train: step' $RUN/train-log.txt 2>/dev/null | tail -n 3 | cut -c1-200
  [ -f $R/bulk/bulk_report.md ] && head -n 30 $R/bulk/bulk_report.md
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  cp $RUN/train-log.txt $RUN/run-summary.json $RUN/gen/gen-stats.json $OUT/ 2>/dev/null
  tar czf $OUT/r63.tgz --exclude='*.npz' --exclude='*.gguf' --exclude='*.safetensors' --exclude='work' -C $W \
      r progress.log run.log lane0.log lcp_build.log 2>/dev/null; ls -la $OUT ;;
shards)  # the trained drafter's f16 shards back (a shard over 15 MiB in parts), for the next warm start
  mkdir -p $OUT; cp $RUN/drafter-*.safetensors $RUN/drafter.json $OUT/
  for f in $OUT/*; do [ "$(stat -c %s "$f")" -gt 15728640 ] && split -b 15M -d "$f" "$f.part" && rm "$f"; done
  ls -la $OUT ;;
esac
