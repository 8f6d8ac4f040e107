"""RPC overhead per step on loopback (issue 18): the same pair with every layer on this machine's
own device, and with every layer on an RPC server on 127.0.0.1 serving that device, in one run.

    python benchmarks/bench_rpc.py [--target T --draft D] [--device CUDA0] [--threads 1] [--max-tokens 64]

The server is `dflash-studio rpc-server` from this very build (runtime.rpc_server), started here;
the engine over RPC runs in this process (Engine.load), as the bench does, so both sides time the
same code. Reported per mode (AR, chain): tok/s local and over RPC, their ratio, the mean step
time of each and the difference (what the network round trips and the remote graph cost add per
step), and whether the tokens are identical.

Each side runs in a process of its own, one after the other, in one invocation. With
``--client-hides-gpus`` the RPC side's client sees no local GPU (CUDA_VISIBLE_DEVICES=""), so on a
CUDA machine every layer goes to the server's GPU -- a GPU-less client driving a GPU over loopback
-- while the local side runs on that GPU directly.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.rpc_server import RpcServerProcess

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_engine import PROMPTS, cpu_model  # noqa: E402


def run(eng: Engine, settings: GenerationSettings, prompts, reps: int) -> dict:
    eng.reset()
    eng.generate(prompts[0], settings.replace(max_tokens=8))  # warm-up
    steps, tps, tokens = [], [], []
    for _ in range(reps):
        for p in prompts:
            eng.reset()
            r = eng.generate(p, settings)
            tps.append(r.summary.tok_per_s)
            steps += [s for s in r.steps if s.committed]
            tokens.append(r.tokens)
    ms = lambda f: 1000 * statistics.fmean(f(s) for s in steps)  # noqa: E731
    return {
        "tok_s": statistics.median(tps),
        "step_ms": ms(lambda s: s.wall),
        "n_steps": len(steps),
        "commit": statistics.fmean(s.committed for s in steps),
        "phases_ms": {p: ms(lambda s, p=p: getattr(s, f"t_{p}")) for p in ("draft", "inject", "verify", "accept")},
        "tokens": tokens,
    }


def side(spec: dict) -> dict:
    """One side of the comparison, in this process: load, warm up, measure both modes."""
    cfg = EngineConfig(
        target=spec["target"],
        draft=spec["draft"],
        n_ctx=2048,
        n_gpu_layers=spec["ngl"],
        draft_n_gpu_layers=spec["ngl"],
        n_threads=spec["threads"],
        flash_attn="off",
        rpc_servers=(spec["rpc"],) if spec["rpc"] else (),
    )
    modes = {
        "ar": GenerationSettings(mode="ar", max_tokens=spec["max_tokens"]),
        "chain": GenerationSettings(mode="chain", budget=spec["budget"], max_tokens=spec["max_tokens"]),
    }
    t = time.monotonic()
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        load_s = round(time.monotonic() - t, 2)
        devices = eng.describe()["target_devices"]
        return {
            "load_s": load_s,
            "devices": devices,
            "modes": {m: run(eng, s, spec["prompts"], spec["reps"]) for m, s in modes.items()},
        }


def main(argv=None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--side":
        print(json.dumps(side(json.loads(sys.argv[2]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--device", default="", help="the device the server serves (default: every GPU, else the CPU)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads, engine and server alike")
    ap.add_argument("--ngl", type=int, default=-1)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--budget", type=int, default=7)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument(
        "--client-hides-gpus",
        action="store_true",
        help="the RPC side's client sees no GPU (CUDA_VISIBLE_DEVICES=''): every layer goes to the server",
    )
    ap.add_argument(
        "--split",
        action="store_true",
        help="also a third side: the server's device plus this machine's GPUs, the target's layers split "
        "over both (the hop of a layer split across devices, per verify)",
    )
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.target is None:
        from engine_bridge.models.demo import demo_pair

        target, draft = demo_pair()
    else:
        target, draft = a.target, a.draft
    prompts = PROMPTS[: a.prompts]
    out: dict = {"machine": cpu_model(), "target": str(target), "draft": str(draft), "threads": a.threads}
    results = {}
    with RpcServerProcess(threads=a.threads, devices=[a.device] if a.device else None) as srv:
        sides = ("local", "rpc", "split") if a.split else ("local", "rpc")
        for where in sides:
            env = dict(os.environ)
            if where == "rpc" and a.client_hides_gpus:
                env["CUDA_VISIBLE_DEVICES"] = ""
            spec = {
                "target": str(target),
                "draft": str(draft),
                "ngl": a.ngl,
                "threads": a.threads,
                "rpc": srv.endpoint if where != "local" else "",
                "max_tokens": a.max_tokens,
                "budget": a.budget,
                "reps": a.reps,
                "prompts": prompts,
            }
            proc = subprocess.run(
                [sys.executable, __file__, "--side", json.dumps(spec)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            out[f"{where}_load_s"], out[f"{where}_devices"] = got["load_s"], got["devices"]
            results[where] = got["modes"]
    modes = ("ar", "chain")
    print(f"machine: {out['machine']}; threads {a.threads}")
    for where in sides:
        print(f"{where}: target on {out[where + '_devices']}, load {out[where + '_load_s']} s")
    print(
        "| mode | side | tok/s | ratio to local | step ms | added per step ms | draft | inject | verify | accept | "
        "commit | same tokens |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for m in modes:
        lo = results["local"][m]
        for where in sides:
            r = results[where][m]
            row = {
                "tok_s": r["tok_s"],
                "ratio": r["tok_s"] / lo["tok_s"],
                "step_ms": r["step_ms"],
                "added_ms": r["step_ms"] - lo["step_ms"],
                "phases_ms": r["phases_ms"],
                "commit": r["commit"],
                "same_tokens": r["tokens"] == lo["tokens"],
            }
            out.setdefault(m, {})[where] = row
            ph = r["phases_ms"]
            print(
                f"| {m} | {where} | {r['tok_s']:.1f} | {row['ratio']:.2f} | {r['step_ms']:.2f} | "
                f"{row['added_ms']:+.2f} | {ph['draft']:.2f} | {ph['inject']:.2f} | {ph['verify']:.2f} | "
                f"{ph['accept']:.2f} | {r['commit']:.2f} | {'yes' if row['same_tokens'] else 'NO'} |"
            )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
