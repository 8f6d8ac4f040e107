#!/usr/bin/env bash
# Issue 30's next drafter sitting for one nvidia-h100-x1 (~27 min held), prepared on 2026-12-07 after
# sitting s83 (docs/runs/2026-12-07-gpu/s83-h100-q15-drafter/, which ran this script's previous version
# from scratch). A warm start: s83's f16 shards (--init) and s83's pool of 14,701 conversations joined with
# this sitting's new ones (--earlier-pool, a new order: --seed 84). Code-heavy, as issue 30 asks: code's
# prompts are answered ahead of the others 3 to 1 (--category-weights code=3; 1,872 of s83's 14,701
# conversations were code). Then `dflash-studio bench` with the judge on the first N prompts of each
# public set (0001-0031, the shipped series). The kept step is
# chosen on the validation split of the training sources (the trainer's held-out walk), never on a
# public set; the bench only reports.
# Before the first call, here:
#   dflash-studio fetch-model qwen2.5-coder-1.5b && PART_MIB=57 bash gpu/gpu_carry.sh split \
#       ~/.local/share/dflash-studio/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf q15     (19 parts)
#   dflash-studio train-drafter --target <that file> --out /tmp/d15.gguf --work .gpu-carry/wq --stage prepare
#       (30 s: 34,794 training prompts, 367 validation, 5.9 MB)
#   .gpu-carry/pool83/: s83's responses.npz and gen-stats.json (5.6 MB, carried by setup)
#   tar cf /tmp/init83.tar -C .gpu-carry/d83 drafter-0{0,1,2,3,4}.safetensors drafter.json
#   PART_MIB=57 bash gpu/gpu_carry.sh split /tmp/init83.tar init83                          (2 parts)
#   mkdir -p .gpu-carry/next && cp docs/design/issue30-drafter-sitting.sh .gpu-carry/next/run84.sh
#   bash gpu/gpu_carry.sh hide; bash gpu/gpu_carry.sh hide resources/models/smollm2/drafter.gguf \
#       docs/screenshot.png docs/pairing-report.png                        (the tree then carries 6.5 MB)
# Calls (no gap over 30 s between them: the machine goes back then):
#   1 `bash .gpu-carry/next/run84.sh setup` (carry .gpu-bundle, .gpu-carry/wq, .gpu-carry/next, .gpu-carry/pool83)
#   2-3 `bash gpu/gpu_carry.sh take init83` (carry its MANIFEST and one part), then `bash /tmp/k/run.sh init`
#   4-22 `bash gpu/gpu_carry.sh take q15` once a part (`gpu_carry.sh calls q15` lists the carry lists)
#   then `bash /tmp/k/run.sh start`, `bash /tmp/k/run.sh follow 540` until "lane done", `pack`
#   (the f16 shards and the logs, 7 files) and `pool` (the joined pool). After s83 (1,554 s held for
#   ~3.5 min of transfers, 213 s of generation, 480 s of training and five benches) the lane here is
#   ~36 s load + GEN + TRAIN + ~160 s of export and benches: with GEN 200 and TRAIN 900 about 27 min
#   held in all. GEN, TRAIN, N and WEIGHTS set the generation and training seconds, the prompts a suite
#   and the categories' weights.
# Without .gpu-carry/d83 and pool83 (not in git: a new checkout lacks them) skip calls 2-3 and leave
#   pool83 out of setup's carry: the lane then trains from scratch on this sitting's pool, and says so.
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle; K=/tmp/k; RUN=/tmp/dflash-train; E=/tmp/eval
T=/tmp/t/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf; INIT=/tmp/init; OLD=/tmp/old83
GEN=${GEN:-200}; TRAIN=${TRAIN:-900}; N=${N:-20}; WEIGHTS=${WEIGHTS:-code=3}
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$K/src PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
case ${1:-} in
setup)
  mkdir -p $W $R $E /tmp/t $INIT $OLD/gen
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  rm -rf $K; mkdir -p $K/src; cp -r $B/whl $K/
  cp -r engine_bridge benchmarks gpu packaging resources pyproject.toml $K/src/
  cp .gpu-carry/next/run84.sh $K/run.sh; mkdir -p $RUN; cp -r .gpu-carry/wq/data $RUN/data
  [ -d .gpu-carry/pool83 ] && cp .gpu-carry/pool83/responses.npz .gpu-carry/pool83/gen-stats.json $OLD/gen/
  setsid bash -c "SECONDS=0; cd $K/src && PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $K/whl --target /tmp/lcp_site --arch 90 --jobs 14 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  say "setup: engine build started; earlier pool in $OLD"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
