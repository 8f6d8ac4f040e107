#!/usr/bin/env bash
# A/B on this 2-vCPU Xeon (AMX-INT8): the portable engine (.venv, GGML_NATIVE=OFF) against the engine
# built for this CPU's instruction sets with patch 0020 (/tmp/lcp_isa: `packaging/build_engine.sh --target
# /tmp/lcp_isa`), one process per suite and side. Run 1 (ab-table-march-native.md) had /tmp/lcp_native2
# (-DGGML_NATIVE=ON, i.e. -march=native, with 0020) as "native" and portable first; file names without r2-.
set -u
T=/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf
D=resources/models/smollm2/drafter.gguf
source .venv/bin/activate
for s in mt-bench gsm8k humaneval; do
  for side in native portable; do
    if [ $side = native ]; then PP=/tmp/lcp_isa; else PP=; fi
    PYTHONPATH=$PP DFLASH_DATA_DIR=/tmp/ab/r2data-$side dflash-studio bench --target $T --draft $D --suite $s --limit 10 \
      --reps 2 --threads 2 --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 --round-prompts 10 \
      --out /tmp/ab/r2-$s-$side.json --md /tmp/ab/r2-$s-$side.md --quiet > /tmp/ab/r2-$s-$side.txt 2>&1
    echo "$s $side rc=$?"
  done
done
