"""What a speculative step costs on this machine, in autoregressive steps: measured once, cached.

The cost of a step depends on the machine, the build, the threads, the K/V types and the shapes
(model sizes, budget), hardly on acceptance: the verify decode processes ``budget + 1`` rows
whether the drafts are accepted or not. So calibration runs the loaded engine itself -- the same
``Engine.generate`` the user runs, through its step records -- on a fixed short prompt with forced
budgets (no stop at end-of-generation; a run is cut after a fixed number of steps), and keeps the
step wall time per configuration. It takes a few seconds per pair and device.

Noise: configurations are measured in interleaved rounds (a drift of the machine spreads over all
of them), the first step of each run is dropped (shape changes re-plan the graph), and the cost of
a configuration is the lower quartile of its steps (contention only ever adds time).

The table is cached as JSON in the user's data folder, keyed by everything it depends on: target
and drafter file identity (path, size, mtime), adapters, backend and devices, threads, engine build,
K/V types, flash attention, GPU layers. Any change gives a new key and a new measurement.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .config import EngineConfig, GenerationSettings
from ..common.paths import data_dir

SCHEMA = 1
#: The engine's step code as it bears on a step's cost; raise it when the loop's batches change shape
#: (2: a tree verify's output count fixed, so its graph is kept: tree steps 1.2-2.3 ms cheaper on an H200;
#: 3: a GPU drafter decodes whole blocks, so a chain-7 draft costs ~0.1 ms more and a tree's less)
STEP_CODE = 4  # 4: each run's warm-up lasts WARM_TOKENS committed tokens, not one step
CHAIN_BUDGETS = (1, 2, 3, 4, 7, 11, 15)
TREE_BUDGETS = (4, 8, 16, 32)
STEPS = 6  # timed steps per configuration and round (after the warm-up: WARM_TOKENS)
ROUNDS = 2
#: Each run's first steps are dropped until they have committed this many tokens (at least one
#: step, the one that builds its graphs). After a reset and its prefill the steps of a run settle
#: over ~20 tokens on the 2-vCPU Xeon (an AR step 6.0 ms at first, 4.1-4.5 ms from the 20th token
#: on; a chain-1 step 9.6 -> 8.3 ms), so with one step dropped the table read AR at 4.5-5.9 ms where a
#: 128-token AR answer runs at 4.4, every speculative step 15-25 % cheaper in AR steps than it is,
#: and auto speculated where nothing paid: chain 1 read 1.72 AR steps (1.14x AR at its commit) and
#: ran at 0.84x AR in the bench (docs/benchmarks.md, "Auto on a CPU where speculation does not pay").
#: Counted in tokens, not steps: the settling follows the tokens decoded, and a deep chain commits
#: several a step, so the warm-up costs every configuration about the same time.
WARM_TOKENS = 16
#: Environment variable: another warm-up (1: one step, the rule before), for measuring one against the
#: other; part of the cache key.
WARM_TOKENS_ENV = "DFLASH_CALIBRATION_WARM_TOKENS"


def warm_tokens() -> int:
    """The warm-up of each calibration run in committed tokens: $DFLASH_CALIBRATION_WARM_TOKENS, else
    WARM_TOKENS."""
    v = os.environ.get(WARM_TOKENS_ENV, "").strip()
    try:
        return max(int(v), 1) if v else WARM_TOKENS
    except ValueError:
        raise ValueError(f"{WARM_TOKENS_ENV}={v!r}: expected a token count such as 16 (1: one step)") from None


#: Fixed, plain text: acceptance does not matter for the cost, only that every run drafts.
PROMPT = "The history of the city begins with a small settlement on the river, where"


@dataclass
class CostTable:
    """Step wall times (ms) per configuration; ``cost`` turns them into AR-step units."""

    key: dict
    ar_ms: float
    chain_ms: dict[int, float] = field(default_factory=dict)
    tree_ms: dict[int, float] = field(default_factory=dict)
    measured_at: float = 0.0  # unix time
    seconds: float = 0.0  # how long measuring took
    from_cache: bool = False  # this object was read from the cache, not measured now

    def costs(self) -> dict[tuple[str, int], float]:
        """{(mode, budget): step time / AR step time} -- each is that step's break-even commit length."""
        out = {("chain", b): ms / self.ar_ms for b, ms in self.chain_ms.items()}
        out.update({("tree", b): ms / self.ar_ms for b, ms in self.tree_ms.items()})
        return out

    def cost(self, mode: str, budget: int) -> float | None:
        """Cost of one step in AR steps; budgets between calibrated ones are interpolated linearly,
        beyond the largest one extrapolated from the last two. None: mode not calibrated."""
        if mode == "ar":
            return 1.0
        ms = {"chain": self.chain_ms, "tree": self.tree_ms}.get(mode) or {}
        if not ms:
            return None
        xs = sorted(ms)
        if budget in ms:
            return ms[budget] / self.ar_ms
        if budget < xs[0]:
            return ms[xs[0]] / self.ar_ms
        lo = max([x for x in xs if x < budget], default=xs[0])
        hi = min([x for x in xs if x > budget], default=None)
        if hi is None:
            if len(xs) < 2:
                return ms[xs[-1]] / self.ar_ms
            lo, hi = xs[-2], xs[-1]
        y = ms[lo] + (ms[hi] - ms[lo]) * (budget - lo) / (hi - lo)
        return max(y, ms[xs[0]]) / self.ar_ms

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("from_cache")
        d["chain_ms"] = {str(k): v for k, v in self.chain_ms.items()}
        d["tree_ms"] = {str(k): v for k, v in self.tree_ms.items()}
        return d

    @classmethod
    def from_json(cls, d: dict) -> "CostTable":
        return cls(
            key=d["key"],
            ar_ms=float(d["ar_ms"]),
            chain_ms={int(k): float(v) for k, v in d["chain_ms"].items()},
            tree_ms={int(k): float(v) for k, v in d["tree_ms"].items()},
            measured_at=float(d.get("measured_at", 0.0)),
            seconds=float(d.get("seconds", 0.0)),
            from_cache=True,
        )

    def rows(self) -> list[tuple[str, int, float, float]]:
        """(mode, budget, step ms, cost in AR steps), AR first: what the CLI prints."""
        out = [("ar", 0, self.ar_ms, 1.0)]
        out += [("chain", b, ms, ms / self.ar_ms) for b, ms in sorted(self.chain_ms.items())]
        out += [("tree", b, ms, ms / self.ar_ms) for b, ms in sorted(self.tree_ms.items())]
        return out


