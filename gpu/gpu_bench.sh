#!/usr/bin/env bash
# The whole GPU run, from the offline bundle (../shared/gpu/make-offline-bundle.sh -> .gpu-bundle):
# build our engine with CUDA (packaging/build_engine.sh, offline) and upstream's llama.cpp tools
# from the same source, write the model pairs, then measure our AR / chain / tree against
# upstream's llama-speculative-simple, llama-completion and llama-bench on the same files and
# prompts, run the engine tests and the CLI on CUDA, and the diagnostics -- in one sitting.
#
# Usage, from the project root on the GPU machine (no package registry needed):
#   bash gpu/gpu_bench.sh all        # everything, in the foreground (~17 min on an H200:
#                                          #   10 min building, 6-7 min measuring)
#   bash gpu/gpu_bench.sh start      # the same in the background (its own process session)
#   bash gpu/gpu_bench.sh follow 560 # prints progress for up to N s, then packs $OUT
#   bash gpu/gpu_bench.sh build | wait [N] | measure | status | pack   # the parts
#   bash gpu/gpu_bench.sh pack-keep  # the `keep` step's parts (engine + upstream tools) -> $OUT
#   BUNDLE=D bash gpu/gpu_bench.sh restore DIR   # a later sitting on the same machine image:
#       DIR holds those parts, D the wheels and ggml-vocab-qwen2.gguf; then `start` skips the builds
# Results: $WORK/results (default /tmp/w/results), packed into $OUT/results.tgz + $OUT/summary.txt.
# Environment: ARCH (default 90), DFLASH_FA_ALL_QUANTS (default 1; 0 builds ~2x faster, with fast
#   CUDA flash-attention kernels for q4_0/q4_0, q8_0/q8_0, f16/f16, bf16/bf16 KV only),
#   MAX_TOKENS (256), REPS (2), PROMPTS (3), STEPS (the measure steps, in order; done ones are skipped),
#   LCP_JOBS (14), PEER_JOBS (8), DIAG_ONLY (gpu_diag experiments, default all).
set -u
B=${BUNDLE:-.gpu-bundle}; W=${WORK:-/tmp/w}; M=$W/models; OUT=${OUT:-/tmp/out}; R=$W/results
ARCH=${ARCH:-90}
here=$(pwd)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$here PYTHONUNBUFFERED=1
export DFLASH_FA_ALL_QUANTS=${DFLASH_FA_ALL_QUANTS:-1}
BIN=$W/llama.cpp/build/bin
N=${MAX_TOKENS:-256}; REPS=${REPS:-2}; NP=${PROMPTS:-3}
STEPS=${STEPS:-"env ours_q15 upstream_q15 tests ours_tiny upstream_tiny cli diag_q15 keep"}

