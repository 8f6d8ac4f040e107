"""A DFlash drafter GGUF read back into the trainer's weights, for a warm start (``--init D.gguf``).

A shipped drafter exists only as its GGUF (q8_0 matrices, f32 norms): the f16 shards of the run
that made it stay on the GPU machine. Reading the GGUF back lets a later sitting continue training
the drafter users have rather than start again. Matrices are dequantised (q8_0 keeps ~0.4 % of
each weight's scale: a starting point, not a bit-exact copy); the header's shape keys must equal
the run's ``DrafterConfig``, or the warm start is refused with the differing fields named.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..models.dflash_names import gguf_to_hf

# DrafterConfig field -> GGUF key (the converter writes these; engine_bridge/models/convert.py)
_CONFIG_KEYS = {
    "n_embd": "dflash.embedding_length",
    "n_layer": "dflash.block_count",
    "n_head": "dflash.attention.head_count",
    "n_head_kv": "dflash.attention.head_count_kv",
    "head_dim": "dflash.attention.key_length",
    "n_ff": "dflash.feed_forward_length",
    "block_size": "dflash.block_size",
    "target_layers": "dflash.target_layers",
    "mask_token_id": "tokenizer.ggml.mask_token_id",
}


def _field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    v = f.contents()
    return [int(x) for x in v] if isinstance(v, list) else v


def read_drafter_gguf(path: str | Path) -> tuple[dict[str, np.ndarray], dict]:
    """(float32 weights under the trainer's Hugging Face names, the config fields the header holds).
    Tensors the trainer does not own (a drafter with its own token_embd / output) are left out."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    r = GGUFReader(str(path))
    if _field(r, "general.architecture") != "dflash":
        raise ValueError(
            f"{path} is not a DFlash drafter (general.architecture is {_field(r, 'general.architecture')!r})"
        )
    cfg = {k: _field(r, key) for k, key in _CONFIG_KEYS.items()}
    state: dict[str, np.ndarray] = {}
    for t in r.tensors:
        name = gguf_to_hf(t.name)
        if name is None or name in ("embed_tokens.weight", "lm_head.weight"):
            continue
        shape = tuple(int(x) for x in reversed(t.shape))  # ggml {in, out} -> torch (out, in)
        # np.array copies: torch wants a writable array, and the reader's is a read-only memory map
        state[name] = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
    return state, cfg


def config_mismatch(gguf_cfg: dict, run_cfg: dict) -> list[str]:
    """'field: file X, run Y' for every header field that differs from the run's configuration."""
    out = []
    for k, v in gguf_cfg.items():
        want = run_cfg.get(k)
        if v is not None and want is not None and v != want:  # lists are lists on both sides (_field)
            out.append(f"{k}: file {v}, run {want}")
    return out


def drafter_from_gguf(path: str | Path, target):
    """The PyTorch drafter of a DFlash GGUF, ready to draft (eval mode, f32) beside ``target`` (a
    ``gguf_target`` model): the header has no rope base or norm epsilon, so both come from the target,
    as the trainer takes them."""
    import torch

    from .drafter_model import DFlashDrafter, DrafterConfig

    arrays, hdr = read_drafter_gguf(path)
    cfg = DrafterConfig(
        **{k: v for k, v in hdr.items() if v is not None}, rope_theta=target.c.rope_theta, rms_eps=target.c.rms_eps
    )
    drafter = DFlashDrafter(cfg)
    drafter.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()})
    return drafter.eval()
