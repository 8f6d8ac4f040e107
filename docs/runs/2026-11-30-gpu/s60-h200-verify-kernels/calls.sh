#!/usr/bin/env bash
# The commands of this sitting after run.sh's (nvidia-h200, 2026-11-30, one machine, calls back to
# back): call A after `run.sh follow`, then B and C. Each side its own process; PYTHONPATH as run.sh.
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/t/drafter.gguf
case ${1:-} in
A)  # "a" against "0" at three KV lengths, then the bench in two rounds (r22b.tgz: r2/)
  R=/tmp/w/r2; mkdir -p $R/real
  for c in 200 500 1000; do
    DFLASH_VERIFY_VEC_KV=100000 timeout 200 python3 gpu/gpu_fuse_ab.py --env DFLASH_VERIFY_KERNELS --tag vkc$c \
      --sides 0,a --rounds 2 --context $c --no-eq --target $T --draft $D --out $R/vkc$c > $R/vkc$c.log 2>&1
  done
  for rd in 1 2; do for suite in mt-bench gsm8k humaneval; do for side in 0 a; do
    timeout 150 env DFLASH_DATA_DIR=/tmp/dd2_$side DFLASH_VERIFY_KERNELS=$side DFLASH_VERIFY_VEC_KV=512 \
      python3 -m engine_bridge.cli bench --target $T --draft $D --suite $suite --limit 30 --reps 1 --round-prompts 10 \
      --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 --json $R/real/$suite-r$rd-$side.json > $R/real/$suite-r$rd-$side.txt 2>&1
  done; done; done ;;
B|C)  # the full sets, "0" then "a" (B: MT-Bench, r22c.tgz: r3/; C: GSM8K and HumanEval, r22d.tgz: r4/,
      # the call's 480 s ran out during HumanEval's "a" side)
  R=/tmp/w/r$([ $1 = B ] && echo 3 || echo 4)
  for suite in $([ $1 = B ] && echo mt-bench || echo gsm8k humaneval); do for side in 0 a; do
    timeout 250 env DFLASH_DATA_DIR=/tmp/dd${R#/tmp/w/r}_$side DFLASH_VERIFY_KERNELS=$side DFLASH_VERIFY_VEC_KV=512 \
      python3 -m engine_bridge.cli bench --target $T --draft $D --suite $suite --limit 200 --reps 1 --round-prompts 10 \
      --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 --json $R/$suite-full-$side.json > $R/$suite-full-$side.txt 2>&1
  done; done ;;
esac
