"""Runs upstream llama.cpp's own drivers on a pair and reads their figures.

* ``llama-speculative-simple --spec-type draft-dflash`` (chain DFlash, upstream's driver) at each
  ``--spec-draft-n-max``: decoded tok/s, drafted, accepted, steps (= decoded - accepted: every
  step commits its accepted drafts plus one target token), step time, and the target sampler's
  host time (upstream samples every verified row on the host over the full vocabulary).
* ``llama-completion``: autoregressive eval tok/s on the same prompts (and its sampling time).
* ``llama-bench -p 0 -n 128``: the standard tg128 figure.
* with ``--backend-sampling``: the same drivers again with upstream's experimental ``-bs``
  (target sampling on the backend), reported separately; a failure there is recorded, not fatal.

Same prompts as benchmarks/bench_engine.py, greedy, n_ctx 4096, flash attention on, all layers on
the GPU. Usage: python gpu/gpu_upstream.py --bin DIR --target T --draft D [--n 256]
[--prompts 3] [--reps 1] [--n-max 7,15] [--json out.json] [--log-dir DIR] [--backend-sampling]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_engine import load_prompts  # noqa: E402

COMMON = ["-ngl", "99", "-fa", "on", "-c", "4096", "--temp", "0", "--seed", "0"]
_LOGS: dict[str, str] = {}  # first raw output of each configuration, for --log-dir


def run(cmd: list[str], key: str, timeout: int = 300) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    out = p.stdout + p.stderr
    _LOGS.setdefault(key, "$ " + " ".join(cmd) + "\n" + out)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({p.returncode}): {out[-2000:]}")
    return out


def _f(pattern: str, text: str, cast=float, last: bool = False):
    hits = re.findall(pattern, text)
    if not hits:
        return None
    h = hits[-1] if last else hits[0]
    return cast(h[0] if isinstance(h, tuple) else h)


def perf(out: str) -> dict:
    """The last perf block of a run (the target's): sampling and eval times."""
    return {
        "sampling_ms": _f(r"sampling time =\s+([\d.]+) ms", out, last=True),
        "eval_ms": _f(r"\beval time =\s+([\d.]+) ms /\s+\d+ runs", out, last=True),
        "eval_runs": _f(r"\beval time =\s+[\d.]+ ms /\s+(\d+) runs", out, int, last=True),
        "prompt_eval_ms": _f(r"prompt eval time =\s+([\d.]+) ms", out, last=True),
        "prompt_eval_tokens": _f(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens", out, int, last=True),
        "unaccounted_ms": _f(r"unaccounted time =\s+([-\d.]+) ms", out, last=True),
        "graphs_reused": _f(r"graphs reused =\s+(\d+)", out, int, last=True),
    }


def speculative(
    bin_dir: Path, target: str, draft: str, prompt: str, n: int, n_max: int, extra=(), spec_type: str = "draft-dflash"
) -> dict:
    out = run(
        [
            str(bin_dir / "llama-speculative-simple"),
            "-m",
            target,
            "-md",
            draft,
            "-ngld",
            "99",
            "--spec-type",
            spec_type,
            "--spec-draft-n-max",
            str(n_max),
            "-p",
            prompt,
            "-n",
            str(n),
        ]
        + COMMON
        + list(extra),
        f"speculative {spec_type} n_max {n_max} {' '.join(extra)}",
    )
    dec = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", out)
    if not dec:
        raise RuntimeError("no 'decoded' line in llama-speculative-simple output:\n" + out[-2000:])
    n_dec, secs = int(dec.group(1)), float(dec.group(2))
    drafted = _f(r"n_drafted\s*=\s*(\d+)", out, int)
    accepted = _f(r"n_accept\s*=\s*(\d+)", out, int)
    steps = n_dec - accepted if accepted is not None else None
    return {
        "n_decoded": n_dec,
        "seconds": secs,
        "tok_per_s": float(dec.group(3)),
        "n_drafted": drafted,
        "n_accepted": accepted,
        "steps": steps,
        "step_ms": 1e3 * secs / steps if steps else None,
        "mean_commit_len": n_dec / steps if steps else None,
        "target_perf": perf(out),
    }


def completion(bin_dir: Path, target: str, prompt: str, n: int, extra=()) -> dict:
    out = run(
        [str(bin_dir / "llama-completion"), "-m", target, "-p", prompt, "-n", str(n), "-no-cnv"] + COMMON + list(extra),
        f"completion {' '.join(extra)}",
    )
    ev = re.search(r"\beval time =\s+([\d.]+) ms /\s+(\d+) runs.*?([\d.]+) tokens per second", out)
    if not ev:
        raise RuntimeError("no 'eval time' line in llama-completion output:\n" + out[-2000:])
    p = perf(out)
    return {
        "ms": float(ev.group(1)),
        "runs": int(ev.group(2)),
        "tok_per_s": float(ev.group(3)),
        "ms_per_token": float(ev.group(1)) / max(int(ev.group(2)), 1),
        "sampling_ms": p["sampling_ms"],
    }


def bench(bin_dir: Path, target: str) -> dict:
    out = run(
        [
            str(bin_dir / "llama-bench"),
            "-m",
            target,
            "-p",
            "0",
            "-n",
            "128",
            "-ngl",
            "99",
            "-fa",
            "1",
            "-r",
            "3",
            "-o",
            "json",
        ],
        "llama-bench",
    )
    rows = json.loads(out[out.index("[") : out.rindex("]") + 1])
    return {
        "avg_ts": rows[0]["avg_ts"],
        "stddev_ts": rows[0]["stddev_ts"],
        "build_commit": rows[0].get("build_commit"),
        "build_number": rows[0].get("build_number"),
        "gpu_info": rows[0].get("gpu_info"),
        "backends": rows[0].get("backends"),
    }


def series(bin_dir, a, prompts, extra=(), reps: int | None = None) -> dict:
    reps = a.reps if reps is None else reps
    res: dict = {"reps": reps}
    comp = [completion(bin_dir, a.target, p, a.n, extra) for _ in range(reps) for p in prompts]
    res["completion"] = comp
    res["completion_tok_per_s"] = statistics.fmean(r["tok_per_s"] for r in comp)
    res["completion_ms_per_token"] = statistics.fmean(r["ms_per_token"] for r in comp)
    tag = " ".join(extra)
    print(
        f"llama-completion {tag:4}   {res['completion_tok_per_s']:9.1f} tok/s  "
        f"({res['completion_ms_per_token']:.3f} ms/token)",
        flush=True,
    )
    res["speculative"] = spec_series(bin_dir, a, prompts, extra, reps, res, a.draft, a.n_max, "draft-dflash")
    if a.classic_draft:
        # classic speculation: a small model of the same vocabulary drafts token by token (upstream's
        # draft-simple), what users of llama.cpp and LM Studio reach for
        res["classic"] = spec_series(
            bin_dir, a, prompts, extra, reps, res, a.classic_draft, a.classic_n_max, "draft-simple"
        )
    return res


def spec_series(bin_dir, a, prompts, extra, reps, res, draft, n_maxes, spec_type) -> dict:
    """One speculative configuration per n_max on every prompt, its step cost against ``res``'s AR."""
    tag = " ".join(extra)
    out = {}
    for n_max in [int(x) for x in n_maxes.split(",")]:
        runs = [
            speculative(bin_dir, a.target, draft, p, a.n, n_max, extra, spec_type) for _ in range(reps) for p in prompts
        ]
        tps = statistics.fmean(r["tok_per_s"] for r in runs)
        drafted = sum(r["n_drafted"] or 0 for r in runs)
        acc = sum(r["n_accepted"] or 0 for r in runs)
        steps = sum(r["steps"] or 0 for r in runs)
        dec = sum(r["n_decoded"] for r in runs)
        secs = sum(r["seconds"] for r in runs)
        samp = [r["target_perf"]["sampling_ms"] for r in runs if r["target_perf"]["sampling_ms"] is not None]
        row = {
            "runs": runs,
            "tok_per_s": tps,
            "tok_per_s_sd": statistics.stdev([r["tok_per_s"] for r in runs]) if len(runs) > 1 else 0.0,
            "acceptance_rate": acc / drafted if drafted else 0.0,
            "mean_commit_len": dec / steps if steps else None,
            "step_ms": 1e3 * secs / steps if steps else None,
            "target_sampling_ms_per_step": (sum(samp) / steps) if samp and steps else None,
        }
        row["step_cost"] = row["step_ms"] / res["completion_ms_per_token"] if row["step_ms"] else None
        row["x_ar"] = tps / res["completion_tok_per_s"] if res["completion_tok_per_s"] else None
        out[n_max] = row
        print(
            f"{spec_type} {tag:4} n_max {n_max:<3} {tps:9.1f} tok/s ({row['x_ar'] or 0:.2f}x AR)  "
            f"acceptance {row['acceptance_rate']:.1%}  "
            f"commit {row['mean_commit_len'] or 0:.2f}  step {row['step_ms'] or 0:.3f} ms  "
            f"(cost {row['step_cost'] or 0:.2f}x AR)  target sampling "
            f"{row['target_sampling_ms_per_step'] or 0:.3f} ms/step",
            flush=True,
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--prompt-file", help="JSONL prompts, as benchmarks/bench_engine.py takes them")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--n-max", default="7,15")
    ap.add_argument("--classic-draft", help="also classic speculation (draft-simple) with this draft model")
    ap.add_argument("--classic-n-max", default="4,8,16")
    ap.add_argument("--json")
    ap.add_argument("--log-dir")
    ap.add_argument("--backend-sampling", action="store_true", help="also run with upstream's -bs")
    ap.add_argument("--no-bench", action="store_true")
    a = ap.parse_args(argv)
    bin_dir = Path(a.bin)
    prompts = load_prompts(a.prompt_file, a.prompts)
    res: dict = {
        "target": a.target,
        "draft": a.draft,
        "n": a.n,
        "prompts": prompts,
        "reps": a.reps,
        "common_args": COMMON,
    }
    try:
        res.update(series(bin_dir, a, prompts))
        if not a.no_bench:
            try:
                res["llama_bench"] = bench(bin_dir, a.target)
                print(
                    f"llama-bench tg128            {res['llama_bench']['avg_ts']:9.1f} tok/s "
                    f"(sd {res['llama_bench']['stddev_ts']:.1f}; build {res['llama_bench']['build_commit']})",
                    flush=True,
                )
            except Exception as exc:  # keep the other figures
                res["llama_bench_error"] = str(exc)
                print(f"llama-bench failed: {str(exc)[:300]}", flush=True)
        if a.backend_sampling:
            try:
                res["backend_sampling"] = series(bin_dir, a, prompts, ("-bs",), reps=1)
            except Exception as exc:
                res["backend_sampling_error"] = str(exc)[-3000:]
                print(f"upstream -bs failed: {str(exc)[-600:]}", flush=True)
    finally:
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1))
        if a.log_dir:
            d = Path(a.log_dir)
            d.mkdir(parents=True, exist_ok=True)
            for k, v in _LOGS.items():
                (d / (re.sub(r"[^A-Za-z0-9]+", "_", k).strip("_") + ".log")).write_text(v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
