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


#: batch shapes a parting is replayed under (``replay_gaps``): the generated tokens in batches of
#: these many rows, and the parting row first in a verify-shaped batch of these many rows. 32
#: covers tree verifies of 17-32 nodes: on CPU, batches past 16 rows round differently (a tree-24
#: run on the demo pair parted at a 0.228 margin that a 25-row-plus batch turns into 0.004; measured
#: from the same cache state, tests/faults).
REPLAY_ROWS = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Parting:
    index: int  # first position where the two token lists differ
    margin: float | None  # target's top-2 logit margin there (None: not measured)
    tolerance: float
    #: the target's logit of the AR token minus that of the speculative token, per replayed batch
    #: shape (None: not replayed); a gap <= 0 means the target itself picks the speculative token there
    shape_gaps: dict[str, float] | None = None

    @property
    def picked_by_target(self) -> bool:
        """The target alone, decoding the same tokens in one of the verify's batch shapes, picks
        what the speculative run picked: rounding, not a loss."""
        if not self.shape_gaps:
            return False
        return min(self.shape_gaps.values()) <= 0.0

    @property
    def within_shape_spread(self) -> bool:
        """The AR token's lead over the speculative one, at its smallest, is less than the target's
        own logits move across the replayed shapes: rounding can carry it either way."""
        if not self.shape_gaps:
            return False
        gaps = self.shape_gaps.values()
        return min(gaps) < max(gaps) - min(gaps)

    @property
    def near_tie(self) -> bool:
        lead = min(self.shape_gaps.values()) if self.shape_gaps else None
        return (
            (self.margin is not None and self.margin < self.tolerance)
            or (lead is not None and lead < self.tolerance)  # a near-tie under another history
            or self.picked_by_target
            or self.within_shape_spread
        )

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "margin": self.margin,
            "tolerance": self.tolerance,
            "near_tie": self.near_tie,
            "shape_gaps": self.shape_gaps,
            "picked_by_target": self.picked_by_target,
            "within_shape_spread": self.within_shape_spread,
        }


def first_divergence(reference: list[int], produced: list[int]) -> int | None:
    """Index of the first differing token; the shorter length when one is a prefix of the other;
    None when the lists are equal."""
    if list(reference) == list(produced):
        return None
    return next((i for i, (a, b) in enumerate(zip(reference, produced)) if a != b), min(len(reference), len(produced)))


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


def batches_upto(verify_batches, k: int) -> list:
    """The recorded tree verify batches (records.VerifyBatch) up to and including the one whose
    commit holds token ``k``; empty when no batch committed it (a chain or AR step did)."""
    out = []
    for vb in verify_batches or ():
        out.append(vb)
        if vb.first <= k < vb.first + len(vb.rows):
            return out
    return []


def replay_gaps(
    engine,
    prompt_tokens: list[int],
    reference: list[int],
    produced: list[int],
    k: int,
    rows=REPLAY_ROWS,
    ar_logits=None,
    start=None,
    verify_batches=(),
) -> dict[str, float]:
    """At a parting ``k`` (both lists hold a token there), the target's logit gap between the AR
    token and the speculative one, with the AR tokens up to ``k`` decoded in batches of each of
    ``rows`` ("b8": eight-row batches ending at the parting row) and with the parting row first in
    a verify-shaped batch followed by the speculative run's own next tokens ("v8"), as a chain or
    tree verify decodes it, with the whole prefix in one batch ("w"), and with the prompt prefilled
    in two pieces ("p50", "p75"), as a request that reuses a cached prefix does. Each shape is one
    replay from an empty cache; the engine's KV is left empty. With ``verify_batches`` (a tree run's
    recorded batches up to the one that committed token k), also "tree": that exact batch -- its
    sibling branches, positions and sequence sets -- decoded over the AR-written prefix, and "run":
    the run's batches replayed in order, each trimmed to its path, so the cache holds the K/V the
    run's own batches wrote (Engine.replay_verify).
    ``ar_logits``: the one-row ("b1")
    replay's logits when the caller already has them (``parting`` reads its margin there).
    ``start`` puts the engine in the state each replay begins from (default: an empty cache)."""
    pt, hist = list(prompt_tokens), list(reference[:k])
    a, b = reference[k], produced[k]
    gaps: dict[str, float] = {}
    begin = start or engine.reset

    def gap(name: str, replay) -> None:
        begin()
        logits = replay()
        gaps[name] = round(float(logits[a] - logits[b]), 4)

    # the whole prefix in one prefill-sized batch: on CPU, batches past 16 rows round differently
    # from the verify's, so this history moves the gap where the others do not
    gap("w", lambda: engine.next_token_logits(pt + hist))
    for pct in (50, 75):
        split = len(pt) * pct // 100
        if 0 < split < len(pt) - 1:
            gap(f"p{pct}", lambda: engine.replay_logits(pt, hist, 1, prompt_split=split))
    for n in rows:
        if n == 1 and ar_logits is not None:
            gap("b1", lambda: ar_logits)
        else:
            gap(f"b{n}", lambda: engine.replay_logits(pt, hist, n))
        if n > 1:
            gap(
                f"v{n}", lambda: engine.replay_logits(pt, hist, n, follow=list(produced[k : k + n - 1]), history_rows=n)
            )
    if verify_batches:
        # the tree step's own batch over the AR-written prefix, then the run's batches up to it
        vbs = list(verify_batches)
        vb = vbs[-1]
        gap("tree", lambda: engine.replay_verify(pt, produced, [vb])[k - vb.first])
        if len(vbs) > 1:
            gap("run", lambda: engine.replay_verify(pt, produced, vbs)[k - vb.first])
    engine.reset()
    return gaps


