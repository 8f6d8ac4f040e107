"""GPU diagnostics for one pair, run after the main comparison (gpu/gpu_bench.sh diag).

* ``sampling``: AR and chain with the greedy argmax on the backend (default) and on the host
  (numpy argmax over the copied logits), same prompts: what backend sampling saves per step.
* ``inject_sync``: chain with and without the synchronisation that closes the inject phase (with
  it the phase times are device-inclusive; without it the inject's device time lands in the next
  draft phase): what the extra sync costs.
* ``calls``: one AR and one chain run with every llama.cpp call the loop makes timed and counted:
  per step, time inside llama.cpp (split by call) and the Python remainder.
* ``kv``: tok/s for KV cache pairs with flash attention on, including pairs this build has no
  fast CUDA kernel for, and what the pairing check said about each.
* ``memory``: weights, context state, and the GPU memory this process holds (nvidia-smi).
* ``profile``: cProfile of one chain run, top functions by own time.
* ``nseq``: AR and chain with the target context made for 64 sequences (tree-capable) and for 1.

Usage: python gpu/gpu_diag.py --target T --draft D [--n 256] [--prompts 3] [--json out.json]
       [--only sampling,calls,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_engine import PROMPTS  # noqa: E402
from engine_bridge.runtime import drafter as drafter_mod  # noqa: E402
from engine_bridge.runtime import native  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings, KVTypes  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT


def gpu_mem_mib() -> int | None:
    """GPU memory this process holds, per nvidia-smi (None where it cannot tell)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0] == str(os.getpid()):
            return int(parts[1])
    return None


def run_mode(eng: Engine, settings: GenerationSettings, prompts, reps: int = 1) -> dict:
    eng.reset()
    eng.generate(prompts[0], settings.replace(max_tokens=16))  # warm-up
    tps, steps, host, commit = [], [], [], []
    phases: dict[str, list] = {}
    for rep in range(reps):
        for p in prompts:
            eng.reset()
            r = eng.generate(p, settings.replace(seed=rep))
            tps.append(r.summary.tok_per_s)
            steps.append(statistics.fmean(s.wall for s in r.steps))
            host.append(r.host_overhead())
            commit.append(r.summary.mean_commit_len)
            for k, v in r.phase_means().items():
                phases.setdefault(k, []).append(v)
    return {
        "tok_per_s": statistics.fmean(tps),
        "step_ms": 1e3 * statistics.fmean(steps),
        "host_overhead": statistics.fmean(host),
        "mean_commit_len": statistics.fmean(commit),
        "phase_ms": {k: 1e3 * statistics.fmean(v) for k, v in phases.items()},
    }


def load(a, **kw) -> Engine:
    cfg = dict(target=a.target, draft=a.draft, n_ctx=4096, flash_attn="on")
    cfg.update(kw)
    return Engine.load(EngineConfig(**cfg), preflight=PAIR_PREFLIGHT)


def exp_sampling(a, prompts) -> dict:
    out = {}
    base = GenerationSettings(max_tokens=a.n)
    for on in (True, False):
        with load(a, backend_sampling=on) as eng:
            out["backend" if on else "host"] = {
                "ar": run_mode(eng, base.replace(mode="ar"), prompts),
                "chain7": run_mode(eng, base.replace(mode="chain", budget=7), prompts),
            }
    for mode in ("ar", "chain7"):
        b, h = out["backend"][mode], out["host"][mode]
        print(
            f"sampling  {mode:7} backend {b['tok_per_s']:8.1f} tok/s ({b['step_ms']:.3f} ms/step)   "
            f"host {h['tok_per_s']:8.1f} tok/s ({h['step_ms']:.3f} ms/step)",
            flush=True,
        )
    return out


def exp_inject_sync(a, prompts) -> dict:
    out = {}
    base = GenerationSettings(max_tokens=a.n, mode="chain", budget=7)
    old = drafter_mod.SYNC_INJECT
    try:
        with load(a) as eng:
            for on in (True, False, True, False):
                drafter_mod.SYNC_INJECT = on
                r = run_mode(eng, base, prompts)
                out.setdefault("sync" if on else "nosync", []).append(r)
    finally:
        drafter_mod.SYNC_INJECT = old
    for k, v in out.items():
        print(
            f"inject    {k:7} "
            + "  ".join(
                f"{r['tok_per_s']:8.1f} tok/s ({r['step_ms']:.3f} ms/step, inject "
                f"{r['phase_ms']['inject']:.3f}, draft {r['phase_ms']['draft']:.3f})"
                for r in v
            ),
            flush=True,
        )
    return out


