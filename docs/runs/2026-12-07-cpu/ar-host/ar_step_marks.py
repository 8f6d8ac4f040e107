"""An AR step's pieces timed inside the step: the engine's AR step copied with time marks (as the code
stood at 18ed98f for "before" and c93961f for "after": run it from a checkout of each), the real default
pair, a story prompt, 5 runs of 128 tokens; medians in us (docs/benchmarks.md, "An AR step's host time
on the CPU"). Run from the repository root with PYTHONPATH=. ."""

import statistics
import time
import numpy as np
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.runtime import generation as G
from engine_bridge.runtime.records import StepRecord

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
pc = time.perf_counter_ns
acc = {}


def mark(k, t):
    acc.setdefault(k, []).append(t)


last_exit = [None]


def _ar_step(self, last, t0):
    a = pc()
    if last_exit[0] is not None:
        mark("0 between steps (run loop)", a - last_exit[0])
    e = self.e
    self._write_unwritten()
    ts = G.now()
    pos = len(e.kv)
    b = e.target_batch
    b.clear()
    b.add_token(last, pos, 0, True)
    tv = G.now()
    x = pc()
    mark("1 batch", x - a)
    e.target_ctx.process(b)
    y = pc()
    e.kv.append(last)
    t_hidden, cancelled = self._stream_deferred_during_decode()
    e.target_ctx.synchronize()
    t_verify = G.now() - tv - t_hidden
    z = pc()
    mark("2 after process to sync", z - y)
    ta = G.now()
    chosen = self._target_choices(e.target_ctx, 1, np.empty(0, dtype=np.int64))
    t_accept = G.now() - ta
    w = pc()
    mark("3 target_choices", w - z)
    self._may_defer(chosen)
    n, done = self._commit(chosen, 0, len(self.steps), t0)
    v = pc()
    mark("4 commit", v - w)
    wall = G.now() - ts
    rec = StepRecord(
        step=len(self.steps),
        pos=pos,
        drafted=0,
        accepted=0,
        committed=n,
        t_verify=t_verify,
        t_accept=t_accept,
        t_other=max(0.0, wall - t_verify - t_accept),
        t_native=t_verify + t_accept,
        wall=wall,
    )
    self._record(rec)
    u = pc()
    mark("5 record", u - v)
    last_exit[0] = pc()
    return (chosen[-1] if chosen else last), done


G.Generation._ar_step = _ar_step
S = GenerationSettings(mode="ar", max_tokens=128, stop_at_eog=False)
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), check=False) as eng:
    text = eng.format_chat([{"role": "user", "content": "Write a short story about a lighthouse keeper."}])
    for _ in range(5):
        eng.reset()
        last_exit[0] = None
        eng.generate(text, S)
    for k in sorted(acc):
        print(f"{k:30s} median {statistics.median(acc[k]) / 1e3:.2f} us")
