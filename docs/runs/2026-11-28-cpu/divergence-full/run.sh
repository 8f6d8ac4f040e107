cd /work/main
OUTDIR=${OUTDIR:-/tmp/chainfull}; mkdir -p $OUTDIR
for s in mt-bench gsm8k humaneval; do
  .venv/bin/dflash-studio bench --target /root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    --draft resources/models/smollm2/drafter.gguf --suite $s --limit 200 --reps 1 --threads 2 --max-tokens 128 \
    --no-warmup --sweep verify=chain --sweep budget=7 --json $OUTDIR/$s.json > $OUTDIR/$s.txt 2>&1
  echo "$s rc=$?" >> $OUTDIR/done.log
done
echo ALL >> $OUTDIR/done.log
