"""Engine throughput: autoregressive vs chain speculative on one pair, in one process, one run.

Reports tok/s for both modes, the ratio, mean commit length, acceptance, mean step phases and host
overhead per step (time outside llama.cpp calls / step wall time). Warm-up runs are excluded.

    python benchmarks/bench_engine.py [--target T --draft D] [--budgets 4,15] [--max-tokens 256] [--json out.json]

Without --target it writes the tiny generated pair (engine_bridge.models.synth) into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile

from engine_bridge.runtime import drafter as drafter_mod
from engine_bridge.runtime import generation as gen_mod
from engine_bridge.models import synth
from engine_bridge.runtime.config import EngineConfig, GenerationSettings, KVTypes
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.rpc import parse_endpoints

PROMPTS = ["Hello world", "def fibonacci(n):", "The history of the", "1, 2, 3, 4,", "Dear team,"]


def load_prompts(path: str | None, n: int) -> list[str]:
    """The first ``n`` prompts of a JSONL file ({"prompt": ...} per line), or of PROMPTS."""
    if not path:
        return PROMPTS[:n]
    lines = [json.loads(x) for x in open(path) if x.strip()]
    return [x["prompt"] for x in lines][:n]


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def measure(eng: Engine, settings: GenerationSettings, prompts, reps: int) -> dict:
    tps, commits, acc, host, ntok = [], [], [], [], []
    phases = {p: [] for p in ("draft", "inject", "verify", "accept", "other")}
    walls = []
    eng.reset()
    eng.generate(prompts[0], settings.replace(max_tokens=16))  # warm-up, not counted
    for rep in range(reps):
        for p in prompts:
            eng.reset()
            r = eng.generate(p, settings.replace(seed=rep))
            s = r.summary
            tps.append(s.tok_per_s)
            ntok.append(s.n_generated)
            commits.append(s.mean_commit_len)
            acc.append(s.acceptance_rate)
            host.append(r.host_overhead())
            for k, v in r.phase_means().items():
                phases[k].append(v)
            walls.append(statistics.fmean(st.wall for st in r.steps))
    return {
        "tok_per_s": statistics.fmean(tps),
        "tok_per_s_sd": statistics.stdev(tps) if len(tps) > 1 else 0.0,
        "mean_commit_len": statistics.fmean(commits),
        "acceptance_rate": statistics.fmean(acc),
        "host_overhead": statistics.fmean(host),
        "step_ms": 1e3 * statistics.fmean(walls),
        "tokens_per_run": statistics.fmean(ntok),
        "phase_ms": {k: 1e3 * statistics.fmean(v) for k, v in phases.items()},
    }


def merge_rounds(rs: list[dict]) -> dict:
    """Means over rounds (each round's figures are already means over prompts and repetitions)."""
    out = {}
    for key, v in rs[0].items():
        if isinstance(v, dict):
            out[key] = {k: statistics.fmean(r[key][k] for r in rs) for k in v}
        elif key == "tok_per_s_sd":
            out[key] = statistics.stdev(r["tok_per_s"] for r in rs) if len(rs) > 1 else v
        else:
            out[key] = statistics.fmean(r[key] for r in rs)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--budgets", default="4,15", help="chain budgets")
    ap.add_argument("--tree", default="", help="tree node budgets, e.g. 8,16,32")
    ap.add_argument("--prompts", type=int, default=len(PROMPTS), help="how many prompts")
    ap.add_argument("--prompt-file", help='JSONL prompts ({"prompt": ...}); default: the built-in ones')
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--ngl", type=int, default=-1)
    ap.add_argument("--flash-attn", default="auto")
    ap.add_argument("--kv", default="f16/f16")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument(
        "--tree-variants",
        default="auto",
        help="tree runs per budget, comma-separated: auto (the engine's defaults) or two letters, "
        "h(ost)/b(ackend) for where the drafter's top-K and the target's argmax are taken, e.g. hh,bh,hb",
    )
    ap.add_argument("--rounds", type=int, default=1, help="passes over all configurations, interleaved")
    ap.add_argument("--json")
    from engine_bridge.cli.engine import add_placement_args, add_rpc_arg, placements_from_args

    add_placement_args(ap)  # several GPUs: --split-mode, --tensor-split, --main-gpu, --draft-*
    add_rpc_arg(ap)  # --rpc host:port,... (in this process: a lost server ends the bench)
    args = ap.parse_args(argv)
    if not args.target:
        tmp = tempfile.mkdtemp(prefix="bench-engine-")
        args.target, args.draft = map(str, synth.write_pair(tmp))
    k, v = args.kv.split("/")
    target_placement, draft_placement = placements_from_args(args)
    cfg = EngineConfig(
        target=args.target,
        draft=args.draft,
        n_ctx=args.n_ctx,
        n_gpu_layers=args.ngl,
        flash_attn=args.flash_attn,
        target_kv=KVTypes(k, v),
        draft_kv=KVTypes(k, v),
        n_threads=args.threads,
        target_placement=target_placement,
        draft_placement=draft_placement,
        rpc_servers=parse_endpoints(args.rpc),
    )
    out = {
        "command": " ".join(["python", "benchmarks/bench_engine.py"] + list(argv or sys.argv[1:])),
        "machine": {"cpu": cpu_model(), "python": platform.python_version()},
        "rows": [],
    }
    from engine_bridge.cli.engine import doctor_report

    out["build"] = {k: v for k, v in doctor_report().items() if k != "system_info"}
    top_k_on, argmax_on = drafter_mod.TREE_TOP_K_ON, gen_mod.TREE_ARGMAX_ON
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        out["pair"] = eng.describe()
        out["memory"] = eng.memory()
        out["devices"] = out["build"].pop("devices", [])
        prompts = load_prompts(args.prompt_file, args.prompts)
        base = GenerationSettings(max_tokens=args.max_tokens)
        where = {"h": "host", "b": "backend"}
        configs = [("ar", 0, None)]
        configs += [("chain", int(x), None) for x in args.budgets.split(",") if x]
        configs += [
            ("tree" if v == "auto" else f"tree-{v}", int(x), v)
            for v in args.tree_variants.split(",")
            for x in args.tree.split(",")
            if x
        ]
        # rounds interleave the configurations, so a drift of the machine (clocks, other load)
        # spreads over all of them instead of favouring whichever ran first
        runs: dict = {c: [] for c in configs}
        for _ in range(args.rounds):
            for c in configs:
                name, b, variant = c
                drafter_mod.TREE_TOP_K_ON = top_k_on if variant in (None, "auto") else where[variant[0]]
                gen_mod.TREE_ARGMAX_ON = argmax_on if variant in (None, "auto") else where[variant[1]]
                mode = name.split("-")[0]
                settings = base.replace(mode=mode, budget=b) if b else base.replace(mode=mode)
                runs[c].append(measure(eng, settings, prompts, args.reps))
        drafter_mod.TREE_TOP_K_ON, gen_mod.TREE_ARGMAX_ON = top_k_on, argmax_on
        ar_tps = statistics.fmean(r["tok_per_s"] for r in runs[configs[0]])
        for (name, b, variant), rs in runs.items():
            row = merge_rounds(rs)
            out["rows"].append(
                {
                    "mode": name,
                    "budget": b,
                    **({"tree_variant": variant} if variant else {}),
                    **row,
                    "rounds": len(rs),
                    "speedup": row["tok_per_s"] / ar_tps,
                }
            )
    print(
        f"{'mode':6} {'budget':>6} {'tok/s':>9} {'ratio':>6} {'commit':>6} {'accept':>7} {'step ms':>8} "
        f"{'draft':>6} {'inject':>6} {'verify':>6} {'accept':>6} {'other':>6} {'host':>6}"
    )
    for r in out["rows"]:
        ph = r["phase_ms"]
        print(
            f"{r['mode']:6} {r['budget']:>6} {r['tok_per_s']:>9.1f} {r['speedup']:>6.2f} {r['mean_commit_len']:>6.2f} "
            f"{r['acceptance_rate']:>7.1%} {r['step_ms']:>8.3f} {ph['draft']:>6.3f} {ph['inject']:>6.3f} "
            f"{ph['verify']:>6.3f} {ph['accept']:>6.3f} {ph['other']:>6.3f} {r['host_overhead']:>6.1%}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
