"""The default pair (SmolLM2-135M-Instruct and its shipped drafter) loaded as the engine tests load it:
a small context and two threads, skipped where the target is not in the models cache. Tests that set
an environment switch before loading call it after their monkeypatch."""

from __future__ import annotations

import pytest

from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig
from engine_bridge.runtime.engine import Engine


#: a code request and a GSM8K-train-style word problem: answers whose commit lengths vary from step
#: to step (the tests of per-shape graphs need the shapes to change)
CODE_AND_MATH_PROMPTS = (
    "Write a Python function that returns the n-th Fibonacci number, with a short docstring.",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did she sell altogether in April and May?",
)


def load_default_pair(n_ctx: int = 1024, n_threads: int = 2) -> Engine:
    target, draft = registry_models.cached(), smollm2_drafter()
    if target is None or draft is None:
        pytest.skip("the default pair is not in the models cache: run `dflash-studio fetch-default`")
    return Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=n_ctx, n_threads=n_threads), preflight=PAIR_PREFLIGHT
    )
