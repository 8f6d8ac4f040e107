#!/usr/bin/env bash
# On the GPU host, CPU only: the portable engine against the one built for this CPU's instruction sets
# (packaging/build_engine.sh, DFLASH_CPU_NATIVE=0 / default), the default pair, ngl 0, every core.
set -u
W=/tmp/cab; mkdir -p $W
case "$1" in
  build)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu-bundle/whl/*.whl
    mkdir -p /tmp/t && cp resources/models/smollm2/drafter.gguf /tmp/t/drafter.gguf
    rm -rf $W/lcp; tar xzf .gpu-bundle/lcp-*.tgz -C $W
    { grep -m1 'model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; nproc; } > $W/cpu.txt
    for side in portable isa; do
      n=1; [ $side = portable ] && n=0
      setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cpu DFLASH_CPU_NATIVE=$n DFLASH_WHEEL_CACHE=$W/wc-$side \
        bash packaging/build_engine.sh --python python3 --source $W/lcp --wheels .gpu-bundle/whl --target /tmp/lcp_$side --jobs 8 \
        > $W/build-$side.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/build-$side.log" < /dev/null > /dev/null 2>&1 &
    done
    cat $W/cpu.txt | cut -c1-300 ;;
  bench)
    setsid bash -c "bash tmp_cpu_ab.sh benchfg > $W/${R:-}bench.log 2>&1; echo done >> $W/${R:-}bench.log" < /dev/null > /dev/null 2>&1 & ;;
  benchfg)
    T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/t/drafter.gguf
    for s in mt-bench gsm8k humaneval; do for side in ${ORDER:-isa portable}; do
      PYTHONPATH=/tmp/lcp_$side:/tmp/site:. DFLASH_DATA_DIR=$W/data-$side python3 -m engine_bridge.cli bench --target $T \
        --draft $D --ngl 0 --suite $s --limit 10 --reps 2 --max-tokens 128 --sweep verify=chain,auto --sweep budget=7 \
        --round-prompts 10 --out $W/${R:-}$s-$side.json --quiet > $W/${R:-}$s-$side.txt 2>&1
      echo "$s $side rc=$? $(date -u +%T)"
    done; done ;;
  status)
    tail -n 2 $W/build-*.log 2>/dev/null; cat $W/bench.log 2>/dev/null; for s in isa portable; do
      PYTHONPATH=/tmp/lcp_$s:/tmp/site python3 -c "import llama_cpp; print('$s', llama_cpp.llama_print_system_info().decode())" 2>&1 | tail -1; done ;;
  pack)
    mkdir -p $OUT; tar czf $OUT/cpu_ab.tgz -C $W cpu.txt build-portable.log build-isa.log bench.log $(cd $W && ls *.json *.txt data-*/calibration/*.json 2>/dev/null) ;;
esac
