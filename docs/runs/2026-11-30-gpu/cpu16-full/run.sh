#!/usr/bin/env bash
# The default pair on the GPU host's 16 Xeon cores, CPU only (the engine built there for its instruction
# sets, patches 0001-0021): AR, chain 7 and auto 7 on the full public sets (MT-Bench 80, GSM8K test 100,
# HumanEval 164), one rep, 128 tokens, blocks of 10 prompts (2026-11-30).
#   call 1 (carry .gpu-bundle): prep; calls 2-3 (drafter hidden; MANIFEST + one part): bash gpu/gpu_carry.sh take s48
#   then: bench (background), status (polls), pack
set -u
W=/tmp/full; H=${H:-docs/runs/2026-11-30-gpu/cpu16-full}; mkdir -p $W /tmp/t
case "$1" in
  prep)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu-bundle/whl/*.whl
    cp resources/models/smollm2/drafter.gguf /tmp/t/drafter.gguf
    rm -rf $W/lcp; tar xzf .gpu-bundle/lcp-*.tgz -C $W
    { grep -m1 'model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; nproc; } > $W/cpu.txt
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cpu DFLASH_WHEEL_CACHE=$W/wc \
      bash packaging/build_engine.sh --python python3 --source $W/lcp --wheels .gpu-bundle/whl --target /tmp/lcp_isa --jobs 14 \
      > $W/build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/build.log" < /dev/null > /dev/null 2>&1 &
    nproc ;;
  bench)
    setsid bash -c "bash $H/run.sh benchfg > $W/bench.log 2>&1; echo finished >> $W/bench.log" < /dev/null > /dev/null 2>&1 & ;;
  benchfg)
    until grep -q "^done rc=" $W/build.log 2>/dev/null; do sleep 3; done
    T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/t/drafter.gguf
    for s in gsm8k humaneval mt-bench; do
      PYTHONPATH=/tmp/lcp_isa:/tmp/site:. DFLASH_DATA_DIR=$W/data python3 -m engine_bridge.cli bench --target $T --draft $D \
        --ngl 0 --suite $s --limit 200 --reps 1 --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 \
        --round-prompts 10 --out $W/full-$s.json --quiet > $W/full-$s.txt 2>&1
      echo "$s rc=$? $(date -u +%T)"
    done ;;
  status) tail -n 1 $W/build.log 2>/dev/null; cat $W/bench.log 2>/dev/null ;;
  pack) mkdir -p $OUT; tar czf $OUT/full16.tgz -C $W cpu.txt build.log bench.log $(cd $W && ls full-*.json full-*.txt data/calibration/*.json 2>/dev/null); ls -la $OUT ;;
esac