init)  # after both `take init83` calls: s83's shards and drafter.json into $INIT
  [ -f /tmp/t/init83.tar.ok ] || { echo "init83 not joined"; exit 1; }
  tar xf /tmp/t/init83.tar -C $INIT && ls -la $INIT ;;
start)
  [ -f $T.ok ] || { echo "target not joined"; exit 1; }
  [ -f $INIT/drafter.json ] || say "no warm start in $INIT (init not run, or .gpu-carry/d83 lost): from scratch"
  [ -f $OLD/gen/responses.npz ] || say "no earlier pool in $OLD (.gpu-carry/pool83 lost): this sitting's pool alone"
  setsid bash $K/run.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "lane started (gen $GEN s, train $TRAIN s, bench first $N a suite)" ;;
lane)
  cd $K/src || exit 1
  # the warm start and the earlier pool where they came (.gpu-carry is not in git: a new checkout may lack
  # them, as s61's and s63's shards were lost before); else from scratch at the recipe's lr
  WARM="--lr 6e-4"; [ -f $INIT/drafter.json ] && WARM="--init $INIT --lr 4e-4 --warmup 0.05"
  [ -f $OLD/gen/responses.npz ] && WARM="$WARM --earlier-pool $OLD"
  python3 -m engine_bridge.training.train_chat --target $T --data $RUN/data --out $RUN --gen-seconds $GEN \
      --seconds $TRAIN --layers 1 --ffn 3072 --seed 84 --category-weights $WEIGHTS $WARM > $RUN.log 2>&1
  say "train rc=$?: $(grep 'generate: joined' $RUN/train-log.txt | cut -c1-160)"
  say "$(grep 'train: done' $RUN/train-log.txt | cut -c1-200)"
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
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 1 $W/lcp_build.log; tail -n 3 $RUN/train-log.txt 2>/dev/null | cut -c1-220
  for f in $R/bench-*.md; do [ -f $f ] && { echo "== $f"; grep -E "^\| (ar|c[0-9]) " $f | head -10; }; done ;;
pack)  # $OUT returns 8 files of <= 16 MiB: the shards (6 with the first one's two parts) and one tarball
  mkdir -p $OUT; rm -f $OUT/*
  cp $RUN/drafter-*.safetensors $RUN/drafter.json $OUT/ 2>/dev/null
  tar cJf $OUT/r84.txz -C / tmp/w/r tmp/w/progress.log tmp/w/lane.log tmp/w/env.txt ${RUN#/}/train-log.txt \
    ${RUN#/}/run-summary.json ${RUN#/}/gen/gen-stats.json ${RUN#/}/shard-0/gen/gen-stats.json \
    ${RUN#/}/shard-0/gen/magpie-samples.txt tmp/dflash-train.log 2>/dev/null
  for f in $OUT/*; do [ "$(stat -c %s $f)" -gt 15728640 ] && split -b 15M -d $f $f.part && rm $f; done
  ls -la $OUT ;;
pool)  # the joined pool (s83's and this sitting's conversations) in a call of its own
  mkdir -p $OUT; rm -f $OUT/*; cp $RUN/gen/responses.npz $RUN/gen/gen-stats.json $OUT/
  for f in $OUT/*; do [ "$(stat -c %s $f)" -gt 15728640 ] && split -b 15M -d $f $f.part && rm $f; done
  ls -la $OUT ;;
esac
