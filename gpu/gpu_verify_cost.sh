#!/usr/bin/env bash
# Issue 13 on the GPU machine: what a verify / a speculative step costs in AR tokens, before and
# after packaging/patches, in one run of one build.
#
# "before" = the patches' toggles off (DFLASH_MMVQ_MAX_ROWS=8: upstream's behaviour exactly);
# "after" = the MMVQ row ceiling per quant type that the mmvq step measured as best (AFTER_MMVQ
# overrides it, e.g. 16; the build's own defaults if mmvq did not run). DFLASH_MULTIROW_GRAPHS=0
# on both sides: builds of patch 0001 before 2026-11-23 had a per-shape CUDA graph key behind it
# (measured: no effect, dropped); the current 0001 is diagnostics only and ignores it.
# Upstream's own tools are built from the same patched tree and run with the toggles off.
#
# Usage, from the project root on the GPU machine, with .gpu-bundle present (carry it):
#   bash gpu/gpu_verify_cost.sh start    # returns at once: builds (ours + peer + a CPU
#                                              # llama-quantize), model pairs, quantisation, then
#                                              # every measure step, in its own process session
#   bash gpu/gpu_verify_cost.sh poll     # short: the last progress lines and build status
#   bash gpu/gpu_verify_cost.sh pack     # report + results into $OUT (any time; again at the end)
#   STEPS="vrows mmvq" bash gpu/gpu_verify_cost.sh measure   # some steps again (foreground)
# Progress: $W/verify/progress.log (W=/tmp/w). The run ends with "VERIFY DONE" there.
# Steps (in order; each has its own time limit, a failed one is recorded and the run goes on):
#   env      doctor, build info, nvidia-smi
#   mmvq     llama-bench pp1..pp16 on the xover model quantised to Q4_0 Q8_0 Q4_K Q5_K Q6_K at
#            MMVQ row ceilings 1 (MMQ from 2 rows) and 16 (MMVQ_CEILINGS); the best ceiling per
#            type becomes the "after" setting ($V/after_mmvq.txt)
#   vrows    gpu/gpu_verify_rows.py: verify of 1,2,4,8,16 rows, before and after, per pair
#   ours     benchmarks/bench_engine.py: AR, chain 3/7/15, tree 8/16/32 with phases, before, after
#   upstream gpu/gpu_upstream.py: llama-speculative-simple chain 3/7/15, llama-completion,
#            llama-bench tg128 (toggles off)
#   gstats   one chain run per pair with DFLASH_GRAPH_STATS=1, before and after: which shapes replay
#   q8drafter chain 7 / tree 16 (after) with the drafter in q8_0 against f16: the draft phase's reads
#   tests    the engine tests on CUDA (greedy lossless, tree)
# Environment: PAIRS (q8b smol q15), MAX_TOKENS (128), PROMPTS (2), REPS (1), AFTER_MMVQ (measured),
#   DFLASH_FA_ALL_QUANTS (0 here: f16 K/V kernels only, as the figures),
#   XOVER_TYPES (Q4_0 Q8_0 Q4_K Q5_K Q6_K), STEPS, and gpu_bench.sh's (ARCH, LCP_JOBS, PEER_JOBS).
set -u
# this run's settings, read before gpu_bench.sh sets its own defaults for the same names
VN=${MAX_TOKENS:-128}; VNP=${PROMPTS:-2}; VREPS=${REPS:-1}
VSTEPS=${STEPS:-"env mmvq vrows ours upstream gstats q8drafter tests"}
# the H100 figures of issue 13 were taken without FA_ALL_QUANTS (f16 K/V only): half the build time
export DFLASH_FA_ALL_QUANTS=${DFLASH_FA_ALL_QUANTS:-0}
# the build, status and model functions of the main GPU run (sourcing runs no command)
source gpu/gpu_bench.sh
V=$W/verify
PAIRS=${PAIRS:-"q8b smol q15"}
AFTER_MMVQ=${AFTER_MMVQ:-}
XOVER_TYPES=${XOVER_TYPES:-"Q4_0 Q8_0 Q4_K Q5_K Q6_K"}
before_env=(env DFLASH_MULTIROW_GRAPHS=0 DFLASH_MMVQ_MAX_ROWS=8)
# after: AFTER_MMVQ, else the MMVQ ceilings the mmvq step measured best per type, else the build's defaults
set_after_env() {
  local spec=$AFTER_MMVQ
  [ -z "$spec" ] && [ -s $V/after_mmvq.txt ] && spec=$(cat $V/after_mmvq.txt)
  after_env=(env DFLASH_MULTIROW_GRAPHS=0)
  [ -n "$spec" ] && after_env+=(DFLASH_MMVQ_MAX_ROWS=$spec)
  echo "${after_env[*]}" > $V/r/after_env.txt 2>/dev/null
}
QBIN=$W/llama.cpp/build-cpu/bin

