"""Shared fixtures: real tiny GGUF models written with the `gguf` package (engine_bridge.models.synth)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from engine_bridge.models import synth  # noqa: E402


# --- engine fixtures ---
@pytest.fixture(scope="session")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny_pair(models_dir):
    """A qwen3 target (GPT-2 BPE vocabulary) and a DFlash drafter that agrees part of the time."""
    return synth.write_pair(
        models_dir / "qwen3", synth.TargetSpec(arch="qwen3", vocab="gpt2"), synth.DrafterSpec(), stem="tiny-qwen3"
    )


@pytest.fixture(scope="session")
def tiny_llama_pair(models_dir):
    """A llama target (Phi-3 SentencePiece vocabulary) and its DFlash drafter."""
    return synth.write_pair(
        models_dir / "llama",
        synth.TargetSpec(arch="llama", vocab="phi3", seed=3),
        synth.DrafterSpec(seed=4),
        stem="tiny-llama",
    )


@pytest.fixture(scope="session")
def tiny_engine(tiny_pair):
    """One loaded pair shared by the tests that only read from it (each test resets the KV)."""
    from engine_bridge.runtime.config import EngineConfig
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    target, draft = tiny_pair
    eng = Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=2048, n_batch=512, n_ubatch=64), preflight=PAIR_PREFLIGHT
    )
    yield eng
    eng.close()


# --- end engine fixtures ---
