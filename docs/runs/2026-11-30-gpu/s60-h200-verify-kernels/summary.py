"""The end-to-end figures of docs/benchmarks.md, "Vector attention for a short verify (patch 0022)",
printed again from the bench JSONs in this folder's r22b.tgz (r2/real: first 30 per suite, two
rounds), r22c.tgz (r3: full MT-Bench) and r22d.tgz (r4: full GSM8K and HumanEval): per suite, round
and side ("0" upstream, "a" the vector attention) chain 7 (c0) and auto (c1) x AR, commit per step
and the chain-7 verify phase; the a / 0 ratios; and the runs that parted from AR with the judge's calls.

Usage: python docs/runs/2026-11-30-gpu/s60-h200-verify-kernels/summary.py
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = (
    ("r22b.tgz", "r2/real/{suite}-r{rd}-{side}.json", ("mt-bench", "gsm8k", "humaneval"), (1, 2), "first 30"),
    ("r22c.tgz", "r3/mt-full-{side}.json", ("mt-bench",), (1,), "all"),
    ("r22d.tgz", "r4/{suite}-full-{side}.json", ("gsm8k", "humaneval"), (1,), "all"),
)


def load(tgz: str, name: str) -> dict | None:
    with tarfile.open(HERE / tgz) as tf:
        try:
            return json.load(tf.extractfile(name))
        except KeyError:  # the full HumanEval's "a" side did not finish
            return None


def rows(doc: dict) -> dict:
    return {r["id"]: r for r in doc["rows"]}


def main() -> None:
    parted = {"0": [0, 0, 0, 0.0], "a": [0, 0, 0, 0.0]}  # runs, parted, near-ties, largest margin
    ups = {"c0": [0, 0], "c1": [0, 0]}
    ratios = []
    print("| suite | round | chain 7: 0, a (commit) | verify ms 0 -> a | auto: 0, a |")
    print("|---|---|---|---|---|")
    for tgz, pat, suites, rounds, label in SETS:
        for suite in suites:
            for rd in rounds:
                docs = {s: load(tgz, pat.format(suite=suite, rd=rd, side=s)) for s in ("0", "a")}
                for side, doc in docs.items():
                    if doc is None:
                        continue
                    for run in doc["runs"]:
                        if run["row_id"] in ("c0", "c1"):
                            p = parted[side]
                            p[0] += 1
                            div = run.get("divergence")
                            if div:
                                p[1] += 1
                                p[2] += bool(div.get("near_tie"))
                                p[3] = max(p[3], div.get("margin") or 0.0)
                r = {s: rows(d) for s, d in docs.items() if d is not None}
                cells = []
                for row in ("c0", "c1"):
                    commit = (lambda s: f" ({r[s][row]['mean_commit_len']:.2f})") if row == "c0" else (lambda s: "")
                    got = [f"{r[s][row]['speedup']:.3f}{commit(s)}" if s in r else "-" for s in ("0", "a")]
                    cells.append(", ".join(got))
                    if len(r) == 2:
                        a, o = r["a"][row]["speedup"], r["0"][row]["speedup"]
                        ups[row][0] += a > o
                        ups[row][1] += 1
                        if row == "c0":
                            ratios.append(a / o)
                verify = " -> ".join(f"{r[s]['c0']['phase_verify_ms']:.3f}" for s in ("0", "a") if s in r)
                print(f"| {suite}, {label} | {rd} | {cells[0]} | {verify} | {cells[1]} |")
    print(f"\nchain 7 higher with a: {ups['c0'][0]} of {ups['c0'][1]}, a / 0 {min(ratios):.3f}-{max(ratios):.3f}")
    print(f"auto higher with a: {ups['c1'][0]} of {ups['c1'][1]}")
    for side, (n, k, nt, mx) in parted.items():
        print(f"side {side}: {k} of {n} chain-7 and auto runs parted from AR, {nt} near-ties, largest margin {mx:.2f}")


if __name__ == "__main__":
    main()
