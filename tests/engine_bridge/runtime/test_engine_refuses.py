"""Pairs that would make llama.cpp abort the process are refused before loading, with a reason."""

from __future__ import annotations

import pytest

from engine_bridge.models import synth
from engine_bridge.runtime.config import EngineConfig, GenerationSettings, KVTypes
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.common.errors import IncompatiblePairError


def _bad_pairs(folder):
    ts = synth.TargetSpec()
    good_t = synth.write_target(folder / "t.gguf", ts)
    good_d = synth.write_drafter(folder / "d.gguf", ts, synth.DrafterSpec())
    truncated = folder / "truncated-d.gguf"
    data = good_d.read_bytes()
    truncated.write_bytes(data[: len(data) - 4096])
    return {
        "hidden_size": (
            good_t,
            synth.write_drafter(folder / "d-hidden.gguf", ts, synth.DrafterSpec(n_embd=ts.n_embd + 1)),
        ),
        "target_layer_ids": (
            good_t,
            synth.write_drafter(folder / "d-layer.gguf", ts, synth.DrafterSpec(target_layers=(1, ts.n_layer))),
        ),
        "mask_token": (
            good_t,
            synth.write_drafter(folder / "d-nomask.gguf", ts, synth.DrafterSpec(with_mask_token=False)),
        ),
        # gemma2's graph records no layer inputs in any build (qwen2 and gemma3 do with patches 0004, 0003)
        "target_arch_feeds_drafter": (synth.write_target(folder / "t-gemma2.gguf", ts, arch="gemma2"), good_d),
        "gguf_complete_drafter": (good_t, truncated),
        "drafter_role": (good_t, good_t),
    }


def test_each_aborting_pair_is_refused_with_its_reason(tmp_path, tiny_pair):
    for expected, (target, draft) in _bad_pairs(tmp_path).items():
        with pytest.raises(IncompatiblePairError) as info:
            Engine.load(EngineConfig(target=target, draft=draft, n_ctx=256), preflight=PAIR_PREFLIGHT)
        names = [c.name for c in info.value.failures]
        assert expected in names, f"{expected}: got {names}"
        assert str(info.value), "the error must say why"
    # the process is alive and a good pair still loads and runs
    with Engine.load(EngineConfig(target=tiny_pair[0], draft=tiny_pair[1], n_ctx=256), preflight=PAIR_PREFLIGHT) as eng:
        assert eng.report is not None and eng.report.ok
        assert len(eng.generate("Hello", GenerationSettings(max_tokens=4)).tokens) == 4


def test_quantised_v_without_flash_attention_is_refused(tiny_pair):
    with pytest.raises(IncompatiblePairError) as info:
        Engine.load(
            EngineConfig(
                target=tiny_pair[0], draft=tiny_pair[1], n_ctx=256, flash_attn="off", target_kv=KVTypes("q8_0", "q8_0")
            ),
            preflight=PAIR_PREFLIGHT,
        )
    assert any(c.name.startswith("kv_types") for c in info.value.failures)


def test_quantised_kv_with_flash_attention_runs_losslessly(tmp_path):
    # quantised cache blocks hold 32 values, so the head size must be a multiple of 32
    ts = synth.TargetSpec(n_head=2, n_head_kv=1, head_dim=32)
    target, draft = synth.write_pair(tmp_path, ts, synth.DrafterSpec())
    cfg = EngineConfig(
        target=target,
        draft=draft,
        n_ctx=512,
        flash_attn="on",
        target_kv=KVTypes("q8_0", "q8_0"),
        draft_kv=KVTypes("q4_0", "q4_0"),
    )
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        ar = eng.generate("Hello world", GenerationSettings(mode="ar", max_tokens=24))
        eng.reset()
        ch = eng.generate("Hello world", GenerationSettings(mode="chain", budget=5, max_tokens=24))
        assert ch.tokens == ar.tokens
