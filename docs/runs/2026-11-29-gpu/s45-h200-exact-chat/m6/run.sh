# ran from the project root on the GPU machine as tmp_*.sh (run_ab.sh was tmp_ab.sh; m4 kvdiff.py was tmp_kvdiff.py)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd PYTHONUNBUFFERED=1
mkdir -p $OUT /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
SIDES="default 0" ROUNDS=2 T_AB=150 bash tmp_ab.sh > /tmp/ab.log 2>&1; grep -A8 "^side" /tmp/ab.log | grep "side\|0-1024\|1024-\|2048-\|4096-\|whole\|identical"
cd /tmp/ab && tar czf $OUT/ab3.tgz auto-exact-rp-* && rm -rf $OUT/ab
