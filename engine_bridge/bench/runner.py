"""The bench runner: autoregressive baseline vs speculative decoding on one pair, over a sweep.

A run measures, for every configuration of the sweep, ``reps`` repetitions of every prompt of a
suite. Per reload group (a set of K/V cache types: changing them needs a new load) it loads the
pair once and measures, on that one engine:

* one autoregressive row (mode 'ar' ignores the drafter), the baseline for speed-up and for the
  losslessness check, and
* one speculative row per configuration (budget x verify mode x draft variant),

in rounds: repetition ``r`` of every row, in plan order, before repetition ``r + 1`` of any, so that
a drift of the machine's speed over minutes falls on every row alike. With ``round_prompts`` = N a
round is cut into blocks of N prompts, each row running a block before the next row takes the same
block: rows then lie seconds apart, not a whole suite's minutes (on the H200 a row's speed moved by
up to 14 % between rounds of one process, docs/benchmarks.md, "Auto on the full public sets, in
blocks of prompts"). Blocks of DEFAULT_BLOCK (10) prompts are the default; 0 runs a whole suite per row.

Fairness rules: every generation starts from empty KV caches (``reset``), so every run pays its
full prefill and time to first token; each row's round begins with one untimed warm-up generation
(first touches of weights and buffers, and the graphs the row before left, are not the steady
state); repetition ``r`` uses seed ``base_seed + r`` for every row, so rows differ only in what is
being compared.

Cancelling (``cancel`` event) stops within one decoding step; the interrupted generation is
dropped, everything that finished is kept and can still be exported. A row whose setting the
engine cannot honour (tree verification before it lands, an incompatible draft variant) fails on
its own with the engine's reason; the other rows still run.

Nothing here computes statistics: ``report`` turns a ``BenchResult`` into the report.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .suites import Suite
from ..runtime.config import KV_TYPES, EngineConfig, GenerationSettings, KVTypes
from ..common.errors import EngineError, UnsupportedSettingError

#: Sweep axes and the names they may also be given on the command line.
AXES = ("budget", "verify_mode", "type_k", "type_v", "draft_variant", "p_min")
AXIS_ALIASES = {
    "verify": "verify_mode",
    "mode": "verify_mode",
    "draft": "draft_variant",
    "variant": "draft_variant",
    "kv": "kv",
}
SPEC_MODES = ("chain", "tree", "auto")  # auto: the engine picks per step, the budget its cap
BASE_VARIANT = "base"
# Greedy speculative runs are judged against AR after their row's timed runs (default); "inline"
# judges each right after it ran, as the bench did before 2026-11-26 (kept for the A/B only).
JUDGE_INLINE = os.environ.get("DFLASH_BENCH_JUDGE", "after") == "inline"


class SweepError(ValueError):
    """A sweep axis or value the bench does not understand."""


# -- sweep ----------------------------------------------------------------------------------------
#: prompts a row runs before the next row takes the same ones (BenchSpec.round_prompts)
DEFAULT_BLOCK = 10


def parse_sweep(items: list[str]) -> dict[str, list]:
    """``["budget=4,8", "kv=q8_0,f16/q8_0"]`` -> ``{"budget": [4, 8], "type_k": [...], ...}``.

    ``kv=K/V`` sweeps both cache types together (one value per configuration, not a product);
    a single type ``kv=q8_0`` means K and V both q8_0. ``draft_variant`` values are ``base``
    (the drafter given with --draft), another drafter GGUF, or ``lora:PATH[@SCALE]``.
    """
    out: dict[str, list] = {}
    for item in items:
        if "=" not in item:
            raise SweepError(f"sweep {item!r}: write AXIS=V1,V2 (axes: {', '.join(AXES)}, kv)")
        axis, _, vals = item.partition("=")
        axis = AXIS_ALIASES.get(axis.strip(), axis.strip())
        values = [v.strip() for v in vals.split(",") if v.strip()]
        if not values:
            raise SweepError(f"sweep {axis}: no values")
        if axis == "kv":
            out["kv"] = [_parse_kv(v) for v in values]
        elif axis in AXES:
            out[axis] = [_parse_value(axis, v) for v in values]
        else:
            raise SweepError(f"unknown sweep axis {axis!r}; choose from {', '.join(AXES)}, kv")
    if "kv" in out and ("type_k" in out or "type_v" in out):
        raise SweepError("sweep either kv=K/V or type_k / type_v, not both")
    return out


def _parse_kv(v: str) -> KVTypes:
    k, _, vv = v.partition("/")
    try:
        return KVTypes(k, vv or k)
    except ValueError as exc:
        raise SweepError(str(exc)) from None


def _parse_value(axis: str, v: str):
    if axis == "budget":
        try:
            b = int(v)
        except ValueError:
            raise SweepError(f"budget {v!r} is not an integer") from None
        if b < 1:
            raise SweepError("budget must be at least 1")
        return b
    if axis == "verify_mode":
        if v not in SPEC_MODES:
            raise SweepError(f"verify_mode {v!r}: choose from {', '.join(SPEC_MODES)}")
        return v
    if axis == "p_min":
        try:
            p = float(v)
        except ValueError:
            raise SweepError(f"p_min {v!r} is not a number") from None
        if not 0.0 <= p <= 1.0:
            raise SweepError("p_min must be between 0 and 1")
        return p
    if axis in ("type_k", "type_v"):
        if v not in KV_TYPES:
            raise SweepError(f"{axis} {v!r}: choose from {', '.join(KV_TYPES)}")
        return v
    return parse_variant(v)


def parse_variant(v: str) -> str:
    """Normalises a draft variant: ``base``, a drafter path, or ``lora:PATH@SCALE``."""
    if v == BASE_VARIANT:
        return v
    if v.startswith("lora:"):
        path, _, scale = v[5:].partition("@")
        try:
            s = float(scale) if scale else 1.0
        except ValueError:
            raise SweepError(f"draft variant {v!r}: the scale after @ must be a number") from None
        if not path:
            raise SweepError(f"draft variant {v!r}: give lora:PATH[@SCALE]")
        return f"lora:{path}@{s:g}"
    return v


def variant_label(v: str) -> str:
    if v == BASE_VARIANT:
        return v
    if v.startswith("lora:"):
        path, _, scale = v[5:].partition("@")
        return f"lora:{Path(path).name}@{scale}"
    return Path(v).name


@dataclass(frozen=True)
class BenchConfig:
    """One speculative configuration of a sweep."""

    id: str
    budget: int
    verify_mode: str
    target_kv: KVTypes
    draft_variant: str
    swept: tuple[str, ...] = ()  # the axes that vary, so labels show only what differs
    p_min: float | None = None  # a chain's draft cut (GenerationSettings.p_min); None: the spec's

    @property
    def label(self) -> str:
        parts = []
        for axis in self.swept or ("budget",):
            if axis == "budget":
                parts.append(f"budget={self.budget}")
            elif axis == "verify_mode":
                parts.append(f"verify={self.verify_mode}")
            elif axis in ("kv", "type_k", "type_v"):
                if f"kv={self.target_kv}" not in parts:
                    parts.append(f"kv={self.target_kv}")
            elif axis == "draft_variant":
                parts.append(f"draft={variant_label(self.draft_variant)}")
            elif axis == "p_min":
                parts.append(f"p_min={self.p_min:g}")
        return " ".join(parts)


@dataclass
class BenchSpec:
    """What to bench: the pair (as an EngineConfig), the prompts, the settings and the sweep."""

    engine: EngineConfig
    suite: Suite
    reps: int = 3
    max_tokens: int = 64
    budget: int = 15
    verify_mode: str = "chain"
    p_min: float = 0.0
    exact_phases: bool = False  # GenerationSettings.exact_phases: every phase ends at a device sync
    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 1.0
    base_seed: int = 0
    warmup: bool = True
    check_pair: bool = True
    sweep: dict[str, list] = field(default_factory=dict)
    #: prompts per block of a round, each row in turn (0: the whole suite). 10 by default: rows that each
    #: ran a whole suite, minutes apart, read a GPU's drift as their own (auto 0.90-0.95x AR on MT-Bench
    #: on an H200 that way, 1.006 in blocks: docs/benchmarks.md, "Auto on the full public sets, in blocks
    #: of prompts" and "Fast auto at 0.90x AR on MT-Bench")
    round_prompts: int = DEFAULT_BLOCK

    def __post_init__(self):
        if self.engine.draft is None:
            raise ValueError("the bench compares speculative decoding with the baseline: give a drafter")
        if self.reps < 1:
            raise ValueError("reps must be at least 1")
        if self.round_prompts < 0:
            raise ValueError("round_prompts must be 0 (the whole suite) or more")
        if self.verify_mode not in SPEC_MODES:
            raise ValueError(f"verify_mode must be one of {', '.join(SPEC_MODES)}")

    def settings(self, mode: str, budget: int, rep: int, p_min: float | None = None) -> GenerationSettings:
        return GenerationSettings(
            mode=mode,
            budget=budget,
            p_min=self.p_min if p_min is None else p_min,
            exact_phases=self.exact_phases,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            seed=self.base_seed + rep,
        )

    def to_dict(self) -> dict:
        e = self.engine
        return {
            "suite": self.suite.describe(),
            "reps": self.reps,
            "max_tokens": self.max_tokens,
            "budget": self.budget,
            "verify_mode": self.verify_mode,
            "p_min": self.p_min,
            "exact_phases": self.exact_phases,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "base_seed": self.base_seed,
            "seeds": [self.base_seed + r for r in range(self.reps)],
            "warmup": self.warmup,
            "round_prompts": self.round_prompts,
            "check_pair": self.check_pair,
            "sweep": {k: [str(v) for v in vs] for k, vs in self.sweep.items()},
            "engine": {
                "target": str(e.target),
                "draft": str(e.draft),
                "n_ctx": e.n_ctx,
                "n_batch": e.n_batch,
                "n_ubatch": e.n_ubatch,
                "n_threads": e.n_threads,
                "n_gpu_layers": e.n_gpu_layers,
                "draft_n_gpu_layers": e.draft_n_gpu_layers,
                "flash_attn": e.flash_attn,
                "target_kv": str(e.target_kv),
                "draft_kv": str(e.draft_kv),
                "adapters": [[str(p), s] for p, s in e.adapters],
            },
        }


def expand_sweep(spec: BenchSpec) -> list[BenchConfig]:
    """The cartesian product of the sweep axes, in the order the axes were given."""
    sw = spec.sweep
    base_kv = spec.engine.target_kv
    axes = [a for a in ("kv", "type_k", "type_v", "draft_variant", "verify_mode", "budget", "p_min") if a in sw]
    swept = tuple(a for a in sw if a in axes)
    values = [sw[a] for a in axes]
    configs = []
    for i, combo in enumerate(itertools.product(*values) if axes else [()]):
        point = dict(zip(axes, combo))
        kv = point.get("kv") or KVTypes(point.get("type_k", base_kv.k), point.get("type_v", base_kv.v))
        configs.append(
            BenchConfig(
                id=f"c{i}",
                budget=point.get("budget", spec.budget),
                verify_mode=point.get("verify_mode", spec.verify_mode),
                target_kv=kv,
                draft_variant=point.get("draft_variant", BASE_VARIANT),
                swept=swept,
                p_min=point.get("p_min"),
            )
        )
    return configs


# -- what a run produces --------------------------------------------------------------------------
@dataclass
class Measurement:
    """One timed generation (one prompt, one repetition, one row)."""

    row_id: str
    prompt_id: str
    rep: int
    seed: int
    summary: dict  # RunSummary.to_dict()
    phase_means: dict  # seconds per step, by phase
    commit_lens: list[int]  # tokens committed by each step
    tokens: list[int]
    text: str
    # greedy speculative runs that part from AR: where, and the target's top-2 margin there
    # (engine_bridge.runtime.near_tie.Parting.to_dict); None when identical or not judged
    divergence: dict | None = None


@dataclass
class BenchRow:
    """A row of the report: the AR baseline of a reload group, or one speculative configuration."""

    id: str
    kind: str  # "ar" | "spec"
    label: str
    verify_mode: str  # "ar" | "chain" | "tree"
    budget: int  # 0 for AR
    target_kv: KVTypes
    draft_variant: str
    ar_row: str  # the AR row this row's speed-up and losslessness refer to
    status: str = "pending"  # pending | ok | failed | cancelled
    error: str = ""
    notes: list[str] = field(default_factory=list)
    model: dict = field(default_factory=dict)  # filenames, sizes, parameter counts
    p_min: float | None = None  # a swept p_min (None: the spec's, GenerationSettings.p_min)


@dataclass
class BenchResult:
    spec: BenchSpec
    rows: list[BenchRow]
    measurements: list[Measurement]
    machine: dict
    build: dict
    started_at: float
    finished_at: float = 0.0
    cancelled: bool = False

    def of_row(self, row_id: str) -> list[Measurement]:
        return [m for m in self.measurements if m.row_id == row_id]


@dataclass(frozen=True)
class BenchProgress:
    done: int  # timed generations finished (or skipped by a failed row)
    total: int
    elapsed_s: float
    eta_s: float | None  # None until the first generation has been timed
    stage: str  # load | warmup | run | failed | done | cancelled
    row_id: str = ""
    row_label: str = ""
    prompt_id: str = ""
    rep: int = -1
    measurement: Measurement | None = None
    message: str = ""

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


# -- the runner -----------------------------------------------------------------------------------
def plan_rows(spec: BenchSpec) -> list[tuple[BenchRow, BenchConfig | None]]:
    """Rows in run order: per K/V group, its AR baseline, then its speculative configurations
    grouped by draft variant (a variant switch costs a drafter load)."""
    configs = expand_sweep(spec)
    groups: dict[KVTypes, list[BenchConfig]] = {}
    for c in configs:
        groups.setdefault(c.target_kv, []).append(c)
    multi_kv = len(groups) > 1
    plan: list[tuple[BenchRow, BenchConfig | None]] = []
    for gi, (kv, cfgs) in enumerate(groups.items()):
        ar_id = f"ar{gi}" if multi_kv else "ar"
        plan.append(
            (BenchRow(ar_id, "ar", "autoregressive" + (f" kv={kv}" if multi_kv else ""), "ar", 0, kv, "", ar_id), None)
        )
        order = list(dict.fromkeys(c.draft_variant for c in cfgs))
        for c in sorted(cfgs, key=lambda c: order.index(c.draft_variant)):
            row = BenchRow(c.id, "spec", c.label, c.verify_mode, c.budget, kv, c.draft_variant, ar_id, p_min=c.p_min)
            plan.append((row, c))
    return plan


def run_bench(
    spec: BenchSpec, on_progress: Callable[[BenchProgress], None] | None = None, cancel: threading.Event | None = None
) -> BenchResult:
    """Runs the whole bench on this thread; see the module docstring."""
    return _Runner(spec, on_progress, cancel).run()


class _Runner:
    def __init__(self, spec: BenchSpec, on_progress, cancel):
        from .machine import build_info, machine_info

        self.spec = spec
        self.on_progress = on_progress
        self.cancel = cancel or threading.Event()
        self.plan = plan_rows(spec)
        self.n_prompts = len(spec.suite.prompts)
        self.total = len(self.plan) * spec.reps * self.n_prompts
        self.done = 0
        self.measured = 0
        self.t0 = time.perf_counter()
        self.result = BenchResult(
            spec, [r for r, _ in self.plan], [], machine_info(), build_info(), started_at=time.time()
        )
        self.variant: str | None = BASE_VARIANT  # what the loaded engine's drafter is now

    # -- progress -------------------------------------------------------------------------------
    def _say(self, stage: str, row: BenchRow | None = None, **kw) -> None:
        if self.on_progress is None:
            return
        elapsed = time.perf_counter() - self.t0
        # Elapsed per *timed* generation, loads and warm-ups included (they recur per row and
        # group); units skipped by a failed row take no time, so they must not dilute the rate.
        eta = elapsed / self.measured * (self.total - self.done) if self.measured else None
        self.on_progress(
            BenchProgress(
                self.done, self.total, elapsed, eta, stage, row.id if row else "", row.label if row else "", **kw
            )
        )

    def _skip(self, row: BenchRow, status: str, error: str = "", units: int | None = None) -> None:
        row.status, row.error = status, error
        self.done += self.spec.reps * self.n_prompts if units is None else units
        self._say("failed" if status == "failed" else status, row, message=error)

    # -- the run --------------------------------------------------------------------------------
    def run(self) -> BenchResult:
        plan = self.plan
        i = 0
        while i < len(plan):
            kv = plan[i][0].target_kv
            j = i
            while j < len(plan) and plan[j][0].target_kv == kv:
                j += 1
            self._run_group(plan[i:j])
            i = j
        self.result.cancelled = self.cancel.is_set()
        self.result.finished_at = time.time()
        self._say("cancelled" if self.result.cancelled else "done")
        return self.result

    def _run_group(self, group: list[tuple[BenchRow, BenchConfig | None]]) -> None:
        if self.cancel.is_set():
            for row, _ in group:
                self._skip(row, "cancelled")
            return
        kv = group[0][0].target_kv
        self._say("load", group[0][0], message=f"loading the pair (target K/V {kv})")
        try:
            eng = self._load(self.spec.engine.replace(target_kv=kv))
        except (EngineError, OSError, ValueError) as exc:
            for row, _ in group:
                self._skip(row, "failed", f"load failed: {exc}")
            return
        self.variant = BASE_VARIANT
        done = {row.id: 0 for row, _ in group}  # timed generations finished, per row
        try:
            prompts = [p.render(eng.format_chat) for p in self.spec.suite.prompts]
            # Rounds: repetition r of every row before repetition r + 1 of any. A machine's speed
            # drifts over minutes (on the H200 VM of 2026-11-27 one-row decodes took 1.03 or 1.14
            # ms for many runs in a row, in AR and auto alike: docs/benchmarks.md, "Where auto
            # loses to AR on the GPU"); rows run one after the other put such a drift between the
            # baseline and a row, rounds spread it over all of them.
            # Blocks (round_prompts): each row runs a block of prompts before the next row takes the
            # same block, so a drift of seconds, not of a whole suite's minutes, lies between rows.
            pairs = list(zip(self.spec.suite.prompts, prompts))
            size = self.spec.round_prompts or len(pairs) or 1
            blocks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
            for rep in range(self.spec.reps):
                for block in blocks:
                    for row, cfg in group:
                        if self.cancel.is_set():
                            break
                        if row.status == "failed":
                            continue
                        row.model = self._model_facts(eng)
                        if cfg is not None:
                            try:
                                self._apply_variant(eng, cfg.draft_variant)
                            except (EngineError, OSError, ValueError) as exc:
                                self.variant = None  # the drafter may be half-swapped: re-apply next time
                                label = variant_label(cfg.draft_variant)
                                self._skip(row, "failed", f"draft variant {label}: {exc}", units=self._left(row, done))
                                continue
                            row.model = self._model_facts(eng)
                        self._run_round(eng, row, block, rep, done)
            for row, _ in group:
                if row.status == "failed":
                    continue
                if self._left(row, done) == 0:
                    row.status = "ok"
                else:  # cancelled before or inside this row's last round
                    self._skip(row, "cancelled", units=self._left(row, done))
        finally:
            eng.close()

    def _load(self, cfg: EngineConfig):
        from ..runtime.engine import Engine

        try:
            from ..models.pair_preflight import PAIR_PREFLIGHT
        except ModuleNotFoundError as exc:
            # The pairing checks (engine_bridge.models.compat) may be absent from a partial install;
            # the bench still runs, and the report says the pair was not checked.
            if not (exc.name or "").endswith(("compat", "pair_preflight")):
                raise
            self.result.build["pair_check"] = "unavailable"
            return Engine.load(cfg, check=False)
        return Engine.load(cfg, preflight=PAIR_PREFLIGHT, check=self.spec.check_pair)

    def _apply_variant(self, eng, variant: str) -> None:
        if variant == self.variant:
            return
        base_draft = self.spec.engine.draft
        base_adapters = list(self.spec.engine.adapters)
        if variant == BASE_VARIANT or variant.startswith("lora:"):
            if eng.config.draft != base_draft or eng.drafter is None:
                self._drop_adapters(eng)
                eng.swap_drafter(base_draft, check=self.spec.check_pair)
            if variant == BASE_VARIANT:
                eng.set_adapters(base_adapters, check=self.spec.check_pair)
            else:
                path, _, scale = variant[5:].partition("@")
                eng.set_adapters([(path, float(scale))], check=self.spec.check_pair)
        else:
            self._drop_adapters(eng)
            eng.swap_drafter(variant, check=self.spec.check_pair)
        self.variant = variant

    @staticmethod
    def _drop_adapters(eng) -> None:
        # swap_drafter re-applies the configured adapters to the new file: clear them first
        if eng.drafter is not None and eng.config.adapters:
            eng.set_adapters([], check=False)

    @staticmethod
    def _model_facts(eng) -> dict:
        facts = {
            "model_filename": eng.config.target.name,
            "model_path": str(eng.config.target),
            "model_size": eng.target.size_bytes,
            "n_params": eng.target.n_params,
            "draft_filename": "",
            "draft_size": 0,
            "draft_n_params": 0,
            "adapters": [],
        }
        if eng.drafter is not None:
            facts.update(
                draft_filename=eng.drafter.path.name,
                draft_path=str(eng.drafter.path),
                draft_size=eng.drafter.model.size_bytes,
                draft_n_params=eng.drafter.model.n_params,
                adapters=[[str(p), s] for p, s in eng.config.adapters],
            )
        return facts

    def _generate(self, eng, text: str, settings: GenerationSettings):
        eng.reset()
        return eng.generate(text, settings, cancel=self.cancel)

    def _divergence(self, eng, row: BenchRow, prompt_id: str, rep: int, text: str, tokens: list[int]):
        """Where this greedy run parts from its AR run, with the target's margin there (outside the
        timed generation; the next one resets the KV anyway)."""
        from ..runtime import near_tie

        ref = next(
            (
                m.tokens
                for m in self.result.measurements
                if m.row_id == row.ar_row and m.prompt_id == prompt_id and m.rep == rep
            ),
            None,
        )
        if ref is None:
            return None
        part = near_tie.parting(eng, eng.tokenize(text), ref, tokens, replay=True)
        return part.to_dict() if part is not None else None

    def _run_round(self, eng, row: BenchRow, prompts: list, rep: int, done: dict[str, int]) -> None:
        """Repetition ``rep`` of ``prompts`` (a block of (prompt, rendered text) pairs) on ``row``: an
        untimed warm-up first (the row before left other graphs, samplers and extraction set up),
        then the timed generations, then the judge of this block's greedy speculative runs. A
        failure fails the row with the engine's reason; a cancel stops between generations
        (``_run_group`` settles the statuses)."""
        spec = self.spec
        mode = "ar" if row.kind == "ar" else row.verify_mode
        budget = row.budget or spec.budget
        try:
            if spec.warmup:
                self._say("warmup", row)
                self._generate(eng, prompts[0][1], spec.settings(mode, budget, 0, row.p_min))
            judge: list[tuple[Measurement, str, int, str]] = []
            for p, text in prompts:
                if self.cancel.is_set():
                    return
                res = self._generate(eng, text, spec.settings(mode, budget, rep, row.p_min))
                if res.summary.finish_reason == "cancelled":
                    continue  # an interrupted generation is not a measurement; the check above ends the round
                s = res.summary
                if s.budget_note and s.budget_note not in row.notes:
                    row.notes.append(s.budget_note)
                m = Measurement(
                    row.id,
                    p.id,
                    rep,
                    spec.base_seed + rep,
                    s.to_dict(),
                    res.phase_means(),
                    [st.committed for st in res.steps],
                    list(res.tokens),
                    res.text,
                )
                if row.kind == "spec" and spec.temperature <= 0:
                    if JUDGE_INLINE:
                        m.divergence = self._divergence(eng, row, p.id, rep, text, m.tokens)
                    else:
                        judge.append((m, p.id, rep, text))
                self.result.measurements.append(m)
                done[row.id] += 1
                self.done += 1
                self.measured += 1
                self._say("run", row, prompt_id=p.id, rep=rep, measurement=m)
            # The judge replays AR decodes with extraction off and the backend sampler detached;
            # between two timed runs that made every next run set both up again (llama.cpp
            # reserves and recaptures its graphs), a cost a user's back-to-back requests never pay.
            for m, pid, r, text in judge:
                if self.cancel.is_set():
                    break
                m.divergence = self._divergence(eng, row, pid, r, text, m.tokens)
        except UnsupportedSettingError as exc:
            # e.g. verify_mode=tree before tree verification lands: this row fails, the bench goes on
            self._skip(row, "failed", str(exc), units=self._left(row, done))
        except EngineError as exc:
            self._skip(row, "failed", f"{type(exc).__name__}: {exc}", units=self._left(row, done))

    def _left(self, row: BenchRow, done: dict[str, int]) -> int:
        """The row's timed generations not yet run (all rounds)."""
        return self.spec.reps * self.n_prompts - done[row.id]
