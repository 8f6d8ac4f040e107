"""Before/after of a patch's switch (issue 28) on one build, in one sitting.

A patch reads its switch once per process (--env: DFLASH_MMVQ_FUSE_ROWS of the dropped patch 0006,
"0" upstream / "16"; DFLASH_BATCHED_ARGMAX of patch 0006, "0" upstream / "1"; DFLASH_LAYER_INP_RESERVE
of patch 0007, "1" upstream / "0"; DFLASH_SMALL_TOP_K of patch 0024, "0" upstream / "1";
DFLASH_TOP_K_SPLIT of the dropped patch 0025, "0" one block a row / "1"; DFLASH_TREE_BATCH of patch 0026,
"0" a tree verify filled entry by entry / "1"), so each side is its own process, the
sides alternating, twice each:

  1. wall ms per phase: gpu/gpu_step_profile.py --time (ar, verify8/16, draft8/16, inject, and
     whole chain7 / tree15 steps), per side and round, into DIR/fuse_VALUE_ROUND.json
     (--sides 0,16 by default; e.g. --sides 0,8,16 adds a side fused up to 8 rows)
  2. equality: per side, the target's raw logits for batches of 2, 8 and 16 rows after one prompt,
     the drafter's backend top-k candidates (BACKEND_TOP_K a row) of one 16-row block, and the
     greedy tokens of AR, chain 7, chain 15 and tree 15 runs (--worker), compared between the sides
     (the fused epilogue adds in the same order as the unfused kernels: expect 0 or ~1e-6)
  3. with --ncu DIR2 (gpu/gpu_ncu.sh step fusencu): kernels per phase and family from its csvs
Files are named by --tag (default "fuse": fuse_SIDE_ROUND.json, fuse_eq_SIDE.*).

Usage (project root on the GPU machine, the engine built at /tmp/lcp_site):
  PYTHONPATH=/tmp/lcp_site:/tmp/site:. python3 gpu/gpu_fuse_ab.py --target T --draft D --out DIR
  python3 gpu/gpu_fuse_ab.py --report DIR [--ncu DIR]          # the tables again, from DIR
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

SIDES = ("0", "16")  # the switch's value per side; the first is the baseline
SHOWN = ("ar", "verify8", "verify16", "draft8", "draft16", "inject", "arx", "toggle", "chain7", "tree15")
ENV = "DFLASH_MMVQ_FUSE_ROWS"  # the switch (--env)
TAG = "fuse"  # file name prefix (--tag)
PROMPT = "The history of the city begins with a small settlement on the river, where"


def worker(a) -> int:
    """One side's logits and greedy tokens (its switch is in the environment)."""
    import numpy as np

    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.drafter import BACKEND_TOP_K
    from engine_bridge.runtime.engine import Engine

    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=4096, flash_attn="on")
    res: dict = {"tokens": {}}
    arrays = {}
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        toks = eng.tokenize(PROMPT)
        for n in (2, 8, 16):
            eng.target_ctx.set_backend_greedy(False)  # raw logits on the host
            eng._prefill(toks[:-1], need_features=False)
            pos = len(eng.kv)
            b = eng.target_batch
            b.clear()
            for j in range(n):
                b.add_token(toks[-1] if j == 0 else (toks[-1] + j) % 1000 + 10, pos + j, 0, True)
            eng.target_ctx.process(b)
            eng.target_ctx.synchronize()
            arrays[f"rows{n}"] = np.array(eng.target_ctx.logits(n), dtype=np.float32).copy()
            eng.target_ctx.seq_rm(0, pos, -1)
        # the drafter's backend top-k as a tree step takes it (patch 0007; 0024 replaces its sort):
        # one 16-row block's candidate ids and raw logits, in the device's order, twice (the second
        # from a replayed graph)
        d = eng.drafter
        eng._prefill(toks[:-1], need_features=True)
        pos = len(toks) - 1
        d.ctx.set_backend_top_k(BACKEND_TOP_K)
        for rep in (0, 1):
            d.ctx.seq_rm(0, pos, -1)
            _, first_out, _ = d._decode_block(toks[-1], pos, 15)
            ids, lg = d.ctx.sampled_top_k(first_out, 15)
            arrays[f"cand_ids{rep}"], arrays[f"cand_logits{rep}"] = np.array(ids).copy(), np.array(lg).copy()
        d.ctx.seq_rm(0, pos, -1)
        d.ctx.set_backend_top_k(0)
        for mode, budget in (("ar", 1), ("chain", 7), ("chain", 15), ("tree", 15)):
            s = GenerationSettings(mode=mode, budget=budget, max_tokens=48, stop_at_eog=False)
            res["tokens"][f"{mode}{budget}"] = list(eng.generate(toks, s).tokens)
    np.savez(a.worker_out + ".npz", **arrays)
    Path(a.worker_out + ".json").write_text(json.dumps(res) + "\n")
    return 0


