#!/usr/bin/env bash
# Issue 30's peers on the GPU machine, on the first PEER_N public prompts per category (MT-Bench
# first turns, GSM8K test, HumanEval: the same prompts, in the same order, as evaluate_chat's
# --n-per-category): upstream llama.cpp's own drivers on the same files, one process per prompt, in
# one run -- llama-completion (AR), llama-speculative-simple --spec-type draft-dflash on our drafter
# (n_max 7) and classic speculation with a small draft model of the same vocabulary (draft-simple,
# n_max 4 / 8 / 16; Qwen2.5-Coder-0.5B for the 1.5B). Needs the peer build (gpu_bench.sh's, or
# gpu_peer_tools.sh's against the engine's ggml, into $BIN) and our engine (the chat template is
# rendered through it, as gpu_pair_bench.sh does). The peer carries packaging/patches: every patch
# switch is set to upstream's behaviour (`gpu_peer_tools.sh env`) for its runs.
#
# Usage, from the project root on the GPU machine:
#   TARGET=T.gguf DRAFT=D.gguf CLASSIC=C.gguf bash gpu/gpu_peer.sh      # -> $P/upstream-CAT.{json,txt}
# Environment: PEER_N (6), MAX_TOKENS (128), BIN (/tmp/w/llama.cpp/build/bin), P (/tmp/peer),
#   CATS ("chat math code"), DFLASH_N_MAX (7), CLASSIC_N_MAX (4,8,16).
set -u
T=${TARGET:?target GGUF}; D=${DRAFT:?DFlash drafter GGUF}; C=${CLASSIC:?classic draft model GGUF}
N=${PEER_N:-6}; P=${P:-/tmp/peer}; BIN=${BIN:-/tmp/w/llama.cpp/build/bin}
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1
mkdir -p "$P"
python3 gpu/gpu_render_prompts.py "$T" "$P" "$N" || exit 1
eval "$(bash "$(dirname "$0")/gpu_peer_tools.sh" env)"
for cat in ${CATS:-chat math code}; do
  echo "[$(date -u +%H:%M:%S)] upstream on $cat"
  timeout 600 python3 gpu/gpu_upstream.py --bin "$BIN" --target "$T" --draft "$D" --classic-draft "$C" \
    --n "${MAX_TOKENS:-128}" --prompts "$N" --prompt-file "$P/$cat-rendered.jsonl" --reps 1 \
    --n-max "${DFLASH_N_MAX:-7}" --classic-n-max "${CLASSIC_N_MAX:-4,8,16}" --no-bench \
    --json "$P/upstream-$cat.json" --log-dir "$P/logs-$cat" > "$P/upstream-$cat.txt" 2>&1
  echo "rc=$?"; grep -E "tok/s" "$P/upstream-$cat.txt" | cut -c1-200
done
