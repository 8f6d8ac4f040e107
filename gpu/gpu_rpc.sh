#!/usr/bin/env bash
# RPC devices on the CUDA machine (issue 18): our CUDA build (with -DGGML_RPC=ON, as build_engine.sh
# now builds), SmolLM2-135M-Instruct Q4_1 brought over in parts (the 64 MiB per-call limit:
# split -b 20M -d -a 2 into .gpu-carry/s/s.partNN here), then the RPC tests and the loopback bench:
# a client that sees no GPU driving the GPU through `dflash-studio rpc-server`, against the GPU direct.
#
# Here, once: bash gpu/gpu_rpc.sh bundle   # .gpu-bundle/ggml-rpc.tgz from the sdist (make-offline-bundle.sh
#                                          # copies only the CPU and CUDA backends' sources)
# Usage, from the project root on the GPU machine:
#   bash gpu/gpu_rpc.sh build                    # + ggml-rpc's source, then gpu_gemma.sh build (background)
#   bash gpu/gpu_rpc.sh part .gpu-carry/s/s.part02
#   bash gpu/gpu_rpc.sh status
#   bash gpu/gpu_rpc.sh measure                  # join + sha256, the RPC tests, bench_rpc.py -> $OUT
set -u
T=/tmp/t; OUT=${OUT:-/tmp/out}; here=$(pwd)
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
S=$T/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p $T "$OUT"
case "${1:-}" in
  bundle)
    sdist=${SDIST:-$HOME/.cache/dflash-studio/converter-peer/sdist/llama_cpp_python-0.3.36.tar.gz}
    tmp=$(mktemp -d); tar xzf "$sdist" -C $tmp --wildcards '*/vendor/llama.cpp/ggml/src/ggml-rpc/*'
    mkdir -p $tmp/lcp/vendor/llama.cpp/ggml/src && mv $tmp/llama_cpp_python-*/vendor/llama.cpp/ggml/src/ggml-rpc $tmp/lcp/vendor/llama.cpp/ggml/src/
    tar czf .gpu-bundle/ggml-rpc.tgz -C $tmp lcp && rm -rf $tmp && ls -la .gpu-bundle/ggml-rpc.tgz ;;
  build)   # the offline bundle's source has only the CPU and CUDA backends: add ggml-rpc (.gpu-bundle/ggml-rpc.tgz)
    mkdir -p /tmp/w; [ -d /tmp/w/lcp ] || tar xzf .gpu-bundle/lcp-*.tgz -C /tmp/w
    tar xzf .gpu-bundle/ggml-rpc.tgz -C /tmp/w && bash gpu/gpu_gemma.sh build ;;
  part) cp "$2" $T/ && ls $T | tr '\n' ' ' ;;
  status) bash gpu/gpu_gemma.sh status ;;
  measure)
    export PYTHONPATH=/tmp/lcp_site:/tmp/site:$here PYTHONUNBUFFERED=1
    [ -f $S ] || cat $T/s.part* > $S
    echo "$SHA  $S" | sha256sum -c - || exit 1
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $OUT/machine.txt
    python3 -c "from engine_bridge.runtime import llama_ffi as f; i=f.build_info(); print(i['backend'], i['cmake_args'])" | tee -a $OUT/machine.txt
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine_bridge/runtime/test_rpc.py > $OUT/tests.txt 2>&1
    tail -3 $OUT/tests.txt
    for t in ${THREADS:-4}; do
      timeout 300 python3 benchmarks/bench_rpc.py --target $S --draft resources/models/smollm2/drafter.gguf \
          --device CUDA0 --client-hides-gpus --split --ngl 99 --threads $t --max-tokens ${MAX_TOKENS:-64} --reps 2 \
          --json $OUT/rpc_gpu_t$t.json 2>&1 | grep -v "^ggml\|Device" | tee $OUT/rpc_gpu_t$t.txt
    done ;;
  *) sed -n 2,12p "$0"; exit 2 ;;
esac