def run(cmd: list[str], env_val: str, log: Path, timeout: int) -> int:
    env = dict(os.environ, **{ENV: env_val})
    t0 = time.time()
    try:
        with open(log, "w") as f:
            rc = subprocess.run(
                cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, check=False
            ).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    print(f"  {log.name}: rc={rc} {time.time() - t0:.0f} s", flush=True)
    return rc


def measure(a, sides: list[str]) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    for v in [] if a.no_eq else sides:  # equality first: cheap, and it must hold
        run(
            [py, __file__, "--target", a.target, "--draft", a.draft, "--worker-out", str(out / f"{TAG}_eq_{v}")],
            v,
            out / f"{TAG}_eq_{v}.log",
            240,
        )
    for rnd in range(1, a.rounds + 1):
        for v in sides:
            run(
                [
                    py,
                    str(HERE / "gpu_step_profile.py"),
                    "--target",
                    a.target,
                    "--draft",
                    a.draft,
                    "--time",
                    "--timed",
                    str(a.timed),
                    "--steps",
                    str(a.steps),
                    "--context",
                    str(a.context),
                    "--json",
                    str(out / f"{TAG}_{v}_{rnd}.json"),
                ],
                v,
                out / f"{TAG}_{v}_{rnd}.log",
                240,
            )


def equality(out: Path, sides: list[str]) -> list[str]:
    lines = []
    for v in sides[1:]:
        lines += ["", f"Equality, {ENV}={sides[0]} against {v} (same build):", ""]
        try:
            import numpy as np

            a, b = np.load(out / f"{TAG}_eq_{sides[0]}.npz"), np.load(out / f"{TAG}_eq_{v}.npz")
            for k in a.files:
                if k.startswith("cand_ids"):
                    rows_same = sum(set(x) == set(y) for x, y in zip(a[k].tolist(), b[k].tolist()))
                    lines.append(
                        f"- drafter top-k {k}: {a[k].shape}, same order {bool((a[k] == b[k]).all())}, rows with "
                        f"the same candidates {rows_same}/{a[k].shape[0]}"
                    )
                    continue
                d = np.abs(a[k] - b[k])
                same_argmax = int((a[k].argmax(-1) == b[k].argmax(-1)).sum())
                lines.append(
                    f"- logits {k}: max |diff| {float(d.max()):.3g}, rows with the same argmax "
                    f"{same_argmax}/{a[k].shape[0]}, bit-identical {bool((a[k] == b[k]).all())}"
                )
        except Exception as exc:  # noqa: BLE001 -- report, do not stop
            lines.append(f"- logits: not compared ({exc})")
        try:
            ta = json.loads((out / f"{TAG}_eq_{sides[0]}.json").read_text())["tokens"]
            tb = json.loads((out / f"{TAG}_eq_{v}.json").read_text())["tokens"]
            for k in ta:
                same = ta[k] == tb.get(k)
                first = next((i for i, (x, y) in enumerate(zip(ta[k], tb.get(k, []))) if x != y), None)
                lines.append(
                    f"- greedy tokens {k}: {'identical' if same else f'DIFFER from token {first}'} "
                    f"({len(ta[k])} tokens)"
                )
        except Exception as exc:  # noqa: BLE001
            lines.append(f"- tokens: not compared ({exc})")
    return lines


def timing(out: Path, sides: list[str]) -> list[str]:
    runs = {v: [json.loads(f.read_text())["phases"] for f in sorted(out.glob(f"{TAG}_{v}_[0-9]*.json"))] for v in sides}
    n = min(len(r) for r in runs.values())
    if n == 0:
        return ["", "no timing runs found"]
    base = sides[0]
    head = " | ".join(f"{v} #{i + 1}" for i in range(n) for v in sides)
    meds = " | ".join(f"{v} (median)" for v in sides)
    ratios = " | ".join(f"{v}/{base}" for v in sides[1:])
    lines = [
        "",
        (
            "Wall ms per phase (each run's median; AR tokens = phase / that run's ar); columns named by "
            f"{ENV}'s value (the first is the baseline), runs alternating:"
        ),
        "",
        f"| phase | {head} | {meds} | {ratios} | AR tokens {' -> '.join(sides)} |",
        "|---" * (1 + n * len(sides) + 2 * len(sides)) + "|",
    ]
    for p in SHOWN:
        try:
            ms = {v: [r[p]["ms_median"] for r in runs[v][:n]] for v in sides}
            ar = {v: statistics.median(r[p]["ar_tokens"] for r in runs[v][:n]) for v in sides}
        except KeyError:
            continue
        med = {v: statistics.median(ms[v]) for v in sides}
        cells = " | ".join(f"{ms[v][i]:.3f}" for i in range(n) for v in sides)
        lines.append(
            f"| {p} | {cells} | "
            + " | ".join(f"{med[v]:.3f}" for v in sides)
            + " | "
            + " | ".join(f"{med[v] / med[base]:.3f}" for v in sides[1:])
            + " | "
            + " -> ".join(f"{ar[v]:.2f}" for v in sides)
            + " |"
        )
    for p in ("chain7", "tree15"):
        try:
            ph = {
                v: {
                    k: statistics.median(r[p]["phase_ms"][k] for r in runs[v][:n])
                    for k in ("draft", "inject", "verify")
                }
                for v in sides
            }
        except KeyError:
            continue
        lines.append(
            f"\n{p} step phases, ms ({' -> '.join(sides)}): "
            + ", ".join(f"{k} " + " -> ".join(f"{ph[v][k]:.3f}" for v in sides) for k in ("draft", "inject", "verify"))
        )
    return lines


