"""A real Gemma 3 target (gemma-3-270m Q4_K_M from the package registry's chunk packages) with a
DFlash drafter, on the engine built with packaging/patches/0003-gemma3-dflash.patch (issue 14).

The drafter is synthetic (random weights shaped for the target, its tokenizer copied): its drafts
are mostly rejected, which is what these tests need -- every verify, rollback and bonus token of
chain and tree mode on Gemma 3's sliding-window cache, compared with the target alone. A trained
drafter's commit lengths are in docs/benchmarks.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine_bridge.models import compat, registry_models, synth
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

from engine_corpus import assert_lossless

PROMPTS = ["The capital of France is", "def fibonacci(n):\n    ", "Water boils at a temperature of"]


@pytest.fixture(scope="module")
def gemma():
    """The registry's Gemma 3 270M (fetched by `make test`; fetched here if it is missing)."""
    path = registry_models.cached(registry_models.GEMMA3_270M) or registry_models.fetch(registry_models.GEMMA3_270M)
    return path


@pytest.fixture(scope="module")
def drafters(gemma, tmp_path_factory):
    d = tmp_path_factory.mktemp("gemma-drafters")
    plain = synth.write_drafter_for(gemma, d / "plain.gguf")
    # the same weights with the scale written in the drafter's own key: once as the target's own
    # sqrt(n_embd) (must draft exactly as the engine's default), once as 1 (upstream's unscaled)
    stated = synth.write_drafter_for(gemma, d / "stated.gguf", extra_kv={"dflash.embedding_scale": math.sqrt(640)})
    unscaled = synth.write_drafter_for(gemma, d / "unscaled.gguf", extra_kv={"dflash.embedding_scale": 1.0})
    return {"plain": plain, "stated": stated, "unscaled": unscaled}


@pytest.fixture(scope="module")
def engine(gemma, drafters):
    eng = Engine.load(
        EngineConfig(target=gemma, draft=drafters["plain"], n_ctx=1024, n_batch=256, n_ubatch=64, n_threads=1),
        preflight=PAIR_PREFLIGHT,
    )
    yield eng
    eng.close()


def test_the_engine_carries_the_gemma_patch_and_check_passes(gemma, drafters):
    applied = [p["name"] for p in llama_ffi.build_info().get("patches", [])]
    assert "0003-gemma3-dflash.patch" in applied
    report = compat.check(gemma, drafters["plain"])
    assert report.ok, report.summary()
    names = [c.name for c in report.checks]
    assert {"target_arch_feeds_drafter", "gemma_embedding_scale", "gemma_logit_softcap"} <= set(names)
    assert report.target.sliding_window == 512 and sum(report.target.sliding_window_pattern) == 15


@pytest.mark.parametrize("mode, budget", [("chain", 7), ("tree", 12)])
def test_chain_and_tree_are_lossless_on_gemma3(engine, mode, budget):
    for prompt in PROMPTS:
        engine.reset()
        ref = engine.generate(prompt, GenerationSettings(mode="ar", max_tokens=24))
        engine.reset()
        out = engine.generate(prompt, GenerationSettings(mode=mode, budget=budget, max_tokens=24))
        assert out.summary.n_generated == 24 and len(out.steps) > 0
        # the drafter really ran (a step near max_tokens may have no room to draft)
        # every step drafts but the first token (the prefill's) and perhaps a short last step
        assert sum(s.drafted > 0 for s in out.steps) >= len(out.steps) - 2, [s.drafted for s in out.steps]
        assert_lossless(engine, prompt, ref.tokens, out.tokens, f"gemma3 {mode} {budget}: {prompt!r}")


def _draft_logits(eng: Engine, prompt: str, n: int = 7) -> np.ndarray:
    toks = eng.tokenize(prompt)
    eng.reset()
    eng._prefill(toks[:-1], need_features=True)
    eng.drafter.ctx.set_backend_greedy(False)
    _, logits = eng.drafter.draft(toks[-1], len(eng.kv), n)  # as a chain step drafts after the prompt
    return np.array(logits, copy=True)


def test_the_embedding_scale_is_applied_once(engine, drafters):
    """patch 0003 gives a drafter without dflash.embedding_scale the target's sqrt(n_embd): it must
    draft as the same drafter stating that scale itself (so nothing is scaled twice), and unlike
    the same drafter stating 1 (so the scale is in effect)."""
    try:
        plain = _draft_logits(engine, PROMPTS[0])
        engine.swap_drafter(drafters["stated"])
        stated = _draft_logits(engine, PROMPTS[0])
        engine.swap_drafter(drafters["unscaled"])
        unscaled = _draft_logits(engine, PROMPTS[0])
    finally:
        engine.swap_drafter(drafters["plain"])
    assert np.allclose(plain, stated, rtol=1e-4, atol=1e-3)
    assert np.abs(plain - unscaled).max() > 0.1


def test_the_tree_takes_the_drafters_top_k_where_it_was_measured_to_win(engine):
    """262k vocabulary: the backend top-k sampler won 3.5-4.8x on the H100 and lost on the CPU
    (docs/benchmarks.md, "Gemma 3"): auto takes it on a GPU build offloading the drafter only."""
    from engine_bridge.runtime import drafter as drafter_mod

    gpu = llama_ffi.build_info().get("backend", "cpu") != "cpu"
    assert engine.drafter.on_gpu == gpu
    assert engine.drafter.tree_top_k_backend() == (drafter_mod.BACKEND_TOP_K if gpu else 0)
