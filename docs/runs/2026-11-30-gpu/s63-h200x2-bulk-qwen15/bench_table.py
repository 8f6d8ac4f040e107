"""The s63 bench rows (x AR in the same process, commit, step phases) from the saved JSON."""

import glob
import json
import sys

d = sys.argv[1] if len(sys.argv) > 1 else "."
print(
    "| side | suite | AR tok/s | chain 7: x AR (commit) | auto: x AR (commit) | chain 7 step: draft / inject / verify / other ms | lossless by the judge, chain / auto (mismatches) |"
)
print("|---|---|---|---|---|---|---|")
for side in ("1", "0"):
    for s in ("mt-bench", "gsm8k", "humaneval"):
        fs = glob.glob(f"{d}/bench-b{side}-{s}.json")
        if not fs:
            print(f"| {side} | {s} | not run (the machine's time ran out) | | | | |")
            continue
        rows = {r["id"]: r for r in json.load(open(fs[0]))["rows"]}
        ar, c, a = rows["ar"], rows["c0"], rows["c1"]
        ph = " / ".join(
            f"{c[k]:.3f}" for k in ("phase_draft_ms", "phase_inject_ms", "phase_verify_ms", "phase_other_ms")
        )
        lm = [len(r.get("lossless_mismatches") or []) for r in (c, a)]
        print(
            f"| {side} | {s} | {ar['avg_ts']:.1f} | {c['speedup']:.3f} ({c['mean_commit_len']:.2f}) | "
            f"{a['speedup']:.3f} ({a['mean_commit_len']:.2f}) | {ph} | {c['lossless']}/{a['lossless']} ({lm[0]}/{lm[1]}) |"
        )
