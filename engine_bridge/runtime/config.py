"""What the engine is asked to load and how it is asked to generate."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..common.placement import Placement

#: KV cache types llama.cpp accepts (its CLI's list), with their ggml type ids.
KV_TYPES: dict[str, int] = {
    "f32": 0,
    "f16": 1,
    "bf16": 30,
    "q8_0": 8,
    "q4_0": 2,
    "q4_1": 3,
    "iq4_nl": 20,
    "q5_0": 6,
    "q5_1": 7,
}
QUANTISED_KV = frozenset(k for k in KV_TYPES if k not in ("f32", "f16", "bf16"))

FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}
#: "auto" picks ar, chain or tree and the budget per step from the measured step costs and the
#: pair's running commit lengths (engine_bridge.runtime.auto_mode); greedy output stays the target's.
MODES = ("ar", "chain", "tree", "auto")
#: More threads than this many per core only make them wait for each other (10000 on 2 cores stalled
#: the machine): the CLI caps --threads here.
THREADS_PER_CORE = 4


def thread_cap() -> int:
    return THREADS_PER_CORE * (os.cpu_count() or 1)


@dataclass(frozen=True)
class KVTypes:
    k: str = "f16"
    v: str = "f16"

    def __post_init__(self):
        for t in (self.k, self.v):
            if t not in KV_TYPES:
                raise ValueError(f"unknown KV cache type {t!r}; choose from {', '.join(KV_TYPES)}")

    def __str__(self) -> str:
        return f"{self.k}/{self.v}"


#: the drafter's context window by default, chosen on a long chat of the training sources'
#: validation split (benchmarks/bench_long_chat.py); 0 keeps the whole context
DEFAULT_DRAFT_WINDOW = 512
MIN_DRAFT_WINDOW = 128


@dataclass(frozen=True)
class EngineConfig:
    """Everything that needs a (re)load when it changes."""

    target: Path
    draft: Path | None = None
    n_ctx: int = 0  # 0: the target's own context length, capped by memory
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: int | None = None  # None: all cores
    n_gpu_layers: int = -1  # -1: all (ignored by CPU builds)
    draft_n_gpu_layers: int = -1
    flash_attn: str = "auto"  # auto | on | off
    target_kv: KVTypes = field(default_factory=KVTypes)
    draft_kv: KVTypes = field(default_factory=KVTypes)
    adapters: tuple[tuple[Path, float], ...] = ()  # LoRA adapters on the drafter, with scales
    max_tree_nodes: int = 64  # sequences / batch room reserved for tree verification
    backend_sampling: bool = True  # greedy argmax inside the graph (no logits copy to host)
    # more than one GPU: how the target's layers are spread, and where the drafter goes (None: on
    # the GPU that holds the target's last layers and output, where its features come from)
    target_placement: Placement = field(default_factory=Placement)
    draft_placement: Placement | None = None
    # llama.cpp RPC servers ("host:port"): their devices come first in the device list, before this
    # machine's GPUs, as in llama.cpp's own default order; the engine then runs in a child process
    # (runtime.engine_process), because ggml-rpc aborts the process that loses a server
    rpc_servers: tuple[str, ...] = ()
    # the exact verify (issue 29): batch-invariant kernels, so that every verified row rounds as a
    # one-token decode does and greedy speculative output is the target's own, token for token
    # (patch 0005 on CPU, 0016 on CUDA; other GPU backends and RPC devices are refused)
    exact: bool = False
    # the drafter's context window in cells (0: the whole context). The shipped drafter was trained on
    # conversations of at most ~700 tokens; in a long chat its commit fades as the context grows, and
    # a window keeps its attention on the span it learned (docs/benchmarks.md, "A window on the
    # drafter's context"). DFLASH_DRAFT_WINDOW overrides it.
    draft_window: int = DEFAULT_DRAFT_WINDOW

    def __post_init__(self):
        object.__setattr__(self, "target", Path(self.target))
        if self.draft is not None:
            object.__setattr__(self, "draft", Path(self.draft))
        if self.flash_attn not in FLASH_ATTN:
            raise ValueError(f"flash_attn must be one of {', '.join(FLASH_ATTN)}")
        object.__setattr__(self, "rpc_servers", tuple(self.rpc_servers))
        if self.n_ctx and self.n_ctx < 16:
            raise ValueError("n_ctx must be 0 (the model's own) or at least 16")
        if self.draft_window < 0 or 0 < self.draft_window < MIN_DRAFT_WINDOW:
            raise ValueError(
                f"draft window must be 0 (the whole context) or at least {MIN_DRAFT_WINDOW} cells, got {self.draft_window}"
            )
        if self.n_threads is not None and self.n_threads < 1:
            raise ValueError(f"threads must be at least 1 (or left out: all cores), got {self.n_threads}")

    def replace(self, **changes) -> "EngineConfig":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class GenerationSettings:
    """What may change from one request to the next without a reload."""

    mode: str = "chain"  # ar | chain | tree | auto
    budget: int = 15  # chain: draft tokens per step; tree: node budget
    p_min: float = 0.0  # stop a chain draft below this drafter probability
    max_tokens: int = 128
    temperature: float = 0.0  # 0: greedy
    top_k: int = 40
    top_p: float = 1.0
    seed: int = 0
    #: tree: candidates per block position, at most; a step reads only as many as its budget can
    #: place (tree.useful_top_k: 4 at budget 7, so trees up to 7 nodes are as they were with 4). On the
    #: default pair's validation split at budget 15 (CPU, 30 requests each): chat, writing and
    #: instructions 2.692 -> 2.731 -> 2.764 committed a step with 4 / 6 / 8; math, code and reasoning
    #: 3.230 -> 3.265 with 4 / 8 (docs/benchmarks.md, "Eight candidates per position at budget 15")
    tree_top_k: int = 8
    stop_at_eog: bool = True
    #: each step record carries the target's top-2 logit margin of every token it committed (the
    #: chat's token tooltip shows it: how near a tie the target's pick was); reads the target's
    #: logits on the host, so greedy picks are not taken on the backend while it is on
    record_margins: bool = False
    #: every phase of a step ends at a device sync, so the profiler's phase times are exact; off, a
    #: step's inject is left running while the host queues the next draft (faster on a GPU; its
    #: device time then shows in the draft phase). The CPU's decodes are synchronous either way.
    exact_phases: bool = False
    #: a plain AR or chain run may stream a step's tokens while the next decode runs (where
    #: generation.OVERLAP_COMMIT_ENV or its GPU default allows); off, each step streams before the next
    #: is queued, as auto's steps do (auto's calibration times its steps that way)
    overlap_commit: bool = True
    #: a plain greedy AR run decodes several tokens in one engine call where ``ar_run.runs_on`` allows
    #: (patch 0028; on a CPU or a GPU target by default); off, one call a token, as auto's AR steps run (auto's
    #: calibration times them)
    ar_runs: bool = True

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        if self.budget < 1:
            raise ValueError("budget must be at least 1")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        # NaN compares false with everything: each check is written so that NaN fails it
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature must be a number >= 0 (0: greedy), got {self.temperature}")
        if not 0.0 <= self.top_p <= 1.0:
            raise ValueError(f"top_p must be between 0 and 1 (1: off), got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0: off), got {self.top_k}")
        if not 0.0 <= self.p_min <= 1.0:
            raise ValueError(f"p_min must be between 0 and 1, got {self.p_min}")

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def replace(self, **changes) -> "GenerationSettings":
        return dataclasses.replace(self, **changes)
