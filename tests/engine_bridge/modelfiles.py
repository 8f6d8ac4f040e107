"""Writers for the model files the model-library tests need beyond what synth makes.

* ``rewrite_gguf``: a copy of a GGUF with metadata keys changed, dropped or the architecture
  renamed, tensors dropped: how the broken corpus is made from one good pair.
* ``write_lora``: a real LoRA adapter GGUF (general.type adapter, lora_a / lora_b pairs).
* ``write_hf_drafter``: an HF DFlash folder in the z-lab layout (config.json with dflash_config +
  model.safetensors with HF names) holding exactly the weights synth writes into a drafter GGUF.
* ``fast_vocab``: synth reads its vocabulary with gguf.GGUFReader (about 2 s for GPT-2); tests
  that write many files patch in a cached copy.
"""

from __future__ import annotations

import contextlib
import functools
import json
import struct
from pathlib import Path

import numpy as np
from gguf import GGUFValueType, GGUFWriter

from engine_bridge.models import dflash_names, synth
from engine_bridge.models.convert_quant import copy_fields
from engine_bridge.models.gguf_header import read_header


@contextlib.contextmanager
def fast_vocab():
    original = synth._load_vocab
    synth._load_vocab = functools.lru_cache(maxsize=4)(original)
    try:
        yield
    finally:
        synth._load_vocab = original


def _typed(value):
    if isinstance(value, bool):
        return value, GGUFValueType.BOOL
    if isinstance(value, int):
        return value, GGUFValueType.UINT32 if value >= 0 else GGUFValueType.INT32
    if isinstance(value, float):
        return value, GGUFValueType.FLOAT32
    if isinstance(value, str):
        return value, GGUFValueType.STRING
    raise TypeError(value)


def rewrite_gguf(
    src,
    dst,
    *,
    set_kv: dict | None = None,
    drop_kv=(),
    arch: str | None = None,
    drop_tensors=(),
    set_arrays: dict | None = None,
) -> Path:
    """Copy of ``src`` with edits; tensor data is copied byte for byte."""
    hdr = read_header(src)
    old_arch = hdr.fields["general.architecture"]
    new_arch = arch or old_arch
    writer = GGUFWriter(str(dst), new_arch)
    renamed = {}
    for key in list(hdr.types):
        if arch and key.startswith(old_arch + "."):
            renamed[key] = new_arch + key[len(old_arch) :]
    skip = set(drop_kv) | set(renamed) | set((set_kv or {}).keys()) | set((set_arrays or {}).keys())
    copy_fields(writer, hdr, skip=skip)
    for old, new in renamed.items():
        if old in drop_kv:
            continue
        vtype, elem = hdr.types[old]
        value = hdr.value(old)
        if vtype == GGUFValueType.ARRAY:
            writer.add_key_value(new, list(value), GGUFValueType(vtype), sub_type=GGUFValueType(elem))
        else:
            writer.add_key_value(new, value, GGUFValueType(vtype))
    for key, value in (set_kv or {}).items():
        v, t = _typed(value)
        writer.add_key_value(key, v, t)
    for key, values in (set_arrays or {}).items():
        writer.add_array(key, list(values))
    for name, t in hdr.tensors.items():
        if name in drop_tensors:
            continue
        raw = np.frombuffer(hdr.tensor_bytes(name), dtype=np.uint8)
        if t.type_name in ("F32", "F16"):
            arr = raw.view(np.float32 if t.type_name == "F32" else np.float16).reshape(t.shape)
            writer.add_tensor(name, arr)
        else:
            from gguf import GGMLQuantizationType, quants

            qt = GGMLQuantizationType(t.ggml_type)
            writer.add_tensor(name, raw.reshape(quants.quant_shape_to_byte_shape(t.shape, qt)), raw_dtype=qt)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(dst)


def truncate_copy(src, dst, cut_bytes: int) -> Path:
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[: len(data) - cut_bytes])
    return Path(dst)


