#!/usr/bin/env bash
# The calls of this sitting (nvidia-h200, 2026-11-30, after s61 on a fresh machine, 268 s of device time
# left): the CUDA build of 0001-0022 that s61 returned (.gpu-keep-s61, three 15 MiB parts) restored
# instead of a rebuild, the default pair carried (.gpu-carry/s48), then host_path.py twice with
# DFLASH_GRAPH_STATS=1 (host_path_1.log, host_path_2.log). It ran from gpu/tmp_x/ (docs/runs is hidden
# from the carried tree), with parents[2] for the project root.
#   call 1 (carry .gpu-keep-s61/lcp.tar.xz.00 and .01; the tree with the shipped drafter):
#     mkdir -p /tmp/keep /tmp/t && cp .gpu-keep-s61/lcp.tar.xz.0* /tmp/keep/ && cp resources/models/smollm2/drafter.gguf /tmp/t/drafter.gguf
#   call 2 (carry .gpu-keep-s61/lcp.tar.xz.02 and .gpu-bundle):
#     cp .gpu-keep-s61/lcp.tar.xz.02 /tmp/keep/ && BUNDLE=.gpu-bundle bash gpu/gpu_bench.sh restore /tmp/keep
#   calls 3-4 (carry .gpu-carry/s48/MANIFEST and one part each): bash gpu/gpu_carry.sh take s48
#   call 4, then:
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf
for r in 1 2; do
  DFLASH_GRAPH_STATS=1 timeout 100 python3 gpu/tmp_x/host_path.py $T /tmp/t/drafter.gguf > $OUT/host_path_$r.log 2>&1
done
