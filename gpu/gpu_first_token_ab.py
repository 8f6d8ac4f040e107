"""The first token from the prefill against the start before, in one process (issues 27-29).

Across two processes on an H200 the branch that takes a request's first token from the prefill's
last row read 1.2-2.6 ms sooner to its first token but 2.4-2.8 % slower per AR token, where two
processes of one configuration differ by up to 6 % (docs/benchmarks.md, "The first token from the
prefill, against main"). Here both starts run in one process (``DFLASH_FIRST_TOKEN`` is read at each
request), prompt by prompt, the side that goes first alternating, so a drift of the machine's speed
falls on both. Per mode (AR, chain 7, auto) and side: tokens, the requests' whole time (prefill and
generation), time to first token, and the first decodes after the prefill against the steady ones
(if the AR decode right after a prefill that had an output is the slow one, it shows there).

Usage (GPU machine): PYTHONPATH=/tmp/lcp_site:/tmp/site:. python3 gpu/gpu_first_token_ab.py --target T
--draft D [--suite humaneval] [--prompts 40] [--rounds 2] [--max-tokens 128] [--modes ar,chain,auto]
[--json OUT.json]; `--from OUT.json` prints a saved run's table.
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
from engine_bridge.runtime.generation import FIRST_TOKEN_ENV  # noqa: E402

SIDES = ("prefill", "decode")


def run(eng, text: str, mode: str, side: str, max_tokens: int) -> dict:
    """One greedy request from an empty cache with the given start; its times and step walls."""
    os.environ[FIRST_TOKEN_ENV] = side
    eng.reset()
    t0 = time.perf_counter()
    res = eng.generate(text, GenerationSettings(mode=mode, budget=7, max_tokens=max_tokens))
    wall = time.perf_counter() - t0
    s = res.summary
    return {
        "mode": mode,
        "side": side,
        "n_gen": s.n_generated,
        "wall_ms": 1e3 * wall,
        "ttft_ms": 1e3 * s.t_first_token,
        "prefill_ms": 1e3 * s.t_prefill,
        # each step's wall, and whether it decoded anything (the prefill side's step 0 does not)
        "step_ms": [1e3 * r.wall for r in res.steps],
        "step_drafted": [r.drafted for r in res.steps],
        "tokens": res.tokens,
    }


def report(runs: list[dict]) -> dict:
    """Per mode and side: tok/s over whole requests, TTFT, the first decodes and the steady ones."""
    out: dict = {}
    for mode in dict.fromkeys(r["mode"] for r in runs):
        for side in SIDES:
            rs = [r for r in runs if r["mode"] == mode and r["side"] == side]
            if not rs:
                continue
            # the first step that decodes: step 1 on the prefill side (step 0 is the prefill's row)
            first = 1 if side == "prefill" else 0
            d = {
                "requests": len(rs),
                "tokens": sum(r["n_gen"] for r in rs),
                "ms": sum(r["wall_ms"] for r in rs),
                "ttft_ms": statistics.mean(r["ttft_ms"] for r in rs),
                "first_decode_ms": statistics.mean(r["step_ms"][first] for r in rs if len(r["step_ms"]) > first),
                "second_decode_ms": statistics.mean(
                    r["step_ms"][first + 1] for r in rs if len(r["step_ms"]) > first + 1
                ),
                "steady_ms": statistics.median([x for r in rs for x in r["step_ms"][first + 3 : -1]] or [float("nan")]),
            }
            d["tok_s"] = 1e3 * d["tokens"] / d["ms"]
            out[f"{mode} {side}"] = d
    print(
        "| mode | start | requests | tokens | tok/s | TTFT ms | 1st decode ms | 2nd decode ms | steady step ms (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for k, d in out.items():
        mode, side = k.split()
        print(
            f"| {mode} | {side} | {d['requests']} | {d['tokens']} | {d['tok_s']:.1f} | {d['ttft_ms']:.2f} | "
            f"{d['first_decode_ms']:.3f} | {d['second_decode_ms']:.3f} | {d['steady_ms']:.3f} |"
        )
    for mode in dict.fromkeys(r["mode"] for r in runs):
        a, b = out.get(f"{mode} prefill"), out.get(f"{mode} decode")
        if a and b:
            same = sum(
                1
                for ra, rb in zip(
                    [r for r in runs if r["mode"] == mode and r["side"] == "prefill"],
                    [r for r in runs if r["mode"] == mode and r["side"] == "decode"],
                )
                if ra["tokens"] == rb["tokens"]
            )
            print(
                f"{mode}: prefill / decode tok/s {a['tok_s'] / b['tok_s']:.3f}, TTFT {a['ttft_ms'] - b['ttft_ms']:+.2f} ms, "
                f"the same tokens in {same} of {a['requests']} requests"
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--from", dest="from_json", default=None, help="print the table of a saved --json instead")
    ap.add_argument("--suite", default="humaneval")
    ap.add_argument("--prompts", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--modes", default="ar,chain,auto")
    ap.add_argument("--gpu-layers", type=int, default=-1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="write every run here")
    a = ap.parse_args()
    if a.from_json:
        report(json.loads(Path(a.from_json).read_text())["runs"])
        return 0
    if not (a.target and a.draft):
        ap.error("--target and --draft are required (or --from a saved --json)")
    modes = [m for m in a.modes.split(",") if m]
    cfg = EngineConfig(target=a.target, draft=a.draft, n_gpu_layers=a.gpu_layers, n_threads=a.threads)
    runs = []
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        texts = [p.render(eng.format_chat) for p in load_suite(a.suite).prompts[: a.prompts]]
        for mode in modes:  # warm-up (auto: its calibration, when none is cached)
            for side in SIDES:
                run(eng, texts[0], mode, side, a.max_tokens)
        n = 0
        for _ in range(a.rounds):
            for text in texts:
                for mode in modes:
                    for side in SIDES if n % 2 == 0 else SIDES[::-1]:
                        runs.append(run(eng, text, mode, side, a.max_tokens))
                    n += 1
    print(f"{a.suite}, first {len(texts)} prompts, {a.rounds} rounds, {a.max_tokens} tokens, starts alternating")
    led = report(runs)
    if a.json:
        Path(a.json).write_text(json.dumps({"table": led, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
