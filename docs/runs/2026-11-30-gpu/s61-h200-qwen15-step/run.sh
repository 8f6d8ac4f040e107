#!/usr/bin/env bash
# Issue 30 / 28 on one nvidia-h200 (2026-11-30): the real Qwen2.5-Coder-1.5B Q4_K_M target's step with
# patches 0001-0022, a random drafter of the trained one's shape (gpu/gpu_synth_drafter.py: acceptance
# does not change a step's cost), then
#   vk15   phases per side, patch 0022 off / on (gpu_fuse_ab.py, DFLASH_VERIFY_KERNELS 0 / a)
#   sweep  verify of 1..16 rows per MMVQ ceiling of the file's two K-quant types (gpu_verify_rows.py)
#   ncu    kernels of ar, verify8, verify16, draft8, inject, chain7 (the defaults)
#   call 1 (.gpu-bundle carried): bash gpu/tmp_x/run61.sh setup
#   calls 2-24 (.gpu-carry/qwen15 parts): bash gpu/gpu_carry.sh take qwen15
#   then: bash gpu/tmp_x/run61.sh start
#   the default pair as well (report_smol.md): a call with the shipped drafter in the tree,
#     `cp resources/models/smollm2/drafter.gguf /tmp/t/drafter.gguf && bash gpu/tmp_x/run61.sh smol`,
#     then two calls `bash gpu/gpu_carry.sh take s48` (.gpu-carry/s48 parts)
#   then: bash gpu/tmp_x/run61.sh follow 540; the r61.tgz here was packed again by hand without *.npz
#     once smolrun was done; bash gpu/tmp_x/run61.sh keep (the .gpu-keep-s61 parts)
#   the drafter sitting (train-log.txt, gen-stats.json, run-summary.json), carrying .gpu-carry/wq/data:
#     TARGET=/tmp/t/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf GEN_SECONDS=150 TRAIN_SECONDS=330 \
#       EXTRA="--layers 1 --ffn 3072" bash gpu/gpu_drafter.sh start .gpu-carry/wq/data
#     bash gpu/gpu_drafter.sh follow 470; bash gpu/gpu_drafter.sh follow 120 (the shards into $OUT;
#     drafter-00 split into 15 MiB parts by hand in one more call)
# (It ran as gpu/tmp_x/run61.sh, moved here afterwards.)
set -u
W=/tmp/w; R=$W/r; OUT=${OUT:-/tmp/out}; B=.gpu-bundle
T=/tmp/t/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf; D=/tmp/t/d15-q8_0.gguf
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
NCU=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)
say() { mkdir -p $W; echo "[$(date -u +%H:%M:%S)] $*" | tee -a $W/progress.log; }
case ${1:-} in
setup)
  mkdir -p $W $R /tmp/t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/whl/*.whl || exit 1
  rm -rf $W/lcp; tar xzf $B/lcp-*.tgz -C $W
  setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cuda bash packaging/build_engine.sh \
      --python python3 --source $W/lcp --wheels $B/whl --target /tmp/lcp_site --arch 90 --jobs 16 \
      > $W/lcp_build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/lcp_build.log" < /dev/null > /dev/null 2>&1 &
  say "setup: build started"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/env.txt ;;
start)
  setsid bash $0 run < /dev/null > $W/run.log 2>&1 &
  say "run started" ;;
run)
  while ! grep -q "^done rc=" $W/lcp_build.log 2>/dev/null; do sleep 5; done
  say "build: $(tail -n 1 $W/lcp_build.log)"; grep -q "^done rc=0" $W/lcp_build.log || exit 1
  while [ ! -f $T.ok ]; do sleep 5; done
  python3 -c "import json,glob; print(json.load(open(glob.glob('/tmp/lcp_site/**/build-info.json',recursive=True)[0]))['patches'])" \
      > $R/patches.txt 2>&1 || true
  python3 gpu/gpu_synth_drafter.py $T $D > $R/drafter.txt 2>&1; say "drafter: $(tail -n 1 $R/drafter.txt)"
  say "vk15: phases, 0022 off / on"
  timeout 420 python3 gpu/gpu_fuse_ab.py --env DFLASH_VERIFY_KERNELS --tag vk15 --sides 0,a --rounds 2 \
      --target $T --draft $D --out $R/vk15 > $R/vk15.log 2>&1; say "vk15 rc=$?"
  for s in default q4_K=1 q4_K=16 q6_K=1 q6_K=16; do
    tag=${s/=/-c}; e=""; [ $s != default ] && e="DFLASH_MMVQ_MAX_ROWS=$s"
    timeout 150 env $e python3 gpu/gpu_verify_rows.py --target $T --draft $D --rows 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 \
      --iters 20 --rounds 2 --label $tag --json $R/sweep_$tag.json > $R/sweep_$tag.txt 2>&1; say "sweep $s rc=$?"
  done
  for p in ar verify8 verify16 draft8 inject chain7; do
    it=2; [ $p = chain7 ] && it=1
    timeout 150 "$NCU" --profile-from-start off --cache-control none --clock-control none \
      --metrics gpu__time_duration.sum -f -o $R/ncu_$p \
      python3 gpu/gpu_step_profile.py --target $T --draft $D --profile $p --iters $it --json $R/ncu_$p.json > $R/ncu_$p.log 2>&1
    rc=$?; "$NCU" --import $R/ncu_$p.ncu-rep --csv --page raw > $R/ncu_$p.csv 2> $R/ncu_$p.csv.err
    say "ncu $p rc=$rc: $(grep -c . $R/ncu_$p.csv) csv lines"
  done
  python3 gpu/gpu_ncu_report.py $R > $R/report15.md 2>&1; say "report rc=$?"
  say "all done" ;;
