#!/usr/bin/env bash
# Issue 27 in one held GPU machine (<= 30 min): the real target brought over in parts, our CUDA engine
# built in the background while the target writes its conversations and the drafter trains
# (gpu_train.sh -> train_chat), then export and the public-benchmark evaluation (MT-Bench 80 first
# turns, GSM8K test first 100, HumanEval 164) through llama.cpp: commit lengths, lossless counts and
# tok/s against AR in the same run, for the new drafter and, on a subset, the shipped one.
#
# Here, first (the 64 MiB per-call limit: hide the 15.7 M reference pair and the shipped drafter from
# the working tree for these calls, the eval carries the shipped drafter as .gpu-carry/old.gguf):
#   split -b 30M -d -a 2 SmolLM2-135M-Instruct.Q4_1.gguf .gpu-carry/s/s.part
#   dflash-studio train-drafter --target T --out D --work .gpu-carry/w --stage prepare   # -> .gpu-carry/w/data
# Usage, from the project root on the GPU machine:
#   bash gpu/gpu_drafter.sh build                        # wheels + our CUDA engine in the background
#   bash gpu/gpu_drafter.sh part .gpu-carry/s/s.part00   # keep a part in /tmp/t (starts the build if not yet)
#   bash gpu/gpu_drafter.sh start .gpu-carry/w/data      # join + sha256, generate + train (background)
#   bash gpu/gpu_drafter.sh follow 540                   # progress for up to N s; packs $OUT when done
#   bash gpu/gpu_drafter.sh eval                         # export + evaluate (background); then follow-eval
#   bash gpu/gpu_drafter.sh follow-eval 540
#   bash gpu/gpu_drafter.sh eval-par                     # or: commit lengths only, one process per category
#   bash gpu/gpu_drafter.sh pool-out [FIRST]             # this sitting's pool (RUN/gen) into $OUT/pool in
#                                                        #   15 MiB parts (gpu_carry.sh give; 7 a call),
#                                                        #   kept here with gpu_carry.sh keep DIR pool
#   bash gpu/gpu_drafter.sh pool-in                      # a pool carried back (gpu_carry.sh take pool)
#                                                        #   into RUN/gen, before start: training reuses it
#   AFTER="cmd; cmd" bash gpu/gpu_drafter.sh then        # or: wait for the training, eval, then AFTER
#   bash gpu/gpu_drafter.sh follow-then 540              #   (all in the background); then follow-eval packs
#     (EVAL=eval-par: `then` runs eval-par instead of eval; NEW_N limits eval-par's new drafter too)
# A chain of sittings: a `part` call also keeps .gpu-carry/old.gguf (a drafter GGUF: EXTRA="--init
#   /tmp/eval/old.gguf" warm-starts from it) and .gpu-carry/init/ (an earlier sitting's f16 shards +
#   drafter.json, as follow-eval returns them: EXTRA="--init /tmp/init") in /tmp. An earlier sitting's
#   pool (pool-out there, gpu_carry.sh keep here, take + tar xf into DIR there) joins the new one with
#   EXTRA="--earlier-pool DIR" (the new conversations and the old, same prepared data).
# Environment: GEN_SECONDS (330), TRAIN_SECONDS (540), EXTRA (train_chat flags), OLD_N (24 prompts per
#   category for the shipped drafter), NEW_N (all: the new drafter's prompts per category in `eval`),
#   MAX_TOKENS (128), TARGET (another target, joined by gpu_carry.sh).
set -u
B=${BUNDLE:-.gpu-bundle}; W=/tmp/w; T=/tmp/t; OUT=${OUT:-/tmp/out}; RUN=${RUN:-/tmp/dflash-train}
here=$(pwd)
# the target: SmolLM2 joined from s.part* (the default), or TARGET, a file gpu_carry.sh joined and
# verified (its "<file>.ok" beside it; e.g. issue 30's Qwen2.5-Coder-1.5B, with EXTRA="--ffn 3072")
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
S=${TARGET:-$T/SmolLM2-135M-Instruct.Q4_1.gguf}; E=/tmp/eval
mkdir -p $W $T $E "$OUT"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a $E/progress.log; }

# before an evaluation: our CUDA build is there; a carried path is gone from the tree at the next
# call, so the shipped drafter is kept in /tmp now
eval_prep() {
  export PYTHONPATH=/tmp/lcp_site:/tmp/site:$here PYTHONUNBUFFERED=1
  grep -q "^done rc=0" $W/lcp_build.log || { say "the CUDA build is not done:"; tail -3 $W/lcp_build.log; return 1; }
  [ -f .gpu-carry/old.gguf ] && cp .gpu-carry/old.gguf $E/old.gguf
  return 0
}
# the run's drafter exported beside the evaluation (a command line for the background shell)
EXPORT="echo '[export]' >> $E/eval.log; python3 -m engine_bridge.cli train-drafter --target $S --out $E/drafter.gguf \
--data-dir $RUN/data --run-dir $RUN --work $E/work --stage export >> $E/eval.log 2>&1"

