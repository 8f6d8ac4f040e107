"""When a greedy speculative run parts from the autoregressive one, was it a near-tie?

Batched and single-token decodes of the same target differ by ~1e-4 relative in the logits (as in
upstream llama.cpp; more on GPUs and with quantised weights), so two greedy runs may pick different
tokens where the target's top two logits are this close: neither is wrong, and from there the
texts differ. A parting where the target is sure is a real loss. The engine's tests
(tests/engine_bridge/engine_corpus.assert_lossless) and the bench's ``lossless`` flag use this rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: top-2 margin below which a parting is a near-tie, for f32/f16/bf16 target weights
NEAR_TIE = 0.02
#: the same for quantised target weights (q8_0, q4_*): their rounding moves logits further
NEAR_TIE_QUANT = 0.1
#: GGUF general.file_type values of unquantised files (llama.cpp's LLAMA_FTYPE_ALL_F32, MOSTLY_F16, MOSTLY_BF16)
_FLOAT_FTYPES = {0, 1, 32}


@dataclass(frozen=True)
class Parting:
    index: int                 # first position where the two token lists differ
    margin: float | None       # target's top-2 logit margin there (None: not measured)
    tolerance: float

    @property
    def near_tie(self) -> bool:
        return self.margin is not None and self.margin < self.tolerance

    def to_dict(self) -> dict:
        return {"index": self.index, "margin": self.margin, "tolerance": self.tolerance,
                "near_tie": self.near_tie}


def first_divergence(reference: list[int], produced: list[int]) -> int | None:
    """Index of the first differing token; the shorter length when one is a prefix of the other;
    None when the lists are equal."""
    if list(reference) == list(produced):
        return None
    return next((i for i, (a, b) in enumerate(zip(reference, produced)) if a != b),
                min(len(reference), len(produced)))


def top2_margin(logits) -> float:
    top2 = np.sort(np.asarray(logits, dtype=np.float64))[-2:]
    return float(top2[1] - top2[0])


def tolerance_for(engine) -> float:
    """NEAR_TIE for a float target, NEAR_TIE_QUANT for a quantised one (by its general.file_type)."""
    try:
        ftype = int(engine.target.meta("general.file_type") or 0)
    except (ValueError, TypeError):
        ftype = 0
    return NEAR_TIE if ftype in _FLOAT_FTYPES else NEAR_TIE_QUANT


def parting(engine, prompt_tokens: list[int], reference: list[int], produced: list[int],
            tolerance: float | None = None) -> Parting | None:
    """Where ``produced`` parts from the autoregressive ``reference`` and how sure the target was
    there (one extra target decode; it changes the engine's KV, as any request does). None when equal."""
    k = first_divergence(reference, produced)
    if k is None:
        return None
    tol = tolerance_for(engine) if tolerance is None else tolerance
    # where one run simply ended first (end-of-generation is a pick too), the margin is read at the
    # same place: the common prefix
    return Parting(k, top2_margin(engine.next_token_logits(list(prompt_tokens) + list(reference[:k]))), tol)