vsay() { mkdir -p "$V"; echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$V/progress.log"; }

# A CPU-only llama-quantize from the peer tree (a few minutes), so the 8B target and the crossover
# models are quantised while nvcc still builds the CUDA engines; then the quantisation itself.
quantise() {
  SECONDS=0
  ( cd $W/llama.cpp && cmake -B build-cpu -G Ninja -DGGML_CUDA=off -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release > $V/quant_cfg.log 2>&1 \
    && cmake --build build-cpu -j 4 --target llama-quantize ) || { echo "llama-quantize (CPU) build failed"; return 1; }
  echo "llama-quantize built in $SECONDS s"
  local t
  # each model is quantised as soon as gpu_models.py reports it written
  waitfor() {
    while ! grep -q "^$1 pair written" $W/models.log 2>/dev/null; do
      tail -n 1 $W/models.log 2>/dev/null | grep -q "^done rc=" && return 1
      sleep 5
    done
  }
  if waitfor q8b && [ -f $M/q8b-target-f16.gguf ]; then
    t=$SECONDS
    if $QBIN/llama-quantize $M/q8b-target-f16.gguf $M/q8b-target.gguf Q4_K_M > $V/quant_q8b.log 2>&1; then
      rm -f $M/q8b-target-f16.gguf
      echo "q8b Q4_K_M in $((SECONDS - t)) s"
    else
      echo "quantise q8b failed"; tail -n 5 $V/quant_q8b.log; rm -f $M/q8b-target.gguf
    fi
  fi
  waitfor xover || { echo "no xover model"; return 1; }
  for ty in $XOVER_TYPES; do
    t=$SECONDS
    # --pure: every matrix of the model in this one type (no Q4_K_M-style mixture)
    $QBIN/llama-quantize --pure $M/xover-target-f16.gguf $M/xover-$ty.gguf $ty > $V/quant_xover_$ty.log 2>&1 \
      || { echo "quantise xover $ty failed"; tail -n 5 $V/quant_xover_$ty.log; rm -f $M/xover-$ty.gguf; }
    echo "xover $ty in $((SECONDS - t)) s"
  done
  local all=1
  for ty in $XOVER_TYPES; do [ -f $M/xover-$ty.gguf ] || all=0; done
  [ $all = 1 ] && rm -f $M/xover-target-f16.gguf
  # q8_0 drafters (the q8drafter step): half the draft phase's weight reads
  local p
  for p in $PAIRS; do
    waitfor $p && [ -f $M/$p-dflash.gguf ] && $QBIN/llama-quantize $M/$p-dflash.gguf $M/$p-dflash-q8_0.gguf Q8_0 \
      > $V/quant_${p}_dflash.log 2>&1 && echo "$p drafter q8_0 written"
  done
  return 0
}

vstart() {
  mkdir -p "$V" "$M"; rm -f "$V/done"
  # everything runs from a snapshot of the project: the working tree may be re-synced meanwhile
  local S=$W/vsrc
  rm -rf $S; mkdir -p $S
  cp -a engine_bridge benchmarks packaging gpu tests resources pyproject.toml $S/
  ln -sfn "$here/$B" $S/.gpu-bundle
  cd $S || return 1
  vsay "start from $S: pairs $PAIRS; after = MMVQ ceilings ${AFTER_MMVQ:-as measured}"
  # q8b first (largest, then quantised while the rest are written), the crossover model second
  local order="" p
  for p in $(case " $PAIRS " in *" q8b "*) echo q8b;; esac) xover $PAIRS; do case " $order " in *" $p "*) ;; *) order="$order $p";; esac; done
  MODEL_PAIRS=$(echo $order | tr ' ' ',') build || { vsay "build failed to start"; return 1; }
  setsid bash -c "source gpu/gpu_verify_cost.sh; quantise > $V/quant.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $V/quant.log" \
    < /dev/null > /dev/null 2>&1 &
  setsid bash -c "source gpu/gpu_verify_cost.sh; vrun > $V/run.log 2>&1" < /dev/null > /dev/null 2>&1 &
  sleep 1; vsay "started in the background; poll: bash gpu/gpu_verify_cost.sh poll"
}

