"""Auto's host time outside its speculative steps against chain's (issue 29), on any device.

On the H200 an auto step cost 6-12 % more wall than a chain-7 step at nearly the same commit, half of
it outside the phases of the steps (docs/benchmarks.md, "Auto on the full public sets on an H200").
This replays that here: auto is given a cost table in which speculation pays (``--table``, e.g. a
GPU's calibration, keyed to this engine so it runs its policy as it did there) and runs against
chain at the same budget, on the first prompts of a public suite. Per mode it prints the time of
the generation outside the step records, per step (``t_generate`` less the steps' own wall
times): auto's policy, the text-kind tracker, its bookkeeping; chain's loop alone. The modes
alternate per round, one process. No timed test reads it: measure, then compare in the docs.

Usage: PYTHONPATH=. python benchmarks/bench_auto_spec_gap.py --target T.gguf --draft D.gguf \
           --table calibration.json [--suite humaneval] [--prompts 8] [--max-tokens 96] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import calibration
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--table", required=True, help="a calibration JSON in which speculation pays")
    ap.add_argument("--suite", default="humaneval")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--budget", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gpu-layers", type=int, default=0)
    a = ap.parse_args(argv)
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=2048, n_threads=a.threads, n_gpu_layers=a.gpu_layers)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        table = calibration.CostTable.from_json(json.loads(Path(a.table).read_text()))
        table.key = calibration.calibration_key(eng.config)  # this engine's: auto reads it, no calibration
        eng.calibration = table
        toks = []
        for p in load_suite(a.suite).prompts[: a.prompts]:
            msgs = (
                [{"role": r, "content": c} for r, c in p.messages]
                if p.messages
                else [{"role": "user", "content": p.text}]
            )
            toks.append(eng.tokenize_chat(msgs))
        print(f"{a.suite}, first {len(toks)} prompts, {a.max_tokens} tokens, budget {a.budget}, table {a.table}")
        print("| round | mode | steps | us outside the steps, per step | ms in the steps, per step |")
        print("|---|---|---|---|---|")
        for rnd in range(a.rounds):
            for mode in ("chain", "auto"):
                outside = inside = 0.0
                steps = 0
                for tk in toks:
                    eng.reset()
                    r = eng.generate(tk, GenerationSettings(mode=mode, budget=a.budget, max_tokens=a.max_tokens))
                    walls = sum(x.wall for x in r.steps)
                    outside += r.summary.t_generate - walls
                    inside += walls
                    steps += len(r.steps)
                    if mode == "auto" and eng.auto_policy is not None:
                        eng.auto_policy.suspect = ""  # keep the given table: no re-measuring between requests
                print(
                    f"| {rnd + 1} | {mode} | {steps} | {1e6 * outside / steps:.1f} | {1e3 * inside / steps:.2f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
