#!/usr/bin/env bash
# Issue 28 on the GPU machine: where a speculative step's time goes (Nsight Compute per phase, GPU
# time against wall time), the MMVQ/MMQ crossover of the default pair's quant types at 1..16 rows,
# and the before/after of the MMVQ ceiling it measures -- one build, one sitting.
#
# Only our engine is built (packaging/build_engine.sh, CUDA, DFLASH_FA_ALL_QUANTS=0, no upstream
# peer: the sweep runs through our own engine). The default pair's target shape is written on the
# machine (gpu/gpu_smol_models.py: SmolLM2-135M shape, random weights, quantised to Q4_1 by the
# engine's llama_model_quantize as the registry file is) and paired with the shipped drafter.
#
# Usage, from the project root on the GPU machine, .gpu-bundle carried (wheels + lcp-*.tgz):
#   bash gpu/gpu_ncu.sh start         # returns at once: build, models, then every step, in its own
#                                     #   process session (setsid); progress in $W/progress.log
#   bash gpu/gpu_ncu.sh follow 560    # progress for up to N s, then the report + results into $OUT
#   bash gpu/gpu_ncu.sh pack-keep     # the built engine in 15 MiB parts into $OUT
#   bash gpu/gpu_ncu.sh restore DIR   # a later sitting: those parts (DIR/lcp.tar.xz.*) instead of
#                                     #   the build (then `start` skips it); no upstream tools in them
#   STEPS="ncu" bash gpu/gpu_ncu.sh steps   # some steps again, in the foreground
# Steps (in order; each has a time limit; a failed one is recorded and the run goes on):
#   quant    smol-q4_1.gguf (the shipped file's type mixture)
#   time     gpu_step_profile.py --time: wall ms per phase (ar, verify8/16, draft8/16, inject,
#            chain7 / tree15 steps), no profiler
#   ncu      ncu --profile-from-start off --cache-control none --clock-control none
#            --metrics gpu__time_duration.sum, one process per phase, 2 iterations in the range
#            (1 step for chain7 / tree15)
#   ncubefore ncu of verify16 with patch 0002's short-row rule off (DFLASH_MMVQ_SHORT_K=0)
#   rule     the rule off (DFLASH_MMVQ_SHORT_K=0) against the build's default, alternating, twice
#            each: gpu_verify_rows.py rows 1,8,16 and bench_engine.py AR, chain 7/15, tree 15
#   xover    the same off/default on 8 layers of the 8B shape's matrices (--pure Q4_1), rows
#            1..16, and its MMVQ (ceiling 16) / MMQ (ceiling 1) sweep
#   keep     the built engine packed for a later sitting (pack-keep copies it to $OUT)
#   sweep    gpu_verify_rows.py rows 1..16 at DFLASH_MMVQ_MAX_ROWS q4_1=1 / q4_1=16, q8_0=1 /
#            q8_0=16 and 8 (upstream) on the default pair (a type it names ignores the rule)
#   pure     rows 1..16 at ceilings 1 / 16 on --pure Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 quantisations
#   kineto   the phases under CUPTI activity tracing (torch.profiler), against wall time
#   fuse     patch 0006 (MMVQ fusion at 2..16 rows; dropped after this measurement: copy it from
#            docs/design/dropped-patches/ into packaging/patches/ to build it): DFLASH_MMVQ_FUSE_ROWS=0 (off) against 16 (on),
#            alternating, twice each, gpu_step_profile.py --time per side (verify8/16, draft8/16,
#            chain7, tree15 ...), and the target's logits (2/8/16 rows) and greedy tokens (AR,
#            chain 7/15, tree 15) compared between the sides (gpu/gpu_fuse_ab.py; ~3-4 min)
#   fusencu  ncu of verify8, verify16, draft8 with fusion off and on: kernels per family (~3 min)
#   argmax   patch 0006: DFLASH_BATCHED_ARGMAX=0 (upstream) against 1, as fuse does (~4 min)
#   argmaxncu ncu of verify8, verify16, draft8 on both sides (~3 min)
#   toggle   patch 0007: DFLASH_LAYER_INP_RESERVE=1 (upstream) against 0, as fuse does (~4 min)
#   treeab   the real pair's chain 7 / tree 7 commit and speed under each switch of patches 0006/0007
#   speed    the real pair, first SPEED_N (24) prompts per public suite, chain and tree at 7 / 15
#   real     the real default pair ($TREAL, joined from carried parts; waits for $TREAL.ok) on the
#            first REAL_N (10) prompts of each public suite: AR, chain 7, auto, per REAL_SIDES
#            ("on off": patch 0006 on / off; "host", "redecode": auto's feature path; "inline": the
#            bench's judge replaying AR between timed runs, as before 2026-11-26), one process
#            per side (`dflash-studio bench`; ~2 min a side; REAL_SWEEP replaces the sweep flags)
#   gstats   patch 0010: gpu_auto_diag.py with DFLASH_GRAPH_STATS=1, CUDA graph key per shape off / on
#   gstree   patch 0010: a tree-15 bench with DFLASH_GRAPH_STATS=1, the key per shape off / on
#   gap      auto's host time between AR steps against AR's (benchmarks/bench_auto_gap.py)
#   share    patch 0011 (one q8_1 quantisation per MMVQ input): DFLASH_MMVQ_SHARE_Q8=0 (upstream)
#            against 1 on the real target, as fuse does (gpu_fuse_ab.py: phases, logits, greedy tokens)
#   sharencu ncu of ar, verify8, verify16, draft8 on the real target, both sides, with the report
#            (kernels per family) and the shared / quantised counts of DFLASH_GRAPH_STATS=1
#   outrows  patch 0015 (a drafter block's head only on the drafts read): DFLASH_DRAFT_OUT_ROWS=0
#            (every row, upstream's graph) against 1 on the real target, as share does;
#            outrowsncu: its ncu of draft8 / draft16
#   addnorm  patch 0012 (residual add + RMS norm + weight in one kernel at 2-16 rows):
#            DFLASH_ADD_RMS_NORM=0 against 1 on the real target, as share does
#   addnormncu ncu of verify8, verify16, draft8 on both sides of 0012, with the report
#   swiglu   dropped patch 0013 (SWIGLU at 2-16 rows quantised into MMVQ's input): DFLASH_SWIGLU_Q8=0
#            against 1 on the real target, as share does; swiglunc: its ncu of verify8/16, draft8
#   calib    the cost tables auto measured in /tmp/dd and the policy simulation on each
#   clocks   gpu_extract_cost.py --clocks: AR with extraction off / on, the GPU's clocks per run
#   drift    issue 29: this GPU's near-tie bound (benchmarks/bench_drift.py, the real target on the
#            GPU, DRIFT_N (4) validation prompts per category, DRIFT_TOKENS (64)) into $R/drift.json
#   exact    issue 29, patch 0016: the exact verify's drift on the real target (bench_drift.py --exact,
#            every width and shape must read 0) into $R/drift-exact.json (and, if not, again without fusion)
#   exactquick an AR request's first token, fast against exact, by prompt length (bench_exact_prefill.py),
#            then the exact engine alone, chain 7 and auto 7, first EXACT_N (40) prompts per suite
#   exactlong what the exact verify costs after long prompts (256-7,800 cells): the verify phase and
#            ms per token, AR and chain 7, fast against exact (bench_exact_prefill.py --decode-lengths)
#   longchat the drafter window in a long chat (MT-Bench's and the validation split's first turns as
#            one conversation), chain 7 window off / 512 and auto, against AR (bench_long_chat.py)
#   exactab  the fast (DFLASH_EXACT=0) against the exact verify (1): phases, as share does
#   exactloss the fast and exact engines on the first EXACT_N (24) prompts per public suite
#            (bench_lossless.py --exact: divergences, tok/s, exact / fast), then the exact one alone on
#            the full sets (EXACT_FULL=0 skips it)
#   serve    issue 31: the server against headless generate on the real pair, chain 7 and AR
#            (benchmarks/bench_server.py; its wheels carried and installed in the first call)
#   (patch 0006, the engine already built in this sitting: STEPS="fuse fusencu" bash gpu/gpu_ncu.sh
#    start; bash gpu/gpu_ncu.sh follow 560 (start skips a finished build); from nothing: STEPS="quant
#    fuse fusencu" ... start, then follow 560 twice; the tables land in $OUT/fuse_report.md)
# (2026-11-25 the first sitting ran "quant time ncu sweep bench keep kineto ncuafter pure" on the
# build before the short-row rule: bench/ncuafter compared DFLASH_MMVQ_MAX_ROWS=q4_1=16 with the
# defaults; the second ran "quant rule keep xover" on the build with it.)
# Environment: W (/tmp/w28), LCP_JOBS (16), STEPS, ARCH (90), PURE_TYPES.
set -u
B=${BUNDLE:-.gpu-bundle}; W=${W:-/tmp/w28}; M=$W/models; R=$W/r; OUT=${OUT:-/tmp/out}
ARCH=${ARCH:-90}
here=$(pwd)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$here PYTHONUNBUFFERED=1
export DFLASH_FA_ALL_QUANTS=${DFLASH_FA_ALL_QUANTS:-0}
STEPS=${STEPS:-"quant time ncu ncubefore rule xover keep sweep pure kineto"}
PURE_TYPES=${PURE_TYPES:-"q4_1 q4_0 q5_0 q5_1 q8_0"}
T=$M/smol-q4_1.gguf; D=${D:-$here/resources/models/smollm2/drafter.gguf}   # D: any drafter GGUF of the pair
TREAL=${TREAL:-/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf}   # the real target (step real; "$TREAL.ok" once joined)
NCU=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)
ROWS16=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16

