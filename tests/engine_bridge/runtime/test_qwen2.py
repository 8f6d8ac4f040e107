"""A real Qwen2 target (Qwen2.5-Coder-0.5B-Instruct Q4_K_M from the package registry's six chunk
packages) with a DFlash drafter, on the engine built with packaging/patches/0004-qwen2-dflash.patch
(issue 30).

The drafter is synthetic (random weights shaped for the target, its tokenizer copied): its drafts
are mostly rejected, which is what these tests need -- every verify, rollback and bonus token of
chain and tree mode on a qwen2 target (Q/K/V biases, rope base 1e6), compared with the target alone.
Without 0004 llama.cpp aborts such a pair ("layer input tensor is null"); the pairing checks refuse
it first, naming the patch (simulated here by the build info of an engine without it).
"""

from __future__ import annotations

import pytest

from engine_bridge.cli import main as cli_main
from engine_bridge.common.errors import IncompatiblePairError
from engine_bridge.models import compat, registry_models, synth
from engine_bridge.models.compat import FAIL, PASS
from engine_bridge.models.modelinfo import inspect_model
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

from engine_corpus import assert_lossless

PATCH = "0004-qwen2-dflash.patch"
# a code completion and a chat turn in the target's template; 12 tokens each: a 0.5B verify costs
# about 8 AR steps on 2 CPU cores, and the random drafter commits ~1 token a step
PROMPTS = ["def fibonacci(n):\n    ", "<|im_start|>user\nSort a list in Python.<|im_end|>\n<|im_start|>assistant\n"]
N_TOKENS = 12


@pytest.fixture(scope="module")
def qwen():
    """The registry's Qwen2.5-Coder-0.5B (fetched by `make test`; fetched here if it is missing)."""
    m = registry_models.QWEN25_CODER_05B
    return registry_models.cached(m) or registry_models.fetch(m)


@pytest.fixture(scope="module")
def drafter(qwen, tmp_path_factory):
    return synth.write_drafter_for(qwen, tmp_path_factory.mktemp("qwen-drafter") / "plain.gguf")


@pytest.fixture(scope="module")
def engine(qwen, drafter):
    eng = Engine.load(
        EngineConfig(target=qwen, draft=drafter, n_ctx=1024, n_batch=256, n_ubatch=64, n_threads=2),
        preflight=PAIR_PREFLIGHT,
    )
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def reference(engine):
    """The target alone (AR), once per prompt for both modes."""
    out = {}
    for prompt in PROMPTS:
        engine.reset()
        out[prompt] = engine.generate(
            prompt, GenerationSettings(mode="ar", max_tokens=N_TOKENS, stop_at_eog=False)
        ).tokens
    return out


def test_the_fetched_file_is_the_pinned_qwen2_target(qwen):
    assert registry_models.verify(qwen, registry_models.QWEN25_CODER_05B)
    info = inspect_model(qwen)
    assert (info.arch, info.n_layer, info.n_embd, info.n_head, info.n_head_kv) == ("qwen2", 24, 896, 14, 2)
    assert info.vocab_size == 151936 and info.rope_theta == 1e6 and info.has_chat_template
    # verified and in place: the CLI only re-hashes it (no index to ask)
    assert cli_main(["fetch-model", "qwen2.5-coder-0.5b", "--no-index"]) == 0


def test_the_engine_carries_0004_and_the_check_passes(qwen, drafter):
    applied = [p["name"] for p in llama_ffi.build_info().get("patches", [])]
    assert PATCH in applied
    report = compat.check(qwen, drafter)
    assert report.ok, report.summary()
    feeds = report.get("target_arch_feeds_drafter")
    assert feeds.status == PASS and "'qwen2'" in feeds.reason and PATCH in feeds.reason


@pytest.mark.parametrize("mode, budget", [("chain", 4), ("tree", 8)])
def test_chain_and_tree_are_lossless_on_qwen2(engine, reference, mode, budget):
    for prompt in PROMPTS:
        engine.reset()
        out = engine.generate(
            prompt, GenerationSettings(mode=mode, budget=budget, max_tokens=N_TOKENS, stop_at_eog=False)
        )
        assert out.summary.n_generated == N_TOKENS and len(out.steps) > 0
        # the drafter really ran (a step near max_tokens may have no room to draft)
        # every step drafts but the first token (the prefill's) and perhaps a short last step
        assert sum(s.drafted > 0 for s in out.steps) >= len(out.steps) - 2, [s.drafted for s in out.steps]
        assert_lossless(engine, prompt, reference[prompt], out.tokens, f"qwen2 {mode} {budget}: {prompt!r}")


def test_an_engine_without_0004_refuses_a_qwen2_target(qwen, drafter, monkeypatch):
    """The build info of an engine built without the patch (everything else as this one): the
    check fails naming the patch and the fix, and Engine.load refuses before llama.cpp loads
    anything, instead of aborting the process."""
    real = llama_ffi.build_info()
    without = {**real, "patches": [p for p in real.get("patches", []) if p["name"] != PATCH]}
    feeds = compat.check(qwen, drafter, build=without).get("target_arch_feeds_drafter")
    assert feeds.status == FAIL and PATCH in feeds.reason and "make engine" in feeds.fix
    monkeypatch.setattr(compat, "_default_build", lambda: without)
    loaded = []
    with pytest.raises(IncompatiblePairError) as info:
        Engine.load(
            EngineConfig(target=qwen, draft=drafter, n_ctx=256), preflight=PAIR_PREFLIGHT, progress=loaded.append
        )
    assert "target_arch_feeds_drafter" in [c.name for c in info.value.failures] and PATCH in str(info.value)
    assert not any(m.startswith("loading") for m in loaded), loaded  # refused before anything loaded
