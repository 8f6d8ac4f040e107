"""Would cutting a chain where the drafter is unsure pay? Replayed under another machine's costs (issue 28).

A chain step verifies every draft of its budget, although the drafter often says how sure it is: a
draft whose probability is low is seldom accepted, and each verified row costs (on an H200 ~0.05 ms,
chain 1 -> 7 is 1.78 -> 2.10 ms a step). ``GenerationSettings.p_min`` stops a chain's drafts at the
first one below it, so the verify has fewer rows. Greedy output does not change (the target still
picks every token); what changes is how many rows each step verifies and how many it commits.

This runs the engine here with each ``--p-min`` (the drafts and acceptance are this engine's: the same
models, whole drafter blocks as on a GPU unless ``DFLASH_DRAFT_FULL_BLOCK`` says otherwise) and costs
every step with a calibration measured elsewhere (``--table``: a chain step that verified k drafts
costs the table's chain-k step), which gives a modelled x AR against the same runs' fixed budget.
Prompts: the validation split of the training sources (choices are made there) or a public suite
(``--public``, for reporting only).

    python benchmarks/bench_draft_cut.py --target T.gguf --draft D.gguf --table CAL.json \\
        [--n 6] [--budgets 7,15] [--p-min 0,0.1,0.2,0.3,0.5] [--public] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_auto_trace import prompts  # noqa: E402  (the same prompts as auto's replay)
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import calibration, drafter  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402


def modelled(steps, table: calibration.CostTable) -> tuple[float, float, float]:
    """(tokens per AR-step unit, mean commit, mean drafts verified) of one run's steps."""
    tokens = sum(r.committed for r in steps)
    # a step cut to no draft still paid the drafter: costed as chain 1, a verify of one row more
    cost = sum(table.cost("chain", max(1, r.drafted)) or 0.0 for r in steps)
    n = max(1, len(steps))
    return tokens / cost, tokens / n, sum(r.drafted for r in steps) / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--table", required=True, help="a calibration JSON measured on the machine to model")
    ap.add_argument("--n", type=int, default=6, help="prompts per category")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--budgets", default="7,15")
    ap.add_argument("--p-min", default="0,0.1,0.2,0.3,0.5")
    ap.add_argument("--public", action="store_true", help="MT-Bench, GSM8K test, HumanEval (reporting only)")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    os.environ.setdefault(drafter.FULL_BLOCK_ENV, "1")  # a GPU's whole blocks: its drafts, not its costs
    table = calibration.CostTable.from_json(json.loads(Path(a.table).read_text()))
    # exact: every verify width rounds alike, so a cut changes no token and "same tokens" checks it
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=2048, exact=True)
    if a.threads:
        cfg = cfg.replace(n_threads=a.threads)
    eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    budgets = [int(x) for x in a.budgets.split(",")]
    cuts = [float(x) for x in a.p_min.split(",")]
    out: dict = {"table": a.table, "public": a.public, "rows": []}
    try:
        print("| category | budget | p_min | commit | drafts verified | modelled x AR | vs no cut | same tokens |")
        print("|---|---|---|---|---|---|---|---|")
        for cat in ("chat", "math", "code"):
            texts = prompts(eng, cat, a.n, a.public)
            for b in budgets:
                base_tokens: list[list[int]] = []
                base = None
                for p in cuts:
                    s = GenerationSettings(mode="chain", budget=b, max_tokens=a.tokens, p_min=p)
                    runs = []
                    same = True
                    for i, t in enumerate(texts):
                        eng.reset()
                        res = eng.generate(eng.tokenize_chat([{"role": "user", "content": t}]), s)
                        runs.append(modelled(res.steps, table))
                        if p == cuts[0]:
                            base_tokens.append(list(res.tokens))
                        else:
                            same = same and list(res.tokens) == base_tokens[i]
                    x = statistics.fmean(r[0] for r in runs)
                    base = x if base is None else base
                    row = {
                        "category": cat,
                        "budget": b,
                        "p_min": p,
                        "x_ar": round(x, 4),
                        "commit": round(statistics.fmean(r[1] for r in runs), 3),
                        "drafted": round(statistics.fmean(r[2] for r in runs), 3),
                        "vs_first": round(x / base, 4),
                        "same_tokens": same,
                    }
                    out["rows"].append(row)
                    print(
                        f"| {cat} | {b} | {p:g} | {row['commit']:.2f} | {row['drafted']:.2f} | {x:.3f} | "
                        f"{x / base:.3f} | {same} |",
                        flush=True,
                    )
    finally:
        eng.close()
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
