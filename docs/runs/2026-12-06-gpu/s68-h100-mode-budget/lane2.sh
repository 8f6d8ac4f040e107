# The sitting's second call (s68, 2026-12-06, same H100 and build, right after run68.sh's lane):
# chain, tree and auto at budget 5 in one run per suite, to check chain 5 against a second AR run.
# HumanEval ran past its 200 s limit (rc 124) and left no report; MT-Bench and GSM8K are in r2/.
export PYTHONPATH=/tmp/lcp_site:/tmp/site:$(pwd) PYTHONUNBUFFERED=1 DFLASH_FA_ALL_QUANTS=0; R=/tmp/w/r2; mkdir -p $R $OUT
for s in "mt-bench 80" "gsm8k 100" "humaneval 164"; do set -- $s
  timeout 200 python3 -m engine_bridge.cli bench --target /tmp/t/SmolLM2-135M-Instruct.Q4_1.gguf --draft /tmp/t/drafter.gguf \
    --suite $1 --limit $2 --reps 1 --round-prompts 10 --max-tokens 128 --sweep verify=chain,tree,auto --sweep budget=5 \
    --out $R/bench-b5-$1.json --md $R/bench-b5-$1.md > $R/bench-b5-$1.log 2>&1
done; tar czf $OUT/r68b.tgz -C /tmp/w r2
