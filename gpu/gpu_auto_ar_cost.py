"""What an AR step inside auto costs against a plain AR step, per feature path, in one process (issue 29).

s55's fast bench on MT-Bench (H200) read auto at 0.90x AR, and its runs that never speculated took
1.27-1.41 ms a step against the same prompts' 1.10 ms under plain AR, as if AR steps inside auto cost
a fifth more (s56 found they do not: docs/benchmarks.md, "Fast auto at 0.90x AR on MT-Bench"). This runs, per public prompt (the chat template, greedy, --max-tokens, the bench's
engine settings), in an order that rotates with the prompt so that a drift of the machine falls on
every configuration:

- ``ar``: plain AR (extraction off)
- ``arx``: plain AR whose prefill feeds the drafter, so every step decodes with layer-input
  extraction on and copies its rows to the host (what auto's AR steps do on the "host" path)
- ``auto``: auto as shipped (the "host" feature path)
- ``auto-rd``: auto on the "redecode" path (AR steps with extraction off; a catch-up re-decode and
  two toggles of extraction around each speculative stretch)

and prints per configuration the median over runs of: ms per generated token, the median wall of its
AR steps (decode steps that drafted nothing), and the run's speculative steps; then the policy's
calibration table, so that a policy that chose AR can be read against the costs it was given.
``--exact``: the exact verify (batch-invariant kernels), as ``dflash-studio bench --exact``.

``--phases P1,P2,...`` instead runs phases in order in one process, as the bench's rows do: ``look``
(ar and arx alternating on every prompt, then a one-round calibration: what an AR step with and
without extraction and each speculative step cost now), ``chain`` / ``tree`` (a chain-7 / tree-7
generation of every prompt, as a bench row), ``judge`` (AR and chain 7 on every prompt, each parting
replayed by the bench's judge, near_tie.parting), ``fresh`` (a new auto policy), ``auto`` (auto on every prompt, its AR steps' walls). A
full sweep's auto row read 0.92x AR on MT-Bench where auto alone read 1.13x (s56): whether a row
before it leaves the engine slower, or its calibration skewed.

Usage (GPU machine): PYTHONPATH=/tmp/lcp_site:/tmp/site:. python3 gpu/gpu_auto_ar_cost.py
    --target T --draft D [--suite mt-bench] [--prompts 40] [--max-tokens 128] [--exact] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine_bridge.bench.suites import load_suite  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import auto_mode, calibration, generation  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

CONFIGS = ("ar", "arx", "auto", "auto-rd")


def one_run(eng, text: str, label: str, max_tokens: int) -> dict:
    """One generation of ``label`` from an empty cache: its ms per decode step, its AR steps' walls."""
    gen = generation.Generation
    plain = gen._prefill_features
    gen._prefill_features = (lambda self: True) if label == "arx" else plain
    eng.auto_keep_features = "redecode" if label == "auto-rd" else ("host" if label == "auto" else None)
    try:
        eng.reset()
        mode = "auto" if label.startswith("auto") else "ar"
        r = eng.generate(text, GenerationSettings(mode=mode, budget=7, max_tokens=max_tokens))
    finally:
        gen._prefill_features = plain
        eng.auto_keep_features = None
    decode = [s for s in r.steps if not s.prefill]
    ar = [1e3 * s.wall for s in decode if s.drafted == 0]
    return {
        "steps": len(decode),
        "tokens": len(r.tokens),
        "gen_ms_per_token": 1e3 * r.summary.t_generate / max(1, len(r.tokens)),
        "ar_step_ms": statistics.median(ar) if ar else None,
        "ar_steps": len(ar),
        "spec_steps": len(decode) - len(ar),
        "note": getattr(r.summary, "auto_note", "") or "",
    }


SWITCHES: list[float] = []  # every switch extra the policy was told (AutoPolicy.observe_switch), in AR steps


def _spy_switches() -> None:
    real = auto_mode.AutoPolicy.observe_switch

    def spy(self, extra_ar_steps: float) -> None:
        SWITCHES.append(extra_ar_steps)
        real(self, extra_ar_steps)

    auto_mode.AutoPolicy.observe_switch = spy


