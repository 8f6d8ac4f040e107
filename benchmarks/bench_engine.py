"""Engine throughput: autoregressive vs chain speculative on one pair, in one process, one run.

Reports tok/s for both modes, the ratio, mean commit length, acceptance, mean step phases and host
overhead per step (time outside llama.cpp calls / step wall time). Warm-up runs are excluded.

    python benchmarks/bench_engine.py [--target T --draft D] [--budgets 4,15] [--max-tokens 256] [--json out.json]

Without --target it writes the tiny generated pair (engine_bridge.synth) into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile

from engine_bridge import drafter as drafter_mod
from engine_bridge import synth
from engine_bridge.config import EngineConfig, GenerationSettings, KVTypes
from engine_bridge.engine import Engine

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
    eng.generate(prompts[0], settings.replace(max_tokens=16))   # warm-up, not counted
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
        "tok_per_s": statistics.fmean(tps), "tok_per_s_sd": statistics.stdev(tps) if len(tps) > 1 else 0.0,
        "mean_commit_len": statistics.fmean(commits), "acceptance_rate": statistics.fmean(acc),
        "host_overhead": statistics.fmean(host), "step_ms": 1e3 * statistics.fmean(walls),
        "tokens_per_run": statistics.fmean(ntok),
        "phase_ms": {k: 1e3 * statistics.fmean(v) for k, v in phases.items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--budgets", default="4,15", help="chain budgets")
    ap.add_argument("--tree", default="", help="tree node budgets, e.g. 8,16,32")
    ap.add_argument("--prompts", type=int, default=len(PROMPTS), help="how many prompts")
    ap.add_argument("--prompt-file", help="JSONL prompts ({\"prompt\": ...}); default: the built-in ones")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--ngl", type=int, default=-1)
    ap.add_argument("--flash-attn", default="auto")
    ap.add_argument("--kv", default="f16/f16")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--tree-scoring", default="backend",
                    help="where tree steps take the drafter's top-K: backend (a top-k sampler in the "
                         "graph), host (full logits), or both, comma-separated")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not args.target:
        tmp = tempfile.mkdtemp(prefix="bench-engine-")
        args.target, args.draft = map(str, synth.write_pair(tmp))
    k, v = args.kv.split("/")
    cfg = EngineConfig(target=args.target, draft=args.draft, n_ctx=args.n_ctx, n_gpu_layers=args.ngl,
                       flash_attn=args.flash_attn, target_kv=KVTypes(k, v), draft_kv=KVTypes(k, v),
                       n_threads=args.threads)
    out = {"command": " ".join(["python", "benchmarks/bench_engine.py"] + list(argv or sys.argv[1:])),
           "machine": {"cpu": cpu_model(), "python": platform.python_version()}, "rows": []}
    from engine_bridge.cli_engine import doctor_report

    out["build"] = {k: v for k, v in doctor_report().items() if k != "system_info"}
    kb = drafter_mod.BACKEND_TOP_K
    with Engine.load(cfg) as eng:
        out["pair"] = eng.describe()
        out["memory"] = eng.memory()
        out["devices"] = out["build"].pop("devices", [])
        prompts = load_prompts(args.prompt_file, args.prompts)
        base = GenerationSettings(max_tokens=args.max_tokens)
        ar = measure(eng, base.replace(mode="ar"), prompts, args.reps)
        out["rows"].append({"mode": "ar", "budget": 0, **ar, "speedup": 1.0})
        for b in [int(x) for x in args.budgets.split(",") if x]:
            row = measure(eng, base.replace(mode="chain", budget=b), prompts, args.reps)
            out["rows"].append({"mode": "chain", "budget": b, **row, "speedup": row["tok_per_s"] / ar["tok_per_s"]})
        for scoring in args.tree_scoring.split(","):
            drafter_mod.BACKEND_TOP_K = kb if scoring == "backend" else 0
            mode = "tree" if scoring == "backend" else f"tree-{scoring[0]}"
            for b in [int(x) for x in args.tree.split(",") if x]:
                row = measure(eng, base.replace(mode="tree", budget=b), prompts, args.reps)
                out["rows"].append({"mode": mode, "budget": b, "tree_scoring": scoring, **row,
                                    "speedup": row["tok_per_s"] / ar["tok_per_s"]})
        drafter_mod.BACKEND_TOP_K = kb
    print(f"{'mode':6} {'budget':>6} {'tok/s':>9} {'ratio':>6} {'commit':>6} {'accept':>7} {'step ms':>8} "
          f"{'draft':>6} {'inject':>6} {'verify':>6} {'accept':>6} {'other':>6} {'host':>6}")
    for r in out["rows"]:
        ph = r["phase_ms"]
        print(f"{r['mode']:6} {r['budget']:>6} {r['tok_per_s']:>9.1f} {r['speedup']:>6.2f} {r['mean_commit_len']:>6.2f} "
              f"{r['acceptance_rate']:>7.1%} {r['step_ms']:>8.3f} {ph['draft']:>6.3f} {ph['inject']:>6.3f} "
              f"{ph['verify']:>6.3f} {ph['accept']:>6.3f} {ph['other']:>6.3f} {r['host_overhead']:>6.1%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