case "${1:-}" in
  build|part)
    if [ ! -f $W/lcp_build.log ]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl
      [ -d $W/lcp ] || tar xzf "$B"/lcp-*.tgz -C $W
      # 12 jobs: leave cores to the training's host side
      setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda DFLASH_FA_ALL_QUANTS=0 bash packaging/build_engine.sh \
          --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch 90 --jobs 12 \
          > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
      echo "build started"
    fi
    [ "$1" = part ] && cp "$2" $T/
    # a carried drafter (the shipped one: the warm start and the eval's comparison) outlives this call in /tmp
    [ -f .gpu-carry/old.gguf ] && cp .gpu-carry/old.gguf $E/old.gguf
    # an earlier sitting's drafter (f16 shards + drafter.json) for EXTRA="--init /tmp/init"
    ls .gpu-carry/init/drafter-*.safetensors >/dev/null 2>&1 && mkdir -p /tmp/init && cp .gpu-carry/init/* /tmp/init/
    ls -la $T; tail -n 1 $W/lcp_build.log ;;
  start)
    data=${2:?prepared data folder}
    if [ -n "${TARGET:-}" ]; then
      [ -f "$S.ok" ] || { echo "$S is not joined and verified yet (gpu/gpu_carry.sh take)"; exit 1; }
    else
      [ -f $S ] || cat $T/s.part* > $S
      echo "$SHA  $S" | sha256sum -c - || exit 1
    fi
    GEN_SECONDS=${GEN_SECONDS:-330} TRAIN_SECONDS=${TRAIN_SECONDS:-540} RUN=$RUN bash gpu/gpu_train.sh start $S "$data" ;;
  follow)
    RUN=$RUN bash gpu/gpu_train.sh follow "${2:-540}"; tail -n 1 $W/lcp_build.log ;;
  eval)
    eval_prep || exit 1
    setsid bash -c "
      cd $here
      $EXPORT
      cp $E/drafter.gguf $OUT/ 2>/dev/null
      echo '[new drafter, public suites]' >> $E/eval.log
      python3 -m engine_bridge.training.evaluate_chat --target $S --draft $E/drafter.gguf --public \
          --max-tokens ${MAX_TOKENS:-128} ${NEW_N:+--n-per-category $NEW_N} --json $E/eval-new.json >> $E/eval.log 2>&1
      echo '[shipped drafter, public suites, first ${OLD_N:-24} per category]' >> $E/eval.log
      [ -f $E/old.gguf ] && python3 -m engine_bridge.training.evaluate_chat --target $S --draft $E/old.gguf \
          --public --max-tokens ${MAX_TOKENS:-128} --n-per-category ${OLD_N:-24} \
          --json $E/eval-old.json >> $E/eval.log 2>&1
      echo 'eval done' >> $E/eval.log" < /dev/null > /dev/null 2>&1 &
    echo $! > $E/pid; sleep 5; tail -3 $E/eval.log ;;
  eval-par)
    # commit lengths only, fast: the new drafter's three categories and the shipped drafter's first
    # OLD_N prompts per category, six processes sharing the GPU at once (the x AR ratios of such a
    # run mean nothing: speed is measured alone, in `eval` or gpu_pair_bench.sh)
    eval_prep || exit 1
    setsid bash -c "
      cd $here
      $EXPORT
      for c in chat math code; do
        python3 -m engine_bridge.training.evaluate_chat --target $S --draft $E/drafter.gguf --public --categories \$c \
            ${NEW_N:+--n-per-category $NEW_N} --max-tokens ${MAX_TOKENS:-128} --json $E/eval-new-\$c.json > $E/eval-new-\$c.log 2>&1 &
        [ -f $E/old.gguf ] && python3 -m engine_bridge.training.evaluate_chat --target $S --draft $E/old.gguf --public \
            --categories \$c --n-per-category ${OLD_N:-24} --max-tokens ${MAX_TOKENS:-128} \
            --json $E/eval-old-\$c.json > $E/eval-old-\$c.log 2>&1 &
      done
      wait
      for f in $E/eval-*-*.log; do echo \"[\$f]\"; grep '^|' \$f; done >> $E/eval.log
      echo 'eval done' >> $E/eval.log" < /dev/null > /dev/null 2>&1 &
    echo $! > $E/pid; sleep 5; tail -3 $E/eval.log ;;
  then)
    # the rest of a sitting in the background, so that its calls only follow: wait for the training,
    # then `eval`, then each command of AFTER in turn (e.g. gpu_peer.sh, gpu_ncu.sh's serve step);
    # "then done" in $E/eval.log at the end (follow-then waits for it)
    setsid bash -c "
      cd $here
      while kill -0 \$(cat $RUN/pid) 2>/dev/null; do sleep 5; done
      echo '[training finished]' >> $E/eval.log
      while ! grep -q '^done rc=' $W/lcp_build.log 2>/dev/null; do sleep 5; done
      bash gpu/gpu_drafter.sh ${EVAL:-eval} || echo 'eval done (not run: no engine build)' >> $E/eval.log
      while ! grep -q '^eval done' $E/eval.log; do sleep 5; done
      ${AFTER:-true}
      echo 'then done' >> $E/eval.log" < /dev/null > $E/then.log 2>&1 &
    echo "started; AFTER: ${AFTER:-none}" ;;
  follow-then)
    n=${2:-540}; t0=$(date +%s)
    while ! grep -q "^then done" $E/eval.log 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$n" ]; do sleep 10; done
    tail -n 3 $RUN/stdout.log 2>/dev/null | cut -c1-200; grep -v "^ggml\|^llama\|^load\|Device" $E/eval.log | tail -25 ;;
  follow-eval)
    n=${2:-540}; t0=$(date +%s)
    while ! grep -q "^eval done" $E/eval.log 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$n" ]; do sleep 10; done
    grep -v "^ggml\|^llama\|^load\|Device" $E/eval.log | tail -40
    # at most 8 files of <= 16 MiB come back: the drafter's f16 shards (for re-export and a warm
    # start here; a shard over 15 MiB, as one tensor of a 1.5B's drafter is, in parts: `cat
    # NAME.part* > NAME`), its q8_0 GGUF where the count still allows, and one archive of the logs
    cp $RUN/drafter-*.safetensors $RUN/drafter.json "$OUT"/ 2>/dev/null
    cp $E/drafter.gguf "$OUT"/ 2>/dev/null
    for f in "$OUT"/*; do
      [ "$(stat -c %s "$f")" -gt 15728640 ] && split -b 15M -d "$f" "$f.part" && rm "$f"
    done
    # over 7 (the archive is the 8th): the GGUF goes first, the shards re-export it here
    [ "$(ls "$OUT" | wc -l)" -gt 7 ] && rm -f "$OUT"/drafter.gguf*
    tar czf "$OUT"/run-logs.tgz -C / ${E#/}/eval.log $(cd / && ls ${E#/}/progress.log ${E#/}/eval-*.json \
        ${RUN#/}/train-log.txt ${RUN#/}/run-summary.json ${RUN#/}/gen/gen-stats.json ${RUN#/}/gen/magpie-samples.txt \
        ${RUN#/}/stdout.log ${E#/}/eval-*-*.json ${E#/}/eval-*-*.log ${E#/}/then.log \
        tmp/peer/upstream-* tmp/peer/*-rendered.jsonl tmp/peer.log tmp/serve.log tmp/w/r/serve 2>/dev/null)
    ls -la "$OUT" ;;
  pool-out)
    # one pool trained over several sittings (the steps, not the data, were the limit of each): the
    # target's conversations of this sitting returned in parts, to be carried back next time
    [ -f $RUN/gen/responses.npz ] || { echo "no pool in $RUN/gen"; exit 1; }
    pt=${POOL_DIR:-/tmp/pool}/pool.tar; mkdir -p "$(dirname "$pt")"
    if [ ! -f "$pt" ] || [ $RUN/gen/responses.npz -nt "$pt" ]; then
      tar cf "$pt" -C $RUN gen/responses.npz gen/gen-stats.json
    fi
    OUT=$OUT bash gpu/gpu_carry.sh give "$pt" ${POOL:-pool} "${2:-0}" ;;
  pool-in)
    f=${DEST:-/tmp/t}/pool.tar
    [ -f "$f.ok" ] || { echo "$f is not joined yet: gpu/gpu_carry.sh take ${POOL:-pool} (each call with its parts)"; exit 1; }
    [ -f $RUN/gen/responses.npz ] && { echo "$RUN/gen already holds a pool"; exit 1; }
    mkdir -p $RUN && tar xf "$f" -C $RUN && ls -la $RUN/gen ;;
  *) sed -n 2,33p "$0"; exit 2 ;;
esac
