# the paired table of docs/benchmarks.md: tar xzf bench-json.tgz && python3 paired.py mt-bench gsm8k humaneval
import json
import sys
import statistics as st

for s in sys.argv[1:]:
    d = json.load(open(f"{s}.json"))
    runs = d["runs"]
    by = {}
    for r in runs:
        by.setdefault((r["prompt_id"], r["rep"]), {})[r["row_id"]] = r
    rat = [v["c0"]["ts"] / v["ar"]["ts"] for v in by.values() if "c0" in v and "ar" in v]
    tok_ar = sum(v["ar"]["n_gen"] for v in by.values())
    t_ar = sum(v["ar"]["t_generate"] for v in by.values())
    tok_au = sum(v["c0"]["n_gen"] for v in by.values())
    t_au = sum(v["c0"]["t_generate"] for v in by.values())
    rows = {r["id"]: r for r in d["rows"]}
    au = rows["c0"]
    print(
        s,
        "pairs",
        len(rat),
        "median ratio %.3f" % st.median(rat),
        "mean %.3f" % st.mean(rat),
        "pooled %.3f" % ((tok_au / t_au) / (tok_ar / t_ar)),
        "AR %.1f auto %.1f" % (rows["ar"]["avg_ts"], au["avg_ts"]),
        "speedup %.3f [%.3f, %.3f]" % (au["speedup"], au["speedup_ci_lo"], au["speedup_ci_hi"]),
        "commit %.3f" % au["mean_commit_len"],
        "spec steps",
        sum(1 for v in by.values() if v["c0"]["draft_n"] > 0),
        "partings",
        sum(1 for v in by.values() if v["c0"].get("divergence")),
    )