say() { mkdir -p "$W"; echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$W/progress.log"; }

build() {
  mkdir -p "$W" "$M" "$R"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl \
    || { say "wheel install failed"; return 1; }
  if ! grep -q "^done rc=0" $W/lcp_build.log 2>/dev/null; then
    rm -rf $W/lcp; tar xzf "$B"/lcp-*.tgz -C $W
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
        --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch $ARCH --jobs ${LCP_JOBS:-16} \
        > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  fi
  if ! grep -q "^done rc=0" $W/models.log 2>/dev/null; then
    setsid bash -c "SECONDS=0; python3 gpu/gpu_smol_models.py write $M > $W/models.log 2>&1; \
        echo \"done rc=\$? secs=\$SECONDS\" >> $W/models.log" < /dev/null > /dev/null 2>&1 &
  fi
}

wait_done() {   # wait_done LOG: until LOG's last line is "done rc=..."; 0 if rc=0
  while ! tail -n 1 "$1" 2>/dev/null | grep -q "^done rc="; do sleep 5; done
  tail -n 1 "$1" | grep -q "^done rc=0"
}

wait_real() {   # until the real target is joined ("$TREAL.ok"), 600 s at most
  local t0=$SECONDS; while [ ! -f "$TREAL.ok" ] && [ $((SECONDS - t0)) -lt 600 ]; do sleep 5; done
}

vrows() {   # vrows TAG "VAR=VALUE ..." ROWS [TARGET DRAFT]: one gpu_verify_rows.py run into $R/TAG.json
  timeout 120 env $2 python3 gpu/gpu_verify_rows.py --target "${4:-$T}" --draft "${5:-$D}" \
    --rows "$3" --iters 20 --rounds 2 --label "$1" --json $R/$1.json > $R/$1.txt 2>&1
  echo "$1 ($2) rc=$?"; tail -n 17 $R/$1.txt
}

step_quant() {
  python3 gpu/gpu_smol_models.py quantise $M q4_1 2>&1 | grep -E "written|fallback|error|failed"
}

step_time() {
  timeout 180 python3 gpu/gpu_step_profile.py --target $T --draft $D --time --json $R/time.json 2>$R/time.err
}

step_ncu() {   # [SIDE "VAR=VALUE ..." PHASES]
  local side=${1:-} env=${2:-} phases=${3:-"ar verify8 verify16 draft8 inject chain7 draft16 tree15"} p
  for p in $phases; do
    local f=$R/ncu${side}_$p
    local it=2; case $p in chain7|tree15) it=1;; esac
    timeout 150 env $env "$NCU" --profile-from-start off --cache-control none \
      --clock-control none --metrics gpu__time_duration.sum -f -o $f \
      python3 gpu/gpu_step_profile.py --target ${NCU_TARGET:-$T} --draft $D --profile $p --iters $it --json $f.json > $f.log 2>&1
    local rc=$?
    "$NCU" --import $f.ncu-rep --csv --page raw > $f.csv 2> $f.csv.err
    echo "ncu$side $p rc=$rc: $(grep -c . $f.csv) csv lines; $(grep PROFILED $f.log)"
  done
}

