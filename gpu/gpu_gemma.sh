#!/usr/bin/env bash
# Gemma 3 270M on the CUDA machine (issue 14): build our engine with the patches (0003 included),
# bring the real model over in parts (the 64 MiB per-call limit: split -b 22M -d -a 2 into
# .gpu-carry/g.partNN here, one part per call), then run the Gemma tests and the phase bench.
#
# Usage, from the project root on the GPU machine:
#   bash gpu/gpu_gemma.sh build            # wheels into /tmp/site, CUDA build into /tmp/lcp_site (background)
#   bash gpu/gpu_gemma.sh part .gpu-carry/g.part03   # keep one part in /tmp/t (any order)
#   bash gpu/gpu_gemma.sh status           # the build log's tail and the parts held
#   bash gpu/gpu_gemma.sh measure          # join + sha256, a synthetic drafter, the tests, the bench -> $OUT
#   bash gpu/gpu_gemma.sh sampling         # after measure: chain/AR argmax on the backend vs the host
# Environment: ARCH (90), BUDGETS (7,15), TREE (8,16), PROMPTS (6), MAX_TOKENS (64)
set -u
B=${BUNDLE:-.gpu-bundle}; W=/tmp/w; T=/tmp/t; OUT=${OUT:-/tmp/out}; ARCH=${ARCH:-90}
here=$(pwd)
SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
MODELS=$HOME/.local/share/dflash-studio/models; G=$MODELS/gemma-3-270m-q4_k_m.gguf
mkdir -p $W $T "$OUT"

case "${1:-}" in
  build)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl
    [ -d $W/lcp ] || tar xzf "$B"/lcp-*.tgz -C $W
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda DFLASH_FA_ALL_QUANTS=0 bash packaging/build_engine.sh \
        --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch $ARCH --jobs 16 \
        > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
    sleep 1; echo "build started: $W/lcp_build.log" ;;
  part)
    cp "$2" $T/ && ls $T | tr '\n' ' ' ;;
  status)
    tail -n 2 $W/lcp_build.log 2>/dev/null; ls $T | tr '\n' ' '; echo ;;
  measure)
    export PYTHONPATH=/tmp/lcp_site:/tmp/site:$here PYTHONUNBUFFERED=1
    mkdir -p $MODELS
    [ -f $G ] || cat $T/g.part* > $G
    echo "$SHA  $G" | sha256sum -c - || exit 1
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $OUT/machine.txt
    python3 -c "from engine_bridge.runtime import llama_ffi as f; i=f.build_info(); print(i['backend'], [p['name'] for p in i['patches']])" | tee -a $OUT/machine.txt
    python3 -c "from engine_bridge.models import synth; synth.write_drafter_for('$G', '$T/gemma-dflash.gguf')"
    python3 -m engine_bridge.cli check "$G" $T/gemma-dflash.gguf > $OUT/check.txt 2>&1; tail -3 $OUT/check.txt
    # the lossless tests on CUDA (the engine fixture offloads every layer: n_gpu_layers -1)
    timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine_bridge/runtime/test_gemma3.py > $OUT/tests.txt 2>&1
    tail -3 $OUT/tests.txt
    # the phase table: chain budgets, tree budgets with the drafter's top-K on the host (hh) and on the backend (bh)
    timeout 420 python3 benchmarks/bench_engine.py --target "$G" --draft $T/gemma-dflash.gguf --budgets ${BUDGETS:-7,15} \
        --tree ${TREE:-8,16} --tree-variants hh,bh --prompts ${PROMPTS:-6} --max-tokens ${MAX_TOKENS:-64} --ngl 99 \
        --rounds 2 --json $OUT/gemma_bench.json > $OUT/bench.txt 2>&1
    tail -30 $OUT/bench.txt ;;
  sampling)   # chain and AR with the argmax on the backend (the default) against the host, same prompts
    export PYTHONPATH=/tmp/lcp_site:/tmp/site:$here PYTHONUNBUFFERED=1
    python3 - "$G" $T/gemma-dflash.gguf <<'PY' 2>&1 | grep -v "^ggml\|Device"
import statistics as st, sys
from engine_bridge.runtime.config import EngineConfig, GenerationSettings as G
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
g, d = sys.argv[1:3]
P = ["The capital of France is", "def fibonacci(n):\n    ", "Water boils at a temperature of", "Once upon a time",
     "The three laws of motion are", "import numpy as np\n"]
for bs in (True, False):
    with Engine.load(EngineConfig(target=g, draft=d, n_ctx=1024, backend_sampling=bs), preflight=PAIR_PREFLIGHT) as e:
        for mode, b in (("ar", 0), ("chain", 7), ("chain", 15)):
            rows = []
            for r in range(2):
                for p in P:
                    e.reset()
                    rows += e.generate(p, G(mode=mode, budget=b or 7, max_tokens=64)).steps[1:]
            f = lambda k: st.mean(getattr(s, k) for s in rows) * 1e3
            print(f"backend_sampling={bs} {mode:5s} {b:2d} step {f('wall'):.3f} draft {f('t_draft'):.3f} "
                  f"verify {f('t_verify'):.3f} accept {f('t_accept'):.3f}")
PY
    ;;
  *) sed -n 2,13p "$0"; exit 2 ;;
esac
