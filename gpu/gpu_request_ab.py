"""A switch read at each request, A/B in one process: prompt by prompt, the side that goes first
alternating. The switch is an environment variable (``--env``) or a field of GenerationSettings
(``--setting``, e.g. tree_top_k with sides 4,8).

Two processes of one configuration differ by up to 3-6 % on the GPU machines (docs/benchmarks.md), so
an effect of a few per cent is measured inside one process: the engine reads switches such as
``DFLASH_OVERLAP_COMMIT`` or ``DFLASH_FIRST_TOKEN`` when a request starts. For each suite, prompt,
mode and side this runs one greedy request from an empty cache and keeps its generated tokens and
generation time (the prefill left out, as the bench's tok/s). The table gives tok/s per side, the
ratio of the last side to the first, the median of the per-request ratios, and in how many requests
the two sides gave the same tokens.

Usage (GPU machine): PYTHONPATH=/tmp/lcp_site:/tmp/site:. python3 gpu/gpu_request_ab.py --target T
--draft D --env DFLASH_OVERLAP_COMMIT [--sides 0,1] [--suites mt-bench,gsm8k,humaneval] [--prompts 40]
[--rounds 2] [--max-tokens 128] [--modes ar,chain] [--budget 5] [--json OUT.json]; `--setting FIELD`
instead of `--env`; `--from OUT.json` prints a saved run's table.

``--per-process``: each side in a process of its own, one per round and side, the side that goes first
alternating by round. For a switch that costs something to flip inside a process (patch 0029's inject
slots free their schedulers when turned down, so every request after a flip starts without graphs)
and that a user sets once: the in-process A/B would charge the flip to one side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine_bridge.bench.suites import load_suite  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402
from engine_bridge.runtime.records import PHASES  # noqa: E402


def one_request(
    eng, text: str, env: str, side: str, mode: str, budget: int, max_tokens: int, setting: str | None = None
) -> dict:
    extra = {}
    if setting:
        extra[setting] = type(getattr(GenerationSettings(), setting))(side)  # the field's own type
    else:
        os.environ[env] = side
    eng.reset()
    res = eng.generate(text, GenerationSettings(mode=mode, budget=budget, max_tokens=max_tokens, **extra))
    s = res.summary
    steps = [st for st in res.steps if not st.prefill]
    # each phase's time summed over the request's decode steps: where a switch moves time between phases
    phase_s = {p: sum(st.phases[p] for st in steps) for p in PHASES}
    return {
        "side": side,
        "mode": mode,
        "n_gen": s.n_generated,
        "gen_s": s.t_generate,
        "tokens": res.tokens,
        "steps": len(steps),
        "phase_s": phase_s,
        "pid": os.getpid(),
    }


def table(runs: list[dict], sides: list[str]) -> list[dict]:
    """One row per suite and mode (and "all" per mode): tok/s per side, ratios, identical outputs."""
    rows = []
    suites = list(dict.fromkeys(r["suite"] for r in runs))
    for mode in dict.fromkeys(r["mode"] for r in runs):
        for suite in [*suites, "all"] if len(suites) > 1 else suites:
            mine = [r for r in runs if r["mode"] == mode and suite in ("all", r["suite"])]
            by_side = {sd: [r for r in mine if r["side"] == sd] for sd in sides}
            tok_s = {
                sd: sum(r["n_gen"] for r in rs) / max(1e-9, sum(r["gen_s"] for r in rs)) for sd, rs in by_side.items()
            }
            a, b = by_side[sides[0]], by_side[sides[-1]]
            pairs = list(zip(a, b))
            rows.append(
                {
                    "mode": mode,
                    "suite": suite,
                    "requests": len(pairs),
                    "tok_s": tok_s,
                    "ratio": tok_s[sides[-1]] / tok_s[sides[0]],
                    # per request: the first side's time over the last side's, per token
                    "median_ratio": statistics.median(
                        (ra["gen_s"] / max(1, ra["n_gen"])) / max(1e-12, rb["gen_s"] / max(1, rb["n_gen"]))
                        for ra, rb in pairs
                    ),
                    "same_tokens": sum(ra["tokens"] == rb["tokens"] for ra, rb in pairs),
                    # ms per decode step of each phase, per side (runs saved before the phases: none)
                    "phase_ms": {sd: phase_ms(rs) for sd, rs in by_side.items()},
                }
            )
    return rows


def phase_ms(runs: list[dict]) -> dict[str, float]:
    steps = sum(r.get("steps", 0) for r in runs)
    if not steps:
        return {}
    return {p: 1e3 * sum(r["phase_s"][p] for r in runs) / steps for p in PHASES}


def print_table(rows: list[dict], sides: list[str], env: str) -> None:
    heads = " | ".join(f"tok/s {env}={sd}" for sd in sides)
    print(f"| mode | suite | requests | {heads} | {sides[-1]} / {sides[0]} | median per request | same tokens |")
    print("|---" * (6 + len(sides)) + "|")
    for r in rows:
        cells = " | ".join(f"{r['tok_s'][sd]:.1f}" for sd in sides)
        print(
            f"| {r['mode']} | {r['suite']} | {r['requests']} | {cells} | {r['ratio']:.4f} | "
            f"{r['median_ratio']:.4f} | {r['same_tokens']} / {r['requests']} |"
        )
    if not any(r["phase_ms"][sd] for r in rows for sd in sides):
        return
    print()
    print(f"| mode | suite | {env} | " + " | ".join(f"{p} ms/step" for p in PHASES) + " |")
    print("|---" * (3 + len(PHASES)) + "|")
    for r in rows:
        for sd in sides:
            ms = r["phase_ms"][sd]
            print(f"| {r['mode']} | {r['suite']} | {sd} | " + " | ".join(f"{ms[p]:.3f}" for p in PHASES) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--env", default="DFLASH_OVERLAP_COMMIT", help="the switch the engine reads at each request")
    ap.add_argument("--setting", default=None, help="a GenerationSettings field to switch instead of --env")
    ap.add_argument("--sides", default="0,1")
    ap.add_argument("--suites", default="mt-bench,gsm8k,humaneval")
    ap.add_argument("--prompts", type=int, default=40, help="the first N prompts of each suite")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--modes", default="ar,chain")
    ap.add_argument("--budget", type=int, default=5)
    ap.add_argument("--gpu-layers", type=int, default=-1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="write every run here")
    ap.add_argument("--from", dest="from_json", default=None, help="print the table of a saved --json instead")
    ap.add_argument("--per-process", action="store_true", help="each side in processes of its own, by round")
    ap.add_argument("--only-side", default=None, help=argparse.SUPPRESS)  # a --per-process worker's side
    a = ap.parse_args(argv)
    if a.from_json:
        saved = json.loads(Path(a.from_json).read_text())
        print_table(table(saved["runs"], saved["sides"]), saved["sides"], saved["env"])
        return 0
    if not (a.target and a.draft):
        ap.error("--target and --draft are required (or --from a saved --json)")
    sides = [s for s in a.sides.split(",") if s]
    modes = [m for m in a.modes.split(",") if m]
    if len(sides) < 2:
        ap.error("--sides needs two values or more")
    if a.per_process and not a.only_side:
        return per_process(a, argv if argv is not None else sys.argv[1:], sides)
    if a.only_side:
        sides = [a.only_side]
    before = os.environ.get(a.env)
    runs = []
    t0 = time.time()
    cfg = EngineConfig(target=a.target, draft=a.draft, n_gpu_layers=a.gpu_layers, n_threads=a.threads)
    try:
        with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
            texts = {
                s: [p.render(eng.format_chat) for p in load_suite(s).prompts[: a.prompts]] for s in a.suites.split(",")
            }
            first = next(iter(texts.values()))[0]
            for mode in modes:  # warm-up: graphs, buffers (and auto's calibration)
                for side in sides:
                    one_request(eng, first, a.env, side, mode, a.budget, a.max_tokens, a.setting)
            n = 0
            for _ in range(a.rounds):
                for suite, prompts in texts.items():
                    for text in prompts:
                        # which side goes first alternates by prompt, the same for every mode: the
                        # first request after another mode's may pay for the switch (graphs, caches),
                        # and alternating per request of any mode would give it to one side per mode
                        order = sides if n % 2 == 0 else sides[::-1]
                        n += 1
                        for mode in modes:
                            for k, side in enumerate(order):
                                r = one_request(eng, text, a.env, side, mode, a.budget, a.max_tokens, a.setting)
                                runs.append({"suite": suite, "first": k == 0, **r})
    finally:
        if before is None:
            os.environ.pop(a.env, None)
        else:
            os.environ[a.env] = before
    name = a.setting or a.env
    if a.only_side:
        Path(a.json).write_text(json.dumps({"env": name, "sides": sides, "runs": runs}))
        return 0
    print(
        f"{name} = {' / '.join(sides)}, one process, {a.rounds} rounds of the first {a.prompts} prompts of "
        f"{a.suites}, budget {a.budget}, {a.max_tokens} tokens, greedy, {time.time() - t0:.0f} s"
    )
    runs.sort(key=lambda r: (r["suite"], r["mode"]))  # stable: each side's requests keep their order
    print_table(table(runs, sides), sides, name)
    if a.json:
        Path(a.json).write_text(json.dumps({"env": name, "sides": sides, "runs": runs}))
    return 0


def per_process(a, argv: list[str], sides: list[str]) -> int:
    """Runs each side in its own process per round (this script with --only-side), the side that goes
    first alternating by round, and prints the table of all of them."""
    import subprocess
    import tempfile

    t0 = time.time()
    runs = []
    base = [x for x in argv if x != "--per-process"]
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.rounds):
            for side in sides if rnd % 2 == 0 else sides[::-1]:
                out = Path(tmp) / f"{rnd}-{side}.json"
                cmd = [sys.executable, __file__, *base, "--rounds", "1", "--only-side", side, "--json", str(out)]
                subprocess.run(cmd, check=True)
                runs += [{**r, "round": rnd} for r in json.loads(out.read_text())["runs"]]
    name = a.setting or a.env
    print(
        f"{name} = {' / '.join(sides)}, a process per side and round, {a.rounds} rounds of the first {a.prompts} "
        f"prompts of {a.suites}, budget {a.budget}, {a.max_tokens} tokens, greedy, {time.time() - t0:.0f} s"
    )
    runs.sort(key=lambda r: (r["suite"], r["mode"], r["round"]))  # stable: each side's requests in order
    print_table(table(runs, sides), sides, name)
    if a.json:
        Path(a.json).write_text(json.dumps({"env": name, "sides": sides, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