step_kineto() {
  timeout 150 python3 - "$T" "$D" "$R/kineto.json" > $R/kineto.txt 2>&1 <<'EOF'
import json, sys, time
from torch.profiler import profile, ProfilerActivity
sys.path.insert(0, "gpu")
import gpu_step_profile as g
from engine_bridge.runtime.config import EngineConfig
from engine_bridge.runtime.engine import Engine
cfg = EngineConfig(target=sys.argv[1], draft=sys.argv[2], n_ctx=4096, flash_attn="on")
res = {"phases": {}}
with Engine.load(cfg) as eng:
    b = g.Bench(eng, 4)
    for p in g.LOOPS:
        g.WARMUP = 6
        b.loop(p, 4)                           # warm: graphs captured, inject's features in place
        g.WARMUP = 0
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            ts = b.loop(p, 20, prime=False)
        ev = list(prof.key_averages())
        gpu = sum(getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0) for e in ev)
        res["phases"][p] = {"gpu_us": gpu / 20, "kernels": sum(e.count for e in ev) / 20,
                            "wall_us": 1e6 * sum(ts) / len(ts)}
        print(p, res["phases"][p], flush=True)
json.dump(res, open(sys.argv[3], "w"), indent=1)
EOF
  echo "kineto rc=$?"; tail -n 8 $R/kineto.txt
}

step_sweep() {
  vrows sweep_q4_1-c1 DFLASH_MMVQ_MAX_ROWS=q4_1=1 $ROWS16
  vrows sweep_q4_1-c16 DFLASH_MMVQ_MAX_ROWS=q4_1=16 $ROWS16
  vrows sweep_q8_0-c1 DFLASH_MMVQ_MAX_ROWS=q8_0=1 $ROWS16
  vrows sweep_q8_0-c16 DFLASH_MMVQ_MAX_ROWS=q8_0=16 $ROWS16
  vrows sweep_upstream DFLASH_MMVQ_MAX_ROWS=8 $ROWS16
  python3 gpu/gpu_ncu_report.py $R --after-env > $R/after_env.txt
  echo "after: DFLASH_MMVQ_MAX_ROWS=$(cat $R/after_env.txt)"
}

step_bench() {
  local after; after=$(cat $R/after_env.txt 2>/dev/null); local i side
  [ -n "$after" ] || { echo "no after setting"; return 1; }
  for i in 1 2; do
    for side in before after; do
      local e=""; [ $side = after ] && e=$after
      vrows vrows_${side}_$i "${e:+DFLASH_MMVQ_MAX_ROWS=$e}" 1,8,16
      timeout 200 env ${e:+DFLASH_MMVQ_MAX_ROWS=$e} python3 benchmarks/bench_engine.py --target $T --draft $D \
        --budgets 7,15 --tree 15 --max-tokens 128 --reps 2 --prompts 3 --flash-attn on \
        --json $R/bench_${side}_$i.json > $R/bench_${side}_$i.txt 2>&1
      echo "bench $side $i (${e:-defaults}) rc=$?"; tail -n 5 $R/bench_${side}_$i.txt
    done
  done
}

# the short-row rule of patch 0002 (DFLASH_MMVQ_SHORT_K): off (0, the per-type ceilings alone) against
# the build's default, alternating, twice each, on the default pair; then the 8B-shape matrices
step_rule() {
  local i k
  for i in 1 2; do
    for k in 0 2048; do
      vrows vrows_shortk${k}_$i "DFLASH_MMVQ_SHORT_K=$k" 1,8,16
      timeout 200 env DFLASH_MMVQ_SHORT_K=$k python3 benchmarks/bench_engine.py --target $T --draft $D \
        --budgets 7,15 --tree 15 --max-tokens 128 --reps 2 --prompts 3 --flash-attn on \
        --json $R/bench_shortk${k}_$i.json > $R/bench_shortk${k}_$i.txt 2>&1
      echo "bench shortk $k $i rc=$?"; tail -n 5 $R/bench_shortk${k}_$i.txt
    done
  done
}

# an 8-layer model with the 8B shape's matrices (ne00 4096 / 12288), --pure Q4_1, with a 1-layer
# f16 drafter: the short-row rule must leave it alone (same kernels with the rule on and off)
step_xover() {
  python3 gpu/gpu_smol_models.py xover $M > $R/xover_write.txt 2>&1 || { tail -n 5 $R/xover_write.txt; return 1; }
  tail -n 2 $R/xover_write.txt
  local k
  for k in 0 2048; do
    vrows vrows_xover-q4_1-shortk${k}_1 "DFLASH_MMVQ_SHORT_K=$k" $ROWS16 $M/xover-q4_1-pure.gguf $M/xover-dflash.gguf | head -n 1
  done
  for k in 1 16; do
    vrows sweep_xover-q4_1-c$k "DFLASH_MMVQ_MAX_ROWS=$k" $ROWS16 $M/xover-q4_1-pure.gguf $M/xover-dflash.gguf | head -n 1
  done
}

step_keep() {
  rm -rf $W/keep; mkdir -p $W/keep
  (cd /tmp/lcp_site && tar cf - --exclude='*.so' --exclude='*.so.0' llama_cpp llama_cpp_python-*.dist-info) \
    | xz -T0 -6 | split -b 15M -d - $W/keep/lcp.tar.xz.
  ls -la $W/keep
}

step_ncuafter() {   # the first sitting's: the sweep's after setting against the build's defaults
  local after; after=$(cat $R/after_env.txt 2>/dev/null)
  step_ncu after "DFLASH_MMVQ_MAX_ROWS=$after" "verify16"
}

