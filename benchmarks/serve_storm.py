"""The serve storm (issue 31's goal) against `dflash-studio serve` as a process of its own.

500 requests by default from 12 clients: good ones (streaming or not), malformed bodies, streams
left mid-way, non-streaming clients that give up, more at once than the queue holds (4 waiting
places). The storm driver is the test's (tests/engine_bridge/serve/test_serve_storm.py), so it
checks the same things: every request ends (no hung client thread), every 200 is byte-identical to
the headless engine's greedy text on the same pair and settings, every refusal is a 400 or a 503 in
OpenAI's shape, /health answers after. Here the server is a separate process, so "0 crashes" is its
exit status and its RSS is its own (measured after the first fifth, a warm-up).

    PYTHONPATH=. .venv/bin/python benchmarks/serve_storm.py --requests 500 --clients 12 --json /tmp/storm.json
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "engine_bridge" / "serve"))

from test_serve_storm import storm  # noqa: E402 - the test's driver, aimed at a process

from engine_bridge.models.demo import reference_pair  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--seed", type=int, default=500)
    ap.add_argument("--queue", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    target, draft = reference_pair()
    mode, budget, n_ctx = "chain", 7, 1024
    cmd = [
        sys.executable,
        "-m",
        "engine_bridge.cli",
        "serve",
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--port",
        "0",
        "--mode",
        mode,
        "--budget",
        str(budget),
        "--n-ctx",
        str(n_ctx),
        "--queue",
        str(args.queue),
        "--threads",
        str(args.threads),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if not line.startswith("dflash-studio serve: http"):
        raise SystemExit(f"the server did not start: {line}{proc.stderr.read()}")
    url = line.split()[2]
    server = SimpleNamespace(url=url, app=SimpleNamespace(model_ids=(target.stem,)))
    # the headless reference, on an engine of this process (the server idles meanwhile)
    with Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=n_ctx, n_threads=args.threads), preflight=PAIR_PREFLIGHT
    ) as eng:
        cache = {}

        def reference(prompt: str, n: int) -> str:
            if (prompt, n) not in cache:
                cache[(prompt, n)] = eng.generate(
                    prompt, GenerationSettings(mode=mode, budget=budget, max_tokens=n)
                ).text
            return cache[(prompt, n)]

        for p in (
            "import numpy as np\n\n\nclass ",
            "def fibonacci(n):\n",
            "# utilities\nimport os\n",
            "class Stack:\n",
        ):
            for n in (8, 24):
                reference(p, n)
    rss_start = rss_mb(proc.pid)
    t0 = time.monotonic()
    try:
        outcomes, grew = storm(
            server, reference, args.requests, n_clients=args.clients, seed=args.seed, rss_mb=lambda: rss_mb(proc.pid)
        )
        failure = None
    except AssertionError as exc:  # a hung request, a differing answer, a bad refusal
        outcomes, grew, failure = [], float("nan"), str(exc)
    seconds = time.monotonic() - t0
    alive = proc.poll() is None
    rss_end = rss_mb(proc.pid) if alive else float("nan")
    proc.send_signal(signal.SIGINT)
    try:
        rc = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "hung at exit"
    out, err = proc.stdout.read(), proc.stderr.read()
    counts = Counter(outcomes)
    report = {
        "requests": args.requests,
        "clients": args.clients,
        "queue": args.queue,
        "seed": args.seed,
        "outcomes": dict(counts),
        "byte_identical_200": counts.get("200", 0),
        "failure": failure,
        "server_alive_after": alive,
        "exit_status": rc,
        "traceback": "Traceback" in err,
        "server_rss_mb_start": round(rss_start, 1),
        "server_rss_mb_end": round(rss_end, 1),
        "server_rss_growth_mb_after_warmup": round(grew, 1),
        "seconds": round(seconds, 1),
        "stop_line": out.strip().splitlines()[-1] if out.strip() else "",
        "machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores",
    }
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    ok = failure is None and alive and rc == 0 and not report["traceback"] and grew < 50
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
