cd /work/main
OUTDIR=${OUTDIR:-/tmp/chainfull}
while ! grep -q ALL $OUTDIR/done.log 2>/dev/null; do sleep 10; done
.venv/bin/dflash-studio bench --target /root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    --draft resources/models/smollm2/drafter.gguf --suite mt-bench --limit 200 --reps 1 --threads 2 --max-tokens 128 \
    --no-warmup --sweep verify=tree --sweep budget=15 --json $OUTDIR/mt-bench-tree15.json > $OUTDIR/mt-bench-tree15.txt 2>&1
echo "tree rc=$?" >> $OUTDIR/done.log
