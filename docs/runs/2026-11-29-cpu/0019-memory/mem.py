"""Patch 0019's memory on a large target shape (CPU engine): resident memory after requests whose
KV view lies below 256 cells and above it, alternating, with DFLASH_ROW_SLOT_WAYS as set."""

import os
import sys
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT


def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024


d = sys.argv[1]
eng = Engine.load(
    EngineConfig(target=f"{d}/t8b.gguf", draft=f"{d}/d8b.gguf", n_ctx=1024, n_threads=2), preflight=PAIR_PREFLIGHT
)
print(
    "ways",
    os.environ.get("DFLASH_ROW_SLOT_WAYS"),
    "row_slots",
    eng.row_slots,
    "rss after load %.0f MiB" % rss_mib(),
    flush=True,
)
short = eng.tokenize("The quick brown fox jumps over the lazy dog. " * 4)
long = eng.tokenize("Pack my box with five dozen liquor jugs, and then count them again. " * 24)
print("prompt tokens", len(short), len(long), flush=True)
base = None
for i, (name, toks) in enumerate([("short", short), ("long", long)] * 3):
    r = eng.generate(toks, GenerationSettings(mode="chain", budget=7, max_tokens=12, stop_at_eog=False))
    m = rss_mib()
    base = base or m
    print(
        f"{i} {name:5s} kv {len(eng.kv):4d} steps {len(r.steps):2d} reused {r.summary.graphs_reused:2d} rss {m:.0f} MiB (+{m - base:.0f} over the first)",
        flush=True,
    )
eng.close()