# patch 0006: fusion off/on alternating (own processes: the switch is read once), then its report
step_fuse() {
  mkdir -p $R/fuse; [ -f $R/env.txt ] && cp $R/env.txt $R/fuse/
  timeout 500 python3 gpu/gpu_fuse_ab.py --target $T --draft $D --out $R/fuse
  echo "fuse rc=$?"
}

step_fusencu() {
  step_ncu fuse0 "DFLASH_MMVQ_FUSE_ROWS=0" "verify8 verify16 draft8"
  step_ncu fuse16 "DFLASH_MMVQ_FUSE_ROWS=16" "verify8 verify16 draft8"
  python3 gpu/gpu_fuse_ab.py --report $R/fuse --ncu $R | tee $R/fuse/fuse_report.md | tail -n 8
}

# a patch's switch on the real target (waits for it): ENV=0 (upstream) against ENV=1, alternating, by
# gpu_fuse_ab.py (phases, logits bit-identity, greedy tokens) into $R/TAG
real_ab() {   # real_ab ENV TAG
  wait_real
  mkdir -p $R/$2
  timeout 500 python3 gpu/gpu_fuse_ab.py --env $1 --tag $2 --sides 0,1 --target $TREAL --draft $D --out $R/$2
  echo "$2 rc=$?"
}

# ...and its kernels under ncu on both sides, with the report (kernels per family) in $R/TAG
real_abncu() {   # real_abncu ENV TAG "PHASES"
  NCU_TARGET=$TREAL step_ncu ${2}0 "$1=0" "$3"
  NCU_TARGET=$TREAL step_ncu ${2}1 "$1=1" "$3"
  python3 gpu/gpu_fuse_ab.py --env $1 --tag $2 --sides 0,1 --report $R/$2 --ncu $R | tee $R/$2/${2}_report.md | tail -n 12
}

# patch 0011 (one q8_1 quantisation per MMVQ input): upstream's per-MMVQ quantisation (0) against the
# patch (1)
step_share() { real_ab DFLASH_MMVQ_SHARE_Q8 share; }

step_sharencu() {
  real_abncu DFLASH_MMVQ_SHARE_Q8 share "ar verify8 verify16 draft8"
  local v
  for v in 0 1; do
    DFLASH_MMVQ_SHARE_Q8=$v DFLASH_GRAPH_STATS=1 timeout 120 python3 gpu/gpu_step_profile.py --target $TREAL \
      --draft $D --time --json $R/share/stats_$v.json 2>&1 | grep -E "dflash_mmvq_q8" | sed "s/^/share=$v /"
  done
}

# patch 0015 (a drafter block's head only on the drafts read): every row an output, upstream's graph
# (0), against the drafts only (1); the target's decodes are unchanged, the drafter's block is not
step_outrows() { real_ab DFLASH_DRAFT_OUT_ROWS outrows; }
step_outrowsncu() { real_abncu DFLASH_DRAFT_OUT_ROWS outrows "draft8 draft16"; }

# patch 0012 (the residual add, the next RMS norm and its weight in one kernel at 2-16 rows): upstream's
# three kernels (0) against the fusion (1)
step_addnorm() { real_ab DFLASH_ADD_RMS_NORM addnorm; }
step_addnormncu() { real_abncu DFLASH_ADD_RMS_NORM addnorm "verify8 verify16 draft8"; }

# candidate patch 0013, dropped (docs/design/dropped-patches/: copy it into packaging/patches/ to build
# it): the GLU kernel and MMVQ's own quantisation (0) against the SWIGLU quantised into MMVQ's input (1)
step_swiglu() { real_ab DFLASH_SWIGLU_Q8 swiglu; }
step_swiglunc() { real_abncu DFLASH_SWIGLU_Q8 swiglu "verify8 verify16 draft8"; }

