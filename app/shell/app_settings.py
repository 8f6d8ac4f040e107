"""The app's persistent choices, kept in QSettings, and how they become engine objects.

``StudioSettings`` is the one typed view of what the user chose; the widgets edit it and the
main window turns it into an ``EngineConfig`` (needs a load) and ``GenerationSettings`` (apply to
the next request). Which changed fields need a reload is decided by comparing EngineConfigs, so
the rule lives in one place: the engine's own split between config and generation settings.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QSettings

from engine_bridge.common.placement import MAX_DEVICES, Placement
from engine_bridge.runtime.config import (
    DEFAULT_DRAFT_WINDOW,
    KV_TYPES,
    MIN_DRAFT_WINDOW,
    EngineConfig,
    GenerationSettings,
    KVTypes,
)
from engine_bridge.runtime.default_mode import default_budget, default_mode

ORGANIZATION = "DFlashStudio"
APPLICATION = "DFlash Studio"

# What each field may hold: the settings panel's widgets take their ranges and choices from here,
# and load() holds a hand-edited file to them, so a value the panel cannot show never reaches it.
INT_RANGES: dict[str, tuple[int, int]] = {
    "n_ctx": (0, 1 << 20),
    "draft_window": (0, 1 << 20),
    "n_gpu_layers": (-1, 1000),
    "main_gpu": (0, MAX_DEVICES - 1),
    "draft_gpu": (-1, MAX_DEVICES - 1),
    "budget": (1, 256),
    "top_k": (0, 1000),
    "max_tokens": (1, 65536),
    "seed": (0, 2**31 - 1),
}
#: the smallest explicit context EngineConfig takes (0 means the model's own)
MIN_CTX = 16
#: fields where 0 means "the model's own" / "all of it" and any other value must reach a smallest one
#: that EngineConfig takes (a spin box cannot leave out 1..smallest-1)
SMALLEST_NONZERO: dict[str, tuple[int, str]] = {
    "n_ctx": (MIN_CTX, "context"),
    "draft_window": (MIN_DRAFT_WINDOW, "window"),
}


def nonzero_floor(name: str, value: int) -> int:
    """``value`` raised to the field's smallest explicit value, 0 kept (SMALLEST_NONZERO)."""
    floor = SMALLEST_NONZERO.get(name, (0, ""))[0]
    return value if value == 0 else max(value, floor)


FLOAT_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "flash_attn": ("auto", "on", "off"),
    "target_k": KV_TYPES,
    "target_v": KV_TYPES,
    "draft_k": KV_TYPES,
    "draft_v": KV_TYPES,
    "split_mode": ("layer", "row", "none"),
    "mode": ("chain", "tree", "ar", "auto"),
}


def open_settings(path: str | Path | None = None) -> QSettings:
    """The user's settings, or an ini file at ``path`` (tests, portable installs)."""
    if path is not None:
        return QSettings(str(path), QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION, APPLICATION)


