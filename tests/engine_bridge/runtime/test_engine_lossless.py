"""Speculative decoding commits exactly what the target alone would commit (temperature 0)."""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

from engine_corpus import LONG_PROMPT, PROMPTS, assert_lossless


def _run(engine, prompt, **kw):
    engine.reset()
    return engine.generate(prompt, GenerationSettings(max_tokens=kw.pop("max_tokens", 32), **kw))


def _partial(result) -> bool:
    return any(0 < s.accepted < s.drafted for s in result.steps)


@pytest.mark.parametrize("budget", [1, 4, 15])
def test_chain_equals_autoregressive(tiny_engine, budget):
    prompts = PROMPTS + [LONG_PROMPT]
    assert len(prompts) >= 21
    partial = accepted = 0
    for p in prompts:
        ar = _run(tiny_engine, p, mode="ar")
        ch = _run(tiny_engine, p, mode="chain", budget=budget)
        assert_lossless(tiny_engine, p, ar.tokens, ch.tokens, f"budget {budget}, prompt {p[:30]!r}")
        if ch.tokens == ar.tokens:
            assert ch.text == ar.text
        partial += _partial(ch)
        accepted += ch.summary.n_accepted
    assert accepted > 0, "the drafter never agreed: rollback paths were not exercised"
    if budget > 1:
        assert partial > 0, "no step accepted part of its draft"


def test_long_prompt_spans_ubatches(tiny_engine):
    n = len(tiny_engine.tokenize(LONG_PROMPT))
    assert n > 2 * tiny_engine.target_ctx.n_ubatch
    ar = _run(tiny_engine, LONG_PROMPT, mode="ar")
    ch = _run(tiny_engine, LONG_PROMPT, mode="chain", budget=7)
    assert_lossless(tiny_engine, LONG_PROMPT, ar.tokens, ch.tokens, "long prompt")
    assert ch.summary.n_prompt == n


def test_prompt_longer_than_n_batch(tiny_pair):
    target, draft = tiny_pair
    with Engine.load(EngineConfig(target=target, draft=draft, n_ctx=1024, n_batch=64, n_ubatch=32), check=False) as eng:
        prompt = " ".join(f"w{i}" for i in range(100))
        assert len(eng.tokenize(prompt)) > 64
        ar = _run(eng, prompt, mode="ar", max_tokens=24)
        ch = _run(eng, prompt, mode="chain", budget=6, max_tokens=24)
        assert_lossless(eng, prompt, ar.tokens, ch.tokens, "prompt > n_batch")


def test_multi_turn_reuses_shared_prefix(tiny_engine):
    eng = tiny_engine
    eng.reset()
    first = eng.generate("Hello world", GenerationSettings(mode="chain", budget=4, max_tokens=20))
    conversation = eng.tokenize("Hello world") + first.tokens + eng.tokenize(" and then", add_special=False)
    follow = eng.generate(conversation, GenerationSettings(mode="chain", budget=4, max_tokens=20))
    assert follow.summary.n_prompt_reused >= len(eng.tokenize("Hello world")) + len(first.tokens) - 1
    fresh = _run(eng, conversation, mode="ar", max_tokens=20)
    assert_lossless(eng, conversation, fresh.tokens, follow.tokens, "follow-up turn")


def test_switching_modes_keeps_caches_consistent(tiny_engine):
    """AR turns leave the drafter's cache behind; the next chain turn must catch it up."""
    eng = tiny_engine
    eng.reset()
    a = eng.generate("Once upon a time", GenerationSettings(mode="ar", max_tokens=12))
    conv = eng.tokenize("Once upon a time") + a.tokens
    b = eng.generate(conv, GenerationSettings(mode="chain", budget=5, max_tokens=16))
    ref = _run(eng, conv, mode="ar", max_tokens=16)
    assert_lossless(eng, conv, ref.tokens, b.tokens, "chain after AR")


def test_llama_architecture_pair(tiny_llama_pair):
    target, draft = tiny_llama_pair
    with Engine.load(EngineConfig(target=target, draft=draft, n_ctx=1024), check=False) as eng:
        for p in PROMPTS[:6]:
            ar = _run(eng, p, mode="ar", max_tokens=24)
            ch = _run(eng, p, mode="chain", budget=5, max_tokens=24)
            assert_lossless(eng, p, ar.tokens, ch.tokens, "llama pair")


