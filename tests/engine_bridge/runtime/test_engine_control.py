"""Cancel, context limits, draft variants: the engine stays usable whatever happens."""

from __future__ import annotations

import threading

import pytest

from engine_bridge.models import synth
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.common.errors import ContextOverflowError, UnsupportedSettingError


def test_cancel_from_another_thread_stops_within_a_step(tiny_engine):
    eng = tiny_engine
    eng.reset()
    cancel = threading.Event()
    seen_steps = []
    state = {}

    def on_step(rec):
        seen_steps.append(rec.step)
        if len(seen_steps) == 3:
            threading.Thread(target=cancel.set).start()
            threading.Event().wait(0.05)  # give the other thread time to set the flag
            state["steps_at_cancel"] = len(seen_steps)

    def run():
        state["result"] = eng.generate(
            "Hello world", GenerationSettings(mode="chain", budget=4, max_tokens=1000), on_step=on_step, cancel=cancel
        )

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(60)
    assert not worker.is_alive()
    res = state["result"]
    assert res.summary.finish_reason == "cancelled"
    assert len(res.steps) <= state["steps_at_cancel"] + 1
    # the pair stays usable and still lossless afterwards
    eng.reset()
    again = eng.generate("Hello world", GenerationSettings(mode="chain", budget=4, max_tokens=16))
    eng.reset()
    ref = eng.generate("Hello world", GenerationSettings(mode="ar", max_tokens=16))
    assert again.tokens == ref.tokens and again.summary.finish_reason == "max_tokens"


def test_prompt_longer_than_context_is_an_error(tiny_pair):
    target, draft = tiny_pair
    with Engine.load(EngineConfig(target=target, draft=draft, n_ctx=64, n_batch=64, n_ubatch=64), check=False) as eng:
        prompt = " ".join(["word"] * (eng.target_ctx.n_ctx + 10))  # llama.cpp pads n_ctx up
        with pytest.raises(ContextOverflowError, match="context"):
            eng.generate(prompt, GenerationSettings(mode="chain"))
        # and the engine still works
        res = eng.generate("Hello", GenerationSettings(mode="chain", max_tokens=8))
        assert len(res.tokens) == 8


def test_generation_stops_at_a_full_context(tiny_pair):
    target, draft = tiny_pair
    with Engine.load(EngineConfig(target=target, draft=draft, n_ctx=64, n_batch=64, n_ubatch=64), check=False) as eng:
        res = eng.generate("Hello world", GenerationSettings(mode="chain", budget=8, max_tokens=500))
        assert res.summary.finish_reason == "context_full"
        assert len(eng.kv) < eng.target_ctx.n_ctx
        eng.reset()
        ar = eng.generate("Hello world", GenerationSettings(mode="ar", max_tokens=500))
        assert ar.summary.finish_reason == "context_full"
        assert len(res.tokens) == len(ar.tokens)
        # Greedy agreement holds except at floating-point near-ties (batched and single-token
        # decodes differ by ~1e-4 relative); this pair has one near token 245, so compare before it.
        assert res.tokens[:200] == ar.tokens[:200]


def test_speculative_mode_without_drafter_is_refused(tiny_pair):
    target, _ = tiny_pair
    with Engine.load(EngineConfig(target=target, n_ctx=256), check=False) as eng:
        with pytest.raises(UnsupportedSettingError, match="drafter"):
            eng.generate("Hello", GenerationSettings(mode="chain"))
        assert len(eng.generate("Hello", GenerationSettings(mode="ar", max_tokens=4)).tokens) == 4


def _steps(eng, prompt="Hello world"):
    eng.reset()
    r = eng.generate(prompt, GenerationSettings(mode="chain", budget=6, max_tokens=40))
    return r.tokens, [(s.drafted, s.accepted) for s in r.steps]


def test_lora_variant_changes_drafts_not_output(tiny_engine, models_dir):
    lora = synth.write_lora(models_dir / "variant-lora.gguf", scale=3.0)
    base_tokens, base_steps = _steps(tiny_engine)
    tiny_engine.set_adapters([(lora, 1.0)], check=False)
    try:
        tokens, steps = _steps(tiny_engine)
        assert tokens == base_tokens
        assert steps != base_steps, "the adapter did not reach the drafter"
        assert tiny_engine.describe()["adapters"][0][0] == str(lora)
    finally:
        tiny_engine.set_adapters([], check=False)
    assert _steps(tiny_engine) == (base_tokens, base_steps)


