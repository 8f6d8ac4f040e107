#!/usr/bin/env bash
# The freshly trained pair on the GPU machine, in the sitting that trained it (packaging/gpu_train.sh):
# export the drafter through our converter, evaluate held-out commit lengths per category through
# llama.cpp (CUDA), then tok/s of AR, chain, tree and auto on the held-out chat prompts with our
# engine, and upstream's llama-speculative-simple --spec-type draft-dflash on the same files.
# Needs the kept CUDA engine and upstream tools: `BUNDLE=.gpu-bundle bash packaging/gpu_bench.sh
# restore DIR` first (the parts of `gpu_bench.sh pack-keep`).
#
# Usage, from the project root on the GPU machine:
#   bash packaging/gpu_pair_bench.sh TARGET.gguf [RUN_DIR] [DATA_DIR]
# RUN_DIR: the training run (default /tmp/dflash-train); DATA_DIR: its prepared data (default
# RUN_DIR/data). Environment: STEPS (export evaluate ours upstream), MAX_TOKENS (128), REPS (2).
# $OUT: drafter.gguf (q8_0), eval.json, bench.json/bench.md (ours), auto.json, upstream.json, pair-bench.log.
set -u
T=${1:?target GGUF}; RUN=${2:-/tmp/dflash-train}; DATA=${3:-$RUN/data}
P=/tmp/pair-bench; OUT=${OUT:-/tmp/out}; BIN=${BIN:-/tmp/w/llama.cpp/build/bin}
N=${MAX_TOKENS:-128}; REPS=${REPS:-2}; STEPS=${STEPS:-"export evaluate ours upstream"}
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1
mkdir -p "$P" "$OUT"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/pair-bench.log"; }
cli() { python3 -m engine_bridge.cli "$@"; }
D=$P/drafter.gguf

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
        --card "$P/card-gpu.md" --stage evaluate >> "$OUT/pair-bench.log" 2>&1 || say "evaluate failed"
      cp "$P/work/eval.json" "$OUT/eval.json" 2>/dev/null ;;
    ours)
      # held-out chat prompts: as a suite (our engine renders the chat template) and rendered
      # (upstream's driver takes raw text; parse_special reads ChatML's markers)
      python3 - "$DATA/heldout.jsonl" "$T" "$P" <<'EOF'
import json, sys
from pathlib import Path
from engine_bridge.chat_template import render_chat
from engine_bridge.native import Model
src, target, p = sys.argv[1], sys.argv[2], Path(sys.argv[3])
rows = [json.loads(l) for l in open(src) if l.strip()]
chat = [r for r in rows if r["category"] == "chat"]
tmpl = Model(target, n_gpu_layers=0).chat_template()
with open(p / "chat.jsonl", "w") as f, open(p / "chat-rendered.jsonl", "w") as g:
    for r in chat:
        f.write(json.dumps({"id": r["id"], "messages": r["messages"]}) + "\n")
        g.write(json.dumps({"prompt": render_chat(tmpl, r["messages"], add_generation_prompt=True)}) + "\n")
print(len(chat), "chat prompts")
EOF
      say "ours: AR, chain and tree at budgets 7 and 15 on $(wc -l < $P/chat.jsonl) chat prompts"
      cli bench --target "$T" --draft "$D" --ngl -1 --suite "$P/chat.jsonl" --reps "$REPS" --max-tokens "$N" \
        --sweep verify=chain,tree --sweep budget=7,15 --out "$OUT/bench.json" --md "$OUT/bench.md" \
        >> "$OUT/pair-bench.log" 2>&1 || say "ours failed"
      tail -30 "$OUT/bench.md" 2>/dev/null
      say "auto against AR (benchmarks/bench_auto.py: calibration on this GPU, its chat prompts)"
      python3 benchmarks/bench_auto.py --pairs smol --smol-target "$T" --smol-draft "$D" --prompts 8 \
        --max-tokens "$N" --rounds "$REPS" --json "$OUT/auto.json" >> "$OUT/pair-bench.log" 2>&1 || say "auto failed"
      tail -12 "$OUT/pair-bench.log" ;;
    upstream)
      say "upstream llama-speculative-simple on the same pair and prompts"
      python3 packaging/gpu_upstream.py --bin "$BIN" --target "$T" --draft "$D" --n "$N" \
        --prompts "$(wc -l < $P/chat-rendered.jsonl)" --prompt-file "$P/chat-rendered.jsonl" --reps 1 \
        --n-max 7,15 --json "$OUT/upstream.json" --log-dir "$P/upstream-logs" >> "$OUT/pair-bench.log" 2>&1 \
        || say "upstream failed"
      tail -20 "$OUT/pair-bench.log" ;;
    *) say "unknown step $step" ;;
  esac
done
ls -l "$OUT"
