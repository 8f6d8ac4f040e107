"""The drafter's context window (DFLASH_DRAFT_WINDOW).

The shipped drafter was trained on conversations of at most ~700 tokens, and after long prompts its
commit fades. A window keeps only its last N context cells: the drafter's KV must then hold no cell
older than N (+ the slack it trims in), and the output must stay the target's own.
"""

from __future__ import annotations

import pytest

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import drafter as drafter_mod
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

TEXT = "The river rises in the hills, runs past the mill and the old bridge, and reaches the sea at dusk. "


@pytest.mark.parametrize("raw, want", [(None, 0), ("", 0), ("0", 0), ("512", 512), (" 128 ", 128)])
def test_the_window_comes_from_the_environment(monkeypatch, raw, want):
    if raw is None:
        monkeypatch.delenv(drafter_mod.WINDOW_ENV, raising=False)
    else:
        monkeypatch.setenv(drafter_mod.WINDOW_ENV, raw)
    assert drafter_mod.draft_window() == want


@pytest.mark.parametrize("raw", ["x", "-1", "100", "1.5"])
def test_a_bad_window_is_refused_with_its_name(monkeypatch, raw):
    monkeypatch.setenv(drafter_mod.WINDOW_ENV, raw)
    with pytest.raises(ValueError, match=drafter_mod.WINDOW_ENV):
        drafter_mod.draft_window()


def _run(tiny_pair, monkeypatch, window: int, env: bool):
    """Generation with the drafter's window given through the environment or the config."""
    monkeypatch.delenv(drafter_mod.WINDOW_ENV, raising=False)
    if env:
        monkeypatch.setenv(drafter_mod.WINDOW_ENV, str(window))
    target, draft = tiny_pair
    # the exact verify (batch-invariant kernels): the drafts may change with the window, the tokens
    # may not, so a near-tie cannot flip with the verify's batch shape
    cfg = EngineConfig(target=target, draft=draft, n_ctx=2048, n_batch=512, n_ubatch=64, exact=True)
    # the environment overrides the config: give the config a window the environment must beat
    cfg = cfg.replace(draft_window=0 if (env and window) else window)
    eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    try:
        prompt = eng.tokenize(TEXT * 40)[:700]
        out = {}
        for mode, budget in (("ar", 1), ("chain", 7), ("tree", 15)):
            eng.reset()
            res = eng.generate(prompt, GenerationSettings(mode=mode, budget=budget, max_tokens=48, stop_at_eog=False))
            first = eng.drafter.ctx.seq_pos_min(0)
            out[mode] = (res.tokens, first, len(prompt) + len(res.tokens))
        return out
    finally:
        eng.close()


@pytest.mark.parametrize("env", [False, True], ids=["config", "environment"])
def test_a_window_drops_the_old_context_cells_and_keeps_the_targets_output(tiny_pair, monkeypatch, env):
    whole = _run(tiny_pair, monkeypatch, 0, env)
    window = 192
    cut = _run(tiny_pair, monkeypatch, window, env)
    for mode in ("chain", "tree"):
        # without a window the drafter holds the whole context from position 0
        assert whole[mode][1] == 0, mode
        tokens, first, end = cut[mode]
        # with one, nothing older than the window and the slack it trims in
        assert end - first <= window + drafter_mod.WINDOW_SLACK + 16, (mode, first, end)
        assert first > 0, mode
        # the verify still decides: greedy output is the target's own
        assert tokens == whole["ar"][0] == cut["ar"][0], mode


def test_the_default_window_is_512_and_a_window_below_128_is_refused():
    from engine_bridge.runtime.config import DEFAULT_DRAFT_WINDOW

    assert EngineConfig(target="t.gguf").draft_window == DEFAULT_DRAFT_WINDOW == 512
    for bad in (-1, 1, 127):
        with pytest.raises(ValueError, match="draft window"):
            EngineConfig(target="t.gguf", draft_window=bad)
