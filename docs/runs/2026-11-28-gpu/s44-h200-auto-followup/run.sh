# m4 (one H200): the engine restored from .gpu-keep-s42, the target's three parts carried, then:
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd
for v in 0 default; do
  if [ $v = 0 ]; then export DFLASH_AUTO_REQUEST_PROBE=0; else unset DFLASH_AUTO_REQUEST_PROBE; fi
  python3 benchmarks/bench_long_chat.py --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf --draft /tmp/dr/d8.gguf \
    --gpu-layers 99 --prompts mt-bench --mode auto --turns 30 --windows 512 --fast --ar --json auto-rp-$v.json > auto-rp-$v.txt
done
# (the first run measured auto's calibration in its first turn: 1.4 s of turn 1's wall)
