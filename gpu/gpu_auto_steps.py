"""Where auto's time goes against chain 7's, step by step, in one process (issue 29).

On an H200 auto ran the full HumanEval set at 0.94 of chain 7's tok/s (docs/benchmarks.md, "Auto on
the full public sets, in blocks of prompts") while committing nearly as much: its steps cost more
than their kinds do alone. This runs chain 7 and auto on the same prompts, alternating prompt by
prompt (a drift of the machine's speed falls on both), and keeps a ledger of every step: its kind
(AR, or a speculative budget; the first one after AR steps, a probe, a change of budget), its wall
time, whether the target reused its graph, and the time between steps. It then prices auto's steps
at what the same kinds cost in their steady state (chain 7's steps that reused their graph, auto's
own AR steps between AR steps) and says where the rest went.

Usage (GPU machine, engine at /tmp/lcp_site): PYTHONPATH=/tmp/lcp_site:/tmp/site:. python3
gpu/gpu_auto_steps.py --target T --draft D [--suite humaneval] [--prompts 40] [--rounds 2]
[--max-tokens 128] [--gpu-layers -1] [--json OUT.json]; `--from OUT.json` prints a saved run's ledger.
A dry run anywhere: --table CAL.json gives auto another machine's cost table (keyed to this engine),
so that it chooses as it did there (e.g. the H200's on a CPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine_bridge.bench.suites import load_suite  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import auto_mode, calibration  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

_CHOICES: list[tuple[str, int, bool]] = []  # (mode, budget, probing) of each auto step, in order


def _ledger_auto_steps() -> None:
    """Records the mode and budget each auto step ran (the step records do not carry them)."""
    step = auto_mode.AutoGeneration._auto_step

    def recorded(self, last, t0):
        n = len(self.steps)
        out = step(self, last, t0)
        if len(self.steps) > n:
            _CHOICES.append((self.mode, self.budget, bool(getattr(self.policy, "probing", False))))
        return out

    auto_mode.AutoGeneration._auto_step = recorded


def run(eng, text: str, mode: str, max_tokens: int) -> dict:
    """One greedy generation; each step's record with the target's graph reuse at its end."""
    reuses = []
    ctx = eng.target_ctx

    def on_step(rec):
        reuses.append(ctx.graph_reuses())

    _CHOICES.clear()
    r0 = ctx.graph_reuses()
    eng.reset()
    res = eng.generate(text, GenerationSettings(mode=mode, budget=7, max_tokens=max_tokens), on_step=on_step)
    steps = []
    prev_reuse = r0
    choices = list(_CHOICES) if mode == "auto" else [("chain", 7, False)] * len(res.steps)
    for rec, reuse, ch in zip(res.steps, reuses, choices):
        steps.append(
            {
                "mode": ch[0],
                "budget": ch[1],
                "probe": ch[2],
                "drafted": rec.drafted,
                "committed": rec.committed,
                "wall_ms": 1e3 * rec.wall,
                "inject_ms": 1e3 * rec.t_inject,
                "verify_ms": 1e3 * rec.t_verify,
                "draft_ms": 1e3 * rec.t_draft,
                "reused": reuse - prev_reuse,
            }
        )
        prev_reuse = reuse
    s = res.summary
    return {
        "mode": mode,
        "n_gen": s.n_generated,
        "t_generate_ms": 1e3 * s.t_generate,
        "outside_ms": 1e3 * (s.t_generate - sum(x.wall for x in res.steps)),
        "steps": steps,
    }


def kind_of(step: dict, prev: dict | None, prev_spec: dict | None) -> str:
    if step["mode"] == "ar":
        return "ar, after a speculative step" if prev is not None and prev["mode"] != "ar" else "ar"
    if step["probe"]:
        return "probe"
    if prev is not None and prev["mode"] == "ar":
        return "speculative, first after AR"
    if prev_spec is not None and (prev_spec["mode"], prev_spec["budget"]) != (step["mode"], step["budget"]):
        return "speculative, budget changed"
    return "speculative"


def ledger(runs: list[dict]) -> dict:
    chain = [x for r in runs if r["mode"] == "chain" for x in r["steps"][1:-1]]  # first and last: not steady
    steady_chain = [x["wall_ms"] for x in chain if x["reused"] and x["drafted"] == 7]
    chain_ms = statistics.mean(steady_chain)
    auto_runs = [r for r in runs if r["mode"] == "auto"]
    rows: dict[str, list] = defaultdict(list)
    for r in auto_runs:
        prev = prev_spec = None
        for i, x in enumerate(r["steps"]):
            k = "first token (the prefill's)" if i == 0 else "first step" if i == 1 else kind_of(x, prev, prev_spec)
            rows[k].append(x)
            prev = x
            if x["mode"] != "ar":
                prev_spec = x
    steady_ar = [x["wall_ms"] for x in rows.get("ar", []) if x["reused"]]  # (.get: no empty "ar" kind)
    ar_ms = statistics.mean(steady_ar) if steady_ar else 0.0
    out = {"chain7_steady_ms": chain_ms, "auto_ar_steady_ms": ar_ms, "kinds": {}}
    for k, xs in sorted(rows.items()):
        walls = [x["wall_ms"] for x in xs]
        nominal = ar_ms if (k.startswith("ar") or not xs) else chain_ms
        out["kinds"][k] = {
            "steps": len(xs),
            "committed": sum(x["committed"] for x in xs),
            "ms": sum(walls),
            "mean_ms": statistics.mean(walls),
            "reused": sum(1 for x in xs if x["reused"]) / len(xs),
            "inject_ms": statistics.mean(x["inject_ms"] for x in xs),
            "verify_ms": statistics.mean(x["verify_ms"] for x in xs),
            "draft_ms": statistics.mean(x["draft_ms"] for x in xs),
            "over_steady_ms": sum(walls) - nominal * len(xs),
        }
    for mode in ("chain", "auto"):
        rs = [r for r in runs if r["mode"] == mode]
        out[mode] = {
            "runs": len(rs),
            "tokens": sum(r["n_gen"] for r in rs),
            "ms": sum(r["t_generate_ms"] for r in rs),
            "outside_ms": sum(r["outside_ms"] for r in rs),
            "steps": sum(len(r["steps"]) for r in rs),
        }
    # what a request's first steps commit (docs/benchmarks.md, "A request's first block was never
    # trained"). Step 0 is the first token, taken from the prefill since 2026-11-29 (no decode): the
    # first speculative step is step 1, and its block opens at the first response token
    chain_runs = [r for r in runs if r["mode"] == "chain" and len(r["steps"]) > 1]
    out["chain7_step_commits"] = {
        str(i): statistics.mean(r["steps"][i]["committed"] for r in chain_runs if len(r["steps"]) > i)
        for i in range(1, 4)
        if any(len(r["steps"]) > i for r in chain_runs)
    }
    out["chain7_first_step_one_token"] = sum(1 for r in chain_runs if r["steps"][1]["committed"] <= 1)
    out["chain7_requests"] = len(chain_runs)
    return out


def report(runs: list[dict]) -> dict:
    """Prints the ledger of ``runs`` (as the JSON keeps them) and returns it."""
    led = ledger(runs)
    c, au = led["chain"], led["auto"]
    for mode, d in (("chain 7", c), ("auto", au)):
        print(
            f"{mode}: {d['tokens']} tokens in {d['ms'] / 1e3:.3f} s ({1e3 * d['tokens'] / d['ms']:.1f} tok/s), "
            f"{d['steps']} steps, outside the steps {d['outside_ms']:.1f} ms"
        )
    print(f"auto / chain 7 tok/s: {(au['tokens'] / au['ms']) / (c['tokens'] / c['ms']):.3f}")
    print(
        f"steady state: chain-7 step {led['chain7_steady_ms']:.3f} ms (graph reused), "
        f"auto's AR step {led['auto_ar_steady_ms']:.3f} ms"
    )
    firsts = ", ".join(f"step {k}: {v:.2f}" for k, v in led["chain7_step_commits"].items())
    print(
        f"chain 7, tokens committed by a request's first steps: {firsts} (the first step committed one "
        f"token in {led['chain7_first_step_one_token']} of {led['chain7_requests']} requests)"
    )
    print(
        "| auto's steps | steps | committed | ms | mean ms | graph reused | inject / verify / draft ms | ms over the steady kind |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for k, d in led["kinds"].items():
        print(
            f"| {k} | {d['steps']} | {d['committed']} | {d['ms']:.1f} | {d['mean_ms']:.3f} | {d['reused']:.2f} | "
            f"{d['inject_ms']:.3f} / {d['verify_ms']:.3f} / {d['draft_ms']:.3f} | {d['over_steady_ms']:.1f} |"
        )
    return led


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--from", dest="from_json", default=None, help="print the ledger of a saved --json instead")
    ap.add_argument("--suite", default="humaneval")
    ap.add_argument("--prompts", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--gpu-layers", type=int, default=-1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="write every step of every run here")
    ap.add_argument("--table", default=None, help="a calibration JSON for auto (another machine's)")
    a = ap.parse_args()
    if a.from_json:
        report(json.loads(Path(a.from_json).read_text())["runs"])
        return 0
    if not (a.target and a.draft):
        ap.error("--target and --draft are required (or --from a saved --json)")
    _ledger_auto_steps()
    cfg = EngineConfig(target=a.target, draft=a.draft, n_gpu_layers=a.gpu_layers, n_threads=a.threads)
    runs = []
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        if a.table:
            table = calibration.CostTable.from_json(json.loads(Path(a.table).read_text()))
            table.key = calibration.calibration_key(eng.config)  # this engine's: auto reads it as its own
            eng.calibration = table
        texts = [p.render(eng.format_chat) for p in load_suite(a.suite).prompts[: a.prompts]]
        for mode in ("chain", "auto"):  # warm-up (auto: its calibration, when none is cached)
            run(eng, texts[0], mode, a.max_tokens)
        for rnd in range(a.rounds):
            for text in texts:
                for mode in ("chain", "auto") if rnd % 2 == 0 else ("auto", "chain"):
                    runs.append(run(eng, text, mode, a.max_tokens))
    print(f"{a.suite}, first {len(texts)} prompts, {a.rounds} rounds, {a.max_tokens} tokens, modes alternating")
    led = report(runs)
    if a.json:
        Path(a.json).write_text(json.dumps({"ledger": led, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
