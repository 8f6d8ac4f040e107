"""``dflash-studio calibrate``: what a speculative step costs here, and whether speculation pays.

Prints the cost table (step time per mode and budget, in ms and in AR steps = the break-even
commit length), then runs a short probe on a prompt to measure the pair's commit lengths, and
prints the same advice the auto mode acts on (engine_bridge.runtime.breakeven).
"""

from __future__ import annotations

import json
import sys

from ..runtime.calibration import CHAIN_BUDGETS, ROUNDS, TREE_BUDGETS
from .engine import ENGINE_EXITS, EXIT_FAIL, EXIT_OK, EXIT_UNREADABLE, add_engine_args, config_from_args, load_engine

DEFAULT_PROMPT = "Explain in a few sentences how a bicycle stays upright."


def register(sub) -> None:
    c = sub.add_parser(
        "calibrate",
        help="measure step costs per budget and say whether speculation pays",
        description="Measures (or reads from the cache) the cost of a speculative step at each "
        "budget in autoregressive-token units, probes the pair's commit lengths on a "
        "prompt, and prints the break-even table and the advice auto mode follows.",
        epilog=ENGINE_EXITS,
    )
    add_engine_args(c)
    c.add_argument("--force", action="store_true", help="measure again even when a cached table matches")
    c.add_argument("--prompt", default=DEFAULT_PROMPT, help="probe prompt (wrapped with the chat template if any)")
    c.add_argument("--probe-tokens", type=int, default=48, help="tokens per probe generation (0: no probe)")
    c.add_argument(
        "--chain-budgets",
        default=",".join(map(str, CHAIN_BUDGETS)),
        help="chain budgets to measure (those above the drafter's block are skipped)",
    )
    c.add_argument(
        "--tree-budgets", default=",".join(map(str, TREE_BUDGETS)), help="tree node budgets to measure ('' for none)"
    )
    c.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved measuring rounds")
    c.add_argument("--json", action="store_true", help="print the table, estimates and advice as JSON")
    c.set_defaults(func=cmd_calibrate)


def probe(eng, prompt: str, tokens: int):
    """Short greedy runs that teach a fresh policy the pair's commit lengths: one chain run at the
    largest calibrated budget (its steps also tell every smaller budget) and one per tree budget."""
    from ..runtime.auto_mode import AutoPolicy
    from ..runtime.config import GenerationSettings

    pol = AutoPolicy(eng.calibration, eng.drafter.max_draft)
    if tokens <= 0:
        return pol
    runs = [("chain", max(pol.chain_budgets))] if pol.chain_budgets else []
    runs += [("tree", b) for b in pol.tree_budgets]
    for mode, b in runs:
        eng.reset()
        res = eng.generate(prompt, GenerationSettings(mode=mode, budget=b, max_tokens=tokens))
        pol.observe_run(res)
    eng.reset()
    return pol


def cmd_calibrate(args) -> int:
    from ..runtime import breakeven, calibration
    from ..common.errors import EngineError

    try:
        cfg = config_from_args(args)
        chain = tuple(int(x) for x in args.chain_budgets.split(",") if x.strip())
        tree = tuple(int(x) for x in args.tree_budgets.split(",") if x.strip())
        if not chain or min(chain + tree) < 1 or args.rounds < 1:
            raise ValueError("budgets and rounds must be positive integers, with at least one chain budget")
    except (ValueError, FileNotFoundError) as exc:
        print(f"dflash-studio calibrate: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if cfg.draft is None:
        print(
            "dflash-studio calibrate: give a drafter (--draft): calibration compares speculation with AR",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    eng, rc = load_engine(cfg, args, "calibrate")
    if eng is None:
        return rc
    try:
        say = (lambda m: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
        table = calibration.ensure(
            eng, force=args.force, progress=say, chain_budgets=chain, tree_budgets=tree, rounds=args.rounds
        )
        prompt = args.prompt
        if eng.chat_template():
            prompt = eng.format_chat([{"role": "user", "content": args.prompt}])
        pol = probe(eng, prompt, args.probe_tokens)
    except EngineError as exc:
        print(f"dflash-studio calibrate: {exc}", file=sys.stderr)
        return EXIT_FAIL
    finally:
        eng.close()
    est = pol.estimates()
    rows = []
    for mode, b, ms, cost in table.rows():
        commit = 1.0 if mode == "ar" else est.get((mode, b))
        rows.append(
            {
                "mode": mode,
                "budget": b,
                "step_ms": ms,
                "break_even": cost,
                "commit": commit,
                "speedup": (commit / cost) if commit is not None else None,
                "pays": None if commit is None else (mode == "ar" or commit > cost),
            }
        )
    pick = breakeven.choose(pol.costs, est, pol.margin)
    text = breakeven.advice(pol.costs, est, pol.margin)
    if args.json:
        json.dump(
            {
                "table": table.to_json(),
                "from_cache": table.from_cache,
                "cache": str(calibration.cache_path(table.key)),
                "rows": rows,
                "alpha": pol.alpha,
                "choice": {
                    "mode": pick.mode,
                    "budget": pick.budget,
                    "break_even": pick.cost,
                    "commit": pick.commit,
                    "speedup": pick.speedup,
                },
                "advice": text,
            },
            sys.stdout,
            indent=1,
        )
        sys.stdout.write("\n")
        return EXIT_OK
    src = "cached" if table.from_cache else f"measured in {table.seconds:.1f} s"
    print(f"step costs ({src}; {calibration.cache_path(table.key)})")
    print(f"{'mode':6} {'budget':>6} {'step ms':>9} {'break-even':>10} {'commit':>7} {'x AR':>6}  pays")
    for r in rows:
        commit = "–" if r["commit"] is None else f"{r['commit']:.2f}"
        sp = "–" if r["speedup"] is None else f"{r['speedup']:.2f}"
        pays = "" if r["mode"] == "ar" else ("–" if r["pays"] is None else ("yes" if r["pays"] else "no"))
        print(
            f"{r['mode']:6} {r['budget'] or '':>6} {r['step_ms']:>9.2f} {r['break_even']:>10.2f} {commit:>7} {sp:>6}  {pays}"
        )
    print(f"advice: {text}")
    print(f"auto would run: {pick.label}")
    return EXIT_OK