def write_lora(
    path,
    drafter,
    *,
    tensors=("blk.0.attn_q.weight", "blk.0.attn_v.weight"),
    rank: int = 4,
    arch: str = "dflash",
    alpha: float | None = 8.0,
    wrong_shape: bool = False,
    seed: int = 0,
) -> Path:
    """A LoRA adapter GGUF for the tensors of ``drafter`` (shapes read from its header)."""
    hdr = read_header(drafter)
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    if alpha is not None:
        w.add_float32("adapter.lora.alpha", alpha)
    for name in tensors:
        out_f, in_f = hdr.tensors[name].shape if name in hdr.tensors else (32, 32)
        if wrong_shape:
            in_f += 1
        w.add_tensor(name + ".lora_a", (0.01 * rng.standard_normal((rank, in_f))).astype(np.float32))
        w.add_tensor(name + ".lora_b", (0.01 * rng.standard_normal((out_f, rank))).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, round to nearest even (what torch does)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors: dict[str, tuple[np.ndarray, str]]) -> Path:
    header, blobs, offset = {}, [], 0
    for name, (arr, dtype) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)
    return Path(path)


def write_hf_drafter(
    folder,
    tspec: synth.TargetSpec,
    dspec: synth.DrafterSpec,
    *,
    dtype: str = "F32",
    rope: str = "top",
    layer_types=None,
    use_sliding_window=None,
    sliding_window=None,
    config_overrides: dict | None = None,
    drop_config=(),
) -> Path:
    """An HF DFlash folder with synth's drafter weights (the same tensors write_drafter writes).

    rope: "top" (rope_theta at the top level), "nested" (under rope_parameters) or "missing".
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = synth._load_vocab(tspec.vocab)
    n_vocab = synth._n_vocab(tok)
    weights = synth.drafter_weights(dspec, tspec, n_vocab)
    st = {}
    for gname, arr in weights.items():
        hf = dflash_names.gguf_to_hf(gname)
        assert hf is not None, gname
        a = np.asarray(arr, dtype=np.float32)
        if dtype == "F32":
            st[hf] = (a, "F32")
        elif dtype == "F16":
            st[hf] = (np.asarray(arr).astype(np.float16), "F16")  # one rounding, as synth does
        else:
            st[hf] = (to_bf16_bits(a), "BF16")
    write_safetensors(folder / "model.safetensors", st)

    layers = dspec.target_layers or synth.default_target_layers(tspec.n_layer)
    mask = (
        dspec.mask_token_id
        if dspec.mask_token_id is not None
        else (tspec.mask_token_id if tspec.mask_token_id is not None else synth.default_mask_token(n_vocab))
    )
    cfg = {
        "architectures": ["DSparkDraftModel" if dspec.dspark else "DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": dspec.n_embd or tspec.n_embd,
        "num_hidden_layers": dspec.n_layer,
        "num_attention_heads": dspec.n_head or tspec.n_head,
        "num_key_value_heads": dspec.n_head_kv or tspec.n_head_kv,
        "head_dim": dspec.head_dim or tspec.head_dim,
        "intermediate_size": dspec.n_ff or tspec.n_ff,
        "max_position_embeddings": tspec.n_ctx,
        "rms_norm_eps": dspec.rms_eps,
        "vocab_size": n_vocab,
        "hidden_act": "silu",
        "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype],
        "num_target_layers": tspec.n_layer,
        "block_size": dspec.block_size,
        "dflash_config": {"mask_token_id": mask, "target_layer_ids": [i - 1 for i in layers]},
    }
    if dspec.dspark:
        cfg["sample_from_anchor"] = True
    if rope == "top":
        cfg["rope_theta"] = dspec.rope_theta
    elif rope == "nested":
        cfg["rope_parameters"] = {"rope_theta": dspec.rope_theta, "rope_type": "default"}
    if layer_types is not None:
        cfg["layer_types"] = list(layer_types)
    if use_sliding_window is not None:
        cfg["use_sliding_window"] = use_sliding_window
    if sliding_window is not None:
        cfg["sliding_window"] = sliding_window
    cfg.update(config_overrides or {})
    for k in drop_config:
        cfg.pop(k, None)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder
