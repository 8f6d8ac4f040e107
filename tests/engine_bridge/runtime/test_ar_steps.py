"""An AR step commits exactly one token, so an AR run's mean commit length is 1.0 — also when it ends on
end-of-generation (that last step picks the EOG token and commits nothing: it is not a commit step)."""

from __future__ import annotations

import shutil

import pytest

from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

PROMPT = "The quick brown fox"


def _set_eos(path, token: int) -> None:
    """Rewrites tokenizer.ggml.eos_token_id in place (same size: a uint32 in the header)."""
    from gguf import GGUFReader

    reader = GGUFReader(path, "r+")
    field = reader.fields["tokenizer.ggml.eos_token_id"]
    field.parts[field.data[0]][0] = token
    reader.data.flush()  # a numpy memmap opened r+
    del reader


def _run(target, settings):
    eng = Engine.load(EngineConfig(target=target, n_ctx=512, n_batch=64, n_ubatch=64), preflight=PAIR_PREFLIGHT)
    try:
        return eng.generate(PROMPT, settings)
    finally:
        eng.close()


def test_an_ar_run_that_ends_on_eog_reports_mean_commit_one(tiny_pair, tmp_path):
    target, _ = tiny_pair
    free = _run(target, GenerationSettings(mode="ar", max_tokens=24, stop_at_eog=False))
    # the first token, after a few, that the greedy run had not produced before: made the EOG below
    eog_at = next(i for i in range(3, len(free.tokens)) if free.tokens[i] not in free.tokens[:i])
    stop_tok = free.tokens[eog_at]
    eos_target = tmp_path / "eos-target.gguf"
    shutil.copy(target, eos_target)
    _set_eos(eos_target, stop_tok)
    res = _run(eos_target, GenerationSettings(mode="ar", max_tokens=24))
    s = res.summary
    assert s.finish_reason == "eog" and res.tokens == free.tokens[:eog_at]
    assert len(res.steps) == eog_at + 1 and res.steps[-1].committed == 0  # the EOG pick is timed
    assert (s.n_generated, s.n_steps) == (eog_at, eog_at)
    assert s.mean_commit_len == pytest.approx(1.0)


def test_an_ar_run_to_max_tokens_reports_mean_commit_one(tiny_engine):
    tiny_engine.reset()
    s = tiny_engine.generate(PROMPT, GenerationSettings(mode="ar", max_tokens=9, stop_at_eog=False)).summary
    assert (s.n_generated, s.n_steps, s.mean_commit_len) == (9, 9, 1.0)


def test_the_streamed_text_is_each_tokens_piece_read_once_and_kept(tiny_engine):
    """The streaming detokenizer reads a token's piece from the model's kept copy (a step's host time
    leaves a GPU idle): the same bytes as llama.cpp's token_to_piece, read once per token."""
    tiny_engine.reset()
    m = tiny_engine.target
    res = tiny_engine.generate(PROMPT, GenerationSettings(mode="ar", max_tokens=16, stop_at_eog=False))
    assert res.text == b"".join(m.piece(t) for t in res.tokens).decode("utf-8", "replace")
    kept = {t: m.text_piece(t) for t in res.tokens}
    assert all(kept[t] == m.piece(t) for t in kept)
    assert all(m.text_piece(t) is kept[t] for t in kept)  # no second read
