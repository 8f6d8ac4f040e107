# ran from the project root on the GPU machine as tmp_s46d.sh (tmp_cal.json: docs/runs/2026-11-27-gpu/s26-h200-addnorm-probe/m1/calibration.json)
# issue 28: p_min with the device's top-k on an H200: chosen on the validation split (modelled with the
# H200's calibration), then timed on the public sets, default (fast) verify, rows in one process
export PYTHONPATH=/tmp/lcp_site:/tmp/site:. DFLASH_FA_ALL_QUANTS=0 DFLASH_DATA_DIR=/tmp/dd4 PYTHONUNBUFFERED=1
mkdir -p $OUT/pm /tmp/dr; cp resources/models/smollm2/drafter.gguf /tmp/dr/d8.gguf
T=/tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf; D=/tmp/dr/d8.gguf
timeout ${T_VAL:-200} python3 benchmarks/bench_draft_cut.py --target $T --draft $D --table tmp_cal.json \
  --n ${NVAL:-6} --budgets 7,15 --p-min 0,0.1,0.2,0.3,0.4 --json $OUT/pm/val.json > $OUT/pm/val.txt 2>&1; echo "val rc=$?"; cat $OUT/pm/val.txt
PM=$(python3 -c "
import json,statistics as st
r=json.load(open('$OUT/pm/val.json'))['rows']
best=set()
for b in (7,15):
  ps=sorted({x['p_min'] for x in r})
  m={p:st.fmean(x['x_ar'] for x in r if x['budget']==b and x['p_min']==p) for p in ps}
  best.add(max(m,key=m.get)); print('budget',b,{p:round(v,3) for p,v in m.items()},file=open('$OUT/pm/choice.txt','a'))
print(','.join(str(p) for p in sorted(best|{0.0})))
"); echo "p_min chosen on validation: $PM"; cat $OUT/pm/choice.txt
for S in ${SUITES:-gsm8k humaneval mt-bench}; do
  timeout ${T_PUB:-130} python3 -m engine_bridge.cli bench --target $T --draft $D --suite $S --limit ${LIM:-30} --reps ${REPS:-2} \
    --max-tokens 128 --sweep budget=7,15 --sweep p_min=$PM --json $OUT/pm/$S.json --md $OUT/pm/$S.md > $OUT/pm/$S.log 2>&1
  echo "$S rc=$?"; grep -A12 "## Results" $OUT/pm/$S.md | cut -c1-160
done
cd $OUT && tar czf pm.tgz pm && rm -rf pm