def test_swap_drafter_file_keeps_target(tiny_pair, models_dir):
    target, draft = tiny_pair
    other = synth.write_drafter(
        models_dir / "other-drafter.gguf", synth.TargetSpec(), synth.DrafterSpec(seed=11, draft_scale=2.0)
    )
    with Engine.load(EngineConfig(target=target, draft=draft, n_ctx=512), check=False) as eng:
        target_ptr = eng.target.ptr
        tokens, steps = _steps(eng)
        eng.swap_drafter(other, check=False)
        assert eng.target.ptr == target_ptr and eng.drafter.path == other
        tokens2, steps2 = _steps(eng)
        assert tokens2 == tokens and steps2 != steps
        # mid-conversation swap: the next request re-prefills the new drafter's cache
        eng.reset()
        first = eng.generate("Hello", GenerationSettings(mode="chain", budget=6, max_tokens=10))
        eng.swap_drafter(draft, check=False)
        conv = eng.tokenize("Hello") + first.tokens
        cont = eng.generate(conv, GenerationSettings(mode="chain", budget=6, max_tokens=10))
        eng.reset()
        ref = eng.generate(conv, GenerationSettings(mode="ar", max_tokens=10))
        assert cont.tokens == ref.tokens


def test_a_target_snapshot_restores_the_cache_byte_for_byte(tiny_engine):
    eng = tiny_engine
    eng.reset()
    eng.generate("The first request", GenerationSettings(mode="chain", budget=4, max_tokens=12))
    snap = eng.snapshot_target()
    assert snap.tokens == eng.kv and len(snap.state) > 0
    first = eng.generate("The first request goes on", GenerationSettings(mode="ar", max_tokens=16))
    # something else in between: another prompt, the drafter's cache too
    eng.generate("Unrelated words", GenerationSettings(mode="tree", budget=8, max_tokens=8))
    eng.restore_target(snap, keep=first.summary.n_prompt_reused)
    assert eng.kv == snap.tokens[: first.summary.n_prompt_reused] and eng.dft_valid == 0
    again = eng.generate("The first request goes on", GenerationSettings(mode="ar", max_tokens=16))
    assert again.summary.n_prompt_reused == first.summary.n_prompt_reused
    assert again.tokens == first.tokens
    # the drafter catches up from an empty cache: speculative decoding goes on working
    chain = eng.generate("The first request goes on", GenerationSettings(mode="chain", budget=4, max_tokens=16))
    assert chain.summary.finish_reason == "max_tokens" and chain.summary.n_generated == 16
    # a state that is not llama.cpp's is refused with an error, not a crash
    from engine_bridge.runtime.engine import TargetSnapshot

    with pytest.raises(Exception, match="refused a saved state"):
        eng.restore_target(TargetSnapshot(tokens=[1, 2], state=b"\x00garbage" * 4))
    assert eng.kv == [] and eng.dft_valid == 0  # left empty, not holding the old tokens
    assert eng.generate("Hello", GenerationSettings(mode="ar", max_tokens=4)).summary.n_generated == 4


def test_a_placement_reaches_llama_cpp_and_the_engine_runs_with_it(tiny_pair):
    import llama_cpp

    from engine_bridge.common.placement import Placement
    from engine_bridge.runtime.native import apply_placement

    params = llama_cpp.llama_model_default_params()
    keep = apply_placement(params, Placement.parse("row", "3,1", 1))
    assert (params.split_mode, params.main_gpu) == (2, 1) and [params.tensor_split[i] for i in range(3)] == [3, 1, 0]
    assert keep is not None
    apply_placement(params, Placement())
    assert (params.split_mode, params.main_gpu, bool(params.tensor_split)) == (1, 0, False)
    # on this build (no GPU) the split is accepted and changes nothing: the same tokens as AR
    target, draft = tiny_pair
    cfg = EngineConfig(target=target, draft=draft, n_ctx=512, target_placement=Placement.parse("layer", "3,1", 0))
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        assert eng.draft_placement == Placement()  # one device or none: the drafter's default
        chain = eng.generate("Hello world", GenerationSettings(mode="chain", budget=4, max_tokens=12)).tokens
        eng.reset()
        assert chain == eng.generate("Hello world", GenerationSettings(mode="ar", max_tokens=12)).tokens
    with Engine.load(
        cfg.replace(draft_placement=Placement(split_mode="none", main_gpu=0)), preflight=PAIR_PREFLIGHT
    ) as eng:
        assert eng.draft_placement == Placement(split_mode="none", main_gpu=0)