# -- the key --------------------------------------------------------------------------------------
def _file_id(path) -> dict | None:
    if path is None:
        return None
    p = Path(path).resolve()
    st = p.stat()
    return {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


@functools.lru_cache(maxsize=1)
def _build_id() -> dict:
    from .llama_ffi import build_info, devices

    info = build_info()
    return {
        "llama_cpp_python": info.get("llama_cpp_python", "unknown"),
        "llama_cpp_commit": info.get("llama_cpp_commit", "unknown"),
        "backend": info.get("backend", "unknown"),
        "cmake_args": info.get("cmake_args", ""),
        # the llama.cpp patches change a step's kernels and graphs (0008: the drafter's graphs kept)
        "patches": [f"{p.get('name')}:{str(p.get('sha256', ''))[:16]}" for p in info.get("patches", [])],
        "devices": [f"{d['type']}:{d['name']}:{d['description']}" for d in devices()],
    }


def calibration_key(config: EngineConfig) -> dict:
    """Everything a step's cost depends on, as plain JSON values."""
    return {
        "schema": SCHEMA,
        "step_code": STEP_CODE,
        "target": _file_id(config.target),
        "draft": _file_id(config.draft),
        "adapters": [[_file_id(p), s] for p, s in config.adapters],
        "build": _build_id(),
        "n_threads": config.n_threads or os.cpu_count() or 0,
        "n_gpu_layers": config.n_gpu_layers,
        "draft_n_gpu_layers": config.draft_n_gpu_layers,
        "flash_attn": config.flash_attn,
        "target_kv": str(config.target_kv),
        "draft_kv": str(config.draft_kv),
        "n_ubatch": config.n_ubatch,
        # the exact verify's batch-invariant kernels cost a verify otherwise (patch 0016: less on an H200)
        "exact": config.exact,
        # DFLASH_DRAFT_FULL_BLOCK changes the drafter's block (its default follows the GPU layers)
        "draft_full_block": os.environ.get("DFLASH_DRAFT_FULL_BLOCK", "").strip(),
        "warm_tokens": warm_tokens(),
    }


def _key_hash(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def cache_dir() -> Path:
    d = data_dir() / "calibration"
    d.mkdir(parents=True, exist_ok=True)
    return d


def cache_path(key: dict) -> Path:
    return cache_dir() / f"{_key_hash(key)}.json"


def load_cached(key: dict) -> CostTable | None:
    """The cached table for exactly this key, or None (absent, unreadable, or another key)."""
    path = cache_path(key)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        table = CostTable.from_json(d)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if table.key != key or table.ar_ms <= 0:
        return None
    return table


def save(table: CostTable) -> Path:
    path = cache_path(table.key)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(table.to_json(), indent=1), encoding="utf-8")
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


# -- measuring ------------------------------------------------------------------------------------
def _step_walls(engine, tokens: list[int], mode: str, budget: int, steps: int, warm: int | None = None) -> list[float]:
    """Step wall times of one forced run: ``steps`` timed decode steps after the warm-up, the first
    decode steps until they have committed ``warm`` tokens (default: warm_tokens(); at least the first
    step, which builds its graphs; see WARM_TOKENS). The first token's record (``StepRecord.prefill``: picked from
    the prefill, no decode of its own) is no step at all and is never counted, so the same steps
    are timed whichever way the request starts (DFLASH_FIRST_TOKEN)."""
    cancel = threading.Event()
    need = warm_tokens() if warm is None else warm
    n = [0]  # decode steps so far
    dropped = [0, 0]  # warm-up steps, and the tokens they committed

    def on_step(rec):
        if rec.prefill:
            return
        n[0] += 1
        if dropped[0] == n[0] - 1 and (dropped[0] == 0 or dropped[1] < need):
            dropped[0] += 1
            dropped[1] += rec.committed
        if n[0] >= dropped[0] + steps:
            cancel.set()  # the loop stops before the next step

    # overlap_commit and ar_runs off: auto's own steps stream before the next decode is queued, one
    # engine call a token
    settings = GenerationSettings(
        mode=mode,
        budget=max(1, budget),
        max_tokens=1_000_000,
        stop_at_eog=False,
        overlap_commit=False,
        ar_runs=False,
    )
    engine.reset()
    res = engine.generate(tokens, settings, on_step=on_step, cancel=cancel)
    decodes = [s for s in res.steps if not s.prefill]
    return [s.wall for s in decodes[dropped[0] :]]


def lower_quartile(xs: list[float]) -> float:
    """Contention (other processes, a busy GPU) only ever adds time to a step, so the lower quartile
    of a configuration's steps estimates its own cost better than the mean or the median."""
    xs = sorted(xs)
    return statistics.quantiles(xs, n=4, method="inclusive")[0] if len(xs) > 1 else xs[0]


def configurations(engine, chain_budgets=CHAIN_BUDGETS, tree_budgets=TREE_BUDGETS) -> list[tuple[str, int]]:
    """What can be measured on this engine: chain budgets up to the drafter's block, tree budgets
    up to the sequences the context was made for (and none where tree verification is unavailable)."""
    cfgs = [("ar", 0)]
    d = engine.drafter
    if d is None:
        return cfgs
    cfgs += [("chain", b) for b in sorted(set(chain_budgets)) if b <= d.max_draft]
    if engine.tree_capable:
        cfgs += [("tree", b) for b in sorted(set(tree_budgets)) if b <= engine.tree_max_nodes]
    return cfgs


def measure(
    engine,
    *,
    chain_budgets=CHAIN_BUDGETS,
    tree_budgets=TREE_BUDGETS,
    steps: int = STEPS,
    rounds: int = ROUNDS,
    prompt: str = PROMPT,
    progress=None,
    cancel=None,
) -> CostTable:
    """Measures the cost table on a loaded engine. Its caches are put back as they were, byte for
    byte: a re-check in the middle of a chat (auto_mode.recheck) must not cost the conversation's
    prefill again, nor write its K/V in prompt batches, which round as the target's own steps did
    not (an exact auto chat parted from AR after one, H200).

    ``cancel`` (a threading.Event): checked before each configuration; once set, the measurement
    stops there with CalibrationCancelled and nothing is kept. (A first auto request waits for the
    whole measurement, seconds on a CPU and far longer on a busy one; a user's stop, or the app
    closing, must not wait for it.)"""
    held = engine.snapshot_target(drafter=True) if engine.kv else None
    try:
        return _measure(engine, chain_budgets, tree_budgets, steps, rounds, prompt, progress, cancel)
    finally:
        engine.reset()
        if held is not None:
            engine.restore_target(held)


def _measure(engine, chain_budgets, tree_budgets, steps, rounds, prompt, progress, cancel) -> CostTable:
    """measure()'s runs, over whatever the caches held (measure puts them back)."""
    t0 = time.perf_counter()
    key = calibration_key(engine.config)
    cfgs = configurations(engine, chain_budgets, tree_budgets)
    n_ctx = engine.target_ctx.n_ctx
    tokens = engine.tokenize(prompt)
    # every run must fit the context: prompt + a warm-up of warm_tokens() and one step more + steps
    # steps of at most budget + 1 tokens
    longest = max(b for _, b in cfgs) + 1
    warm = warm_tokens()
    if len(tokens) + warm + (steps + 2) * longest >= n_ctx:
        tokens = tokens[: max(2, n_ctx - warm - (steps + 2) * longest - 2)]
    walls: dict[tuple[str, int], list[float]] = {c: [] for c in cfgs}

    def stop_if_cancelled() -> None:
        if cancel is not None and cancel.is_set():
            raise CalibrationCancelled("the calibration was cancelled; nothing was kept")

    for mode, b in cfgs[:2]:  # untimed warm-up: first touches of weights and buffers
        stop_if_cancelled()
        _step_walls(engine, tokens, mode, b, 2)
    total = rounds * len(cfgs)
    for r in range(rounds):
        for i, c in enumerate(cfgs):
            stop_if_cancelled()
            if progress is not None:
                # how far along the whole measurement is (a first auto request waits for all of it)
                label = "AR" if c[0] == "ar" else f"{c[0]} {c[1]}"
                progress(f"calibrating {label}: step costs {r * len(cfgs) + i + 1}/{total}")
            walls[c] += _step_walls(engine, tokens, c[0], c[1], steps)
    ms = {c: 1000.0 * lower_quartile(v) for c, v in walls.items() if v}
    table = CostTable(
        key=key,
        ar_ms=ms[("ar", 0)],
        chain_ms={b: v for (m, b), v in ms.items() if m == "chain"},
        tree_ms={b: v for (m, b), v in ms.items() if m == "tree"},
        measured_at=time.time(),
        seconds=time.perf_counter() - t0,
    )
    return table


class CalibrationCancelled(Exception):
    """A measurement stopped by its cancel event (``measure``); no table was made."""


def ensure(engine, *, force: bool = False, progress=None, **measure_kw) -> CostTable:
    """The engine's cost table: the one it holds, else the cached one, else measured now (and
    cached). ``force`` measures again. The table is kept on the engine (``engine.calibration``)."""
    key = calibration_key(engine.config)
    held = getattr(engine, "calibration", None)
    if not force and held is not None and held.key == key:
        return held
    table = None if force else load_cached(key)
    if table is None:
        table = measure(engine, progress=progress, **measure_kw)
        save(table)
        engine.auto_policy = None  # its costs were another table's
    engine.calibration = table
    return table


def cached_for(engine) -> CostTable | None:
    """The engine's table if it holds one or one is cached for its key; never measures."""
    try:
        key = calibration_key(engine.config)
    except OSError:
        return None
    held = getattr(engine, "calibration", None)
    if held is not None and held.key == key:
        return held
    table = load_cached(key)
    if table is not None:
        engine.calibration = table
    return table
