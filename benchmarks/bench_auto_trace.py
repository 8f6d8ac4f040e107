"""Auto's decisions under another machine's cost table, replayed on this one (issue 29).

Loads the pair here (any build), gives auto a cost table measured elsewhere (a calibration JSON,
e.g. an H200's from docs/runs), and runs auto on prompts: the tokens accepted are this engine's
(the same model, so the same acceptance up to near-ties), the choices are those auto would make on
that machine. Each run's steps are then costed with that table (an AR step 1, a chain step its
table cost, half of --switch-cost per change between AR and speculation, --change-cost per change
from one speculative configuration to another: a new verify shape), which gives a modelled
x AR per category. The re-check of the table against this machine's step times and the learnt switch
cost are turned off (they would read this machine's times). Prompts: the validation split of the
training sources (the default: where policy choices are made), or a public suite for reporting
(--public). Variants: ``now`` (the shipped policy), ``chain7`` (chain 7 throughout), ``earlier``
(DFLASH_AUTO_PROBE=cheapest), ``probe4`` (four steps a probe instead of two), ``stay`` (the opt-in
stay band, DFLASH_AUTO_STAY=1), ``emaW`` (the running commit weighing a step W, e.g. ema0.025);
``reqprobe`` / ``noreqprobe`` (every request's first AR choice probes, DFLASH_AUTO_REQUEST_PROBE=1,
or none does, =0; since 2026-11-28 ``now`` probes at the start of a chat's follow-ups), ``nostay`` (the
band off), ``nohold`` / ``holdM`` (no hold between speculative choices, or a hold margin M), ``geo`` / ``pos`` (chain commits from one acceptance rate, the estimator
before 2026-11-28, or from the acceptance per draft position), ``priorK`` (that rate leaning on
a prior of K chain steps, DFLASH_AUTO_PRIOR_STEPS=K; off by default); joined with ``+`` they combine
(``stay+ema0.025``). Since 2026-11-27 ``now`` has the band and EMA 0.025, since 2026-11-28 the hold
(margin 0.05); the estimator stays ``geo``.

    python benchmarks/bench_auto_trace.py --target T.gguf --draft D.gguf --table CAL.json \\
        [--n 10] [--variants now,chain7] [--public] [--chat 30 [--chat-prompts val|mt-bench]]

``--chat N`` plays one long conversation instead of the categories (as
benchmarks/bench_long_chat.py does: N requests, each answer kept in the history, one policy
throughout, the engine's default drafter window), with the exact verify so that every variant sees
the same contexts, and prints each variant's modelled x AR per turn as well.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_long_chat import requests as chat_requests  # noqa: E402  (the same long chats)
from engine_bridge.bench.suites import load_suite  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import auto_mode, calibration  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VAL = ROOT / "resources" / "prompts" / "train" / "prompts.jsonl.xz"
PUBLIC = {"code": "humaneval", "math": "gsm8k", "chat": "mt-bench"}


def prompts(eng, category: str, n: int, public: bool) -> list[str]:
    if public:
        return [p.render(eng.format_chat) for p in load_suite(PUBLIC[category]).prompts[:n]]
    with lzma.open(VAL, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    texts = [r["text"] for r in rows if r["split"] == "val" and r["category"] == category][:n]
    return [eng.format_chat([{"role": "user", "content": t}]) for t in texts]


def policy(table: calibration.CostTable, max_draft: int, variant: str, switch: float) -> auto_mode.AutoPolicy:
    parts = variant.split("+")  # variants combine: stay+ema0.025
    os.environ.pop(auto_mode.PROBE_ENV, None)
    os.environ.pop(auto_mode.STAY_ENV, None)
    os.environ.pop(auto_mode.ESTIMATOR_ENV, None)
    if "geo" in parts:  # one acceptance rate for every position (the estimator before 2026-11-28)
        os.environ[auto_mode.ESTIMATOR_ENV] = "geometric"
    if "pos" in parts:
        os.environ[auto_mode.ESTIMATOR_ENV] = "positions"
    if "earlier" in parts:
        os.environ[auto_mode.PROBE_ENV] = "cheapest"
    if "stay" in parts:
        os.environ[auto_mode.STAY_ENV] = "1"
    try:
        pol = auto_mode.AutoPolicy(table, max_draft)
    finally:
        os.environ.pop(auto_mode.PROBE_ENV, None)
        os.environ.pop(auto_mode.STAY_ENV, None)
        os.environ.pop(auto_mode.ESTIMATOR_ENV, None)
    for p in parts:
        if p.startswith("ema"):  # e.g. ema0.025: the running commit's weight per step
            pol.ema = float(p[3:])
        if p == "nostay":  # the stay band off (DFLASH_AUTO_STAY=0)
            pol.stay_margin = 0.0
        if p == "nohold":  # no hold between speculative choices (DFLASH_AUTO_HOLD=0, the rule before)
            pol.hold_margin = 0.0
        if p.startswith("hold"):  # e.g. hold0.1: another hold margin
            pol.hold_margin = float(p[4:])
        if p == "reqprobe":  # every new request probes at its first AR choice (DFLASH_AUTO_REQUEST_PROBE=1)
            pol.request_probe = "every"
        if p.startswith("pema"):  # e.g. pema0.25: a probe step's weight in the running commit (EMA_PROBE)
            pol.ema_probe = float(p[4:])
        if p.startswith("pmax"):  # e.g. pmax256: the longest wait between AR probes (AR_PROBE_MAX)
            pol.ar_probe_max = int(p[4:])
        if p == "noreqprobe":  # no request probes at once (DFLASH_AUTO_REQUEST_PROBE=0: the rule before)
            pol.request_probe = "never"
        # e.g. prior4: the geometric estimates' acceptance prior, in chain steps (DFLASH_AUTO_PRIOR_STEPS)
        if p.startswith("prior"):
            pol.prior_steps = float(p[5:])
    pol.recheck_factor = float("inf")  # this machine's step times are not the table's
    pol.switch_cost = switch
    pol.observe_switch = lambda _x: None  # type: ignore[method-assign]
    pol.observe_wall = lambda *_a: None  # type: ignore[method-assign]
    return pol


def cost_run(res, costs: dict, a, tot: Counter) -> None:
    """Adds a run's steps, costed with the table, to ``tot`` (tokens, time in AR steps, spec / ar
    steps, changes of speculative configuration)."""
    prev, prev_cfg = "ar", None
    for r in res.steps:
        cfg = ("tree" if r.tree_nodes else "chain", r.drafted) if r.drafted else None
        if cfg and prev_cfg and cfg != prev_cfg:
            tot["changes"] += 1  # a new verify shape: on a GPU the target's graph is built again
            tot["time"] += a.change_cost
        prev_cfg = cfg or prev_cfg
        m = "spec" if r.drafted else "ar"
        if m != prev:
            tot["time"] += a.switch_cost / 2
            prev = m
        tot[m] += 1
        tot["time"] += 1.0 if not r.drafted else costs.get(("chain", r.drafted), costs[("chain", 7)])
        tot["tokens"] += r.accepted + 1 if r.drafted else 1
    if prev != "ar":
        tot["time"] += a.switch_cost / 2


def chat(eng, table, costs: dict, a) -> None:
    """--chat: one long conversation per variant, the policy kept across its turns."""
    reqs = chat_requests(a.chat_prompts, a.chat, 1200)
    per_turn: dict[str, list[tuple[int, float, float]]] = {}
    for variant in a.variants.split(","):
        eng.auto_policy = policy(table, eng.drafter.max_draft, variant, a.switch_cost)
        messages: list[dict] = []
        tot, rows = Counter(), []
        for text in reqs:
            messages.append({"role": "user", "content": text})
            toks = eng.tokenize_chat(messages)
            if len(toks) + a.max_tokens + 32 >= eng.target_ctx.n_ctx:
                break
            mode = "chain" if variant == "chain7" else "auto"
            res = eng.generate(toks, GenerationSettings(mode=mode, budget=7, max_tokens=a.max_tokens))
            turn = Counter()
            cost_run(res, costs, a, turn)
            tot.update(turn)
            rows.append((len(toks), turn["tokens"] / max(turn["time"], 1e-9), turn["spec"] / max(len(res.steps), 1)))
            messages.append({"role": "assistant", "content": res.text})
        per_turn[variant] = rows
        share = tot["spec"] / max(tot["spec"] + tot["ar"], 1)
        print(
            f"| {variant} | {tot['tokens'] / tot['time']:.3f} ({share:.0%} spec, {tot['changes']} changes) |",
            flush=True,
        )
    names = list(per_turn)
    print("\n| turn | context | " + " | ".join(f"{v}: x AR, spec share" for v in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for i in range(min(len(r) for r in per_turn.values())):
        cells = [f"{per_turn[v][i][1]:.2f}, {per_turn[v][i][2]:.0%}" for v in names]
        print(f"| {i + 1} | {per_turn[names[0]][i][0]} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--table", required=True, help="a calibration JSON (auto's cache of another machine)")
    ap.add_argument("--n", type=int, default=10, help="prompts per category")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--variants", default="now,chain7")
    ap.add_argument("--categories", default="code,math,chat")
    ap.add_argument("--public", action="store_true", help="the public suites instead of the validation split")
    ap.add_argument("--switch-cost", type=float, default=2.6, help="AR steps per round trip (H200: ~2.6)")
    ap.add_argument(
        "--change-cost",
        type=float,
        default=0.0,
        help="AR steps per change of speculative configuration (a new verify shape; H200: ~1.8, from the hold's A/B)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--passes",
        type=int,
        default=1,
        help="the prompts this many times over with one policy, as a bench's repeated rows (its path shows)",
    )
    ap.add_argument("--chat", type=int, default=0, help="N requests as one long conversation (see above)")
    ap.add_argument("--chat-prompts", default="val", choices=("val", "mt-bench"))
    a = ap.parse_args()
    saved = json.loads(Path(a.table).read_text(encoding="utf-8"))
    steps0 = auto_mode.PROBE_STEPS
    cfg = EngineConfig(target=a.target, draft=a.draft, n_threads=a.threads)
    if a.chat:  # the same contexts for every variant: the target's own tokens whatever the steps
        cfg = cfg.replace(n_ctx=8192, exact=True)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        table = calibration.CostTable.from_json(saved)
        table.key = calibration.calibration_key(eng.config)  # used here as if measured here
        eng.calibration = table
        costs = table.costs()
        if a.chat:
            print(f"one chat of {a.chat} requests ({a.chat_prompts}), table {a.table}")
            print("| variant | whole chat: x AR |\n|---|---|")
            chat(eng, table, costs, a)
            return
        print(f"{'public' if a.public else 'validation'} prompts, {a.n} a category, table {a.table}")
        print("| variant | " + " | ".join(a.categories.split(",")) + " |")
        print("|---" * (1 + len(a.categories.split(","))) + "|")
        for variant in a.variants.split(","):
            auto_mode.PROBE_STEPS = 4 if "probe4" in variant.split("+") else steps0
            cells = []
            for cat in a.categories.split(","):
                pol = policy(table, eng.drafter.max_draft, variant, a.switch_cost)
                eng.auto_policy = pol
                tot = Counter()
                for text in prompts(eng, cat, a.n, a.public) * a.passes:
                    mode = "chain" if variant == "chain7" else "auto"
                    res = eng.generate(text, GenerationSettings(mode=mode, budget=7, max_tokens=a.max_tokens))
                    cost_run(res, costs, a, tot)
                share = tot["spec"] / max(tot["spec"] + tot["ar"], 1)
                cells.append(f"{tot['tokens'] / tot['time']:.3f} ({share:.0%} spec, {tot['changes']} changes)")
            auto_mode.PROBE_STEPS = steps0
            print(f"| {variant} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