smol)  # after the 1.5B run: the default pair's kernels with 0001-0022 (SmolLM2 target and the shipped drafter)
  setsid bash $0 smolrun < /dev/null > $W/smol.log 2>&1 &
  say "smol started" ;;
smolrun)
  TS=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; DS=/tmp/t/drafter.gguf; RS=$W/rs; mkdir -p $RS
  while ! grep -q "all done" $W/progress.log; do sleep 5; done
  while [ ! -f $TS.ok ]; do sleep 5; done
  for p in ar verify8 draft8 draft16 inject chain7; do
    it=2; [ $p = chain7 ] && it=1
    timeout 150 "$NCU" --profile-from-start off --cache-control none --clock-control none \
      --metrics gpu__time_duration.sum -f -o $RS/ncu_$p \
      python3 gpu/gpu_step_profile.py --target $TS --draft $DS --profile $p --iters $it --json $RS/ncu_$p.json > $RS/ncu_$p.log 2>&1
    rc=$?; "$NCU" --import $RS/ncu_$p.ncu-rep --csv --page raw > $RS/ncu_$p.csv 2> $RS/ncu_$p.csv.err
    say "smol ncu $p rc=$rc: $(grep -c . $RS/ncu_$p.csv) csv lines"
  done
  timeout 200 python3 gpu/gpu_step_profile.py --target $TS --draft $DS --time --json $RS/time.json > $RS/time.log 2>&1
  say "smol time rc=$?"
  python3 gpu/gpu_ncu_report.py $RS > $RS/report_smol.md 2>&1; say "smol report rc=$?"
  say "smol done" ;;
follow)
  end=$((SECONDS + ${2:-500}))
  while [ $SECONDS -lt $end ] && ! grep -q "all done\|rc=[1-9]" $W/progress.log; do sleep 10; done
  cat $W/progress.log; tail -n 2 $W/lcp_build.log
  [ -f $R/vk15/vk15_report.md ] && head -n 40 $R/vk15/vk15_report.md
  mkdir -p $OUT; cp $W/env.txt $OUT/ 2>/dev/null
  tar czf $OUT/r61.tgz --exclude='*.ncu-rep' -C $W r $(ls -d $W/rs 2>/dev/null | xargs -r basename) progress.log run.log lcp_build.log 2>/dev/null; ls -la $OUT ;;
keep)  # the CUDA build of 0001-0022 in 15 MiB parts (gpu_bench.sh restore's lcp.tar.xz.NN)
  mkdir -p $W/keep $OUT; rm -f $W/keep/*
  (cd /tmp/lcp_site && tar cf - --exclude='*.so' --exclude='*.so.0' llama_cpp llama_cpp_python-*.dist-info) \
    | xz -T0 -6 | split -b 15M -d - $W/keep/lcp.tar.xz.
  cp $W/keep/* $OUT/; ls -la $OUT ;;
esac
