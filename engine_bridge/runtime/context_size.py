"""The default context size: the target's own context length, capped by memory.

A fixed 4096 was too long for small models (llama.cpp warned "n_ctx_seq (4096) > n_ctx_train
(1024) -- possible training context overflow": positions past the trained length give garbage)
and too short for long-context ones. ``EngineConfig.n_ctx == 0`` means "this", resolved at load:

    n_ctx = min(<arch>.context_length, MAX_DEFAULT_CTX, what a KV cache in KV_MEMORY_SHARE of the
                available memory holds for the target and a drafter of the same shape)

A user who sets a size (the CLI's --n-ctx, the app's settings) gets exactly that.
"""

from __future__ import annotations

from ..common.memory import available_memory  # noqa: F401 - here since before it moved
from .llama_ffi import C

#: the longest context loaded without being asked for: a 128k-token model would otherwise reserve
#: a KV cache of many GiB before the first message
MAX_DEFAULT_CTX = 32768
#: share of the available memory the default KV caches (target + drafter) may take
KV_MEMORY_SHARE = 0.25
#: never below this (a model that reports a tiny or no context length still gets a usable one)
MIN_DEFAULT_CTX = 256
#: bytes per KV element by cache type (quantised types with their block scales)
KV_BYTES = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}


def kv_bytes_per_token(model, kv_k: str = "f16", kv_v: str = "f16") -> float:
    """K and V bytes one token takes in ``model``'s cache (all layers)."""
    ptr = model.ptr
    n_layer, n_head = C.llama_model_n_layer(ptr), max(1, C.llama_model_n_head(ptr))
    n_head_kv = C.llama_model_n_head_kv(ptr) or n_head
    head_dim = C.llama_model_n_embd(ptr) // n_head
    per_elem = KV_BYTES.get(kv_k, 2.0) + KV_BYTES.get(kv_v, 2.0)
    return n_layer * n_head_kv * head_dim * per_elem


def default_n_ctx(model, kv_k: str = "f16", kv_v: str = "f16", memory: int | None = None) -> int:
    """The context size a load gets when none was asked for (see the module's docstring)."""
    trained = int(C.llama_model_n_ctx_train(model.ptr)) or MAX_DEFAULT_CTX
    n = min(trained, MAX_DEFAULT_CTX)
    memory = available_memory() if memory is None else memory
    if memory:
        # x2: a drafter of the target's shape at worst (DFlash drafters are a few layers)
        fits = int(memory * KV_MEMORY_SHARE / (2 * kv_bytes_per_token(model, kv_k, kv_v)))
        n = min(n, fits)
    return max(MIN_DEFAULT_CTX, n)
