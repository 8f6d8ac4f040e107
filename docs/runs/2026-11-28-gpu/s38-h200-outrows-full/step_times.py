"""Per row and rep of the H200 full-set run: wall per step (t_generate / n_steps), tokens per step,
the row's phase sum per step, and the difference (time outside the step records), from the bench
JSON in real-chain7-auto-full.tgz.

    python docs/runs/2026-11-28-gpu/s38-h200-outrows-full/step_times.py
"""

import json
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PHASES = ("phase_draft_ms", "phase_inject_ms", "phase_verify_ms", "phase_accept_ms", "phase_other_ms")

with tarfile.open(HERE / "real-chain7-auto-full.tgz") as tar:
    for m in sorted(tar.getmembers(), key=lambda m: m.name):
        f = tar.extractfile(m) if m.name.endswith(".json") else None
        if f is None:
            continue
        d = json.load(f)
        suite = d["settings"]["suite"]["name"]
        for row in d["rows"]:
            phases = sum(row[p] or 0.0 for p in PHASES)
            for rep in sorted({r["rep"] for r in d["runs"]}):
                rs = [r for r in d["runs"] if r["row_id"] == row["id"] and r["rep"] == rep]
                steps = sum(r["n_steps"] for r in rs)
                ms = 1000 * sum(r["t_generate"] for r in rs) / steps
                tok = sum(r["n_gen"] for r in rs) / steps
                print(
                    f"{suite} {row['label']} rep {rep}: {ms:.3f} ms a step, {tok:.3f} tokens a step, "
                    f"phases {phases:.3f} ms (the row's mean), outside {ms - phases:+.3f} ms"
                )
