"""The torch GGUF target (engine_bridge.training.gguf_target) on a real qwen2 file: the registry's
Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Q/K/V biases, rope base 1e6, a separate output matrix; Q4_K,
Q5_0, Q6_K and Q8_0 tensors dequantised by gguf). As on SmolLM2's Q4_1 (test_train_drafter.py),
llama.cpp quantises activations for its dot products, so logits differ a little: teacher-forced on
llama.cpp's own greedy answers, torch picks the same token almost everywhere, and where it does
not, llama.cpp's token is a near-tie in torch's logits too. (Exactness on f32 files, qwen2 with a
tied output included, is test_train_drafter.py's.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_bridge.models import registry_models
from torch_follows import assert_torch_follows_llama_cpp

torch = pytest.importorskip("torch", reason="the train extra (PyTorch) is not installed")

PROMPTS = [
    [{"role": "user", "content": "Write a Python function that checks whether a string is a palindrome."}],
    [{"role": "user", "content": "What does a hash map do, in one sentence?"}],
]


@pytest.fixture(scope="module")
def qwen() -> Path:
    m = registry_models.QWEN25_CODER_05B
    return registry_models.cached(m) or registry_models.fetch(m)


def test_torch_target_follows_llama_cpp_on_qwen2(qwen):
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.training.gguf_target import load_gguf_target

    torch.set_num_threads(2)
    eng = Engine.load(EngineConfig(target=qwen, n_ctx=512, n_batch=256, n_ubatch=128), check=False)
    try:
        runs = []
        for messages in PROMPTS:
            p = eng.tokenize(eng.format_chat(messages), add_special=False)
            eng.reset()
            runs.append((p, list(eng.generate(p, GenerationSettings(mode="ar", max_tokens=16)).tokens)))
    finally:
        eng.close()
    model = load_gguf_target(qwen)
    c = model.c
    assert (c.arch, c.qkv_bias, c.tied, c.qk_norm, c.rope_theta) == ("qwen2", True, False, False, 1e6)
    assert all(len(ar) >= 8 for _, ar in runs), runs
    assert_torch_follows_llama_cpp(model, runs)