say() { mkdir -p "$W"; echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$W/progress.log"; }

build() {
  mkdir -p "$W" "$M"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl \
    || { say "wheel install failed"; return 1; }
  grep -q "^done rc=0" $W/lcp_build.log 2>/dev/null || [ -d $W/lcp ] || tar xzf "$B"/lcp-*.tgz -C $W
  # the peer gets our packaging/patches too: with their toggles off (upstream_env) it is upstream
  if ! grep -q "^done rc=0" $W/peer_build.log 2>/dev/null && [ ! -d $W/llama.cpp ]; then
    tar xzf "$B"/peer-llama.cpp.tgz -C $W && python3 packaging/apply_patches.py $W/llama.cpp --record $W/peer_patches.json \
      || { say "peer: untar or packaging/patches failed"; return 1; }
  fi
  say "build: FA_ALL_QUANTS=$DFLASH_FA_ALL_QUANTS arch=$ARCH; ours, upstream and the model pairs in parallel"
  # ours: the same script users run, offline, into /tmp/lcp_site
  if ! grep -q "^done rc=0" $W/lcp_build.log 2>/dev/null; then
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
        --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch $ARCH --jobs ${LCP_JOBS:-14} \
        > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  fi
  # the peer: upstream's own drivers from the same llama.cpp tree, same GGML flags
  local fa=""; [ "$DFLASH_FA_ALL_QUANTS" = 1 ] && fa="-DGGML_CUDA_FA_ALL_QUANTS=ON"
  if ! grep -q "^done rc=0" $W/peer_build.log 2>/dev/null; then
    setsid bash -c "cd $W/llama.cpp && SECONDS=0 && cmake -B build -G Ninja -DGGML_CUDA=on $fa \
        -DCMAKE_CUDA_ARCHITECTURES=$ARCH -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release > $W/peer_cfg.log 2>&1 && \
        cmake --build build -j ${PEER_JOBS:-8} --target llama-speculative-simple llama-bench llama-completion llama-quantize \
        > $W/peer_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/peer_build.log" < /dev/null > /dev/null 2>&1 &
  fi
  # the pairs (CPU work while nvcc runs)
  if ! grep -q "^done rc=0" $W/models.log 2>/dev/null; then
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site:$here python3 gpu/gpu_models.py $M $B ${MODEL_PAIRS:+--pairs $MODEL_PAIRS} \
        > $W/models.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/models.log" < /dev/null > /dev/null 2>&1 &
  fi
  sleep 2
  echo "started; logs: $W/lcp_build.log $W/peer_build.log $W/models.log"
}

status() {
  for f in lcp_build peer_build models; do
    printf '%-11s %s\n' "$f" "$(tail -n 1 $W/$f.log 2>/dev/null | cut -c1-150)"
  done
  nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu --format=csv,noheader 2>/dev/null
}

# wait [secs]: until the three background jobs end; 0 when all succeeded, 1 on a failure, 2 on time-out
wait_builds() {
  local limit=${1:-3600} t0=$SECONDS last=0
  while :; do
    local n=0 bad=0
    for f in lcp_build peer_build models; do
      if tail -n 1 $W/$f.log 2>/dev/null | grep -q "^done rc="; then
        n=$((n + 1)); tail -n 1 $W/$f.log | grep -q "^done rc=0" || bad=1
      fi
    done
    if [ $n = 3 ]; then
      say "builds finished: $(for f in lcp_build peer_build models; do printf '%s[%s] ' $f "$(tail -n1 $W/$f.log)"; done)"
      if [ $bad = 1 ]; then
        for f in lcp_build peer_build models; do tail -n 25 $W/$f.log; done
        return 1
      fi
      return 0
    fi
    [ $((SECONDS - t0)) -ge "$limit" ] && return 2
    if [ $((SECONDS - last)) -ge 60 ]; then status | sed 's/^/    /'; last=$SECONDS; fi
    sleep 10
  done
}

# GPU memory in use, sampled every 200 ms while a step runs: peak - idle = what the step held
mem_start() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$R/gpumem_$1.txt" 2>/dev/null & MEMPID=$!; }
mem_stop() {
  kill $MEMPID 2>/dev/null; wait $MEMPID 2>/dev/null
  local peak; peak=$(sort -n "$R/gpumem_$1.txt" 2>/dev/null | tail -n 1)
  echo "$1 peak_gpu_mem_mib=${peak:-?} idle_mib=${IDLE_MIB:-?}" | tee -a "$R/gpumem.txt"
}

step_env() {
  { echo "date: $(date -u)"; echo "host: $(uname -a)"; nvidia-smi; nvcc --version; python3 --version
    nproc; free -g; echo "FA_ALL_QUANTS=$DFLASH_FA_ALL_QUANTS ARCH=$ARCH N=$N REPS=$REPS PROMPTS=$NP"
    cat /tmp/lcp_site/llama_cpp/dflash_build_info.json 2>/dev/null; echo
    grep -E "CMAKE_CUDA_ARCHITECTURES|GGML_CUDA_FA|CMAKE_BUILD_TYPE" $W/llama.cpp/build/CMakeCache.txt 2>/dev/null
    ls -la $BIN/ /tmp/lcp_site/llama_cpp/lib/ 2>/dev/null
    echo "toolchain:"; command -v gcc g++; g++ --version | head -n1; g++ -print-file-name=libstdc++.so
    g++ -print-file-name=libstdc++.a; g++ -dumpspecs 2>/dev/null | grep -n -i "static" | head -n 5
    env | grep -i -E "^(LDFLAGS|CFLAGS|CXXFLAGS|CC|CXX|CUDAHOSTCXX|CMAKE_[A-Z_]*)=" || true
    for f in /tmp/lcp_site/llama_cpp/lib/libllama.so $BIN/llama-completion; do echo "$f: $(readelf -d $f 2>/dev/null | grep NEEDED | sed 's/.*\[//; s/\]//' | tr '\n' ' ')"; done
    echo "project files (md5):"; md5sum engine_bridge/*.py engine_bridge/*/*.py packaging/* gpu/* benchmarks/*.py; } > "$R/env.txt" 2>&1
  python3 -m engine_bridge.cli doctor --json > "$R/doctor.json" 2> "$R/doctor.err"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$R/gpu.txt"
  head -c 600 "$R/doctor.json"; echo
}

step_ours() {   # $1: pair
  local T=$M/$1-target.gguf D=$M/$1-dflash.gguf
  mem_start ours_$1
  timeout 420 python3 benchmarks/bench_engine.py --target "$T" --draft "$D" --budgets 7,15 --tree 8,16,32 \
      --max-tokens "$N" --reps "$REPS" --prompts "$NP" --flash-attn on --json "$R/ours_$1.json" \
      > "$R/ours_$1.txt" 2>&1
  local rc=$?; mem_stop ours_$1
  tail -n 8 "$R/ours_$1.txt"; return $rc
}

# the peer carries packaging/patches; these switches turn every one that has a switch back to upstream's
# behaviour, so that it runs as upstream (gpu_peer_tools.sh env prints them)
read -r -a upstream_env <<< "env $(bash "$here/gpu/gpu_peer_tools.sh" env | sed 's/^export //')"

step_upstream() {   # $1: pair
  local T=$M/$1-target.gguf D=$M/$1-dflash.gguf bs=""
  [ "$1" = q15 ] && bs=--backend-sampling
  mem_start upstream_$1
  timeout 420 "${upstream_env[@]}" python3 gpu/gpu_upstream.py --bin "$BIN" --target "$T" --draft "$D" --n "$N" \
      --prompts "$NP" --reps "$REPS" --n-max 7,15 --json "$R/upstream_$1.json" --log-dir "$R/upstream_logs_$1" $bs \
      > "$R/upstream_$1.txt" 2>&1
  local rc=$?; mem_stop upstream_$1
  tail -n 9 "$R/upstream_$1.txt"; return $rc
}

step_tests() {
  timeout 480 python3 -m pytest -q -p no:cacheprovider -o addopts="" -rfE \
      tests/engine_bridge/runtime/test_engine_lossless.py tests/engine_bridge/runtime/test_engine_stats.py \
      tests/engine_bridge/runtime/test_engine_control.py tests/engine_bridge/runtime/test_engine_refuses.py \
      tests/engine_bridge/runtime/test_tree.py > "$R/cuda_tests.log" 2>&1
  local rc=$?
  echo "tests rc=$rc" >> "$R/cuda_tests.log"
  grep -E "passed|failed|error" "$R/cuda_tests.log" | tail -n 12; return $rc
}

step_cli() {   # dflash-studio generate / bench, on CUDA
  local T=$M/q15-target.gguf D=$M/q15-dflash.gguf t=$M/tiny-target.gguf d=$M/tiny-dflash.gguf
  { echo "$ dflash-studio generate (q15, chain 7, llama.cpp log on)"
    DFLASH_LLAMA_LOG=1 timeout 120 python3 -m engine_bridge.cli generate --target "$T" --draft "$D" --flash-attn on \
        --mode chain --budget 7 --max-tokens 64 --prompt "The history of the" --json > "$R/cli_generate_q15.json" 2> "$R/cli_generate_q15.log"
    echo "rc=$?"
    grep -E "buffer size|llama_kv_cache: |memory breakdown|n_ctx_seq|flash_attn|graph nodes|graph splits" \
        "$R/cli_generate_q15.log" | grep -v llama_graph_n_input | head -40
    echo "$ dflash-studio bench (tiny pair, code suite, budgets 4,8,15)"
    timeout 240 python3 -m engine_bridge.cli bench --target "$t" --draft "$d" --flash-attn on --suite code --limit 3 \
        --reps 2 --max-tokens 64 --sweep budget=4,8,15 --out "$R/cli_bench_tiny.json" --md "$R/cli_bench_tiny.md"
    echo "rc=$?"; } > "$R/cli.txt" 2>&1
  tail -n 25 "$R/cli.txt"
}

# keep: the built engine and upstream's tools, packed in parts of 15 MiB, so that a later sitting on
# the same kind of machine can measure again without a rebuild (copied to $OUT by `pack-keep`)
step_keep() {
  rm -rf $W/keep; mkdir -p $W/keep
  (cd /tmp/lcp_site && tar cf - --exclude='*.so' --exclude='*.so.0' llama_cpp llama_cpp_python-*.dist-info) \
    | xz -T0 -6 | split -b 15M -d - $W/keep/lcp.tar.xz.
  (cd $BIN && tar cf - llama-speculative-simple llama-bench llama-completion libllama-common.so* lib*-impl.so) \
    | xz -T0 -6 > $W/keep/peer-tools.tar.xz
  ls -la $W/keep
}

step_diag() {   # $1: pair
  timeout 480 python3 gpu/gpu_diag.py --target $M/$1-target.gguf --draft $M/$1-dflash.gguf --n "$N" \
      --prompts "$NP" --json "$R/diag_$1.json" ${DIAG_ONLY:+--only $DIAG_ONLY} > "$R/diag_$1.txt" 2>&1
  local rc=$?; cat "$R/diag_$1.txt" | cut -c1-220 | tail -n 45; return $rc
}

measure() {
  mkdir -p "$R" "$OUT"
  IDLE_MIB=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n1)
  for s in $STEPS; do
    [ -f "$R/.done_$s" ] && continue
    say "step $s"
    local t0=$SECONDS rc=0
    case $s in
      env) step_env ;;
      ours_*) step_ours ${s#ours_} ;;
      upstream_*) step_upstream ${s#upstream_} ;;
      tests) step_tests ;;
      cli) step_cli ;;
      diag_*) step_diag ${s#diag_} ;;
      keep) step_keep ;;
      *) echo "unknown step $s" ;;
    esac > "$R/step_$s.out" 2>&1
    rc=$?
    sed 's/^/    /' "$R/step_$s.out" | tee -a "$W/progress.log"
    say "step $s done rc=$rc in $((SECONDS - t0)) s"
    touch "$R/.done_$s"
  done
}

pack() {
  mkdir -p "$OUT" "$R"
  cp $W/*.log "$R/" 2>/dev/null
  python3 gpu/gpu_report.py "$R" > "$R/report.md" 2> "$R/report.err"
  cp "$R/report.md" "$OUT/report.md" 2>/dev/null
  tar czf "$OUT/results.tgz" -C $W results 2>/dev/null
  { cat "$R/gpu.txt" 2>/dev/null; for f in "$R"/ours_*.txt "$R"/upstream_*.txt; do [ -f "$f" ] && { echo "== $(basename $f)"; tail -n 12 "$f"; }; done
    cat "$R/gpumem.txt" 2>/dev/null; grep -E "passed|failed" "$R/cuda_tests.log" 2>/dev/null | tail -n 3
    cat "$R/diag_q15.txt" 2>/dev/null; } > "$OUT/summary.txt"
  cp "$W/progress.log" "$OUT/progress.log" 2>/dev/null
  echo "packed: $(ls -la $OUT | tail -n +2 | awk '{print $5, $9}' | tr '\n' ' ')"
}

all() {
  rm -f $W/all.done
  build || { echo "rc=1" > $W/all.done; return 1; }
  wait_builds 3600; local rc=$?
  if [ $rc != 0 ]; then say "builds failed (rc=$rc)"; echo "rc=$rc" > $W/all.done; return 1; fi
  measure
  say "ALL DONE"
  echo "rc=0" > $W/all.done
}

follow() {   # follow [secs]: progress lines until the run ends or secs pass, then pack
  local limit=${1:-560} t0=$SECONDS seen=0
  while :; do
    local n; n=$(wc -l < $W/progress.log 2>/dev/null || echo 0)
    [ "$n" -gt "$seen" ] && { sed -n "$((seen + 1)),${n}p" $W/progress.log; seen=$n; }
    [ -f $W/all.done ] && break
    [ $((SECONDS - t0)) -ge "$limit" ] && break
    sleep 5
  done
  status
  pack
  [ -f $W/all.done ] && { echo "RUN FINISHED: $(cat $W/all.done)"; tail -n 60 $W/all.log 2>/dev/null | cut -c1-200; }
  return 0
}

# sourced (gpu/gpu_verify_cost.sh reuses the functions above): no command runs
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case ${1:-} in
  build) build ;;
  wait) wait_builds "${2:-3600}" ;;
  status) status ;;
  measure) measure; pack ;;
  pack) pack ;;
  pack-keep) mkdir -p "$OUT"; cp $W/keep/* "$OUT/" && ls -la "$OUT" ;;
  restore)   # a later sitting: the kept engine and tools instead of a rebuild (same machine kind)
    K=${2:-keep}; mkdir -p /tmp/lcp_site $BIN
    cat $K/lcp.tar.xz.* | xz -d | tar xf - -C /tmp/lcp_site
    for f in /tmp/lcp_site/llama_cpp/lib/*.so.0.*; do b=${f%.so.0.*}; cp -f "$f" "$b.so.0"; ln -sf "$(basename $b).so.0" "$b.so"; done
    xz -d < $K/peer-tools.tar.xz | tar xf - -C $BIN
    for f in /tmp/lcp_site/llama_cpp/lib/*.so*; do [ -e "$BIN/$(basename $f)" ] || ln -s "$f" $BIN/; done
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl
    for f in lcp_build peer_build; do echo "done rc=0 secs=0 (restored)" > $W/$f.log; done
    ls -la /tmp/lcp_site/llama_cpp/lib $BIN ;;
  all) all; pack ;;
  start)   # runs from a snapshot of the project: the working tree may be re-synced while it runs
    mkdir -p $W/src; rm -f $W/all.done
    cp -a engine_bridge benchmarks packaging gpu tests resources pyproject.toml $W/src/
    ln -sfn "$here/$B" $W/src/.gpu-bundle
    (cd $W/src && BUNDLE=.gpu-bundle setsid bash gpu/gpu_bench.sh all > $W/all.log 2>&1 < /dev/null &)
    sleep 3; echo "started the whole run from $W/src; log $W/all.log" ;;
  follow) follow "${2:-560}" ;;
  *) sed -n 2,19p "$0"; exit 2 ;;
esac