class CallTimer:
    """Wraps the llama.cpp entry points the loop uses; times and counts each."""

    TARGETS = [
        (native.Context, "process"),
        (native.Context, "synchronize"),
        (native.Context, "sampled_token"),
        (native.Context, "logits"),
        (native.Context, "seq_rm"),
        (native.Context, "seq_cp"),
        (native.Context, "seq_keep"),
        (native.Batch, "clear"),
        (native.Batch, "add_token"),
        (native.Batch, "add_token_seqs"),
        (native.Batch, "add_embd_at"),
    ]

    def __init__(self):
        self.t: dict[str, float] = {}
        self.n: dict[str, int] = {}
        self.saved = []
        self.active = True

    def __enter__(self):
        orig_prefill = Engine._prefill
        self.saved.append((Engine, "_prefill", orig_prefill))

        def prefill(*args, **kw):  # the prompt's calls are not part of any step
            self.active = False
            try:
                return orig_prefill(*args, **kw)
            finally:
                self.active = True

        Engine._prefill = prefill
        for cls, name in self.TARGETS:
            orig = getattr(cls, name)
            self.saved.append((cls, name, orig))
            key = f"{cls.__name__}.{name}"

            def wrap(*args, _o=orig, _k=key, **kw):
                if not self.active:
                    return _o(*args, **kw)
                t0 = time.perf_counter()
                try:
                    return _o(*args, **kw)
                finally:
                    self.t[_k] = self.t.get(_k, 0.0) + time.perf_counter() - t0
                    self.n[_k] = self.n.get(_k, 0) + 1

            setattr(cls, name, wrap)
        return self

    def __exit__(self, *exc):
        for cls, name, orig in self.saved:
            setattr(cls, name, orig)


def exp_calls(a, prompts) -> dict:
    out = {}
    base = GenerationSettings(max_tokens=a.n)
    with load(a) as eng:
        for label, s in (
            ("ar", base.replace(mode="ar")),
            ("chain7", base.replace(mode="chain", budget=7)),
            ("chain15", base.replace(mode="chain", budget=15)),
        ):
            eng.reset()
            eng.generate(prompts[0], s.replace(max_tokens=16))
            eng.reset()
            # an un-instrumented run first: the wrappers add their own cost
            plain = eng.generate(prompts[0], s)
            eng.reset()
            with CallTimer() as ct:
                r = eng.generate(prompts[0], s)
            n = len(r.steps)
            wall = sum(st.wall for st in r.steps)
            in_calls = sum(ct.t.values())
            per = {k: {"us_per_step": 1e6 * v / n, "calls_per_step": ct.n[k] / n} for k, v in sorted(ct.t.items())}
            out[label] = {
                "steps": n,
                "step_ms": 1e3 * wall / n,
                "plain_step_ms": 1e3 * statistics.fmean(st.wall for st in plain.steps),
                "plain_tok_per_s": plain.summary.tok_per_s,
                "in_llama_calls_ms": 1e3 * in_calls / n,
                "python_ms": 1e3 * (wall - in_calls) / n,
                "python_fraction": 1 - in_calls / wall,
                "calls": per,
            }
            print(
                f"calls     {label:7} step {1e3 * wall / n:.3f} ms (plain {out[label]['plain_step_ms']:.3f}): "
                f"llama.cpp {1e3 * in_calls / n:.3f} ms, python {1e3 * (wall - in_calls) / n:.3f} ms "
                f"({out[label]['python_fraction']:.1%})",
                flush=True,
            )
            for k, v in per.items():
                print(f"            {k:24} {v['us_per_step']:9.1f} us/step  {v['calls_per_step']:6.1f} calls/step")
    return out


