#!/usr/bin/env bash
# auto against AR on the full public sets with the engine built for this CPU (.venv), this 2-vCPU Xeon
set -u
source .venv/bin/activate
T=/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf
for s in mt-bench gsm8k humaneval; do
  DFLASH_DATA_DIR=/tmp/ab/fulldata dflash-studio bench --target $T --draft resources/models/smollm2/drafter.gguf --suite $s \
    --limit 200 --reps 1 --threads 2 --max-tokens 128 --sweep verify=auto --sweep budget=7 --round-prompts 10 \
    --out /tmp/ab/full-$s.json --quiet > /tmp/ab/full-$s.txt 2>&1
  echo "$s rc=$? $(date -u +%T)"
done
