# docs/benchmarks.md, "One decode for the inject and the block": extract A-*.tgz into A/, B-*.tgz into B/
# and C-*.tgz into C/ beside this file, then python3 table.py (> table.txt)
import json
import glob


def load(base):
    out = {}
    for f in glob.glob(f"{base}/*.json"):
        n = f.split("/")[-1][:-5]
        suite, rest = n.rsplit("-r", 1)
        rnd, side = rest.split("_", 1)
        d = json.load(open(f))
        for r in d["rows"]:
            if r["id"] == "ar":
                continue
            b = r["budget"]
            out[(suite, b, int(rnd), side)] = (
                r["speedup"],
                r["phase_draft_ms"] + r["phase_inject_ms"],
                r["phase_draft_ms"],
                r["phase_inject_ms"],
                r["mean_commit_len"],
            )
    return out


for name, base in [("A", "A/r/real"), ("B", "B/r/real"), ("C", "C/r/real")]:
    o = load(base)
    print("sitting", name)
    for suite in ("mt-bench", "gsm8k", "humaneval"):
        for b in (7, 15):
            cells = []
            for rnd in (1, 2):
                if (suite, b, rnd, "on") in o and (suite, b, rnd, "merge0") in o:
                    on = o[(suite, b, rnd, "on")]
                    off = o[(suite, b, rnd, "merge0")]
                    cells.append(
                        f"{on[0]:.3f} / {off[0]:.3f} ; d+i {on[1]:.3f} / {off[1]:.3f} (d {on[2]:.3f}/{off[2]:.3f}, i {on[3]:.3f}/{off[3]:.3f})"
                    )
            print(f"  {suite} chain {b}: " + " || ".join(cells))
    ons = [v for k, v in o.items() if k[3] == "on" and (k[0], k[1], k[2], "merge0") in o]
    offs = [o[(k[0], k[1], k[2], "merge0")] for k, v in o.items() if k[3] == "on" and (k[0], k[1], k[2], "merge0") in o]
    import statistics as st

    print(
        "  n",
        len(ons),
        "mean d+i on",
        round(st.mean(x[1] for x in ons), 3),
        "off",
        round(st.mean(x[1] for x in offs), 3),
        "mean xAR on",
        round(st.mean(x[0] for x in ons), 3),
        "off",
        round(st.mean(x[0] for x in offs), 3),
        "on faster in",
        sum(a[0] > b[0] for a, b in zip(ons, offs)),
    )
