"""Why a one-row decode with layer-input extraction on costs ~0.1 ms more than one without in real
generation on the GPU (issue 29; docs/benchmarks.md, "Where auto loses to AR on the GPU"), when a
loop at a fixed position shows +13 us (gpu_step_profile.py's arx).

Runs plain AR generations on MT-Bench prompts (chat template), alternating extraction off and on
(the prefill feeds the drafter, so every step decodes with extraction on), and per run prints the
median host time of llama_process and of llama_synchronize per step, and whether the host buffers
that llama.cpp copies into (logits, each layer input) are page-locked (cudaHostGetFlags), so that
a slow run can be told from a fast one by where its time goes. With --clocks, nvidia-smi samples the
GPU's SM and memory clocks, power and clock-event reasons every 20 ms, and each run also prints their
medians over its generation and its prompt and context length: whether the slow state is the
GPU's clock (DVFS) rather than the work.

Usage (GPU machine): PYTHONPATH=/tmp/lcp_site:/tmp/site:. python3 gpu/gpu_extract_cost.py
    --target T --draft D [--prompts 4] [--rounds 3] [--max-tokens 128] [--threads 2] [--clocks]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import datetime
import glob
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine_bridge.bench.suites import load_suite  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import generation, llama_ffi as ffi, native  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402


def cudart():
    names = [ctypes.util.find_library("cudart")] + sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so*"))
    names += sorted(glob.glob("/tmp/lcp_site/**/libcudart.so*", recursive=True))
    for n in names:
        if n:
            try:
                return ctypes.CDLL(n)
            except OSError:
                pass
    return None


def pinned(rt, addr: int) -> str:
    if rt is None or not addr:
        return "?"
    flags = ctypes.c_uint(0)
    rc = rt.cudaHostGetFlags(ctypes.byref(flags), ctypes.c_void_p(addr))
    if rc != 0:
        rt.cudaGetLastError()  # clear the (non-sticky) error a pageable pointer leaves
    return "pinned" if rc == 0 else f"pageable(rc={rc})"


CLOCK_FIELDS = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"


class ClockSampler:
    """nvidia-smi sampling the GPU every 20 ms into a file; ``window`` summarises a time span."""

    def __init__(self):
        for fields in (CLOCK_FIELDS, CLOCK_FIELDS.replace("clocks_event_reasons", "clocks_throttle_reasons")):
            self.file = tempfile.NamedTemporaryFile("w+", suffix=".csv", delete=False)
            self.proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "20"],
                stdout=self.file,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(0.5)  # (its first samples; an unknown field makes it exit at once)
            if self.proc.poll() is None:
                return

    def window(self, t0: float, t1: float) -> str:
        self.file.flush()
        rows = []
        for line in Path(self.file.name).read_text().splitlines():
            f = [x.strip() for x in line.split(",")]
            try:
                ts = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                rows.append((ts, float(f[1]), float(f[2]), float(f[3]), f[5]))
            except (ValueError, IndexError):
                continue
        got = [r for r in rows if t0 <= r[0] <= t1]
        if not got:
            return "clocks: no sample"
        reasons = sorted({r[4] for r in got})
        return (
            f"sm {statistics.median(r[1] for r in got):.0f} MHz (min {min(r[1] for r in got):.0f}), "
            f"mem {statistics.median(r[2] for r in got):.0f}, power {statistics.median(r[3] for r in got):.0f} W, "
            f"reasons {reasons}, {len(got)} samples"
        )

    def close(self) -> None:
        self.proc.terminate()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clocks", action="store_true", help="sample the GPU's clocks (nvidia-smi) per run")
    ap.add_argument("--warm-prompt", type=int, default=0, help="the prompt each round's warm-up decodes")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each prompt in a row")
    ap.add_argument("--modes", default="off,on", help="extraction off / on, in this order each round")
    a = ap.parse_args()
    rt = cudart()
    clocks = ClockSampler() if a.clocks else None
    times: dict[str, list[float]] = {"process": [], "sync": []}
    real_process, real_sync = native.Context.process, native.Context.synchronize

    def process(self, b):
        t = time.perf_counter()
        real_process(self, b)
        times["process"].append(time.perf_counter() - t)

    def sync(self):
        t = time.perf_counter()
        real_sync(self)
        times["sync"].append(time.perf_counter() - t)

    cfg = EngineConfig(target=a.target, draft=a.draft, n_threads=a.threads)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        texts = [p.render(eng.format_chat) for p in load_suite("mt-bench").prompts[: a.prompts]]
        Gen = generation.Generation
        plain = Gen._prefill_features
        for rnd in range(a.rounds):
            for label in a.modes.split(","):
                Gen._prefill_features = (lambda self: True) if label == "on" else plain
                s = GenerationSettings(mode="ar", max_tokens=a.max_tokens, stop_at_eog=False)
                eng.reset()
                eng.generate(texts[a.warm_prompt], s)  # warm-up
                for i, text in [(i, t) for i, t in enumerate(texts) for _ in range(a.repeat)]:
                    eng.reset()
                    toks = eng.tokenize(text)
                    native.Context.process, native.Context.synchronize = process, sync
                    times["process"].clear()
                    times["sync"].clear()
                    t_run = time.time()
                    try:
                        res = eng.generate(toks, s)
                    finally:
                        native.Context.process, native.Context.synchronize = real_process, real_sync
                    steps = res.steps
                    n = len(steps)
                    pr, sy = times["process"][-n:], times["sync"][-n:]
                    tctx = eng.target_ctx.ptr
                    lay = (
                        [
                            ctypes.cast(ffi.llama_get_embeddings_layer_inp(tctx, lid), ctypes.c_void_p).value or 0
                            for lid in eng.drafter.target_layers
                        ]
                        if label == "on"
                        else []
                    )
                    logits = ctypes.cast(native.C.llama_get_logits(tctx), ctypes.c_void_p).value or 0
                    print(
                        f"round {rnd} extraction {label:3} prompt {i}: median step "
                        f"{1e3 * statistics.median(x.wall for x in steps[1:]):.3f} ms, process "
                        f"{1e3 * statistics.median(pr):.3f}, synchronize {1e3 * statistics.median(sy):.3f} | "
                        f"logits {pinned(rt, logits)}, layer inputs {[pinned(rt, x) for x in lay]}",
                        flush=True,
                    )
                    if clocks is not None:
                        time.sleep(0.05)  # (the last samples of the run reach the file)
                        print(
                            f"    {len(toks)} prompt tokens, {len(toks) + len(steps)} positions; "
                            + clocks.window(t_run, time.time() - 0.05),
                            flush=True,
                        )
        Gen._prefill_features = plain
    if clocks is not None:
        clocks.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