@dataclass
class StudioSettings:
    # the pair
    target: str = ""
    drafter: str = ""  # the pair's base drafter
    draft_variant: str = ""  # a quantised variant in use instead ('' = base)
    adapters: list = field(default_factory=list)  # [[path, scale], ...] on the drafter
    # loading (a change needs a reload)
    n_ctx: int = 0  # 0: the target's own context length, capped by memory
    n_gpu_layers: int = -1
    flash_attn: str = "auto"
    exact_verify: bool = False  # batch-invariant kernels (CPU; CUDA with patch 0016): greedy output = AR
    # the drafter sees only the last N context cells (0: all): it fades in long chats otherwise
    draft_window: int = DEFAULT_DRAFT_WINDOW
    target_k: str = "f16"
    target_v: str = "f16"
    draft_k: str = "f16"
    draft_v: str = "f16"
    # several GPUs (a change needs a reload): the target's split, and the drafter's GPU (-1: the one
    # holding the target's output)
    split_mode: str = "layer"
    tensor_split: str = ""  # "3,1": shares per GPU ('' = by free memory)
    main_gpu: int = 0
    draft_gpu: int = -1
    rpc_servers: str = ""  # "host:port,host:port": llama.cpp RPC servers (their devices first)
    # the engine in the app's process instead of a child (applies at the next load): no per-step IPC,
    # but a llama.cpp abort, a crash or the OOM killer then ends the window too (RPC always uses a child)
    engine_in_process: bool = False
    # generation (applies to the next request). A first run's mode: chain on a GPU build, auto on a
    # CPU-only one, where chain runs slower than the target alone (engine_bridge.runtime.default_mode)
    mode: str = field(default_factory=lambda: default_mode(True))
    # a first run's budget: 5 for chain on a GPU build (faster than 7 and 3 on every public suite on an
    # H100), else 7 (faster than 15 everywhere measured; engine_bridge.runtime.default_mode)
    budget: int = field(default_factory=lambda: default_budget(default_mode(True)))
    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    token_margins: bool = False  # step records carry the target's top-2 margins (token tooltips)
    exact_phases: bool = False  # every phase of a step ends at a device sync (exact profiler phases)
    # view
    highlight_drafts: bool = True

    # -- engine objects ---------------------------------------------------------------------------
    @property
    def has_pair(self) -> bool:
        return bool(self.target)

    @property
    def active_drafter(self) -> str:
        return self.draft_variant or self.drafter

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            target=Path(self.target),
            draft=Path(self.active_drafter) if self.active_drafter else None,
            n_ctx=self.n_ctx,
            n_gpu_layers=self.n_gpu_layers,
            draft_n_gpu_layers=self.n_gpu_layers,
            flash_attn=self.flash_attn,
            target_kv=KVTypes(self.target_k, self.target_v),
            draft_kv=KVTypes(self.draft_k, self.draft_v),
            adapters=tuple((Path(p), float(s)) for p, s in self.adapters),
            target_placement=self.target_placement(),
            draft_placement=None if self.draft_gpu < 0 else Placement(split_mode="none", main_gpu=self.draft_gpu),
            rpc_servers=self.rpc_endpoints(),
            exact=self.exact_verify,
            draft_window=self.draft_window,
        )

    def rpc_endpoints(self) -> tuple[str, ...]:
        from engine_bridge.runtime.rpc import parse_endpoints

        try:
            return parse_endpoints(self.rpc_servers)
        except ValueError:
            return ()  # a hand-edited value the panel would not accept: no servers

    def target_placement(self) -> Placement:
        try:
            return Placement.parse(self.split_mode, self.tensor_split, self.main_gpu)
        except ValueError:
            return Placement()  # a hand-edited value the panel would not accept: llama.cpp's default

    def generation_settings(self, has_drafter: bool = True) -> GenerationSettings:
        mode = self.mode if has_drafter else "ar"
        return GenerationSettings(
            mode=mode,
            budget=self.budget,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            seed=self.seed,
            record_margins=self.token_margins,
            exact_phases=self.exact_phases,
        )

    def replace(self, **changes) -> "StudioSettings":
        return dataclasses.replace(self, **changes)

    # -- persistence ------------------------------------------------------------------------------
    @classmethod
    def load(cls, qs: QSettings) -> "StudioSettings":
        return cls.load_checked(qs)[0]

    @classmethod
    def load_checked(cls, qs: QSettings) -> tuple["StudioSettings", list[str]]:
        """The settings, every field held to what its widget can show, and one line per field that
        was not kept as written ("n_ctx: 999999999999 is above 1048576; 1048576 used"). A hand-edited
        or older file never stops the app."""
        out = cls()
        resets: list[str] = []
        for f in dataclasses.fields(cls):
            key = f"studio/{f.name}"
            if not qs.contains(key):
                continue
            raw = qs.value(key)
            default = getattr(out, f.name)
            try:
                value, note = _checked(f.name, _decode(raw, default))
            except (TypeError, ValueError, OverflowError) as exc:
                value, note = default, f"{_shown(raw)} is not valid ({exc}); the default {default!r} used"
            setattr(out, f.name, value)
            if note:
                resets.append(f"{f.name}: {note}")
        return out, resets

    def save(self, qs: QSettings) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            qs.setValue(f"studio/{f.name}", json.dumps(value) if isinstance(value, list) else value)
        qs.sync()


def _decode(raw, default):
    """QSettings' ini backend returns strings; convert back to the field's type (ValueError when the
    text is not of it)."""
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "1", "yes", "false", "0", "no"):
            raise ValueError("not true or false")
        return text in ("true", "1", "yes")
    if isinstance(default, int):
        if isinstance(raw, str) and not raw.strip().lstrip("+-").isdigit():
            raise ValueError("not an integer")
        return int(raw)
    if isinstance(default, float):
        value = float(raw)
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        return value
    if isinstance(default, list):
        value = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(value, list):
            raise ValueError("not a list")
        return value
    if isinstance(raw, (list, dict)):
        raise ValueError("not text")
    return "" if raw is None else str(raw)


def _checked(name: str, value):
    """(value held to the field's range or choices, a note when it changed)."""
    if name in SMALLEST_NONZERO and nonzero_floor(name, value) != value:  # EngineConfig refuses these
        floor, what = SMALLEST_NONZERO[name]
        return floor, f"{value} is below the smallest {what} {floor}; {floor} used"
    if name in INT_RANGES or name in FLOAT_RANGES:
        lo, hi = INT_RANGES.get(name) or FLOAT_RANGES[name]
        if value < lo:
            return lo, f"{value} is below {lo}; {lo} used"
        if value > hi:
            return hi, f"{value} is above {hi}; {hi} used"
        return value, None
    if name in CHOICES and value not in CHOICES[name]:
        raise ValueError(f"not one of {', '.join(CHOICES[name])}")
    if name == "adapters":
        for entry in value:
            if (
                not isinstance(entry, list)
                or len(entry) != 2
                or not isinstance(entry[0], str)
                or isinstance(entry[1], bool)
                or not isinstance(entry[1], (int, float))
                or not math.isfinite(entry[1])
            ):
                raise ValueError(f"{entry!r} is not [path, scale]")
    return value, None


def _shown(raw) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:39] + "…"


#: EngineConfig fields that swap_drafter / set_adapters change without reloading the target.
DRAFTER_FIELDS = ("draft", "adapters")


def config_changes(loaded: EngineConfig | None, wanted: EngineConfig) -> tuple[list[str], list[str]]:
    """(fields needing a full reload, drafter fields that a swap can apply) between two configs."""
    if loaded is None:
        return [], []
    reload, swap = [], []
    for f in dataclasses.fields(EngineConfig):
        if getattr(loaded, f.name) != getattr(wanted, f.name):
            (swap if f.name in DRAFTER_FIELDS else reload).append(f.name)
    if "draft" in swap and (loaded.draft is None or wanted.draft is None):
        reload.append("draft")  # adding or removing the drafter changes the target's context
        swap.remove("draft")
    return reload, swap