vrun() {
  wait_builds 3600 || { vsay "builds failed"; vpack; echo "rc=1" > $V/done; return 1; }
  while ! tail -n 1 $V/quant.log 2>/dev/null | grep -q "^done rc="; do sleep 5; done
  vsay "quantisation: $(tr '\n' ';' < $V/quant.log | cut -c1-400)"
  # fallback: the CUDA peer's llama-quantize, for what the CPU one did not produce
  if [ ! -f $M/q8b-target.gguf ] && [ -f $M/q8b-target-f16.gguf ]; then
    $BIN/llama-quantize $M/q8b-target-f16.gguf $M/q8b-target.gguf Q4_K_M > $V/quant_q8b_peer.log 2>&1
    vsay "q8b quantised with the peer's llama-quantize: rc=$?"
  fi
  local ty
  for ty in $XOVER_TYPES; do
    if [ ! -f $M/xover-$ty.gguf ] && [ -f $M/xover-target-f16.gguf ]; then
      $BIN/llama-quantize --pure $M/xover-target-f16.gguf $M/xover-$ty.gguf $ty > $V/quant_xover_${ty}_peer.log 2>&1
      vsay "xover $ty quantised with the peer's llama-quantize: rc=$?"
    fi
  done
  vmeasure
  vpack
  vsay "VERIFY DONE"
  echo "rc=0" > $V/done
}

vmeasure() {
  mkdir -p "$V/r"
  for s in $VSTEPS; do
    [ -f "$V/r/.done_$s" ] && continue
    vsay "step $s"
    local t0=$SECONDS
    case $s in
      env) vstep_env ;;
      vrows) vstep_vrows ;;
      mmvq) vstep_mmvq ;;
      ours) vstep_ours ;;
      upstream) vstep_upstream ;;
      gstats) vstep_gstats ;;
      q8drafter) vstep_q8drafter ;;
      tests) step_tests_v ;;
      *) echo "unknown step $s" ;;
    esac > "$V/r/step_$s.out" 2>&1
    local rc=$?
    tail -n 30 "$V/r/step_$s.out" | cut -c1-200 | sed 's/^/    /' >> "$V/progress.log"
    vsay "step $s done rc=$rc in $((SECONDS - t0)) s"
    touch "$V/r/.done_$s"
  done
}

vstep_env() {
  { date -u; nvidia-smi; nvcc --version | tail -n 2; cat /tmp/lcp_site/llama_cpp/dflash_build_info.json; echo
    echo "peer patches:"; cat $W/peer_patches.json; ls -la $M; } > $V/r/env.txt 2>&1
  python3 -m engine_bridge.cli doctor > $V/r/doctor.txt 2>&1
  cat $V/r/doctor.txt
}

vstep_vrows() {
  local p; set_after_env
  for p in $PAIRS; do
    for side in before after; do
      local e=("${before_env[@]}"); [ $side = after ] && e=("${after_env[@]}")
      timeout 120 "${e[@]}" python3 gpu/gpu_verify_rows.py --target $M/$p-target.gguf --draft $M/$p-dflash.gguf \
        --label "$p-$side" --json $V/r/vrows_${p}_$side.json 2>$V/r/vrows_${p}_$side.err | tail -n 6
    done
  done
}

vstep_mmvq() {
  local ty c
  for ty in $XOVER_TYPES; do
    [ -f $M/xover-$ty.gguf ] || { echo "no xover-$ty.gguf"; continue; }
    # 8 (upstream) equals 16 up to 8 rows and 1 above on Hopper (no per-arch table): not rerun
    for c in ${MMVQ_CEILINGS:-1 16}; do
      # graphs off: every repetition runs the kernels directly (no capture run in the average)
      timeout 90 env DFLASH_MMVQ_MAX_ROWS=$c GGML_CUDA_DISABLE_GRAPHS=1 $BIN/llama-bench -m $M/xover-$ty.gguf \
        -p 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 -n 0 -ngl 99 -fa 1 -r 10 -o json \
        > $V/r/mmvq_${ty}_c$c.json 2> $V/r/mmvq_${ty}_c$c.err
      echo "$ty ceiling $c rc=$?"
    done
  done
  python3 gpu/gpu_verify_report.py $V/r --mmvq-env > $V/after_mmvq.txt
  echo "best ceilings (the after setting): $(cat $V/after_mmvq.txt)"
}

