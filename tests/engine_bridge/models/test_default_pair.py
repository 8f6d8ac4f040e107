"""The default pair (engine_bridge.models.demo): SmolLM2-135M-Instruct + its drafter, else the 15.7 M pair.

Which drafter the SmolLM2 tests use: the trained one shipped in resources/models/smollm2/ when it
is there, else a synthetic drafter of the same shape (engine_bridge.models.synth: n_embd 576, the target's
own vocabulary and tokenizer, one layer). Losslessness, loading and the pairing checks do not
depend on the drafter's weights, so the tests hold with either and never wait on the trained file;
the acceptance floor applies only to the trained drafter (random weights accept nothing).
The target is the real file ``make test`` fetched into the models cache; without it they skip.
"""

from __future__ import annotations

import pytest

from engine_bridge.models import demo, registry_models, synth
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.models.modelinfo import inspect_model

import engine_corpus

#: Q4_1 target: batched (verify) and single-token (AR) matmuls differ by a little more than f32's.
NEAR_TIE_Q4 = 0.1
CHAT_PROMPTS = [
    "Give me three tips for staying healthy.",
    "Write a short poem about the sea.",
    "Explain what a hash table is in two sentences.",
]
MAX_TOKENS = 32


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """(target, drafter, trained?) for SmolLM2; skips when the target was not fetched."""
    target = registry_models.cached()
    if target is None:
        pytest.skip("the default target is not in the models cache: run `dflash-studio fetch-default`")
    trained = demo.smollm2_drafter()
    if trained is not None:
        return target, trained, True
    drafter = synth.write_drafter_for(
        target,
        tmp_path_factory.mktemp("smol") / "smollm2-synthetic-dflash.gguf",
        synth.DrafterSpec(n_layer=1, block_size=16),
    )
    return target, drafter, False


# -- which pair is the default -------------------------------------------------------------------------
def test_without_the_fetched_target_the_default_is_the_reference_pair(tmp_path, monkeypatch):
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))  # an empty models cache
    assert demo.smollm2_pair() is None
    ref = demo.reference_pair()
    assert ref is not None and ref == demo.shipped_pair()
    assert demo.demo_pair() == ref
    assert inspect_model(ref[0]).arch == "qwen3"  # the 15.7 M Python-code pair


def test_smollm2_pair_needs_both_files(tmp_path):
    models, drafters = tmp_path / "models", tmp_path / "drafters"
    models.mkdir()
    drafters.mkdir()
    target = registry_models.cached_path(folder=models)
    assert demo.smollm2_pair(models, drafters) is None
    with open(target, "wb") as f:  # a file of the wrong size is not the fetched target
        f.truncate(1000)
    (drafters / demo.SMOLLM2_DRAFTER).write_bytes(b"GGUF")
    assert demo.smollm2_pair(models, drafters) is None
    with open(target, "wb") as f:
        f.truncate(registry_models.SMOLLM2.size)
    assert demo.smollm2_pair(models, drafters) == (target, drafters / demo.SMOLLM2_DRAFTER)
    (drafters / demo.SMOLLM2_DRAFTER).unlink()
    assert demo.smollm2_pair(models, drafters) is None


def test_with_the_fetched_target_the_default_follows_the_shipped_drafter(smollm2, tmp_path, monkeypatch):
    target = smollm2[0]
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    (data / "models" / target.name).symlink_to(target)
    monkeypatch.setenv("DFLASH_DATA_DIR", str(data))
    drafter = demo.smollm2_drafter()
    if drafter is not None:
        assert demo.demo_pair() == (data / "models" / target.name, drafter)
    else:  # the trained drafter has not shipped yet
        assert demo.demo_pair() == demo.reference_pair()


# -- the pair runs ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine(smollm2):
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    target, drafter, _ = smollm2
    eng = Engine.load(
        EngineConfig(target=target, draft=drafter, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=1),
        preflight=PAIR_PREFLIGHT,
    )
    yield eng
    eng.close()


def test_the_pair_passes_the_checks(smollm2):
    from engine_bridge.models.compat import check

    target, drafter, _ = smollm2
    report = check(target, drafter)
    assert report.ok, report.summary()
    assert inspect_model(drafter).tokens_hash == inspect_model(target).tokens_hash


def test_chain_is_lossless_on_chat_prompts(engine, smollm2):
    committed = steps = 0
    for text in CHAT_PROMPTS:
        prompt = engine.format_chat([{"role": "user", "content": text}])
        engine.reset()
        ref = engine.generate(prompt, GenerationSettings(mode="ar", max_tokens=MAX_TOKENS))
        engine.reset()
        r = engine.generate(prompt, GenerationSettings(mode="chain", budget=7, max_tokens=MAX_TOKENS))
        engine_corpus.assert_lossless(
            engine, prompt, list(ref.tokens), list(r.tokens), "chain budget 7", tol=NEAR_TIE_Q4
        )
        committed += r.summary.n_generated
        steps += r.summary.n_steps
    if smollm2[2]:
        # the trained drafter must accept something on chat (a random one commits 1.0 per step).
        # Chat is its weakest category: 1.25 on these three short prompts (CPU); the drafter shipped
        # before, trained on templated requests much like these, 1.43 (on MT-Bench the two are level
        # at chain 7 and the real-data one leads at 15: docs/benchmarks.md, issue 27)
        assert committed / steps > 1.15, f"mean commit length {committed / steps:.2f}"


def test_shipped_drafter_accepts_on_held_out_prompts(engine, smollm2):
    """The shipped drafter on prompts it never trained on (its card's held-out set: the val split of
    the real prompt set), chain 7, 32 tokens, the first three of a category, CPU: measured 2.29
    tokens per step on code and 1.78 on math (the drafter shipped before, trained on our templates:
    1.20 and 1.50). A drafter that lost its training (a broken export, wrong target layers, a wrong
    mask token) commits ~1.0."""
    if not smollm2[2]:
        pytest.skip("no trained SmolLM2 drafter shipped")
    import json

    from engine_bridge.common.resources import resource

    rows = [json.loads(line) for line in resource("models", "smollm2", "prompts.jsonl").read_text().splitlines()]
    for cat, floor in (("code", 1.8), ("math", 1.4)):
        committed = steps = 0
        for r in [r for r in rows if r["category"] == cat][:3]:
            engine.reset()
            g = engine.generate(
                engine.format_chat(r["messages"]), GenerationSettings(mode="chain", budget=7, max_tokens=32)
            )
            committed += g.summary.n_generated
            steps += g.summary.n_steps
        assert committed / steps > floor, f"mean commit length {committed / steps:.2f} on held-out {cat}"


def test_the_target_answers_a_chat_question(engine):
    prompt = engine.format_chat([{"role": "user", "content": CHAT_PROMPTS[0]}])
    engine.reset()
    text = engine.generate(prompt, GenerationSettings(mode="ar", max_tokens=64)).text.lower()
    assert sum(w in text for w in ("water", "exercise", "sleep", "diet", "eat")) >= 2, text
