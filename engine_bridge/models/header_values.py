"""Numeric GGUF header values that llama.cpp uses, checked against the domain it assumes.

A file can be well-formed and still carry a value that makes llama.cpp abort the whole process
at the first decode (``GGML_ASSERT(eps >= 0.0f)`` for a negative or NaN RMS-norm epsilon) or
compute garbage forever (a NaN rope base, a zero head count). The pairing checks and the
converter both ask ``problems()``; each problem names the key and the value.
"""

from __future__ import annotations

import math

from . import llama_facts as facts

# key (after "<arch>.") -> what the value must be. Upper bounds are far beyond any real model,
# low enough that llama.cpp never tries to allocate for them.
_POSITIVE = {  # finite and > 0 (epsilons divide, rope bases are raised to powers)
    "attention.layer_norm_rms_epsilon",
    "attention.layer_norm_epsilon",
    "rope.freq_base",
    "rope.freq_base_swa",
    "rope.scaling.factor",
}
_FINITE = {  # finite (scales multiply activations)
    "embedding_scale",
    "logit_scale",
    "residual_scale",
    "attention.scale",
    "attention.value_scale",
    "rope.scaling.attn_factor",
    "expert_weights_scale",
}
_SOFTCAPS = {  # finite and >= 0 (0 means "no softcap" to llama.cpp)
    "final_logit_softcapping",
    "attn_logit_softcapping",
}
# integer dimensions: (smallest allowed in a scalar, largest allowed)
_DIMS = {
    "block_count": (1, 4096),
    "embedding_length": (1, 1 << 17),
    "feed_forward_length": (0, 1 << 20),
    "attention.head_count": (1, 4096),
    "attention.head_count_kv": (1, 4096),
    "attention.key_length": (1, 1 << 14),
    "attention.value_length": (1, 1 << 14),
    "rope.dimension_count": (0, 1 << 14),
    "context_length": (1, 1 << 27),
    "vocab_size": (1, 1 << 24),
    "block_size": (1, 1 << 12),
    "attention.sliding_window": (0, 1 << 27),
}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _float_problem(key: str, v, rule: str) -> str | None:
    if not _number(v):
        return f"{key} = {v!r} is not a number"
    f = float(v)
    if not math.isfinite(f):
        return f"{key} = {f} is not finite"
    if rule == "positive" and f <= 0:
        return f"{key} = {f:g} must be > 0"
    if rule == "softcap" and f < 0:
        return f"{key} = {f:g} must be >= 0"
    return None


def _dim_problem(key: str, v, lo: int, hi: int) -> str | None:
    # Some architectures give per-layer arrays (head counts, feed-forward widths); a 0 there
    # marks a layer without that block, so array entries may be 0.
    values, floor = (list(v), 0) if isinstance(v, (list, tuple)) else ([v], lo)
    for x in values:
        if not _number(x) or (isinstance(x, float) and not x.is_integer()):
            return f"{key} = {x!r} is not an integer"
        if not floor <= int(x) <= hi:
            return f"{key} = {int(x)} is outside {floor}..{hi}"
    return None


def problems(arch: str | None, fields: dict) -> list[str]:
    """What in ``fields`` (GGUF key -> value) is out of llama.cpp's domain, one line each."""
    if not arch:
        return []
    prefix = f"{arch}."
    found: list[str] = []
    for key, v in fields.items():
        if not key.startswith(prefix):
            continue
        short = key[len(prefix) :]
        if short in _POSITIVE:
            p = _float_problem(key, v, "positive")
        elif short in _FINITE:
            p = _float_problem(key, v, "finite")
        elif short in _SOFTCAPS:
            p = _float_problem(key, v, "softcap")
        elif short in _DIMS:
            p = _dim_problem(key, v, *_DIMS[short])
        else:
            p = None
        if p:
            found.append(p)
    return found + _head_problems(arch, fields)


def _whole(v) -> int | None:
    return int(v) if _number(v) and math.isfinite(v) and float(v).is_integer() else None


def _head_problems(arch: str, fields: dict) -> list[str]:
    """Rope width and value head size against the key head size: the graphs assert them at decode."""
    p = f"{arch}."
    head = _whole(fields.get(p + "attention.key_length"))
    n_embd, n_head = _whole(fields.get(p + "embedding_length")), _whole(fields.get(p + "attention.head_count"))
    if head is None and n_embd and n_head and n_head > 0:
        head = n_embd // n_head
    if not head or head <= 0:
        return []  # the dimension rules above name a missing or bad head size
    found = []
    rot, v = fields.get(p + "rope.dimension_count"), _whole(fields.get(p + "attention.value_length"))
    rot = _whole(rot) if rot is not None else None
    uses_rope = arch == "dflash" or arch in facts.ROPE_WHOLE_HEAD
    if rot is not None and (rot > head or (rot < 1 and uses_rope) or rot % 2):
        # ggml's rope kernels assert an even width (ggml-cpu ops.cpp: n_dims % 2 == 0)
        found.append(
            f"{p}rope.dimension_count = {rot} must be even and within {1 if uses_rope else 0}..{head} (the head size)"
        )
    elif rot is not None and arch in facts.ROPE_WHOLE_HEAD and rot != head:
        found.append(
            f"{p}rope.dimension_count = {rot} must equal the head size {head}: llama.cpp's {arch} graph "
            "asserts it at the first decode"
        )
    if v is not None and v != head and (arch == "dflash" or arch in facts.ROPE_WHOLE_HEAD):
        found.append(
            f"{p}attention.value_length = {v} must equal the key head size {head}: llama.cpp's {arch} "
            "graph asserts it at the first decode"
        )
    return found