def phases(eng, texts: list[str], names: list[str], max_tokens: int) -> None:
    """``--phases``: each phase in order, on the same engine (docstring)."""
    _spy_switches()
    for k, name in enumerate(names):
        if name == "look":
            rs = {"ar": [], "arx": []}
            for i, text in enumerate(texts):
                for label in ("ar", "arx") if i % 2 == 0 else ("arx", "ar"):
                    rs[label].append(one_run(eng, text, label, max_tokens))
            t = calibration.measure(eng, rounds=1)
            walls = {lb: statistics.median(r["ar_step_ms"] for r in v) for lb, v in rs.items()}
            tok = {lb: statistics.median(r["gen_ms_per_token"] for r in v) for lb, v in rs.items()}
            costs = t.costs()
            print(
                f"phase {k} look: AR-step wall ar {walls['ar']:.4f} arx {walls['arx']:.4f} ms "
                f"(arx/ar {walls['arx'] / walls['ar']:.3f}); ms/token ar {tok['ar']:.4f} arx {tok['arx']:.4f}; "
                f"calibration AR {t.ar_ms:.3f} ms, chain 1/4/7 {costs[('chain', 1)]:.3f}/{costs[('chain', 4)]:.3f}/"
                f"{costs[('chain', 7)]:.3f}, tree 8 {costs.get(('tree', 8), float('nan')):.3f}"
            )
        elif name == "fresh":  # a new policy (the same cost table): what the old one had learnt is gone
            eng.auto_policy = None
            print(f"phase {k} fresh: a new auto policy")
        elif name == "judge":
            # the bench's judge after a chain-7 row: each parting from AR replayed (near_tie.parting)
            from engine_bridge.runtime import near_tie

            n_part, t0 = 0, time.perf_counter()
            for text in texts:
                outs = {}
                for mode in ("ar", "chain"):
                    eng.reset()
                    s = GenerationSettings(mode=mode, budget=7, max_tokens=max_tokens)
                    outs[mode] = list(eng.generate(text, s).tokens)
                part = near_tie.parting(eng, eng.tokenize(text), outs["ar"], outs["chain"], replay=True)
                n_part += part is not None
            print(
                f"phase {k} judge: {n_part} of {len(texts)} chain-7 runs parted, judged in {time.perf_counter() - t0:.1f} s"
            )
        elif name in ("chain", "tree", "auto"):
            walls, tok, spec = [], [], 0
            for text in texts:
                eng.reset()
                r = eng.generate(text, GenerationSettings(mode=name, budget=7, max_tokens=max_tokens))
                dec = [x for x in r.steps if not x.prefill]
                walls += [1e3 * x.wall for x in dec if x.drafted == 0]
                spec += sum(1 for x in dec if x.drafted > 0)
                tok.append(1e3 * r.summary.t_generate / max(1, len(r.tokens)))
            extra = f", AR-step wall {statistics.median(walls):.4f} ms over {len(walls)}" if walls else ""
            print(f"phase {k} {name}: ms/token median {statistics.median(tok):.4f}, speculative steps {spec}{extra}")
            pol = getattr(eng, "auto_policy", None)
            if name == "auto" and pol is not None:
                sw = sorted(SWITCHES)
                q = statistics.quantiles(sw, n=4) if len(sw) > 1 else sw
                print(
                    f"   switches told so far {len(sw)}: quartiles {[round(x, 1) for x in q]}, max "
                    f"{max(sw, default=0):.1f}, last 8 {[round(x, 1) for x in SWITCHES[-8:]]}; policy switch_cost "
                    f"{pol.switch_cost:.1f}, AR probe every {pol.ar_probe_every}, rechecks {pol.rechecks}"
                )
        else:
            raise SystemExit(f"unknown phase {name!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--suite", default="mt-bench")
    ap.add_argument("--prompts", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--exact", action="store_true", help="the exact verify (batch-invariant kernels)")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json", help="every run's figures to this file")
    ap.add_argument("--phases", help="phases in order, as the bench's rows (look, chain, tree, auto)")
    a = ap.parse_args()
    labels = [c for c in a.configs.split(",") if c]
    cfg = EngineConfig(target=a.target, draft=a.draft, exact=a.exact)
    runs: dict[str, list[dict]] = {c: [] for c in labels}
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        texts = [p.render(eng.format_chat) for p in load_suite(a.suite).prompts[: a.prompts]]
        if a.phases:
            one_run(eng, texts[0], "ar", 16)  # warm-up
            phases(eng, texts, a.phases.split(","), a.max_tokens)
            return 0
        table = calibration.ensure(eng)  # measured here (or cached): what auto's policy is given
        for label in labels:  # an untimed warm-up of each configuration
            one_run(eng, texts[0], label, 16)
        for i, text in enumerate(texts):
            order = labels[i % len(labels) :] + labels[: i % len(labels)]
            for label in order:
                runs[label].append(one_run(eng, text, label, a.max_tokens))
        pol = getattr(eng, "auto_policy", None)
        print(f"suite {a.suite}, {len(texts)} prompts, {a.max_tokens} tokens, exact {a.exact}")
        print("calibration (mode, budget, step ms, AR steps):")
        for m, b, ms, c in table.rows():
            print(f"  {m:5} {b:3d} {ms:7.3f} {c:6.3f}")
        base = statistics.median(r["gen_ms_per_token"] for r in runs.get("ar", [])) if runs.get("ar") else None
        for label, rs in runs.items():
            gen = statistics.median(r["gen_ms_per_token"] for r in rs)
            arw = [r["ar_step_ms"] for r in rs if r["ar_step_ms"] is not None]
            pure = [r["gen_ms_per_token"] for r in rs if r["spec_steps"] == 0]
            line = f"{label:8} ms/token median {gen:.4f}"
            line += f" ({base / gen:.3f}x AR's speed)" if base else ""
            line += f", mean {statistics.mean(r['gen_ms_per_token'] for r in rs):.4f}"
            if arw:
                line += f" | AR-step wall median {statistics.median(arw):.4f} ms over {sum(r['ar_steps'] for r in rs)} steps"
            print(line)
            print(
                f"         speculative steps {sum(r['spec_steps'] for r in rs)}, runs that never speculated "
                f"{len(pure)}" + (f" (their ms/token median {statistics.median(pure):.4f})" if pure else "")
            )
        if pol is not None and hasattr(pol, "describe"):
            print("policy at the end:", json.dumps(pol.describe(), default=str)[:600])
        for label in labels:
            if label.startswith("auto"):
                print(f"{label} notes (last 3):", [r["note"] for r in runs[label][-3:]])
    if a.json:
        Path(a.json).write_text(json.dumps({"exact": a.exact, "suite": a.suite, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
