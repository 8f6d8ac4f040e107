"""What the exact verify costs a prompt's prefill and, after a long prompt, a step (issue 29, patch 0016).

A batch-invariant CUDA context runs the attention of batches of up to 16 rows through the vector
kernel, one row per block (the first version did so at every row count, prompts included, and
cost long prompts 1.4-2.1x; docs/benchmarks.md). This times the first
token of an AR request (prefill + one decode) for prompts of several lengths on a fast and an exact
engine in one process, alternating, and prints the medians and exact / fast; then whether the two
engines' greedy AR answers to those prompts are the same tokens.

With ``--decode-lengths``, the cost of decoding after prompts of those lengths: the vector kernel
reads the KV cache once per row of a verify, where upstream's MMA kernel reads it once per batch, so
a verify over thousands of cells may cost more exact than fast. Per length and engine, AR and chain
``--budget`` decode ``--decode-tokens`` tokens with exact phase times; it prints the medians of
the verify phase per step and of ms per committed token, exact / fast.

    python benchmarks/bench_exact_prefill.py --target T.gguf --draft D.gguf --gpu-layers 99 \
        --lengths 64,256,1024,2048 --reps 5 [--decode-lengths 512,2048,4096,8000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

TEXT = (
    "Write a detailed report on the water supply of a small town: where the water comes from, how it "
    "is treated, stored and pumped, who pays for the pipes, and what the town should change first. "
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--gpu-layers", type=int, default=99)
    ap.add_argument("--lengths", default="64,256,1024,2048", help="prompt lengths in tokens")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ar-tokens", type=int, default=64, help="AR tokens compared between the engines")
    ap.add_argument("--decode-lengths", default="", help="prompt lengths to decode after (empty: none)")
    ap.add_argument("--decode-tokens", type=int, default=64, help="tokens decoded after each prompt")
    ap.add_argument("--budget", type=int, default=7, help="chain budget of the decode measurement")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    lengths = [int(x) for x in a.lengths.split(",") if x.strip()]
    decode_lengths = [int(x) for x in a.decode_lengths.split(",") if x.strip()]
    longest = max(lengths + decode_lengths)
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=longest + a.decode_tokens + 256, n_gpu_layers=a.gpu_layers)
    engines = {
        "fast": Engine.load(cfg.replace(exact=False), preflight=PAIR_PREFLIGHT),
        "exact": Engine.load(cfg.replace(exact=True), preflight=PAIR_PREFLIGHT),
    }
    base = engines["fast"].tokenize(TEXT)
    base = engines["fast"].tokenize(TEXT * (longest // max(1, len(base)) + 2))
    once = GenerationSettings(mode="ar", max_tokens=1, stop_at_eog=False)
    times: dict[tuple[str, int], list[float]] = {(k, n): [] for k in engines for n in lengths}
    for _ in range(a.reps + 1):  # the first round warms every shape up and is not counted
        for n in lengths:
            for kind, eng in engines.items():
                eng.reset()
                t = time.perf_counter()
                eng.generate(base[:n], once)
                times[(kind, n)].append(time.perf_counter() - t)
    rows = []
    print("| prompt tokens | fast ms | exact ms | exact / fast |")
    print("|---|---|---|---|")
    for n in lengths:
        f = statistics.median(times[("fast", n)][1:]) * 1e3
        e = statistics.median(times[("exact", n)][1:]) * 1e3
        rows.append({"tokens": n, "fast_ms": round(f, 3), "exact_ms": round(e, 3), "ratio": round(e / f, 3)})
        print(f"| {n} | {f:.2f} | {e:.2f} | {e / f:.3f} |")
    # the two engines' AR on the same prompts: equal where the exact engine's one-row decodes and
    # prompt kernels are the fast engine's (the exact verify only changes batches of 2-16 rows)
    same = {}
    greedy = GenerationSettings(mode="ar", max_tokens=a.ar_tokens, stop_at_eog=False)
    for n in lengths:
        outs = []
        for eng in engines.values():
            eng.reset()
            outs.append(list(eng.generate(base[:n], greedy).tokens))
        same[n] = outs[0] == outs[1]
    print("exact AR == fast AR (" + str(a.ar_tokens) + " tokens): " + ", ".join(f"{n}: {same[n]}" for n in lengths))
    decode = decode_costs(engines, base, decode_lengths, a.decode_tokens, a.budget, a.reps) if decode_lengths else []
    for eng in engines.values():
        eng.close()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(
                {"reps": a.reps, "rows": rows, "ar_equal": {str(n): v for n, v in same.items()}, "decode": decode},
                fh,
                indent=1,
            )
    return 0


def decode_costs(engines: dict, base: list[int], lengths: list[int], n_tokens: int, budget: int, reps: int) -> list:
    """Per prompt length: the verify phase per step and the time per committed token, AR and chain
    ``budget``, fast against exact (medians over ``reps`` runs after one warm-up, alternating)."""
    modes = {"ar": GenerationSettings(mode="ar", max_tokens=n_tokens, stop_at_eog=False, exact_phases=True)}
    modes[f"chain {budget}"] = GenerationSettings(
        mode="chain", budget=budget, max_tokens=n_tokens, stop_at_eog=False, exact_phases=True
    )
    got: dict[tuple, list[tuple[float, float, float]]] = {}
    for r in range(reps + 1):
        for n in lengths:
            for mode, st in modes.items():
                for kind, eng in engines.items():
                    eng.reset()
                    res = eng.generate(base[:n], st)
                    s = res.summary
                    if r == 0 or s is None or not s.n_steps:
                        continue
                    got.setdefault((n, mode, kind), []).append(
                        (res.phase_means()["verify"] * 1e3, s.t_generate / s.n_generated * 1e3, s.mean_commit_len)
                    )
    rows = []
    print(
        "| prompt tokens | mode | verify ms fast | exact | exact / fast | ms per token fast | exact | exact / fast | commit fast / exact |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in lengths:
        for mode in modes:
            f, e = got[(n, mode, "fast")], got[(n, mode, "exact")]
            med = [[statistics.median(x[i] for x in v) for i in range(3)] for v in (f, e)]
            row = {
                "tokens": n,
                "mode": mode,
                "verify_ms": [round(med[0][0], 4), round(med[1][0], 4)],
                "ms_per_token": [round(med[0][1], 4), round(med[1][1], 4)],
                "commit": [round(med[0][2], 3), round(med[1][2], 3)],
            }
            rows.append(row)
            print(
                f"| {n} | {mode} | {med[0][0]:.3f} | {med[1][0]:.3f} | {med[1][0] / med[0][0]:.3f} | {med[0][1]:.3f} | "
                f"{med[1][1]:.3f} | {med[1][1] / med[0][1]:.3f} | {med[0][2]:.2f} / {med[1][2]:.2f} |"
            )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
