cd /work/main
OUTDIR=${OUTDIR:-/tmp/cpufull}; mkdir -p $OUTDIR
for s in mt-bench gsm8k humaneval; do
  DFLASH_DATA_DIR=/tmp/cpumode/data .venv/bin/dflash-studio bench --target /root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    --draft resources/models/smollm2/drafter.gguf --suite $s --limit 200 --reps 2 --threads 2 --max-tokens 128 \
    --sweep verify=auto --sweep budget=7 --json $OUTDIR/$s.json > $OUTDIR/$s.txt 2>&1
  echo "$s rc=$?" >> $OUTDIR/done.log
done
echo ALL >> $OUTDIR/done.log
