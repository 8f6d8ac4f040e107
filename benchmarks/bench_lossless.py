"""Every divergence from AR, classified against the measured drift bound (issue 29).

For each public prompt (MT-Bench, GSM8K test, HumanEval; the chat template, greedy): the target alone
(AR), then each speculative mode, on the same engine. A run that parts from AR is a near-tie when the
target's own top-2 gap at the first differing token is at most the bound measured for this device
and precision (benchmarks/bench_drift.py; ``--bound`` or ``--drift FILE``), and a bug otherwise.
With ``--exact``, a second engine with the exact verify (EngineConfig.exact, patch 0005) runs the
same prompts, interleaved prompt by prompt with the fast one, so their tok/s compare in one run
(``--no-fast``: the exact engine alone). On a GPU the exact verify needs patch 0016.

    python benchmarks/bench_lossless.py --per-suite 24 --tokens 96 --drift docs/runs/drift-cpu.json --exact \
        --json docs/runs/lossless-cpu.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

from engine_bridge.bench import drift
from engine_bridge.bench.suites import PUBLIC_SUITES, load_suite
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import near_tie
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

MODES = ("chain:15", "tree:15", "auto:15")


def _run(eng, toks, mode, budget, tokens):
    eng.reset()
    t = time.perf_counter()
    res = eng.generate(toks, GenerationSettings(mode=mode, budget=budget, max_tokens=tokens))
    return res.tokens, time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--per-suite", type=int, default=24, help="first N prompts of each public suite (0: all)")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--bound", type=float, help="the near-tie bound (default: --drift's)")
    ap.add_argument("--drift", help="a bench_drift.py JSON report: its bound")
    ap.add_argument("--exact", action="store_true", help="also run an exact-verify engine, interleaved")
    ap.add_argument("--no-fast", action="store_true", help="with --exact: the exact engine alone")
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--suites", default=",".join(PUBLIC_SUITES), help="which public suites (comma-separated)")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    bound = a.bound if a.bound is not None else (drift.load(a.drift).bound if a.drift else None)
    if bound is None:
        print("give --bound or --drift (measure it with benchmarks/bench_drift.py)", file=sys.stderr)
        return 2
    target, draft = a.target or registry_models.cached(), a.draft or smollm2_drafter()
    cfg = EngineConfig(target=target, draft=draft, n_ctx=2048, n_gpu_layers=a.gpu_layers, n_threads=a.threads)
    if a.no_fast and not a.exact:
        print("--no-fast needs --exact", file=sys.stderr)
        return 2
    engines = {} if a.no_fast else {"fast": Engine.load(cfg, preflight=PAIR_PREFLIGHT)}
    if a.exact:
        engines["exact"] = Engine.load(cfg.replace(exact=True), preflight=PAIR_PREFLIGHT)
    modes = [(m.split(":")[0], int(m.split(":")[1])) for m in a.modes.split(",")]
    table = defaultdict(
        lambda: {
            "prompts": 0,
            "identical": 0,
            "near_ties": 0,
            "bugs": 0,
            "bug_gaps": [],
            "gaps": [],
            "tokens": 0,
            "seconds": 0.0,
        }
    )
    for suite_name in a.suites.split(","):
        suite = load_suite(suite_name)
        prompts = suite.prompts if a.per_suite <= 0 else suite.prompts[: a.per_suite]
        for p in prompts:
            msgs = [{"role": r, "content": c} for r, c in p.messages] if p.messages else None
            for kind, eng in engines.items():
                toks = eng.tokenize_chat(msgs) if msgs else eng.tokenize(p.text)
                ar, t_ar = _run(eng, toks, "ar", 1, a.tokens)
                cell = table[(kind, suite_name, "ar")]
                cell["prompts"] += 1
                cell["identical"] += 1
                cell["tokens"] += len(ar)
                cell["seconds"] += t_ar
                for mode, budget in modes:
                    out, t = _run(eng, toks, mode, budget, a.tokens)
                    cell = table[(kind, suite_name, f"{mode} {budget}")]
                    cell["prompts"] += 1
                    cell["tokens"] += len(out)
                    cell["seconds"] += t
                    k = near_tie.first_divergence(ar, out)
                    if k is None:
                        cell["identical"] += 1
                        continue
                    # near_tie.parting reads AR's own margin at the parting, also where one run
                    # stopped first (the end token is a pick too); past the budget there is none:
                    # a run longer than max_tokens stays a bug
                    gap = near_tie.parting(eng, toks, ar, out, tolerance=bound).margin if k < a.tokens else None
                    cell["gaps"].append(None if gap is None else round(gap, 4))  # every parting: re-classifiable
                    if drift.classify(gap, bound) == "near-tie":
                        cell["near_ties"] += 1
                    else:
                        cell["bugs"] += 1
                        cell["bug_gaps"].append(None if gap is None else round(gap, 4))
            print(f"  {suite_name} {p.id}", file=sys.stderr, flush=True)
    for eng in engines.values():
        eng.close()
    rows = []
    for (kind, suite_name, mode), c in table.items():
        ar = table[(kind, suite_name, "ar")]
        tps = c["tokens"] / c["seconds"] if c["seconds"] else 0.0
        ar_tps = ar["tokens"] / ar["seconds"] if ar["seconds"] else 0.0
        fast = table.get(("fast", suite_name, mode)) if kind == "exact" else None
        rows.append(
            {
                "verify": kind,
                "suite": suite_name,
                "mode": mode,
                **{k: c[k] for k in ("prompts", "identical", "near_ties", "bugs", "bug_gaps", "gaps")},
                "tok_s": round(tps, 2),
                "x_ar": round(tps / ar_tps, 3) if ar_tps else None,
                "x_fast": round(tps / (fast["tokens"] / fast["seconds"]), 3) if fast and fast["seconds"] else None,
            }
        )
    print(f"bound {bound:.4g}; {a.tokens} tokens; first {a.per_suite or 'all'} prompts per suite")
    print("| verify | suite | mode | prompts | identical to AR | near-ties | bugs | tok/s | x AR | x fast |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['verify']} | {r['suite']} | {r['mode']} | {r['prompts']} | {r['identical']} | {r['near_ties']} | "
            f"{r['bugs']}{' ' + str(r['bug_gaps']) if r['bug_gaps'] else ''} | {r['tok_s']} | {r['x_ar']} | "
            f"{r['x_fast'] if r['x_fast'] is not None else '–'} |"
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bound": bound, "tokens": a.tokens, "per_suite": a.per_suite, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
