"""Where a request's first token comes from (docs/design/first-token-from-prefill.md).

By default the prefill decodes the whole prompt with an output on its last token and step 0 commits
the token it picks, with no draft and no decode of its own. ``DFLASH_FIRST_TOKEN=decode`` keeps the
start before (the prompt's last token decoded by the first step, a block drafted after it), read at
each request so that one process can alternate the two (gpu/gpu_first_token_ab.py). On the real
default pair, through llama.cpp.
"""

from __future__ import annotations

import pytest

from engine_bridge.runtime import generation
from engine_bridge.runtime.config import GenerationSettings
from default_pair import load_default_pair

PROMPT = [{"role": "user", "content": "Write a Python function that returns the sum of a list of numbers."}]


@pytest.fixture(scope="module")
def smol():
    eng = load_default_pair()
    yield eng
    eng.close()


def _run(eng, monkeypatch, start: str | None, mode: str):
    if start is None:
        monkeypatch.delenv(generation.FIRST_TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(generation.FIRST_TOKEN_ENV, start)
    eng.reset()
    return eng.generate(eng.tokenize_chat(PROMPT), GenerationSettings(mode=mode, budget=7, max_tokens=24))


def test_the_first_token_comes_from_the_prefill_by_default(smol, monkeypatch):
    assert generation.first_token_from_prefill()
    res = _run(smol, monkeypatch, None, "chain")
    s0 = res.steps[0]
    assert (s0.drafted, s0.committed) == (0, 1)  # the prefill's row: no draft, one token
    # marked as the prefill's pick, with no per-step rate (its ~0.1 ms would read as ~10k tok/s)
    assert s0.prefill and s0.tok_per_s == 0.0 and s0.to_dict()["prefill"]
    assert not any(r.prefill for r in res.steps[1:]) and res.steps[1].tok_per_s > 0
    assert res.steps[1].drafted > 0  # the first block opens after the first response token
    assert res.summary.n_prompt_reused == 0


@pytest.mark.parametrize("mode", ["ar", "chain"])
def test_the_start_before_is_kept_behind_its_switch(smol, monkeypatch, mode):
    new = _run(smol, monkeypatch, "prefill", mode)
    old = _run(smol, monkeypatch, "decode", mode)
    assert not generation.first_token_from_prefill()
    if mode == "chain":
        # the first step decodes the prompt's last token with a block drafted after it
        assert old.steps[0].drafted > 0 and new.steps[0].drafted == 0
    else:
        # AR: one token a step either way; the old start's step 0 is a decode, timed as one
        assert len(old.steps) == len(old.tokens) and len(new.steps) == len(new.tokens)
        assert old.steps[0].t_verify > 0 and new.steps[0].t_verify == 0
    assert new.steps[0].prefill and not any(r.prefill for r in old.steps)  # the old step 0 decodes
    # (the tokens may differ: the prefill's row and a one-row decode round differently; on this CPU
    # 5 of the first 8 HumanEval answers parted within 32 tokens)
