"""A one-minute smoke test of the engine on this machine's build: writes the tiny pair, loads it
with every layer offloaded, and checks that AR, chain and tree give the same greedy tokens.

Usage: python gpu/gpu_smoke.py [DIR]   (exit code 0 when all three agree)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bridge.models import synth  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT


def main(argv: list[str]) -> int:
    folder = argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="dflash-smoke-")
    target, draft = synth.write_pair(folder)
    t0 = time.perf_counter()
    with Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=1024, flash_attn="on"), preflight=PAIR_PREFLIGHT
    ) as eng:
        print(f"loaded in {time.perf_counter() - t0:.2f} s; memory {eng.memory()}", flush=True)
        out = {}
        for mode, budget in (("ar", 1), ("chain", 7), ("tree", 16)):
            eng.reset()
            r = eng.generate("def fibonacci(n):", GenerationSettings(mode=mode, budget=budget, max_tokens=64))
            out[mode] = r.tokens
            print(f"{mode:5} {r.summary.tok_per_s:8.1f} tok/s  commit {r.summary.mean_commit_len:.2f}", flush=True)
    same = out["ar"] == out["chain"] == out["tree"]
    print("greedy tokens identical across modes:", same, flush=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
