"""How far a verify batch's logits drift from a one-token decode, measured (issue 29).

A greedy speculative run commits the target's argmax in the batch that verified each token. A
batch is not a one-token decode: the kernels, their reduction order and the attention over a cache
written by earlier batches may differ, so the logits move a little, and where the target's top two
are closer than that move the two runs may pick differently without either being wrong. "Lossless"
is then a claim about that move's size, so it is measured here, per device and precision.

The same generated positions are decoded in several batch shapes over the same history:

* ``ar``: one token per decode (the reference, as autoregressive decoding writes them);
* ``chain W``: batches of W rows, each the next W tokens of the AR answer (a chain verify that
  accepted everything), the history written by the earlier batches of the same shape;
* ``tree W``: batches of W rows holding the AR path as the seeded chain plus one rejected sibling
  per depth in its own sequence (a tree verify), trimmed to the path afterwards as the engine trims
  it, so the cells of rejected branches come and go as in a run;
* ``branch W``: batches whose seeded chain is wrong and whose AR path is a branch behind it (a
  tree that wins off its chain), the path's cells handled as the engine handles them.

Per shape: the largest |logit difference| against ``ar`` over the whole vocabulary, the largest
shift of the AR top-2 margin (how far a gap can move: the near-tie bound), and the largest AR top-2
gap whose argmax flipped. ``bound`` is the largest margin shift over every shape: a divergence from
AR whose AR top-2 gap is below it is a near-tie; one above it is a bug (``classify``).
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..runtime.records import VerifyBatch

#: the verify widths (rows) measured by default: every chain and tree budget the app offers fits
WIDTHS = (2, 4, 8, 16, 32)


@dataclass
class ShapeDrift:
    shape: str  # "chain 8", "tree 16"
    positions: int = 0  # generated positions compared
    max_abs_logit: float = 0.0
    max_margin_shift: float = 0.0
    flips: int = 0  # positions whose argmax differed from AR's
    max_flipped_gap: float = 0.0


@dataclass
class DriftReport:
    device: str
    precision: str  # the target's weights and the KV cache types
    prompts: int
    tokens: int  # generated per prompt
    shapes: list[ShapeDrift] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def bound(self) -> float:
        """The near-tie bound: the largest AR top-2 margin shift any measured shape showed."""
        return max((s.max_margin_shift for s in self.shapes), default=0.0)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["bound"] = self.bound
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "DriftReport":
        shapes = [ShapeDrift(**s) for s in d.get("shapes", [])]
        return cls(
            d["device"], d["precision"], int(d["prompts"]), int(d["tokens"]), shapes, float(d.get("seconds", 0.0))
        )

    def table(self) -> str:
        rows = [
            "| shape | positions | max abs logit diff | max margin shift | flips | largest flipped gap |",
            "|---|---|---|---|---|---|",
        ]
        for s in self.shapes:
            rows.append(
                f"| {s.shape} | {s.positions} | {s.max_abs_logit:.4g} | {s.max_margin_shift:.4g} | "
                f"{s.flips} | {s.max_flipped_gap:.4g} |"
            )
        return "\n".join(rows)


def chain_batches(
    prompt_len: int, generated: list[int], prompt_tokens: list[int], width: int, siblings=None
) -> list[VerifyBatch]:
    """Verify batches of ``width`` rows that commit ``generated`` in order: the root (the last
    committed token) and the next path nodes. With ``siblings`` (position -> a token other than the
    path's), each depth also gets that token as a rejected sibling in its own sequence: a tree of
    ``width`` rows whose seeded chain is the path (as tree.build_tree seeds it)."""
    toks = list(prompt_tokens) + list(generated)
    # the first generated token comes from the prompt's prefill (Generation._first_token): the first
    # batch opens at it
    out, first, n = [], 1, len(generated)
    while first < n:
        pos = prompt_len - 1 + first
        if siblings is None:
            d = min(width - 1, n - first - 1)
            sib_depths: list[int] = []
        else:
            d = min(width // 2, n - first - 1)
            sib_depths = list(range(min(width - 1 - d, d)))
        path = toks[pos + 1 : pos + 1 + d]
        # sequence 0 is the path's leaf; sibling at depth j is a leaf of its own (sequence j + 1),
        # a child of the path node at depth j - 1, so path nodes above it hold its sequence too
        tokens = list(path) + [int(siblings[first + j]) for j in sib_depths]
        depth = list(range(d)) + sib_depths
        seqs = [tuple([0] + [j + 1 for j in sib_depths if j > i]) for i in range(d)]
        seqs += [(j + 1,) for j in sib_depths]
        out.append(
            VerifyBatch(
                first=first,
                pos=pos,
                last=toks[pos],
                n_seqs=1 + len(sib_depths),
                tokens=tuple(tokens),
                depth=tuple(depth),
                seqs=tuple(seqs),
                rows=tuple(range(d + 1)),
            )
        )
        first += d + 1
    return out


def branch_batches(
    prompt_len: int, generated: list[int], prompt_tokens: list[int], width: int, wrong
) -> list[VerifyBatch]:
    """Verify batches whose seeded chain is wrong from its first node (``wrong``: position -> a
    token other than the answer's) and whose accepted path is a branch added after it: every
    step's path lies off the chain, behind the chain's rejected cells, as when a tree wins through
    a sibling. The engine writes such nodes ahead of the next batch (Generation._tree_step)."""
    toks = list(prompt_tokens) + list(generated)
    out, first, n = [], 1, len(generated)  # (the first token: the prefill's, as chain_batches)
    while first < n:
        pos = prompt_len - 1 + first
        d = min((width - 1) // 2, n - first - 1)
        c = max(1, width - 1 - d) if d else 0  # the wrong chain, as deep as the rows allow
        chain = [int(wrong[min(first + j, n - 1)]) for j in range(c)]
        path = toks[pos + 1 : pos + 1 + d]
        tokens = chain + list(path)
        depth = list(range(c)) + list(range(d))
        seqs = [(0,)] * c + [(1,)] * d
        out.append(
            VerifyBatch(
                first=first,
                pos=pos,
                last=toks[pos],
                n_seqs=2 if c and d else 1,
                tokens=tuple(tokens),
                depth=tuple(depth),
                seqs=tuple(seqs),
                rows=(0,) + tuple(c + 1 + j for j in range(d)),
            )
        )
        first += d + 1
    return out


def _compare(ref: np.ndarray, got: np.ndarray, acc: ShapeDrift) -> None:
    ref = ref.astype(np.float64)
    got = got.astype(np.float64)
    acc.positions += len(ref)
    acc.max_abs_logit = max(acc.max_abs_logit, float(np.abs(got - ref).max()))
    top2 = np.argsort(-ref, axis=1, kind="stable")[:, :2]
    rows = np.arange(len(ref))
    a, b = top2[:, 0], top2[:, 1]
    gap_ref = ref[rows, a] - ref[rows, b]
    gap_got = got[rows, a] - got[rows, b]
    acc.max_margin_shift = max(acc.max_margin_shift, float(np.abs(gap_got - gap_ref).max()))
    flipped = got.argmax(axis=1) != a
    acc.flips += int(flipped.sum())
    if flipped.any():
        acc.max_flipped_gap = max(acc.max_flipped_gap, float(gap_ref[flipped].max()))


def measure(engine, prompts: list[list[int]], tokens: int = 64, widths=WIDTHS, progress=None) -> DriftReport:
    """Decodes each prompt's greedy AR answer (``tokens`` long) in every shape and compares.
    ``prompts`` are token lists (the chat template applied). Leaves the engine's KV empty."""
    t0 = time.perf_counter()
    kinds = ("chain", "tree", "branch")
    shapes = [ShapeDrift(f"{kind} {w}") for w in widths for kind in kinds]
    for n, prompt in enumerate(prompts):
        gen, ref = engine.greedy_logits(prompt, tokens)
        if len(gen) < 2:
            continue  # the first token is the prefill's in every shape: nothing a verify decodes
        sib = [int(np.argsort(-r, kind="stable")[1]) for r in ref]  # the target's runner-up: a likely draft
        for w in widths:
            for kind in kinds:
                if kind != "chain" and (not engine.tree_capable or w > engine.tree_max_nodes or w < 3):
                    continue
                if kind == "branch":
                    batches = branch_batches(len(prompt), gen, prompt, w, sib)
                else:
                    batches = chain_batches(len(prompt), gen, prompt, w, sib if kind == "tree" else None)
                got = np.concatenate(engine.replay_verify(prompt, gen, batches, every_batch=True))
                _compare(ref[1:], got, next(s for s in shapes if s.shape == f"{kind} {w}"))
        if progress:
            progress(n + 1, len(prompts))
    engine.reset()
    return DriftReport(
        device=device_name(engine),
        precision=precision_of(engine),
        prompts=len(prompts),
        tokens=tokens,
        shapes=[s for s in shapes if s.positions],
        seconds=round(time.perf_counter() - t0, 1),
    )


def device_name(engine, devices=None) -> str:
    """Where the target's layers ran: the GPU llama.cpp offloaded them to, else the CPU. (The bound
    belongs to a device: the H100's verify rows drift from its one-token decodes far more than the
    CPU's do, so a report labelled with the wrong one would misclassify every divergence.)"""
    cfg = getattr(engine, "config", None)
    if cfg is not None and cfg.n_gpu_layers != 0:
        if devices is None:
            from .machine import llama_devices

            devices = llama_devices()
        gpus = [d.get("description") or d.get("name") for d in devices if d.get("type") in ("gpu", "igpu")]
        if gpus:
            return f"GPU {', '.join(gpus)} (n_gpu_layers {cfg.n_gpu_layers})"
    return f"CPU {platform.processor() or platform.machine()}"


def precision_of(engine) -> str:
    ftype = engine.target.meta("general.file_type")
    kv = getattr(engine.config, "target_kv", None)
    return f"file_type {ftype}, KV {kv}" if kv is not None else f"file_type {ftype}"


# -- the bound on disk, per device and precision ---------------------------------------------------
def save(report: DriftReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.to_dict(), indent=1))


def load(path: str | Path) -> DriftReport:
    return DriftReport.from_dict(json.loads(Path(path).read_text()))


def classify(ar_gap: float | None, bound: float) -> str:
    """A divergence from AR whose AR top-2 gap is at most the measured bound is a near-tie; above
    it, a bug. No gap (one run simply ended first): a bug too, since nothing was measured."""
    if ar_gap is None or not math.isfinite(ar_gap):
        return "bug"
    return "near-tie" if ar_gap <= bound else "bug"