def likely_eog(engine, logits) -> int | None:
    """The end-of-generation token the target ranks highest in ``logits`` (None: the vocabulary has none)."""
    ids = engine.target.eog_ids
    if len(ids) == 0:
        return None
    return int(ids[int(np.argmax(np.asarray(logits)[ids]))])


def parting(
    engine,
    prompt_tokens: list[int],
    reference: list[int],
    produced: list[int],
    tolerance: float | None = None,
    replay: bool = False,
    start=None,
    verify_batches=(),
) -> Parting | None:
    """Where ``produced`` parts from the autoregressive ``reference`` and how sure the target was
    there (a replay of the AR run up to the parting; it resets the engine's KV). None when equal.

    With ``replay``, a parting above the tolerance is replayed under the verify's batch shapes
    (``replay_gaps``): the quantised targets' logits move with the batch shape by more than any
    fixed tolerance (up to 1.7 logits for SmolLM2 Q4_1 on an H100, measured), and a parting is
    rounding when the target itself, decoding the same tokens in such a shape, picks the same, or
    when the AR token's smallest lead is less than the target's own logits move across the shapes
    (the replays do not rebuild a verify's exact history: its sibling branches and KV cells).

    ``start`` puts the engine in the state every replay begins from instead of an empty cache:
    e.g. ``Engine.restore_target`` of a snapshot taken before the run, when ``reference`` is what
    the target alone committed from there (a request that reuses a cached prefix is decoded over
    K/V that earlier requests wrote).

    ``verify_batches``: a tree run's recorded verify batches (GenerationResult.verify_batches, kept
    with ``Engine.record_verify``); the batch that committed the parting token is replayed as it was
    ("tree" in the gaps), since a tree verify's rows sit among sibling branches that no linear
    replay rebuilds."""
    k = first_divergence(reference, produced)
    if k is None:
        return None
    tol = tolerance_for(engine) if tolerance is None else tolerance
    # where one run simply ended first (end-of-generation is a pick too), the margin is read at the
    # same place: the common prefix; and as the AR run met it: the prompt prefilled, then one token
    # per decode (a whole prefix in one batch rounds differently: 0.20 against 0.05 at one parting,
    # measured on CPU)
    (start or engine.reset)()
    ar_logits = engine.replay_logits(list(prompt_tokens), list(reference[:k]), 1)
    margin = top2_margin(ar_logits)
    gaps = None
    if replay and margin >= tol and (k == len(reference) or k == len(produced)):
        # one run ended here: its pick was an end-of-generation token, which its text leaves out.
        # The one the target ranks highest there stands for it, so that the parting is replayed
        # and judged like any other (an auto run of AR steps alone parted this way on an H200)
        eog = likely_eog(engine, ar_logits)
        if eog is not None:
            reference, produced = (
                (list(reference) + [eog], produced) if k == len(reference) else (reference, list(produced) + [eog])
            )
    if replay and margin >= tol and k < len(reference) and k < len(produced):
        gaps = replay_gaps(
            engine,
            prompt_tokens,
            reference,
            produced,
            k,
            ar_logits=ar_logits,
            start=start,
            verify_batches=batches_upto(verify_batches, k),
        )
    return Parting(k, margin, tol, gaps)
