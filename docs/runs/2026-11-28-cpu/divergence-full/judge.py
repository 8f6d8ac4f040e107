# the divergence table of docs/benchmarks.md ("Divergences on the full public sets on this CPU"):
# python3 judge.py mt-bench.json gsm8k.json humaneval.json mt-bench-tree15.json
import json
import statistics as st
import sys

for f in sys.argv[1:]:
    d = json.load(open(f))
    for row in d["rows"]:
        if row["id"] == "ar":
            continue
        runs = [r for r in d["runs"] if r["row_id"] == row["id"]]
        parted = [r["divergence"] for r in runs if r.get("divergence")]
        near = [p for p in parted if p.get("near_tie")]
        under = [p for p in near if (p.get("margin") or 0) <= p.get("tolerance", 0.1)]
        margins = [p.get("margin") or 0 for p in parted]
        print(
            f"{f}: {row['label']}: runs {len(runs)}, identical {len(runs) - len(parted)}, parted {len(parted)},"
            f" near-ties {len(near)} (under tolerance {len(under)}), not near-ties {len(parted) - len(near)},"
            f" max margin {max(margins) if margins else 0:.3f}, median {st.median(margins) if margins else 0:.3f},"
            f" x AR {row['speedup']:.3f}, commit {row['mean_commit_len']:.2f}"
        )
