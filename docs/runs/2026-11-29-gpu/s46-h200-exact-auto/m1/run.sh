# ran from the project root on the GPU machine as tmp_*.sh (tmp_ab.sh was ../../s45-h200-exact-chat/run_ab.sh, unchanged)
# issue 29: the exact auto chat with the follow-up probe on (default), after the wide-batch fix (one H200)
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd PYTHONUNBUFFERED=1
mkdir -p $OUT /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
SIDES="${SIDES:-default}" ROUNDS=2 T_AB=${T_AB:-200} bash tmp_ab.sh > /tmp/ab.log 2>&1; grep -A9 "^side" /tmp/ab.log | grep "side\|0-1024\|1024-\|2048-\|4096-\|whole\|identical\|part"
cd /tmp/ab && tar czf $OUT/ab.tgz auto-exact-rp-* && rm -rf $OUT/ab
