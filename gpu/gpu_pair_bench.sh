#!/usr/bin/env bash
# The freshly trained pair on the GPU machine, in the sitting that trained it (gpu/gpu_train.sh):
# export the drafter through our converter, evaluate held-out commit lengths per category through
# llama.cpp (CUDA), then tok/s of AR, chain, tree and auto on the held-out chat prompts with our
# engine, and upstream's llama-speculative-simple --spec-type draft-dflash on the same files.
# Needs the kept CUDA engine and upstream tools: `BUNDLE=.gpu-bundle bash gpu/gpu_bench.sh
# restore DIR` first (the parts of `gpu_bench.sh pack-keep`).
#
# Usage, from the project root on the GPU machine:
#   bash gpu/gpu_pair_bench.sh TARGET.gguf [RUN_DIR] [DATA_DIR]
# RUN_DIR: the training run (default /tmp/dflash-train); DATA_DIR: its prepared data (default
# RUN_DIR/data). Environment: STEPS (export evaluate prompts ours auto upstream), CATEGORIES (chat code
# math: held-out categories), BUDGETS (7,15), MAX_TOKENS (128), REPS (2), DRAFTER (a drafter GGUF
# instead of the exported one: then leave export out of STEPS), HELDOUT (the held-out suite, default
# DATA_DIR/heldout.jsonl; the shipped drafter's is resources/models/smollm2/prompts.jsonl).
# $OUT: drafter.gguf (q8_0), eval.json, bench-CAT.json (ours), auto-CAT.json, upstream-CAT.json,
# pair-bench.log (the summary rows of every step).
set -u
T=${1:?target GGUF}; RUN=${2:-/tmp/dflash-train}; DATA=${3:-$RUN/data}
P=/tmp/pair-bench; OUT=${OUT:-/tmp/out}; BIN=${BIN:-/tmp/w/llama.cpp/build/bin}
N=${MAX_TOKENS:-128}; REPS=${REPS:-2}; STEPS=${STEPS:-"export evaluate prompts ours auto upstream"}
CATS=${CATEGORIES:-"chat code math"}; BUDGETS=${BUDGETS:-7,15}; HELDOUT=${HELDOUT:-$DATA/heldout.jsonl}
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1
mkdir -p "$P" "$OUT"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/pair-bench.log"; }
cli() { python3 -m engine_bridge.cli "$@"; }
D=${DRAFTER:-$P/drafter.gguf}

for step in $STEPS; do
  case $step in
    export)
      say "export $RUN -> $D"
      cli train-drafter --target "$T" --out "$D" --data-dir "$DATA" --run-dir "$RUN" --work "$P/work" \
        --stage export >> "$OUT/pair-bench.log" 2>&1 || say "export failed"
      cp "$D" "$OUT/" 2>/dev/null ;;
    evaluate)
      # the card's table on this GPU: held-out commit lengths per category, chain/tree, budgets 7/15
      say "evaluate (held-out, all layers on the GPU)"
      cli train-drafter --target "$T" --out "$D" --data-dir "$DATA" --run-dir "$RUN" --work "$P/work" \
        --card "$P/card-gpu.md" --stage evaluate >> "$OUT/pair-bench.log" 2>&1
      # train-drafter exits 1 also when the table is complete but not lossless: the table decides
      cp "$P/work/eval.json" "$OUT/eval.json" 2>/dev/null || say "evaluate failed (no eval.json)" ;;
    prompts)
      # held-out prompts per category: as a suite (our engine renders the chat template) and rendered
      # (upstream's driver takes raw text; parse_special reads ChatML's markers)
      python3 - "$HELDOUT" "$T" "$P" $CATS <<'EOF'
import json, sys
from pathlib import Path
from engine_bridge.runtime.chat_template import render_chat
from engine_bridge.runtime.native import Model
src, target, p, cats = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4:]
rows = [json.loads(l) for l in open(src) if l.strip()]
tmpl = Model(target, n_gpu_layers=0).chat_template()
for cat in cats:
    sel = [r for r in rows if r["category"] == cat]
    with open(p / f"{cat}.jsonl", "w") as f, open(p / f"{cat}-rendered.jsonl", "w") as g:
        for r in sel:
            f.write(json.dumps({"id": r["id"], "category": cat, "messages": r["messages"]}) + "\n")
            g.write(json.dumps({"prompt": render_chat(tmpl, r["messages"], add_generation_prompt=True)}) + "\n")
    print(cat, len(sel), "prompts")
EOF
      ;;
    ours)
      for cat in $CATS; do
        say "ours: AR, chain and tree at budgets $BUDGETS on $(wc -l < $P/$cat.jsonl) $cat prompts"
        cli bench --target "$T" --draft "$D" --ngl -1 --suite "$P/$cat.jsonl" --reps "$REPS" --max-tokens "$N" \
          --sweep verify=chain,tree --sweep budget=$BUDGETS --out "$OUT/bench-$cat.json" --md "$P/bench-$cat.md" \
          >> "$OUT/pair-bench.log" 2>&1 || say "ours $cat failed"
        grep -E "^\| (ar|c[0-9]+) \| [a-z]" "$P/bench-$cat.md" | grep -v "| $cat-" | tee -a "$OUT/pair-bench.log"
      done ;;
    auto)
      for cat in $CATS; do
        say "auto against AR on the $cat prompts (benchmarks/bench_auto.py, calibrated on this GPU)"
        python3 benchmarks/bench_auto.py --pairs smol --smol-target "$T" --smol-draft "$D" \
          --suite "$HELDOUT" --category "$cat" --prompts 16 --max-tokens "$N" --rounds "$REPS" \
          --json "$OUT/auto-$cat.json" >> "$OUT/pair-bench.log" 2>&1 || say "auto $cat failed"
        tail -4 "$OUT/pair-bench.log"
      done ;;
    upstream)
      for cat in $CATS; do
        say "upstream llama-speculative-simple on the same pair and $cat prompts"
        python3 gpu/gpu_upstream.py --bin "$BIN" --target "$T" --draft "$D" --n "$N" \
          --prompts "$(wc -l < $P/$cat-rendered.jsonl)" --prompt-file "$P/$cat-rendered.jsonl" --reps 1 \
          --n-max "$BUDGETS" --json "$OUT/upstream-$cat.json" --log-dir "$P/upstream-logs-$cat" \
          >> "$OUT/pair-bench.log" 2>&1 || say "upstream $cat failed"
        tail -5 "$OUT/pair-bench.log"
      done ;;
    *) say "unknown step $step" ;;
  esac
done
ls -l "$OUT"