def exp_kv(a, prompts) -> dict:
    out = {}
    base = GenerationSettings(max_tokens=min(a.n, 128))
    for kv in ("f16/f16", "q8_0/q8_0", "q4_0/q4_0", "bf16/bf16", "q8_0/f16", "f16/q8_0", "q4_0/q8_0"):
        k, v = kv.split("/")
        row: dict = {}
        try:
            with load(a, target_kv=KVTypes(k, v), draft_kv=KVTypes(k, v)) as eng:
                if eng.report is not None:
                    row["checks"] = [
                        f"{c.status}: {c.reason}"
                        for c in eng.report.checks
                        if "KV" in c.reason or "kv" in c.name.lower()
                    ]
                row["ar"] = run_mode(eng, base.replace(mode="ar"), prompts[:1])
                row["chain7"] = run_mode(eng, base.replace(mode="chain", budget=7), prompts[:1])
                row["gpu_mem_mib"] = gpu_mem_mib()
            print(
                f"kv        {kv:10} AR {row['ar']['tok_per_s']:8.1f} tok/s  chain7 {row['chain7']['tok_per_s']:8.1f} "
                f"tok/s  {'; '.join(row.get('checks', []))[:160]}",
                flush=True,
            )
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            print(f"kv        {kv:10} failed: {row['error'][:300]}", flush=True)
        out[kv] = row
    return out


def exp_memory(a, prompts) -> dict:
    before = gpu_mem_mib()
    with load(a) as eng:
        loaded = gpu_mem_mib()
        eng.generate(prompts[0], GenerationSettings(max_tokens=64, mode="tree", budget=32))
        after = gpu_mem_mib()
        mem = eng.memory()
    out = {"engine": mem, "gpu_mib_before": before, "gpu_mib_loaded": loaded, "gpu_mib_after_tree32": after}
    print(
        f"memory    weights {mem['target_weights'] / 2**20:.0f}+{mem.get('draft_weights', 0) / 2**20:.0f} MiB, "
        f"context state {mem['target_context'] / 2**20:.0f}+{mem.get('draft_context', 0) / 2**20:.0f} MiB, "
        f"GPU held {loaded} MiB loaded, {after} MiB after a tree-32 run, RSS {mem['process_rss'] / 2**20:.0f} MiB",
        flush=True,
    )
    return out


def exp_nseq(a, prompts) -> dict:
    """The target context's sequence slots: 64 (tree-capable, the default) vs 1 (chain only)."""
    out = {}
    base = GenerationSettings(max_tokens=a.n)
    for label, nodes in (("n_seq_64", 64), ("n_seq_1", 1), ("n_seq_64b", 64), ("n_seq_1b", 1)):
        with load(a, max_tree_nodes=nodes) as eng:
            out[label] = {
                "ar": run_mode(eng, base.replace(mode="ar"), prompts),
                "chain7": run_mode(eng, base.replace(mode="chain", budget=7), prompts),
                "gpu_mem_mib": gpu_mem_mib(),
            }
        r = out[label]
        print(
            f"nseq      {label:9} AR {r['ar']['tok_per_s']:8.1f} tok/s ({r['ar']['step_ms']:.3f} ms)  chain7 "
            f"{r['chain7']['tok_per_s']:8.1f} tok/s ({r['chain7']['step_ms']:.3f} ms)  GPU {r['gpu_mem_mib']} MiB",
            flush=True,
        )
    return out


def exp_profile(a, prompts) -> dict:
    """cProfile of one chain-7 run: where the Python time goes (the profiler inflates small calls)."""
    import cProfile
    import io
    import pstats

    base = GenerationSettings(max_tokens=a.n, mode="chain", budget=7)
    with load(a) as eng:
        eng.generate(prompts[0], base.replace(max_tokens=16))
        eng.reset()
        pr = cProfile.Profile()
        pr.enable()
        r = eng.generate(prompts[0], base)
        pr.disable()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(22)
    text = buf.getvalue()
    print(f"profile   chain7 {len(r.steps)} steps; top functions by own time:", flush=True)
    print("\n".join(line[:160] for line in text.splitlines()[:40] if line.strip()), flush=True)
    return {"steps": len(r.steps), "stats": text}


EXPERIMENTS = {
    "sampling": exp_sampling,
    "inject_sync": exp_inject_sync,
    "calls": exp_calls,
    "kv": exp_kv,
    "memory": exp_memory,
    "profile": exp_profile,
    "nseq": exp_nseq,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--only", default=",".join(EXPERIMENTS))
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    prompts = PROMPTS[: a.prompts]
    res: dict = {"target": a.target, "draft": a.draft, "n": a.n}
    for name in a.only.split(","):
        t0 = time.time()
        try:
            res[name] = EXPERIMENTS[name](a, prompts)
        except Exception as exc:
            res[name] = {"error": traceback.format_exc()[-3000:]}
            print(f"{name} failed: {exc}", flush=True)
        res.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