def kernels(ncu: Path, sides: list[str]) -> list[str]:
    import gpu_ncu_report as g

    lines = [
        "",
        f"Kernels per iteration under ncu (count / µs), {ENV} {sides[0]} -> {sides[-1]}:",
        "",
        "| phase | all | MMVQ | act. quantise | swiglu | add (k_bin_bcast) | argmax |",
        "|---|---|---|---|---|---|---|",
    ]
    fams = (
        "MMVQ (quantised mat-vec)",
        "activation quantise (MMVQ)",
        "swiglu",
        "add / mul (binary)",
        "argmax / sampling",
    )
    for p in SHOWN:
        cells = {}
        for side in (f"{TAG}{sides[0]}", f"{TAG}{sides[-1]}"):
            csv_path = ncu / f"ncu{side}_{p}.csv"
            if not csv_path.exists():
                break
            meta = ncu / f"ncu{side}_{p}.json"
            iters = json.loads(meta.read_text()).get("iters", 1) if meta.exists() else 1
            ks = g.read_ncu(csv_path)
            tot = (len(ks) / iters, sum(t for _, t in ks) / iters)
            per = {
                f: (
                    sum(1 for k, _ in ks if g.family(k) == f) / iters,
                    sum(t for k, t in ks if g.family(k) == f) / iters,
                )
                for f in fams
            }
            cells[side] = (tot, per)
        if len(cells) < 2:
            continue
        (t0, p0), (t1, p1) = cells[f"{TAG}{sides[0]}"], cells[f"{TAG}{sides[-1]}"]
        row = [f"{t0[0]:.0f} / {t0[1]:.0f} -> {t1[0]:.0f} / {t1[1]:.0f}"]
        row += [f"{p0[f][0]:.0f} / {p0[f][1]:.0f} -> {p1[f][0]:.0f} / {p1[f][1]:.0f}" for f in fams]
        lines.append(f"| {p} | " + " | ".join(row) + " |")
    return lines


def report(out: Path, ncu: Path | None, sides: list[str]) -> str:
    lines = [f"# {ENV}: {' against '.join(sides)}, {out}"]
    env = out / "env.txt"
    if env.exists():
        lines += ["", "```", env.read_text().strip(), "```"]
    has_eq = (out / f"{TAG}_eq_{sides[0]}.json").exists()
    lines += timing(out, sides) + (equality(out, sides) if has_eq else [])
    if ncu is not None:
        lines += kernels(ncu, sides)
    return "\n".join(lines) + "\n"


def _set_switch(env: str, tag: str) -> None:
    global ENV, TAG
    ENV, TAG = env, tag


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--out", help="results folder (measure, then report)")
    ap.add_argument("--report", help="only the report of this results folder")
    ap.add_argument("--ncu", help="a folder with ncuTAGSIDE_PHASE.csv (gpu_ncu.sh fusencu / argmaxncu)")
    ap.add_argument("--env", default=ENV, help="the switch's environment variable")
    ap.add_argument("--tag", default=TAG, help="file name prefix of the results")
    ap.add_argument("--sides", default=",".join(SIDES), help="the switch's values, the first the baseline")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timed", type=int, default=50, help="iterations per phase and round (gpu_step_profile --timed)")
    ap.add_argument("--steps", type=int, default=40, help="chain7 / tree15 steps per run")
    ap.add_argument("--context", type=int, default=0, help="prompt tokens before the timed loops (gpu_step_profile)")
    ap.add_argument("--no-eq", action="store_true", help="skip the logits / greedy-token equality runs")
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    _set_switch(a.env, a.tag)
    if a.worker_out:
        return worker(a)
    sides = [v.strip() for v in a.sides.split(",") if v.strip()]
    if a.report:
        print(report(Path(a.report), Path(a.ncu) if a.ncu else None, sides), end="")
        return 0
    if not (a.target and a.draft and a.out):
        ap.error("--target, --draft and --out are required (or --report DIR)")
    measure(a, sides)
    text = report(Path(a.out), Path(a.ncu) if a.ncu else None, sides)
    (Path(a.out) / f"{TAG}_report.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
