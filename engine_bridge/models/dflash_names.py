"""How DFlash drafter tensors are named in a Hugging Face checkpoint and in a GGUF file.

Read from llama.cpp's gguf-py ``tensor_mapping.py`` (``model.fc``, ``model.hidden_norm``,
``model.markov_head.*``, ``model.confidence_head.proj``) and the z-lab checkpoints, which store
the names without the ``model.`` prefix (the upstream converter adds it). Shapes need no
transposition: HF ``Linear`` weights are (out, in), which is ggml's ``{in, out}``.
"""

from __future__ import annotations

import re

#: Whole-model tensors: HF name (without "model.") -> GGUF name.
GLOBAL_NAMES = {
    "fc.weight": "fc.weight",
    "hidden_norm.weight": "enc.output_norm.weight",
    "norm.weight": "output_norm.weight",
    "markov_head.markov_w1.weight": "markov_w1.weight",
    "markov_head.markov_w2.weight": "markov_w2.weight",
    "confidence_head.proj.weight": "conf_proj.weight",
    "confidence_head.proj.bias": "conf_proj.bias",
    "embed_tokens.weight": "token_embd.weight",
    "lm_head.weight": "output.weight",
}

#: Per-layer tensors: HF suffix after "layers.N." -> GGUF suffix after "blk.N.".
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}

_LAYER_RE = re.compile(r"^layers\.(\d+)\.(.+)$")
_BLK_RE = re.compile(r"^blk\.(\d+)\.(.+)$")


def hf_to_gguf(name: str) -> str | None:
    """The GGUF name of an HF drafter tensor, or None for one llama.cpp does not use."""
    if name.startswith("model."):
        name = name[len("model.") :]
    if name in GLOBAL_NAMES:
        return GLOBAL_NAMES[name]
    m = _LAYER_RE.match(name)
    if m and m.group(2) in LAYER_NAMES:
        return f"blk.{m.group(1)}.{LAYER_NAMES[m.group(2)]}"
    return None


def gguf_to_hf(name: str) -> str | None:
    for hf, gg in GLOBAL_NAMES.items():
        if gg == name:
            return hf
    m = _BLK_RE.match(name)
    if m:
        for hf, gg in LAYER_NAMES.items():
            if gg == m.group(2):
                return f"layers.{m.group(1)}.{hf}"
    return None


def layer_index(gguf_name: str) -> int | None:
    m = _BLK_RE.match(gguf_name)
    return int(m.group(1)) if m else None


def is_norm_or_vector(gguf_name: str, ne: tuple[int, ...]) -> bool:
    """Norms, biases and other 1-D tensors: kept F32 by every converter and quantiser."""
    return len(ne) <= 1 or gguf_name.endswith("_norm.weight") or gguf_name.endswith(".bias")
