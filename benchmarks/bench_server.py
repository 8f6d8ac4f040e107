"""`dflash-studio serve` against headless `generate`, on the same prompts, in one run.

The server is `dflash-studio serve` in a process of its own on 127.0.0.1 (as a user runs it: the
clients' parsing does not share its interpreter); this process drives a second engine on the same
pair and settings directly, as `dflash-studio generate` does, and the clients. The two engines
never run at the same time. Per round, each prompt goes once headless and once through the server
as a single streaming `openai` client, alternating which goes first. Then N concurrent streaming
clients send the prompts again, bounded by --clients and --seconds.

Reported (greedy; every served answer is also checked byte-identical to the headless one):
* tok/s, both measured the same way from where the tokens arrive: tokens / (time of the last token
  - the request's start) -- headless at the on_token callback, served at the client's last chunk
  (tokens from the stream's usage); the ratio of sums served / headless.
* time to first token, p50 / p99: headless from generate() to the first on_token, served from the
  request to the first content chunk; and what the server adds (served - headless, per prompt), also
  outside the engine: each side less its engine's own time to first token (the server's
  ``timings.first_token_ms``), which takes the engines' run-to-run noise out of the difference.
* concurrent: total tokens / wall, and the clients' time to first token p50 / p99 (queueing included).

    python benchmarks/bench_server.py                                       # the reference pair
    python benchmarks/bench_server.py --target T.gguf --draft D.gguf --mode chain --budget 7 \\
        --max-tokens 128 --rounds 3 --clients 4 --seconds 60 --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

from engine_bridge.models.demo import reference_pair
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

now = time.perf_counter


def prompts(n: int) -> list[str]:
    folder = Path(__file__).resolve().parent.parent / "resources" / "models"
    rows = [json.loads(x) for x in (folder / "prompts.jsonl").read_text().splitlines() if x.strip()]
    return [r["prompt"] for r in rows][:n]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else 0.0


def headless(eng, prompt: str, settings) -> tuple:
    """(text, ttft s, s to the last token, tokens, the engine's generation s, the engine's own ttft s)
    with the times taken at on_token, as a caller sees them."""
    times: list[float] = []
    t0 = now()
    res = eng.generate(prompt, settings, on_token=lambda ev: times.append(now()))
    return res.text, times[0] - t0, times[-1] - t0, len(times), res.summary.t_generate, res.summary.t_first_token


def served(client, model: str, prompt: str, max_tokens: int) -> tuple:
    """The same figures at the client's chunks (a chunk may carry several tokens: the usage counts them);
    the engine's figures from the response's timings."""
    times, parts, n, gen, first = [], [], 0, 0.0, 0.0
    t0 = now()
    for ch in client.completions.create(
        model=model,
        prompt=prompt,
        max_tokens=max_tokens,
        stream=True,
        temperature=0,
        stream_options={"include_usage": True},
    ):
        if ch.choices and ch.choices[0].text:
            times.append(now())
            parts.append(ch.choices[0].text)
        if ch.usage is not None:
            n = ch.usage.completion_tokens
            t = (ch.model_extra or {}).get("timings", {})
            gen, first = t.get("predicted_ms", 0.0) / 1e3, t.get("first_token_ms", 0.0) / 1e3
    return "".join(parts), times[0] - t0, times[-1] - t0, n, gen, first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--mode", default="chain")
    ap.add_argument("--budget", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60.0, help="bound on the concurrent part")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--n-ctx", type=int, default=1024)
    ap.add_argument("--json")
    args = ap.parse_args()
    from openai import OpenAI

    if args.target:
        target, draft = Path(args.target), Path(args.draft) if args.draft else None
    else:
        target, draft = reference_pair()
    cfg = EngineConfig(target=target, draft=draft, n_ctx=args.n_ctx, n_threads=args.threads)
    settings = GenerationSettings(mode=args.mode, budget=args.budget, max_tokens=args.max_tokens)
    direct = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    cmd = [
        sys.executable,
        "-m",
        "engine_bridge.cli",
        "serve",
        "--target",
        str(target),
        "--port",
        "0",
        "--mode",
        args.mode,
        "--budget",
        str(args.budget),
        "--n-ctx",
        str(args.n_ctx),
        "--queue",
        str(max(8, args.clients)),
    ]
    cmd += ["--draft", str(draft)] if draft else []
    cmd += ["--threads", str(args.threads)] if args.threads else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    line = proc.stdout.readline()
    if not line.startswith("dflash-studio serve: http"):
        raise SystemExit(f"the server did not start: {line}")
    url = line.split()[2]
    client = OpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
    model = target.stem
    ps = prompts(args.prompts)
    # warm-up, untimed: first decodes, the client's connection, imports
    headless(direct, ps[0], settings)
    served(client, model, ps[0], args.max_tokens)

    rows = {"headless": [], "served": []}
    mismatches = 0
    for r in range(args.rounds):
        for i, p in enumerate(ps):
            order = ("headless", "served") if (r + i) % 2 == 0 else ("served", "headless")
            got = {}
            for kind in order:
                got[kind] = (
                    headless(direct, p, settings) if kind == "headless" else served(client, model, p, args.max_tokens)
                )
                rows[kind].append(got[kind][1:])
            mismatches += got["headless"][0] != got["served"][0]

    def rate(kind):
        return sum(r[2] for r in rows[kind]) / sum(r[1] for r in rows[kind])

    def engine_rate(kind):  # the engine's own generation time (the server's timings.predicted_ms)
        return sum(r[2] for r in rows[kind]) / sum(r[3] for r in rows[kind])

    ttft = {k: [r[0] for r in rows[k]] for k in rows}
    added = [s - h for h, s in zip(ttft["headless"], ttft["served"])]
    # what is spent outside the engine before the first token, per prompt: client TTFT less the
    # engine's own (prefill + first step), served less headless -- the engines' run-to-run noise
    # (tens of ms on a shared CPU) cancels; the HTTP request, parsing, queue hand-over,
    # tokenizing, first chunk and the client's parsing remain
    outside = {k: [r[0] - r[4] for r in rows[k]] for k in rows}
    added_outside = [s - h for h, s in zip(outside["headless"], outside["served"])]

    # concurrent clients, bounded in count and time
    conc_ttft, conc_tokens = [], 0
    lock = threading.Lock()
    stop_at = now() + args.seconds

    def one_client(k: int):
        nonlocal conc_tokens
        c = OpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
        for p in ps[k :: args.clients] or ps[:1]:
            if now() > stop_at:
                return
            _, t, _, n, _, _ = served(c, model, p, args.max_tokens)
            with lock:
                conc_ttft.append(t)
                conc_tokens += n

    t0 = now()
    threads = [threading.Thread(target=one_client, args=(k,)) for k in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    conc_wall = now() - t0
    proc.terminate()
    proc.wait(30)
    direct.close()

    out = {
        "machine": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
        "pair": [str(target), str(draft)],
        "mode": args.mode,
        "budget": args.budget,
        "max_tokens": args.max_tokens,
        "prompts": len(ps),
        "rounds": args.rounds,
        "headless_tok_s": rate("headless"),
        "served_tok_s": rate("served"),
        "served_over_headless": rate("served") / rate("headless"),
        # inside the engine only (no HTTP): what sharing the process with the event loop costs
        "engine_served_over_headless": engine_rate("served") / engine_rate("headless"),
        "ttft_ms": {k: {"p50": pct(v, 0.5) * 1e3, "p99": pct(v, 0.99) * 1e3} for k, v in ttft.items()},
        "ttft_added_ms": {"p50": pct(added, 0.5) * 1e3, "p99": pct(added, 0.99) * 1e3},
        "ttft_added_outside_engine_ms": {"p50": pct(added_outside, 0.5) * 1e3, "p99": pct(added_outside, 0.99) * 1e3},
        "text_mismatches": mismatches,
        "concurrent": {
            "clients": args.clients,
            "requests": len(conc_ttft),
            "tok_s": conc_tokens / conc_wall,
            "ttft_ms_p50": pct(conc_ttft, 0.5) * 1e3,
            "ttft_ms_p99": pct(conc_ttft, 0.99) * 1e3,
        },
    }
    print(
        f"tok/s: headless {out['headless_tok_s']:.1f}, served {out['served_tok_s']:.1f}, "
        f"served/headless {out['served_over_headless']:.3f} (inside the engine: "
        f"{out['engine_served_over_headless']:.3f})"
    )
    print(
        f"TTFT ms p50/p99: headless {out['ttft_ms']['headless']['p50']:.1f}/{out['ttft_ms']['headless']['p99']:.1f}, "
        f"served {out['ttft_ms']['served']['p50']:.1f}/{out['ttft_ms']['served']['p99']:.1f}; "
        f"added {out['ttft_added_ms']['p50']:.2f}/{out['ttft_added_ms']['p99']:.2f}; added outside the engine "
        f"{out['ttft_added_outside_engine_ms']['p50']:.2f}/{out['ttft_added_outside_engine_ms']['p99']:.2f}"
    )
    c = out["concurrent"]
    print(
        f"{c['clients']} concurrent clients: {c['requests']} requests, {c['tok_s']:.1f} tok/s total, "
        f"TTFT p50 {c['ttft_ms_p50']:.1f} ms, p99 {c['ttft_ms_p99']:.1f} ms"
    )
    print(f"served text == headless text: {'yes' if not mismatches else f'NO ({mismatches} differ)'}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
