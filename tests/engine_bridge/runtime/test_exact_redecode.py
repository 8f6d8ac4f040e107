"""An exact engine decodes cached tokens again in rows that round as AR's did (issue 29).

Auto's AR steps leave the drafter behind the target; the next speculative step (``catch_up_drafter``)
or the next request's prefill decodes those tokens again, with feature extraction on. A batch of
more than 16 rows takes a prompt's kernels on a GPU (patch 0016 keeps one-row rounding up to 16
rows), so their K/V moved and an exact chat with auto parted from AR (H200). An exact engine decodes
such tokens at most ``EXACT_ROWS`` a batch, and the request's new tokens from where AR's prefill
starts them. Tokens that a prompt's batch of more than 16 rows wrote are decoded again in that same
batch: a catch-up that cut them into 16-row batches moved their K/V too (an exact auto chat whose
follow-up probed the drafter parted from AR at turn 25 on an H200)."""

from __future__ import annotations

import pytest

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import EXACT_ROWS, Engine

PROMPT = (
    "Write a short story about a lighthouse keeper who finds a map in a bottle. The map shows an island "
    "that is not on any chart, and the keeper has never left the lighthouse in thirty years."
)


def _spy(eng: Engine) -> list[tuple[int, int]]:
    """Records every target decode as (first position, rows): ``kv`` grows after each decode."""
    seen: list[tuple[int, int]] = []
    process = eng.target_ctx.process

    def spy(batch):
        seen.append((len(eng.kv), batch.n))
        return process(batch)

    eng.target_ctx.process = spy
    return seen


@pytest.mark.parametrize("exact", [True, False])
def test_tokens_decoded_again_come_in_rows_as_ar_wrote_them(tiny_pair, exact):
    target, draft = tiny_pair
    cfg = EngineConfig(target=target, draft=draft, n_ctx=1024, n_batch=256, n_ubatch=256, exact=exact)
    eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    try:
        prompt = eng.tokenize(PROMPT)
        wide = (0, len(prompt))  # the prompt's prefill, one batch (its last row gives the first token)
        assert wide[1] > EXACT_ROWS
        ar = eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=48, stop_at_eog=False))
        cached = len(eng.kv)
        assert eng.dft_valid == 0 and cached == len(prompt) + 47  # AR fed the drafter nothing
        follow = prompt + list(ar.tokens) + eng.tokenize(" Then tell it again, shorter.", add_special=False)
        seen = _spy(eng)
        eng.generate(follow, GenerationSettings(mode="chain", budget=4, max_tokens=4, stop_at_eog=False))
        prefill = [(p, n) for p, n in seen if p < len(follow) - 1]
        again = [(p, n) for p, n in prefill if p < cached]
        assert again[0][0] == 0  # everything cached is decoded again (the drafter had none of it)
        if exact:
            assert again[0] == wide  # the prompt's batch as it was first written
            assert sum(n for _, n in again) == cached and max(n for _, n in again[1:]) <= EXACT_ROWS
            assert any(p == cached for p, _ in prefill)  # the new tokens start where AR's prefill would
        else:
            assert again[0][1] > cached  # one prompt batch over old and new tokens: the fast path
        # the catch-up in a request: AR steps, then a chain step of auto's kind
        eng.reset()
        eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=40, stop_at_eog=False))
        seen.clear()
        behind = len(eng.kv) - eng.dft_valid
        assert eng.catch_up_drafter() == behind > EXACT_ROWS
        assert sum(n for _, n in seen) == behind
        if exact:
            assert seen[0] == wide and max(n for _, n in seen[1:]) <= EXACT_ROWS
        else:
            assert seen == [(0, behind)]
    finally:
        eng.close()


def test_a_wide_batch_cut_short_keeps_its_rows_and_a_snapshot_carries_them(tiny_pair):
    target, draft = tiny_pair
    cfg = EngineConfig(target=target, draft=draft, n_ctx=1024, n_batch=256, n_ubatch=256, exact=True)
    eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    try:
        prompt = eng.tokenize(PROMPT)
        eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=8, stop_at_eog=False))
        assert eng.wide_batches == [(0, len(prompt))]
        snap = eng.snapshot_target()
        # a request that shares only the first 30 tokens: AR keeps those 30 rows of the prompt's batch
        edited = prompt[:30] + eng.tokenize(" A lighthouse on the moon.", add_special=False)
        eng.generate(edited, GenerationSettings(mode="ar", max_tokens=4, stop_at_eog=False))
        assert eng.wide_batches[0] == (0, 30)
        eng.restore_target(snap, keep=20)
        assert eng.wide_batches == [(0, 20)] and len(eng.kv) == 20
        seen = _spy(eng)
        assert eng.catch_up_drafter() == 20
        assert seen == [(0, 20)]  # the 20 rows again in one batch, as the prompt's batch wrote them
    finally:
        eng.close()
