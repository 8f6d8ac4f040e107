"""Where an AR step inside auto loses time against a plain AR step (issue 29), in one process.

Runs the real pair on a few public prompts (raw text, greedy, --max-tokens, end of generation
ignored) as: plain AR; auto as shipped; auto with its probes switched off on the "host" feature path
(extraction on, each AR step's row kept); the same on the "redecode" path (extraction off after the
first step); plain AR with extraction on (its prefill feeds the drafter: auto's AR steps without
auto); then one auto run under cProfile. Per configuration: generation ms per step (median
over runs), and per step the median of the record's wall, its native (llama.cpp) time and the host
time between one step's end and the next one's start.

Usage (GPU machine, engine at /tmp/lcp_site): PYTHONPATH=/tmp/lcp_site:/tmp/site:. python3
gpu/gpu_auto_diag.py --target T --draft D [--prompts 4] [--runs 2] [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import auto_mode, generation  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("draft", "inject", "verify", "accept", "other")  # a step record's phases, in the slowest steps


def prompts(n: int) -> list[str]:
    rows = (ROOT / "resources/prompts/public/mt_bench.jsonl").read_text().splitlines()[:n]
    return [json.loads(r)["messages"][0]["content"] for r in rows]


def run(eng, toks, mode: str, max_tokens: int) -> dict:
    ends = []

    def on_step(rec):
        ends.append(time.perf_counter())

    s = GenerationSettings(mode=mode, budget=7, max_tokens=max_tokens, stop_at_eog=False)
    t0 = time.perf_counter()
    r = eng.generate(toks, s, on_step=on_step)
    wall = time.perf_counter() - t0
    recs = r.steps
    gaps = [b - a - rec.wall for a, b, rec in zip(ends, ends[1:], recs[1:])]
    return {
        "steps": len(recs),
        "gen_ms_per_step": 1e3 * r.summary.t_generate / max(1, len(recs)),
        "wall_ms_per_step": 1e3 * wall / max(1, len(recs)),
        "rec_wall_ms": 1e3 * statistics.median(x.wall for x in recs[1:]),
        "rec_native_ms": 1e3 * statistics.median(x.t_native for x in recs[1:]),
        "gap_ms": 1e3 * statistics.median(gaps) if gaps else None,
        "note": getattr(r.summary, "auto_note", ""),
        # where the rest goes: the slowest steps (index, ms, mode) and generation time outside steps
        "slowest": sorted(
            (
                (1e3 * x.wall, i, x.drafted, *(round(1e3 * getattr(x, "t_" + k), 2) for k in PHASES))
                for i, x in enumerate(recs)
            ),
            reverse=True,
        )[:4],
        "outside_ms": 1e3 * (r.summary.t_generate - sum(x.wall for x in recs)),
    }


def bench_like(eng, n_prompts: int, reps: int, max_tokens: int) -> None:
    """The bench's order on its own prompts: MT-Bench through the chat template, a warm-up run,
    then every AR run, every AR run with extraction on (its prefill feeds the drafter), then every
    auto run (one policy throughout, KV reset before each run), and
    per auto run: ms, drafted, median and mean step, the slowest steps, time outside the steps,
    and whether the policy measured its calibration again before it."""
    from engine_bridge.bench.suites import load_suite

    suite = load_suite("mt-bench")
    texts = [p.render(eng.format_chat) for p in suite.prompts[:n_prompts]]
    Gen = generation.Generation
    plain_prefill = Gen._prefill_features
    for label in ("ar", "arx", "auto"):
        # arx: plain AR whose prefill feeds the drafter, so that its steps decode with extraction on
        Gen._prefill_features = (lambda self: True) if label == "arx" else plain_prefill
        mode = "ar" if label == "arx" else label
        s = GenerationSettings(mode=mode, budget=7, max_tokens=max_tokens)
        eng.reset()
        eng.generate(texts[0], s)  # the bench's warm-up run
        for rep in range(reps):
            for i, text in enumerate(texts):
                pol = getattr(eng, "auto_policy", None)
                before = getattr(pol, "rechecks", 0)
                eng.reset()
                r = run(eng, eng.tokenize(text), mode, max_tokens)
                pol = getattr(eng, "auto_policy", None)
                print(
                    f"{label:4} rep {rep} prompt {i}: {r['steps']:3d} steps, gen {r['gen_ms_per_step']:.3f} ms/step, "
                    f"median step {r['rec_wall_ms']:.3f}, outside {r['outside_ms']:.2f} ms, "
                    f"rechecks +{getattr(pol, 'rechecks', 0) - before}, suspect {getattr(pol, 'suspect', None)!r} | {r['note']}"
                )
                print(
                    "      slowest (ms, index, drafted, " + ", ".join(PHASES) + "):",
                    [(round(w, 2), *x) for w, *x in r["slowest"]],
                )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench-like", action="store_true", help="the bench's order and prompts, per run (bench_like)")
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument(
        "--threads", type=int, default=None, help="llama.cpp's CPU threads per context (default: all cores)"
    )
    ap.add_argument("--no-gc", action="store_true", help="Python's cyclic garbage collector off during the runs")
    a = ap.parse_args()
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=4096, flash_attn="on", n_threads=a.threads)
    if a.no_gc:
        import gc

        gc.disable()
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        if a.bench_like:
            bench_like(eng, a.prompts, a.runs, a.max_tokens)
            return 0
        toks_all = [eng.tokenize(p) for p in prompts(a.prompts)]
        eng.generate(toks_all[0], GenerationSettings(mode="auto", budget=7, max_tokens=16))  # calibration, warm-up
        # (mode, feature path, probes, drafter fed)
        configs = {
            "ar": ("ar", None, True, True),
            "ar, extraction on": ("ar", "extract", True, True),
            "auto": ("auto", None, True, True),
            "auto host, no probes": ("auto", "host", False, True),
            "auto redecode, no probes": ("auto", "redecode", False, True),
            "auto, drafter not fed": ("auto", None, False, False),
        }
        out = {}
        Pol = auto_mode.AutoPolicy
        real = (Pol._ar_probe, Pol.needs_drafter)
        Gen = generation.Generation
        plain_prefill = Gen._prefill_features
        for _round in range(a.runs):
            for name, (mode, path, probes, fed) in configs.items():
                # "extract": plain AR whose prefill feeds the drafter, so that every AR step decodes
                # with layer-input extraction on, as auto's AR steps do (and nothing else of auto)
                Gen._prefill_features = (lambda self: True) if path == "extract" else plain_prefill
                eng.auto_keep_features = None if path == "extract" else path
                Pol._ar_probe = real[0] if probes else (lambda self: None)
                Pol.needs_drafter = real[1] if probes else (lambda self, fed=fed: fed)
                eng.auto_policy = None  # a fresh policy each time
                for toks in toks_all:
                    eng.reset()
                    out.setdefault(name, []).append(run(eng, toks, mode, a.max_tokens))
        Pol._ar_probe, Pol.needs_drafter = real
        Gen._prefill_features = plain_prefill
        eng.auto_keep_features = None
        for name, rs in out.items():
            med = {
                k: statistics.median(r[k] for r in rs if r[k] is not None)
                for k in rs[0]
                if k not in ("note", "slowest")
            }
            print(f"{name:26} " + "  ".join(f"{k} {v:.3f}" for k, v in med.items()) + f"  | {rs[-1]['note']}")
            for r in rs[-2:]:
                print(
                    "    slowest steps (ms, index, drafted, " + ", ".join(PHASES) + "):",
                    [(round(w, 2), *rest) for w, *rest in r["slowest"]],
                )
        pr = cProfile.Profile()
        eng.auto_policy = None
        for toks in toks_all:
            eng.reset()
            pr.enable()
            eng.generate(toks, GenerationSettings(mode="auto", budget=7, max_tokens=a.max_tokens, stop_at_eog=False))
            pr.disable()
        st = pstats.Stats(pr)
        st.sort_stats("tottime")
        buf = io.StringIO()
        st.stream = buf
        st.print_stats(30)
        print(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
