"""A speculative run that ends on end-of-generation leaves the target's cache as AR leaves it.

AR's last step decodes the newest committed token to pick the EOG token, so that token sits in the
cache. A chain or tree step keeps only ``last`` and the committed tokens but the newest (the next step
decodes it), so after an EOG it used to leave that token out: the next request of a chat then
prefilled it in its prompt batch. On a GPU a prompt batch rounds K/V differently from a one-row
decode, so an exact chat parted from AR a few turns later (H200, MT-Bench chat, turn 11)."""

from __future__ import annotations

import shutil

import pytest

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

from test_ar_steps import PROMPT, _set_eos


@pytest.fixture(scope="module")
def eos_pair(tiny_pair, tmp_path_factory):
    """The tiny pair with an EOS token that its greedy answer reaches after a few tokens."""
    target, draft = tiny_pair
    eng = Engine.load(EngineConfig(target=target, n_ctx=512), preflight=PAIR_PREFLIGHT)
    try:
        free = eng.generate(PROMPT, GenerationSettings(mode="ar", max_tokens=40, stop_at_eog=False)).tokens
    finally:
        eng.close()
    # a token first produced late enough that the speculative runs get a few steps before it
    eog_at = next(i for i in range(3, len(free)) if free[i] not in free[:i])
    path = tmp_path_factory.mktemp("eos") / "eos-target.gguf"
    shutil.copy(target, path)
    _set_eos(path, free[eog_at])
    return path, draft, free[:eog_at]


@pytest.mark.parametrize("mode,budget", [("chain", 4), ("chain", 7), ("tree", 7), ("auto", 7)])
def test_a_run_that_ends_on_eog_leaves_the_cache_ar_leaves(eos_pair, mode, budget):
    target, draft, answer = eos_pair
    eng = Engine.load(EngineConfig(target=target, draft=draft, n_ctx=512), preflight=PAIR_PREFLIGHT)
    try:
        prompt = eng.tokenize(PROMPT)
        ar = eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=40))
        ar_cache = list(eng.kv)
        eng.reset()
        spec = eng.generate(prompt, GenerationSettings(mode=mode, budget=budget, max_tokens=40))
        assert ar.summary.finish_reason == spec.summary.finish_reason == "eog"
        assert list(ar.tokens) == list(spec.tokens) == answer
        # AR's cache: the prompt and every committed token (the last one decoded to pick EOG)
        assert ar_cache == prompt + answer
        # (a tree's kept nodes off its seeded chain, which the next step would have written, are
        # written at the end of the request)
        assert list(eng.kv) == ar_cache
        # and the next request of the chat reuses the same prefix as AR's would
        follow = prompt + answer + eng.tokenize(" and then", add_special=False)
        assert eng.generate(follow, GenerationSettings(mode="ar", max_tokens=2)).summary.n_prompt_reused == len(
            ar_cache
        )
    finally:
        eng.close()