vstep_ours() {
  local p; set_after_env
  for p in $PAIRS; do
    for side in before after; do
      local e=("${before_env[@]}"); [ $side = after ] && e=("${after_env[@]}")
      timeout 300 "${e[@]}" python3 benchmarks/bench_engine.py --target $M/$p-target.gguf --draft $M/$p-dflash.gguf \
        --budgets 3,7,15 --tree 8,16,32 --max-tokens "$VN" --reps "$VREPS" --prompts "$VNP" --flash-attn on \
        --json $V/r/ours_${p}_$side.json > $V/r/ours_${p}_$side.txt 2>&1
      echo "ours $p $side rc=$?"; tail -n 8 $V/r/ours_${p}_$side.txt
    done
  done
}

vstep_upstream() {
  local p
  for p in $PAIRS; do
    timeout 300 "${before_env[@]}" python3 gpu/gpu_upstream.py --bin "$BIN" --target $M/$p-target.gguf \
      --draft $M/$p-dflash.gguf --n "$VN" --prompts "$VNP" --reps "$VREPS" --n-max 3,7,15 \
      --json $V/r/upstream_$p.json --log-dir $V/r/upstream_logs_$p > $V/r/upstream_$p.txt 2>&1
    echo "upstream $p rc=$?"; tail -n 6 $V/r/upstream_$p.txt
  done
}

vstep_gstats() {
  local p; set_after_env
  for p in $PAIRS; do
    for side in before after; do
      local e=("${before_env[@]}"); [ $side = after ] && e=("${after_env[@]}")
      timeout 120 "${e[@]}" DFLASH_GRAPH_STATS=1 python3 -m engine_bridge.cli generate --target $M/$p-target.gguf \
        --draft $M/$p-dflash.gguf --flash-attn on --mode chain --budget 7 --max-tokens 64 \
        --prompt "The history of the" > /dev/null 2> $V/r/gstats_${p}_$side.txt
      echo "== $p $side rc=$?"; grep "dflash_graph_stats" $V/r/gstats_${p}_$side.txt | sort -k2 -n -r | head -n 12
    done
  done
}

vstep_q8drafter() {
  local p; set_after_env
  for p in $PAIRS; do
    [ -f $M/$p-dflash-q8_0.gguf ] || { echo "no $p q8_0 drafter"; continue; }
    timeout 200 "${after_env[@]}" python3 benchmarks/bench_engine.py --target $M/$p-target.gguf \
      --draft $M/$p-dflash-q8_0.gguf --budgets 7 --tree 16 --max-tokens "$VN" --reps "$VREPS" --prompts "$VNP" \
      --flash-attn on --json $V/r/q8drafter_$p.json > $V/r/q8drafter_$p.txt 2>&1
    echo "q8_0 drafter $p rc=$?"; tail -n 4 $V/r/q8drafter_$p.txt
  done
}

step_tests_v() {
  # the pristine-tree patch tests read the unpacked llama-cpp-python source of the bundle
  DFLASH_LCP_SDIST=$W/lcp timeout 360 python3 -m pytest -q -p no:cacheprovider -o addopts="" -rfE \
      tests/engine_bridge/runtime/test_engine_lossless.py tests/engine_bridge/runtime/test_tree.py \
      tests/engine_bridge/runtime/test_engine_patches.py > $V/r/cuda_tests.log 2>&1
  echo "tests rc=$?"; grep -E "passed|failed|error" $V/r/cuda_tests.log | tail -n 8
}

vpack() {
  mkdir -p "$OUT"
  cp $W/*.log $V/*.log "$V/r/" 2>/dev/null
  python3 gpu/gpu_verify_report.py "$V/r" > "$V/r/report.md" 2> "$V/r/report.err"
  cp "$V/r/report.md" "$OUT/verify_report.md" 2>/dev/null
  cp "$V/progress.log" "$OUT/verify_progress.log" 2>/dev/null
  tar czf "$OUT/verify_results.tgz" -C "$V" r 2>/dev/null
  echo "packed: $(ls -la $OUT | tail -n +2 | awk '{print $5, $9}' | tr '\n' ' ')"
}

vpoll() {
  tail -n ${1:-25} "$V/progress.log" 2>/dev/null | cut -c1-220
  status
  printf '%-11s %s\n' quant "$(tail -n 1 $V/quant.log 2>/dev/null | cut -c1-150)"
  [ -f "$V/done" ] && echo "RUN FINISHED: $(cat $V/done)"
  return 0
}

[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case ${1:-} in
  start) vstart ;;
  poll) vpoll "${2:-25}" ;;
  measure) vmeasure; vpack ;;
  pack) cd $W/vsrc 2>/dev/null; vpack ;;   # the report script of the snapshot the run uses
  quantise) quantise ;;
  *) sed -n 2,32p "$0"; exit 2 ;;
esac
