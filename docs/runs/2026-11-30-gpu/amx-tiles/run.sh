#!/usr/bin/env bash
# Patch 0021 (the AMX tile path made safe) on the GPU host's Xeon, CPU only: the tile path
# (DFLASH_AMX_TILES=1) against patch 0020's one-row kernels for every row (=0), alternating, one
# process each: calibration step costs at a 15- and a 252-token context, and prefill times.
#   call 1 (carry .gpu-bundle): prep  (site-packages, drafter, the engine built with 0001-0021, in the background)
#   calls 2-3 (the drafter hidden; carry .gpu-carry/s48/MANIFEST and one part each): bash gpu/gpu_carry.sh take s48
#   call 3 also: bash docs/runs/2026-11-30-gpu/amx-tiles/run.sh measure   (in the background)
#   then: status, pack
set -u
W=/tmp/amx; H=docs/runs/2026-11-30-gpu/amx-tiles; mkdir -p $W /tmp/t
case "$1" in
  prep)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu-bundle/whl/*.whl
    cp resources/models/smollm2/drafter.gguf /tmp/t/drafter.gguf
    cp $H/prefill.py docs/runs/2026-11-30-cpu/cpu-build/calib_ctx.py $W/
    rm -rf $W/lcp; tar xzf .gpu-bundle/lcp-*.tgz -C $W
    { grep -m1 'model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; nproc; } > $W/cpu.txt
    setsid bash -c "SECONDS=0; PYTHONPATH=/tmp/site DFLASH_BACKEND=cpu DFLASH_WHEEL_CACHE=$W/wc \
      bash packaging/build_engine.sh --python python3 --source $W/lcp --wheels .gpu-bundle/whl --target /tmp/lcp_t --jobs 14 \
      > $W/build.log 2>&1; echo \"done rc=\$? secs=\$SECONDS\" >> $W/build.log" < /dev/null > /dev/null 2>&1 &
    cut -c1-200 $W/cpu.txt ;;
  measure)
    setsid bash -c "bash $0 measurefg > $W/measure.log 2>&1; echo done >> $W/measure.log" < /dev/null > /dev/null 2>&1 & ;;
  measurefg)
    until grep -q "^done rc=" $W/build.log 2>/dev/null; do sleep 3; done
    export TARGET=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf DRAFT=/tmp/t/drafter.gguf PYTHONPATH=/tmp/lcp_t:/tmp/site:.
    for th in 16 8; do for tiles in 1 0 1 0; do
      echo "## threads $th tiles $tiles"
      THREADS=$th DFLASH_AMX_TILES=$tiles python3 $W/prefill.py 2>&1 | grep tokens
      THREADS=$th DFLASH_AMX_TILES=$tiles python3 $W/calib_ctx.py 2>&1 | grep -E "^(short|long)"
    done; done ;;
  status) tail -n 1 $W/build.log 2>/dev/null; tail -n 6 $W/measure.log 2>/dev/null ;;
  pack) mkdir -p $OUT; cp $W/cpu.txt $W/build.log $W/measure.log $OUT/ 2>/dev/null; ls $OUT ;;
esac
