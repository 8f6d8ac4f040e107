#!/usr/bin/env bash
# The exact verify on this 2-vCPU CPU, the full public sets, one suite a process (issue 29's exact goal):
# the exact engine alone, each mode against its own AR, 128 tokens, 2 threads.
set -u
cd "$(git rev-parse --show-toplevel)"
D=docs/runs/2026-11-28-cpu/exact-full
for s in mt-bench gsm8k humaneval; do
  .venv/bin/python benchmarks/bench_lossless.py --suites $s --per-suite 0 --tokens 128 --modes chain:7,tree:15,auto:7 \
    --drift docs/runs/drift-cpu-2026-11-25.json --exact --no-fast --threads 2 --json $D/$s.json > $D/$s.txt 2>&1
  echo "$s rc=$?"
done
