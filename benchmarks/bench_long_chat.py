"""Does the drafter hold up as a chat grows long, and does a window on its context help?

One long conversation: each turn a new user request, answered by the engine (``--mode``: chain,
tree or auto; greedy), the answer kept in the history, so that the context grows turn by turn as in a user's
long chat. The same conversation is replayed once per drafter window (``DFLASH_DRAFT_WINDOW``; 0 =
the whole context). The verify is exact (batch-invariant) unless ``--fast``: every replay then
commits the target's own tokens, so every window sees the same contexts and only the drafts differ.

Requests come from the training sources' validation split (``--prompts val``: the split used for
choices) or from MT-Bench's first turns (``--prompts mt-bench``: a public set, for reporting only).

    python benchmarks/bench_long_chat.py --target T.gguf --draft D.gguf --windows 0,512,1024 \
        --turns 24 --tokens 128 [--prompts val|mt-bench] [--gpu-layers 99] [--json out.json]

Prints the commit length per turn and window, then its mean over context bands and the whole chat
(its tokens over its wall time); with ``--ar`` the target alone replays the conversation too, and
each band gives tok/s over AR's. ``--rounds N`` replays every side N times in rounds (windows, then
AR) and gives the range of x AR over the rounds: speed moves between replays, commit does not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from engine_bridge.common.resources import resource
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import drafter as drafter_mod
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.training import real_prompts

BANDS = (0, 1024, 2048, 4096, 8192, 1 << 30)


def requests(which: str, n: int, max_chars: int) -> list[str]:
    if which == "val":
        rows = [r["text"] for r in real_prompts.load("val")]
    elif which == "mt-bench":
        with open(resource("prompts", "public", "mt_bench.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line)["messages"][0]["content"] for line in f if line.strip()]
    else:
        raise ValueError(f"--prompts {which!r}: val or mt-bench")
    rows = [t for t in rows if len(t) <= max_chars]
    if len(rows) < n:
        raise ValueError(f"only {len(rows)} requests of at most {max_chars} characters in {which}")
    return rows[:n]


def replay(
    cfg: EngineConfig,
    window: int,
    reqs: list[str],
    settings: GenerationSettings,
    fresh: bool = False,
    ar_from: int = 0,
) -> list[dict]:
    """One replay of the chat. ``fresh``: every turn's prompt is prefilled whole, nothing reused from
    the turn before; ``ar_from`` > 0: turns from that one (1-based) on are the target's alone, over
    the cache the earlier turns left (diagnostics: which part of a long chat parts from AR)."""
    os.environ[drafter_mod.WINDOW_ENV] = str(window)
    eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    try:
        messages: list[dict] = []
        turns = []
        for text in reqs:
            messages.append({"role": "user", "content": text})
            toks = eng.tokenize_chat(messages)
            if len(toks) + settings.max_tokens + 32 >= eng.target_ctx.n_ctx:
                break
            if fresh:
                eng.reset()
            turn_settings = settings.replace(mode="ar") if 0 < ar_from <= len(turns) + 1 else settings
            t0 = time.perf_counter()
            res = eng.generate(toks, turn_settings)
            wall = time.perf_counter() - t0
            s = res.summary
            assert s is not None
            turns.append(
                {
                    "context": len(toks),
                    "commit": round(s.mean_commit_len, 4),
                    "tok_s": round(s.tok_per_s, 2),
                    "wall_s": round(wall, 3),
                    "tokens": list(res.tokens),
                    "steps": s.auto_note,  # auto: which modes ran how often (what a parting ran under)
                }
            )
            messages.append({"role": "assistant", "content": res.text})
        return turns
    finally:
        eng.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--windows", default="0,512,1024", help="drafter windows in cells (0: the whole context)")
    ap.add_argument("--prompts", default="val", help="val (the training sources' validation split) or mt-bench")
    ap.add_argument("--turns", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=128, help="answer length cap per turn")
    ap.add_argument("--budget", type=int, default=7)
    ap.add_argument("--mode", default="chain", choices=("chain", "tree", "auto"), help="speculative mode replayed")
    ap.add_argument("--max-chars", type=int, default=1200, help="skip longer requests")
    ap.add_argument("--fast", action="store_true", help="the fast verify (default: exact, same contexts)")
    ap.add_argument("--ar", action="store_true", help="replay with the target alone too (x AR per band)")
    ap.add_argument(
        "--rounds", type=int, default=1, help="replay every window (and AR) this many times, in rounds, for speed"
    )
    ap.add_argument("--fresh", action="store_true", help="prefill every turn whole (no cache reuse), every side")
    ap.add_argument("--ar-from", type=int, default=0, help="replay turns from this one on with the target alone")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    windows = [int(x) for x in a.windows.split(",") if x.strip()]
    reqs = requests(a.prompts, a.turns, a.max_chars)
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=a.n_ctx, n_gpu_layers=a.gpu_layers, exact=not a.fast)
    if a.threads:
        cfg = cfg.replace(n_threads=a.threads)
    settings = GenerationSettings(mode=a.mode, budget=a.budget, max_tokens=a.tokens)
    if a.rounds < 1:
        raise SystemExit("--rounds: at least 1")
    # rounds: windows then AR, again and again, so that a machine's slow spell falls on every side
    rounds: list[dict] = []
    for _ in range(a.rounds):
        r = {str(w): replay(cfg, w, reqs, settings, a.fresh, a.ar_from) for w in windows}
        if a.ar:
            r["ar"] = replay(cfg, 0, reqs, settings.replace(mode="ar"), a.fresh)
        rounds.append(r)
    runs = {w: rounds[0][str(w)] for w in windows}
    ar = rounds[0].get("ar")
    n = min(len(t) for r in rounds for t in r.values())
    first = runs[windows[0]]
    same = all(r[k][i]["tokens"] == first[i]["tokens"] for r in rounds for k in r for i in range(n))
    print("| turn | context | " + " | ".join(f"window {w or 'off'}" for w in windows) + " |")
    print("|---|---|" + "---|" * len(windows))
    for i in range(n):
        print(
            f"| {i + 1} | {first[i]['context']} | " + " | ".join(f"{runs[w][i]['commit']:.2f}" for w in windows) + " |"
        )
    print()
    spread = a.rounds > 1
    print(
        "| context cells | turns | "
        + (" AR tok/s | " if ar else "")
        + " | ".join(
            f"window {w or 'off'}: commit, tok/s" + (", x AR" + (" (rounds' range)" if spread else "") if ar else "")
            for w in windows
        )
        + " |"
    )
    print("|---|---|" + ("---|" if ar else "") + "---|" * len(windows))
    bands = []
    spans = [(lo, hi) for lo, hi in zip(BANDS, BANDS[1:])] + [(None, None)]
    for lo, hi in spans:
        # the last row is the whole chat: its tokens over its wall time, prefills included
        idx = [i for i in range(n) if lo is None or lo <= first[i]["context"] < hi]
        if not idx:
            continue

        def speed(turns: list[dict], idx: list[int] = idx, whole: bool = lo is None) -> float:
            if whole:
                return sum(len(turns[i]["tokens"]) for i in idx) / sum(turns[i]["wall_s"] for i in idx)
            return statistics.fmean(turns[i]["tok_s"] for i in idx)

        cells = []
        row: dict = {"from": lo, "to": hi, "turns": len(idx)}
        t_ar = [speed(r["ar"]) for r in rounds] if ar else []
        if ar:
            row["ar_tok_s"] = round(statistics.fmean(t_ar), 2)
            cells.append(f"{row['ar_tok_s']:.1f}")
        for w in windows:
            c = statistics.fmean(runs[w][i]["commit"] for i in idx)
            t = [speed(r[str(w)]) for r in rounds]
            row[str(w)] = {"commit": round(c, 3), "tok_s": round(statistics.fmean(t), 2)}
            cell = f"{c:.2f}, {statistics.fmean(t):.1f}"
            if ar:
                x = [tw / ta for tw, ta in zip(t, t_ar)]
                row[str(w)]["x_ar"] = [round(v, 3) for v in x]
                cell += f", {statistics.fmean(x):.2f}x" + (f" ({min(x):.2f}-{max(x):.2f})" if spread else "")
            cells.append(cell)
        bands.append(row)
        label = "whole chat" if lo is None else f"{lo}-{min(hi, 1 << 20)}"
        print(f"| {label} | {len(idx)} | " + " | ".join(cells) + " |")
    print(f"every replay's answers identical{' (and AR' + chr(39) + 's)' if ar else ''}: {same}")
    for k in rounds[0]:
        if k != str(windows[0]):
            parted = [i + 1 for i in range(n) if rounds[0][k][i]["tokens"] != first[i]["tokens"]]
            print(f"turns where {k if k == 'ar' else 'window ' + k} parted from window {windows[0]}: {parted[:8]}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(
                {
                    "windows": windows,
                    "prompts": a.prompts,
                    "mode": a.mode,
                    "fast": a.fast,
                    "bands": bands,
                    "same": same,
                    "runs": runs,
                    "ar": ar,
                    "rounds": rounds,
                },
                fh,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