def test_dspark_drafter(tiny_pair, models_dir):
    from engine_bridge.models import synth

    target, _ = tiny_pair
    draft = synth.write_drafter(models_dir / "dspark.gguf", synth.TargetSpec(), synth.DrafterSpec(dspark=True))
    with Engine.load(EngineConfig(target=target, draft=draft, n_ctx=1024), check=False) as eng:
        assert eng.drafter.is_dspark and eng.drafter.max_draft == eng.drafter.block_size
        for p in PROMPTS[:5]:
            ar = _run(eng, p, mode="ar", max_tokens=24)
            ch = _run(eng, p, mode="chain", budget=8, max_tokens=24)
            assert_lossless(eng, p, ar.tokens, ch.tokens, "dspark")


def test_top_k_one_sampling_is_exact(tiny_engine):
    """With the sampler chain in the loop but one candidate, both modes must agree exactly."""
    for p in PROMPTS[:5]:
        ar = _run(tiny_engine, p, mode="ar", temperature=0.9, top_k=1, seed=3)
        ch = _run(tiny_engine, p, mode="chain", budget=6, temperature=0.9, top_k=1, seed=3)
        assert_lossless(tiny_engine, p, ar.tokens, ch.tokens, "top-k 1 sampling")


def test_sampling_distribution_is_the_targets(tiny_engine):
    """At temperature > 0 the target's sampler decides every token: the distribution of the first
    two tokens is the same with and without a drafter (a drafter-biased loop would skew it)."""
    from collections import Counter

    n = 150
    dist = {}
    for mode in ("ar", "chain"):
        c = Counter()
        for seed in range(n):
            r = _run(tiny_engine, "Hello world", mode=mode, budget=4, temperature=1.0, top_k=4, seed=seed, max_tokens=2)
            c[tuple(r.tokens)] += 1
        dist[mode] = c
    keys = set(dist["ar"]) | set(dist["chain"])
    tv = 0.5 * sum(abs(dist["ar"][k] - dist["chain"][k]) for k in keys) / n
    assert len(dist["ar"]) > 3, "sampling produced no variety: the test would prove nothing"
    assert tv < 0.2, f"token distributions differ (total variation {tv:.2f})"


def test_host_and_backend_argmax_agree(tiny_pair):
    """Greedy picks come from the device (backend sampler) or from the host logits: same text."""
    target, draft = tiny_pair
    results = {}
    for backend in (True, False):
        with Engine.load(
            EngineConfig(target=target, draft=draft, n_ctx=1024, backend_sampling=backend), preflight=PAIR_PREFLIGHT
        ) as eng:
            out = []
            for p in PROMPTS[:6]:
                eng.reset()
                r = eng.generate(p, GenerationSettings(mode="chain", budget=6, max_tokens=24))
                out.append((r.tokens, [(s.drafted, s.accepted) for s in r.steps]))
                if backend:
                    assert eng.target_ctx.backend_greedy and eng.drafter.ctx.backend_greedy
                else:
                    assert not eng.target_ctx.backend_greedy and not eng.drafter.ctx.backend_greedy
            results[backend] = out
    assert results[True] == results[False]


def test_lossless_check_rejects_real_differences(tiny_engine):
    """The near-tie allowance is narrow: a changed token where the target is sure must fail."""
    ar = _run(tiny_engine, "Hello world", mode="ar", max_tokens=12)
    prompt = tiny_engine.tokenize("Hello world")
    margins = []
    for k in range(len(ar.tokens)):
        top2 = np.sort(tiny_engine.next_token_logits(prompt + ar.tokens[:k]))[-2:]
        margins.append(top2[1] - top2[0])
    k = int(np.argmax(margins))
    wrong = ar.tokens[:k] + [(ar.tokens[k] + 1) % tiny_engine.target.n_vocab]
    with pytest.raises(AssertionError, match="margin"):
        assert_lossless(tiny_engine, "Hello world", ar.tokens, wrong + ar.tokens[k + 1 :], "planted error")