# the cost tables auto measured here (DFLASH_DATA_DIR=/tmp/dd, after a bench with auto) and the
# policy simulation on each (benchmarks/bench_auto_policy_sim.py --table)
step_calib() {
  mkdir -p $R/calib; local f
  for f in /tmp/dd/calibration/*.json; do
    [ -f "$f" ] || continue
    cp "$f" $R/calib/
    python3 -c "import json,sys; t=json.load(open(sys.argv[1])); print('ar_ms', t['ar_ms'], 'chain_ms', t['chain_ms'], 'tree_ms', t['tree_ms'])" "$f"
    python3 benchmarks/bench_auto_policy_sim.py --table "$f" --seeds 0,1
  done
}

# the slow one-row state (issue 29): AR runs with extraction off and on, the GPU's clocks sampled
step_clocks() {
  wait_real
  DFLASH_DATA_DIR=/tmp/dd timeout 400 python3 gpu/gpu_extract_cost.py --target $TREAL --draft $D --clocks \
    --rounds ${CLOCK_ROUNDS:-3} ${CLOCK_ARGS:-} 2>&1 | grep -v "^ggml_cuda_init\|^  Device"
}

# issue 29: the near-tie bound of this GPU (benchmarks/bench_drift.py on the real target, all
# layers offloaded; prompts: the validation split of resources/prompts/train, which must be carried)
step_drift() {
  wait_real
  timeout ${DRIFT_TIMEOUT:-500} python3 benchmarks/bench_drift.py --target $TREAL --draft $D --gpu-layers 99 \
    --per-category ${DRIFT_N:-4} --tokens ${DRIFT_TOKENS:-64} --json $R/drift.json 2>&1 | grep -v "^ggml_cuda_init\|^  Device"
}

# issue 29, patch 0016: the exact verify on the GPU. Its drift must be 0 at every width and shape
# (bench_drift.py --exact); then DFLASH_EXACT_FUSION=0 (no op fusion) as a second reading when not
step_exact() {
  wait_real
  timeout ${DRIFT_TIMEOUT:-500} python3 benchmarks/bench_drift.py --target $TREAL --draft $D --gpu-layers 99 --exact \
    --per-category ${DRIFT_N:-4} --tokens ${DRIFT_TOKENS:-64} --json $R/drift-exact.json 2>&1 | grep -v "^ggml_cuda_init\|^  Device"
  if ! python3 -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['bound'] != 0.0)" $R/drift-exact.json; then
    DFLASH_EXACT_FUSION=0 timeout ${DRIFT_TIMEOUT:-500} python3 benchmarks/bench_drift.py --target $TREAL --draft $D \
      --gpu-layers 99 --exact --per-category ${DRIFT_N:-4} --tokens ${DRIFT_TOKENS:-64} \
      --json $R/drift-exact-nofusion.json 2>&1 | grep -v "^ggml_cuda_init\|^  Device"
  fi
}

# ...what it costs a phase: the fast verify (DFLASH_EXACT=0) against the exact one (1), as share does
# (phases alternating, twice each; the target's logits then differ between the sides by design)
step_exactab() { real_ab DFLASH_EXACT exactab; }

# ...and the public prompts: the fast and the exact engine interleaved on the first EXACT_N (24)
# prompts per suite (divergences, x AR, exact / fast), then the exact engine alone on all of them
step_exactloss() {
  wait_real
  local bound=${EXACT_BOUND:-4.637}
  timeout ${EXACT_TIMEOUT:-900} python3 benchmarks/bench_lossless.py --target $TREAL --draft $D --gpu-layers 99 \
    --per-suite ${EXACT_N:-24} --tokens 128 --modes ${EXACT_MODES:-chain:7,tree:15,auto:7} --bound $bound --exact \
    --json $R/lossless-exact-n${EXACT_N:-24}.json 2>&1 | grep -v "^ggml_cuda_init\|^  Device\|^  [a-z-]* "
  [ "${EXACT_FULL:-1}" = 1 ] || return 0
  timeout ${EXACT_TIMEOUT:-900} python3 benchmarks/bench_lossless.py --target $TREAL --draft $D --gpu-layers 99 \
    --per-suite 0 --tokens 128 --modes ${EXACT_MODES:-chain:7,tree:15,auto:7} --bound $bound --exact --no-fast \
    --json $R/lossless-exact-full.json 2>&1 | grep -v "^ggml_cuda_init\|^  Device\|^  [a-z-]* "
}

# ...its prompt cost (an AR request's first token, fast against exact, and whether the two engines'
# AR agree), then chain 7 and auto 7 of the exact engine alone on the first EXACT_N (40) prompts per suite
step_exactquick() {
  wait_real
  timeout 300 python3 benchmarks/bench_exact_prefill.py --target $TREAL --draft $D --gpu-layers 99 \
    --lengths 16,64,256,1024,2048,3840 --reps 7 --json $R/prefill.json 2>&1 | grep -v "^ggml_cuda_init\|^  Device"
  timeout ${EXACT_TIMEOUT:-900} python3 benchmarks/bench_lossless.py --target $TREAL --draft $D --gpu-layers 99 \
    --per-suite ${EXACT_N:-40} --tokens 128 --modes chain:7,auto:7 --bound ${EXACT_BOUND:-4.637} --exact --no-fast \
    --json $R/lossless-exact-quick.json 2>&1 | grep -v "^ggml_cuda_init\|^  Device\|^  [a-z-]* "
}

# ...and after long prompts: the vector kernel reads the cache once per row of a verify (MMA once
# per batch), so the decode's verify phase is timed fast against exact up to 7,800 cells
step_exactlong() {
  wait_real
  timeout ${EXACT_TIMEOUT:-540} python3 benchmarks/bench_exact_prefill.py --target $TREAL --draft $D --gpu-layers 99 \
    --lengths 1024 --reps ${EXACT_REPS:-5} --decode-lengths ${EXACT_LENGTHS:-256,1024,2048,4096,7800} \
    --decode-tokens 64 --json $R/exact-long.json 2>&1 | grep -v "^ggml_cuda_init\|^  Device"
}

# the drafter window in a long chat on the real pair (benchmarks/bench_long_chat.py): MT-Bench's first
# LONG_TURNS (30) first turns as one conversation, then the validation split's; chain 7 with the whole
# context against the default window, and auto, each against the target alone, in LONG_ROUNDS (2)
# rounds; the fast verify (the GPU's default) for speed, then the exact one for commit on one context
step_longchat() {
  wait_real
  mkdir -p $R/longchat; local p m ex b tag
  local lc="timeout ${LONG_TIMEOUT:-300} python3 benchmarks/bench_long_chat.py --target $TREAL --draft $D --gpu-layers 99"
  # LONG_RUNS: PROMPTS:MODE:fast|exact[:BUDGET] each
  for spec in ${LONG_RUNS:-mt-bench:chain:fast val:chain:fast mt-bench:auto:fast mt-bench:chain:exact}; do
    IFS=: read p m ex b <<< "$spec"; b=${b:-7}; tag=$p-$m-$ex$( [ "$b" = 7 ] || echo "-b$b" )
    $lc --prompts $p --mode $m --budget $b --turns ${LONG_TURNS:-30} --windows ${LONG_WINDOWS:-0,512} \
      $( [ "$ex" = fast ] && echo "--fast --ar --rounds ${LONG_ROUNDS:-2}" ) \
      --json $R/longchat/$tag.json > $R/longchat/$tag.txt 2>&1
    echo "longchat $spec rc=$?"; grep -v "^| [0-9]* | [0-9]* |" $R/longchat/$tag.txt | tail -n 9 | cut -c1-220
  done
}

# patch 0006 (one greedy argmax for all rows): upstream's per-row argmax (0) against the patch (1)
step_argmax() {
  mkdir -p $R/argmax; [ -f $R/env.txt ] && cp $R/env.txt $R/argmax/
  timeout 500 python3 gpu/gpu_fuse_ab.py --env DFLASH_BATCHED_ARGMAX --tag argmax --sides 0,1 \
    --target $T --draft $D --out $R/argmax
  echo "argmax rc=$?"
}

step_argmaxncu() {
  step_ncu argmax0 "DFLASH_BATCHED_ARGMAX=0" "verify8 verify16 draft8"
  step_ncu argmax1 "DFLASH_BATCHED_ARGMAX=1" "verify8 verify16 draft8"
  python3 gpu/gpu_fuse_ab.py --env DFLASH_BATCHED_ARGMAX --tag argmax --sides 0,1 --report $R/argmax --ncu $R \
    | tee $R/argmax/argmax_report.md | tail -n 8
}

# patch 0007 (extraction toggles without a reserve): upstream's reserve (1) against the patch (0)
step_toggle() {
  mkdir -p $R/toggle; [ -f $R/env.txt ] && cp $R/env.txt $R/toggle/
  timeout 500 python3 gpu/gpu_fuse_ab.py --env DFLASH_LAYER_INP_RESERVE --tag toggle --sides 1,0 \
    --target $T --draft $D --out $R/toggle
  echo "toggle rc=$?"
}

# the real default pair (TREAL: SmolLM2-135M-Instruct Q4_1, joined from carried parts) on the first
# REAL_N prompts of each public suite: AR, chain 7 and auto through `dflash-studio bench`, per side
# (REAL_SIDES, default "on off"): "on" (the build's defaults), "off" (patch 0006 switched to
# upstream), "host" / "redecode" (auto's feature path chosen), tkhost / tkrows / tkbatch / tkarg /
# hostarg (where a tree step takes its drafter top-k and target argmax), seqold / noreuse (the
# tree's varying output count; llama.cpp's graph reuse off), noout0 (patch 0008 off), fullblk
# (whole drafter blocks, the GPU default since 2026-11-27; fullblk0: budget-sized), onerow0 (patch 0009
# off), merge0 (dropped patch 0014 applied: a step's inject decoded on its own, not in the next block), outrows0
# (patch 0015 unused: the drafter's head on every block row), stay1 / stay0 (auto's opt-in stay band on / off), shape0 / stay1shape0 (patch 0010 off);
# sides alternate per suite,
# one process each (REAL_REPS_SIDES=2 runs the list twice). (The first run, 2026-11-26, had patch 0007 too: its "off" also set DFLASH_LAYER_INP_RESERVE=1.)
step_real() {
  wait_real
  [ -f "$TREAL.ok" ] || { echo "no real target at $TREAL"; return 1; }
  mkdir -p $R/real
  local suite side
  local round
  for round in $(seq 1 ${REAL_REPS_SIDES:-1}); do
  for suite in ${REAL_SUITES:-mt-bench gsm8k humaneval}; do
    for side in ${REAL_SIDES:-on off}; do
    # REAL_DRAFTERS="TAG=FILE ...": each drafter in turn on the same suite and side (two sittings'
    # drafters compared in one process per run), its tag in the file names
    for dd in ${REAL_DRAFTERS:-main=$D}; do
      local tag=${dd%%=*} dfile=${dd#*=} sfx=${REAL_DRAFTERS:+_${dd%%=*}}
      local e="DFLASH_DATA_DIR=/tmp/dd"
      case $side in host) e="$e DFLASH_AUTO_FEATURES=host";; redecode) e="$e DFLASH_AUTO_FEATURES=redecode";;
        off) e="$e DFLASH_BATCHED_ARGMAX=0";; inline) e="$e DFLASH_BENCH_JUDGE=inline";;
        # the tree's drafter top-k and target argmax (patch 0007 and DFLASH_TREE_ARGMAX; with
        # REAL_SWEEP="--sweep verify=tree --sweep budget=7,15")
        tkhost) e="$e DFLASH_TREE_TOP_K=host";; tkrows) e="$e DFLASH_TREE_TOP_K=backend DFLASH_BATCHED_TOP_K=0";;
        tkbatch) e="$e DFLASH_TREE_TOP_K=backend";; tkarg) e="$e DFLASH_TREE_TOP_K=backend DFLASH_TREE_ARGMAX=backend";;
        hostarg) e="$e DFLASH_TREE_TOP_K=host DFLASH_TREE_ARGMAX=backend";;
        # graph reuse: the tree's old batch (output count varying from step to step), and
        # llama.cpp's reuse off altogether (what a rebuild costs)
        seqold) e="$e DFLASH_TREE_FIXED_OUTPUTS=0";; noreuse) e="$e LLAMA_GRAPH_REUSE_DISABLE=1";;
        # the drafter on llama.cpp's one scheduler (patch 0008 off)
        noout0) e="$e DFLASH_NO_OUTPUT_SCHED=0";;
        # every drafter block decoded whole (16 rows) whatever the budget
        fullblk) e="$e DFLASH_DRAFT_FULL_BLOCK=1";; fullblk0) e="$e DFLASH_DRAFT_FULL_BLOCK=0";;
        # the target's one-row decodes in llama.cpp's shared slot (patch 0009 off)
        onerow0) e="$e DFLASH_ONE_ROW_SCHED=0";;
        # auto's policy with the stay band and the deeper budgets' refresh (opt-in; stay0: without)
        stay0) e="$e DFLASH_AUTO_STAY=0";; stay1) e="$e DFLASH_AUTO_STAY=1";;
        # the stay band with a running commit that weighs a step 0.025 (bench_auto_trace's stay+ema0.025)
        stayema) e="$e DFLASH_AUTO_STAY=1 DFLASH_AUTO_EMA=0.025";;
        # CUDA graphs keyed by the first node only, as upstream (patch 0010 off); with the stay band
        shape0) e="$e DFLASH_CUDA_GRAPH_PER_SHAPE=0";; stay1shape0) e="$e DFLASH_AUTO_STAY=1 DFLASH_CUDA_GRAPH_PER_SHAPE=0";;
        # every MMVQ quantising its own input, as upstream (patch 0011 off)
        share0) e="$e DFLASH_MMVQ_SHARE_Q8=0";;
        # the residual add apart from the next RMS norm at 2-16 rows (patch 0012 off)
        addnorm0) e="$e DFLASH_ADD_RMS_NORM=0";;
        # the GLU kernel and MMVQ's own quantisation at 2-16 rows (dropped patch 0013 off; it must be built in)
        swiglu0) e="$e DFLASH_SWIGLU_Q8=0";;
        # auto's earlier probe rule and commit weight (the cheapest budget, EMA 0.1)
        probe0) e="$e DFLASH_AUTO_PROBE=cheapest";;
        # every step's inject closed by a device sync (the default before 2026-11-28: exact phases)
        sync1) e="$e DFLASH_SYNC_INJECT=1";;
        # the tree's greedy chain seeded half the budget deep (the rule before 2026-11-27: 8 at tree 15)
        seed8) e="$e DFLASH_TREE_SEED_MAX=99";;
        sync1seed8) e="$e DFLASH_SYNC_INJECT=1 DFLASH_TREE_SEED_MAX=99";;
        # auto without the hold between speculative choices (the rule before 2026-11-28), and with
        # the per-position chain estimate (opt-in)
        hold0) e="$e DFLASH_AUTO_HOLD=0";; posest) e="$e DFLASH_AUTO_EST=positions";;
        # a step's inject as a decode of its own, not in the next block's (dropped patch 0014: it
        # and its engine diff must be applied from docs/design/dropped-patches/)
        merge0) e="$e DFLASH_MERGE_INJECT=0";;
        # every row of a drafter block an output, the head on all of them (patch 0015 unused)
        outrows0) e="$e DFLASH_DRAFT_OUT_ROWS=0";;
        # the exact verify (patch 0016's batch-invariant kernels) off / on, whatever the config says
        exact0) e="$e DFLASH_EXACT=0";; exact1) e="$e DFLASH_EXACT=1";; esac
      timeout ${REAL_TIMEOUT:-300} env $e python3 -m engine_bridge.cli bench --target $TREAL --draft $dfile --suite $suite \
        --limit ${REAL_N:-10} --reps ${REAL_REPS:-2} --max-tokens 128 ${REAL_SWEEP:---sweep verify=chain,auto --sweep budget=7} \
        --json $R/real/${suite}-r${round}_$side$sfx.json > $R/real/${suite}-r${round}_$side$sfx.txt 2>&1
      echo "real $suite $side $tag rc=$?"; tail -n 6 $R/real/${suite}-r${round}_$side$sfx.txt | cut -c1-160
    done
    done
  done
  done
}

# patch 0010: what each graph shape ran (replayed, captured, direct) with the CUDA graph key per shape
# (1) and upstream's (0), DFLASH_GRAPH_STATS=1, in gpu/gpu_auto_diag.py (AR, auto, its variants)
step_gstats() {
  wait_real
  mkdir -p $R/gstats; local v
  for v in 0 1; do
    DFLASH_CUDA_GRAPH_PER_SHAPE=$v DFLASH_GRAPH_STATS=1 DFLASH_DATA_DIR=/tmp/dd timeout 200 python3 gpu/gpu_auto_diag.py \
      --target $TREAL --draft $D --prompts 4 --runs 2 > $R/gstats/diag_$v.txt 2>&1
    echo "gstats per-shape=$v rc=$?"; grep -E "^(ar|auto)" $R/gstats/diag_$v.txt | cut -c1-150
    grep dflash_graph_stats $R/gstats/diag_$v.txt | sort -k2 -n -r | head -n 12 | cut -c1-170
  done
}

# auto's host time between AR steps against plain AR's (benchmarks/bench_auto_gap.py), twice
step_gap() {
  wait_real
  local i
  for i in 1 2; do
    DFLASH_DATA_DIR=/tmp/dd timeout 200 python3 benchmarks/bench_auto_gap.py --target $TREAL --draft $D 2>&1 | grep "gap between"
  done
}

# patch 0010 and the tree: what each graph shape of a tree-15 run ran (replayed, captured, direct)
# with the key per shape (1) and upstream's (0), DFLASH_GRAPH_STATS=1, one bench process each
step_gstree() {
  wait_real
  mkdir -p $R/gstree; local v
  for v in 0 1; do
    DFLASH_CUDA_GRAPH_PER_SHAPE=$v DFLASH_GRAPH_STATS=1 DFLASH_DATA_DIR=/tmp/dd timeout 200 python3 -m engine_bridge.cli bench \
      --target $TREAL --draft $D --suite gsm8k --limit 4 --reps 1 --max-tokens 128 --sweep verify=tree --sweep budget=15 \
      --json $R/gstree/tree_$v.json > $R/gstree/tree_$v.txt 2>&1
    echo "gstree per-shape=$v rc=$?"; grep -E "^\| c0" $R/gstree/tree_$v.txt | cut -c1-150
    grep dflash_graph_stats $R/gstree/tree_$v.txt | sort -k2 -n -r | head -n 16 | cut -c1-170
  done
}

# which switch moves the tree's commit length on the real pair (mt-bench, 6 prompts, 64 tokens)
step_treeab() {
  wait_real
  mkdir -p $R/treeab; local e
  for e in X=1 DFLASH_LAYER_INP_RESERVE=1 DFLASH_BATCHED_ARGMAX=0 "DFLASH_LAYER_INP_RESERVE=1 DFLASH_BATCHED_ARGMAX=0"; do
    local tag; tag=$(echo "$e" | tr ' =' '__')
    timeout 150 env $e DFLASH_DATA_DIR=/tmp/dd python3 -m engine_bridge.cli bench --target $TREAL --draft $D \
      --suite mt-bench --limit 6 --reps 1 --max-tokens 64 --sweep verify=chain,tree --sweep budget=7 \
      --json $R/treeab/$tag.json > $R/treeab/$tag.txt 2>&1
    echo "treeab $e rc=$?"; grep -E "^\| c" $R/treeab/$tag.txt | cut -c1-150
  done
}

# the real pair on the first SPEED_N (24) prompts of each public suite: chain and tree at budgets 7, 15
step_speed() {
  wait_real
  mkdir -p $R/speed; local s
  for s in mt-bench gsm8k humaneval; do
    DFLASH_DATA_DIR=/tmp/dd timeout 400 python3 -m engine_bridge.cli bench --target $TREAL --draft $D --suite $s \
      --limit ${SPEED_N:-24} --reps 1 --max-tokens 128 --sweep verify=chain,tree --sweep budget=7,15 \
      --json $R/speed/$s.json > $R/speed/$s.txt 2>&1
    echo "speed $s rc=$?"; grep -E "^\| c" $R/speed/$s.txt | cut -c1-150
  done
}

step_ncubefore() {
  step_ncu shortk0 "DFLASH_MMVQ_SHORT_K=0" "verify16"
}

step_pure() {
  local ty
  : > $R/sweep_pure.log
  for ty in $PURE_TYPES; do
    python3 gpu/gpu_smol_models.py quantise $M $ty pure > /dev/null 2>&1 || { echo "quantise $ty failed"; continue; }
    vrows sweep_pure-$ty-c1 DFLASH_MMVQ_MAX_ROWS=1 $ROWS16 $M/smol-$ty-pure.gguf | head -n 1
    vrows sweep_pure-$ty-c16 DFLASH_MMVQ_MAX_ROWS=16 $ROWS16 $M/smol-$ty-pure.gguf | head -n 1
  done
}

# issue 31's GPU row: `dflash-studio serve` against headless generate on the real default pair
# (benchmarks/bench_server.py; the server's ASGI wheels and the openai client are not in the offline
# bundle: carry a folder of cp312 wheels and install it into /tmp/site in the first call, e.g.
# pip install --no-index --no-deps --target /tmp/site .gpu-carry/whl-serve/*.whl), chain 7 and AR
step_serve() {
  wait_real
  mkdir -p $R/serve; local m
  for m in ${SERVE_MODES:-chain ar}; do
    timeout 300 python3 benchmarks/bench_server.py --target $TREAL --draft $D --mode $m --prompts ${SERVE_N:-8} \
      --rounds 2 --max-tokens 128 --clients 4 --seconds 30 --json $R/serve/$m.json > $R/serve/$m.txt 2>&1
    echo "serve $m rc=$?"; tail -n 12 $R/serve/$m.txt | cut -c1-200
  done
}

steps() {
  mkdir -p "$R"
  for s in $STEPS; do
    [ -f "$R/.done_$s" ] && continue
    say "step $s"
    local t0=$SECONDS
    "step_$s" > "$R/step_$s.out" 2>&1
    local rc=$?
    cut -c1-200 "$R/step_$s.out" | tail -n 40 | sed 's/^/    /' >> "$W/progress.log"
    say "step $s done rc=$rc in $((SECONDS - t0)) s"
    touch "$R/.done_$s"
  done
}

pipeline() {
  wait_done $W/lcp_build.log || { say "engine build failed: $(tail -n 30 $W/lcp_build.log)"; echo "rc=1" > $W/done; return 1; }
  say "engine built: $(tail -n 1 $W/lcp_build.log)"
  wait_done $W/models.log || { say "model write failed: $(tail -n 5 $W/models.log)"; echo "rc=1" > $W/done; return 1; }
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    nvcc --version | tail -n 2; "$NCU" --version | tail -n 1; cat /tmp/lcp_site/llama_cpp/dflash_build_info.json; } > $R/env.txt 2>&1
  steps
  say "NCU DONE"
  echo "rc=0" > $W/done
}

pack() {
  mkdir -p "$OUT"
  cp $W/*.log $R/ 2>/dev/null
  python3 gpu/gpu_ncu_report.py $R > $R/report.md 2> $R/report.err
  cp $R/report.md $OUT/ncu_report.md
  [ -f $R/fuse/fuse_report.md ] && cp $R/fuse/fuse_report.md $OUT/fuse_report.md
  [ -d $R/argmax ] && python3 gpu/gpu_fuse_ab.py --env DFLASH_BATCHED_ARGMAX --tag argmax --sides 0,1 \
    --report $R/argmax $( [ -f $R/ncuargmax1_verify8.csv ] && echo "--ncu $R" ) > $OUT/argmax_report.md 2>&1
  [ -d $R/toggle ] && python3 gpu/gpu_fuse_ab.py --env DFLASH_LAYER_INP_RESERVE --tag toggle --sides 1,0 \
    --report $R/toggle > $OUT/toggle_report.md 2>&1
  cp $W/progress.log $OUT/ncu_progress.log 2>/dev/null
  tar czf $OUT/ncu_results.tgz -C $W --exclude='*.ncu-rep' --exclude='*.csv' r 2>/dev/null
  (cd $W && tar czf $OUT/ncu_reps.tgz r/*.ncu-rep 2>/dev/null)
  ls -la $OUT | tail -n +2 | awk '{print $5, $9}' | tr '\n' ' '; echo
}

follow() {
  local limit=${1:-560} t0=$SECONDS seen=0
  while :; do
    local n; n=$(wc -l < $W/progress.log 2>/dev/null || echo 0)
    [ "$n" -gt "$seen" ] && { sed -n "$((seen + 1)),${n}p" $W/progress.log | cut -c1-220; seen=$n; }
    [ -f $W/done ] && break
    [ $((SECONDS - t0)) -ge "$limit" ] && break
    sleep 5
  done
  tail -n 2 $W/lcp_build.log 2>/dev/null | cut -c1-200
  pack
  [ -f $W/done ] && echo "RUN FINISHED: $(cat $W/done)"
  return 0
}

[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case ${1:-} in
  start)
    mkdir -p $W; rm -f $W/done
    build || exit 1
    setsid bash -c "bash gpu/gpu_ncu.sh pipeline > $W/pipeline.log 2>&1" < /dev/null > /dev/null 2>&1 &
    sleep 2; say "started: build ($W/lcp_build.log), models, then steps: $STEPS" ;;
  pipeline) pipeline ;;
  steps) steps; pack ;;
  follow) follow "${2:-560}" ;;
  pack) pack ;;
  pack-keep) mkdir -p "$OUT"; cp $W/keep/* "$OUT/" && ls -la "$OUT" ;;
  restore)
    K=${2:-.gpu-keep}; mkdir -p /tmp/lcp_site $W
    cat $K/lcp.tar.xz.* | xz -d | tar xf - -C /tmp/lcp_site || exit 1
    for f in /tmp/lcp_site/llama_cpp/lib/*.so.0.*; do b=${f%.so.0.*}; cp -f "$f" "$b.so.0"; ln -sf "$(basename $b).so.0" "$b.so"; done
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl
    echo "done rc=0 secs=0 (restored)" > $W/lcp_build.log
    ls -la /tmp/lcp_site/llama_cpp/lib ;;
  *) sed -n 2,33p "$0"; exit 2 ;;
esac
