"""Writes small, real GGUF models: llama-family targets and DFlash / DSpark drafters.

They serve three purposes: the test fixtures (real llama.cpp on real files), the embedded demo
pair until a trained pair exists, and large random-weight models for GPU speed runs (speed does
not depend on the weights).

Random weights accept almost nothing, so a target can be given *structure* that a drafter can
partly predict, while staying context-dependent (so a KV-cache bug changes its output):

* Tokens fall into ``n_classes`` classes (``token % n_classes``). Every token embedding carries
  its class direction; the lm_head rows of class ``k`` point at the class that precedes ``k`` in
  a class map. The target therefore always emits a token of class ``class_map[c(last)]``.
* Inside that class one "hub" token gets a bonus, and random lm_head rows plus real, random
  attention / FFN layers decide between the hub and the rest: which token wins depends on the
  context, so the target is a real sequence model, not a bigram table.
* The class map flows into a 2-cycle that contains the class the drafter predicts. A drafter
  with small layers predicts, at every block position, the target's own choice after the mask
  token (it shares the target's embeddings and lm_head): the hub of that class. So drafts are
  accepted on some steps, partly, and rejected on others — exactly what losslessness and KV
  rollback tests need. ``structured=False`` gives plain random weights.

Tensors are written in the ggml layout with numpy shapes (rows = output features).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..common.resources import vocab_path

#: A ChatML-style template written into generated "instruct" targets.
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TOKENIZER_PREFIX = "tokenizer."


@dataclass
class TargetSpec:
    arch: str = "qwen3"  # qwen3 | llama | qwen2 (adds Q/K/V biases) | any arch with the same tensor set
    vocab: str = "gpt2"  # a name under resources/vocab, or a path to a vocab GGUF
    n_embd: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 128
    n_ctx: int = 4096
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    dtype: str = "f32"  # f32 | f16 for matrices (norms stay f32)
    seed: int = 0
    chat_template: str | None = CHATML_TEMPLATE
    structured: bool = True
    n_classes: int = 8
    layer_scale: float = 0.6  # size of the layers' residual contribution
    hub_bonus: float = 2.0  # how strongly each class prefers its hub tokens
    n_hubs: int = 2  # 1 or 2 preferred tokens per class
    mask_token_id: int | None = None  # the token the drafter uses as mask (default: last id - 1)
    name: str = "dflash-studio tiny target"
    extra_kv: dict = field(default_factory=dict)
    tied_output: bool = False  # no output.weight: llama.cpp reads token_embd as the lm_head


@dataclass
class DrafterSpec:
    n_layer: int = 1
    n_head: int | None = None  # default: the target's
    n_head_kv: int | None = None
    head_dim: int | None = None
    n_ff: int | None = None
    n_embd: int | None = None  # must equal the target's; settable to build bad pairs
    target_layers: tuple[int, ...] | None = None  # GGUF ids (HF id + 1); default spread over the target
    block_size: int = 16
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    dtype: str = "f32"
    seed: int = 1
    draft_scale: float = 0.05  # layer weights small: the drafter predicts the target's choice
    mask_token_id: int | None = None  # default: the target spec's
    with_mask_token: bool = True
    dspark: bool = False  # add a DSpark Markov head (+ confidence head)
    sliding_window: int = 0  # >0: interleaved sliding-window layers
    sliding_window_pattern: tuple[bool, ...] | None = None
    name: str = "dflash-studio tiny drafter"
    extra_kv: dict = field(default_factory=dict)


@functools.lru_cache(maxsize=4)
def _load_vocab(vocab: str | Path) -> dict:
    """Reads every ``tokenizer.*`` key of a vocab GGUF as (value, gguf value type)."""
    from gguf import GGUFReader, GGUFValueType

    path = vocab_path(vocab) if not Path(str(vocab)).exists() else Path(vocab)
    reader = GGUFReader(path)
    out: dict = {}
    for key, fld in reader.fields.items():
        if not key.startswith(TOKENIZER_PREFIX):
            continue
        vtype = fld.types[0]
        if vtype == GGUFValueType.ARRAY:
            out[key] = (fld.contents(), vtype, fld.types[1])
        else:
            out[key] = (fld.contents(), vtype, None)
    return out


def _n_vocab(tok: dict) -> int:
    return len(tok["tokenizer.ggml.tokens"][0])


def _write_tokenizer(writer, tok: dict, *, mask_token_id: int | None, chat_template: str | None) -> None:
    from gguf import GGUFValueType

    for key, (value, vtype, sub) in tok.items():
        if key == "tokenizer.chat_template":
            continue
        if vtype == GGUFValueType.ARRAY:
            writer.add_key_value(key, value, vtype, sub_type=sub)
        else:
            writer.add_key_value(key, value, vtype)
    if mask_token_id is not None:
        writer.add_uint32("tokenizer.ggml.mask_token_id", int(mask_token_id))
    if chat_template:
        writer.add_string("tokenizer.chat_template", chat_template)


#: Above this many elements, `_randn` tiles one random block instead of drawing every value (set
#: by `tiled_random`): GPU speed does not depend on the values, and drawing the 8 B normals of an
#: 8B-parameter benchmark model took most of the 349 s its writing took on a 16-core GPU machine.
_TILE_ABOVE: int | None = None


@contextlib.contextmanager
def tiled_random(block: int = 1 << 22):
    """Within this block, large random matrices repeat one block of ``block`` normals (speed
    benchmarks on huge shapes only: the values are as random per block, not per matrix)."""
    global _TILE_ABOVE
    old, _TILE_ABOVE = _TILE_ABOVE, int(block)
    try:
        yield
    finally:
        _TILE_ABOVE = old


def _randn(rng: np.random.Generator, shape) -> np.ndarray:
    n = int(np.prod(shape))
    if _TILE_ABOVE is not None and n > _TILE_ABOVE:
        # an odd block length, so consecutive rows do not start on the same value
        block = rng.standard_normal(_TILE_ABOVE | 1, dtype=np.float32)
        out = np.empty(n, dtype=np.float32)
        full = n // block.size
        out[: full * block.size].reshape(full, block.size)[:] = block  # one broadcast copy
        out[full * block.size :] = block[: n - full * block.size]
        return out.reshape(shape)
    return rng.standard_normal(shape, dtype=np.float32)


def _mat(a: np.ndarray, dtype: str) -> np.ndarray:
    return a.astype(np.float16 if dtype == "f16" else np.float32)


def _file_type(dtype: str) -> int:
    return 1 if dtype == "f16" else 0  # LLAMA_FTYPE_MOSTLY_F16 / ALL_F32


def default_mask_token(n_vocab: int) -> int:
    # An ordinary token near the end of the vocabulary, never BOS/EOS of the shipped vocabs.
    return n_vocab - 2


def _class_map(n_classes: int, mask_class: int, rng: np.random.Generator) -> np.ndarray:
    """A map on classes that flows into the 2-cycle {s, s2}, s = map[mask_class]."""
    s = (mask_class + 1) % n_classes
    s2 = (mask_class + 2) % n_classes
    cmap = np.full(n_classes, -1, dtype=np.int64)
    cmap[s], cmap[s2] = s2, s
    attached = [s, s2]
    rest = [k for k in range(n_classes) if k not in (s, s2)]
    rng.shuffle(rest)
    if mask_class in rest:  # the mask's class must lead to s directly
        rest.remove(mask_class)
        cmap[mask_class] = s
        attached.append(mask_class)
    for k in rest:
        cmap[k] = attached[int(rng.integers(len(attached)))]
        attached.append(k)
    return cmap


def target_weights(spec: TargetSpec, n_vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec.seed)
    d, hd, nh, nkv, ff = spec.n_embd, spec.head_dim, spec.n_head, spec.n_head_kv, spec.n_ff
    w: dict[str, np.ndarray] = {}
    mask_id = spec.mask_token_id if spec.mask_token_id is not None else default_mask_token(n_vocab)

    if spec.structured:
        k_cls = spec.n_classes
        basis, _ = np.linalg.qr(_randn(rng, (d, k_cls)))
        U = basis.T  # (classes, d), orthonormal rows
        cls = np.arange(n_vocab) % k_cls
        emb = U[cls] * np.sqrt(d) + 0.5 * _randn(rng, (n_vocab, d))
        cmap = _class_map(k_cls, int(mask_id % k_cls), rng)
        # Row j points at every class k with cmap[k] == c(j): inputs of class k score class c(j).
        pre = np.zeros((k_cls, d))
        for k in range(k_cls):
            pre[cmap[k]] += U[k]
        out = 4.0 * pre[cls] + 0.35 * _randn(rng, (n_vocab, d))
        hubs = np.array([int(rng.integers(n_vocab // k_cls)) * k_cls + k for k in range(k_cls)])
        out[hubs] += spec.hub_bonus * pre[np.arange(k_cls)]
        if spec.n_hubs > 1:
            # A twin per hub: the same row plus a random direction, so which of the two wins depends
            # on the context (the sign of that direction against the hidden state). The drafter
            # ranks them first and second after the mask token; the target prefers either, so a
            # tree verifier that keeps the drafter's runner-up gets tokens accepted a chain misses.
            twins = (hubs + k_cls) % (n_vocab - n_vocab % k_cls)
            out[twins] = out[hubs] + 0.5 * _randn(rng, (k_cls, d))
        layer_out_scale = spec.layer_scale
    else:
        emb = _randn(rng, (n_vocab, d))
        out = _randn(rng, (n_vocab, d)) / np.sqrt(d)
        layer_out_scale = 1.0

    w["token_embd.weight"] = emb
    if not spec.tied_output:
        w["output.weight"] = out
    w["output_norm.weight"] = np.ones(d)
    for i in range(spec.n_layer):
        w.update(
            _block(
                rng, i, d, nh, nkv, hd, ff, layer_out_scale, qk_norm=spec.arch == "qwen3", qkv_bias=spec.arch == "qwen2"
            )
        )
    return w


def _block(
    rng, i: int, d: int, nh: int, nkv: int, hd: int, ff: int, out_scale: float, qk_norm: bool, qkv_bias: bool = False
) -> dict[str, np.ndarray]:
    """One transformer block (attention + SwiGLU FFN); ``out_scale`` sizes its residual writes."""
    p = f"blk.{i}."
    w = {
        p + "attn_norm.weight": np.ones(d),
        p + "attn_q.weight": _randn(rng, (nh * hd, d)) / np.sqrt(d),
        p + "attn_k.weight": _randn(rng, (nkv * hd, d)) / np.sqrt(d),
        p + "attn_v.weight": _randn(rng, (nkv * hd, d)) / np.sqrt(d),
        p + "attn_output.weight": out_scale * _randn(rng, (d, nh * hd)) / np.sqrt(nh * hd),
    }
    if qk_norm:
        w[p + "attn_q_norm.weight"] = np.ones(hd)
        w[p + "attn_k_norm.weight"] = np.ones(hd)
    if qkv_bias:  # qwen2 (build_qkv adds them after the projections)
        w[p + "attn_q.bias"] = 0.5 * _randn(rng, (nh * hd,))
        w[p + "attn_k.bias"] = 0.5 * _randn(rng, (nkv * hd,))
        w[p + "attn_v.bias"] = 0.5 * _randn(rng, (nkv * hd,))
    w[p + "ffn_norm.weight"] = np.ones(d)
    w[p + "ffn_gate.weight"] = _randn(rng, (ff, d)) / np.sqrt(d)
    w[p + "ffn_up.weight"] = _randn(rng, (ff, d)) / np.sqrt(d)
    w[p + "ffn_down.weight"] = out_scale * _randn(rng, (d, ff)) / np.sqrt(ff)
    return w


def _add_tensors(writer, weights: dict[str, np.ndarray], dtype: str) -> None:
    for name, arr in weights.items():
        is_vector = arr.ndim == 1
        writer.add_tensor(name, arr.astype(np.float32) if is_vector else _mat(arr, dtype))


def write_target(path: str | Path, spec: TargetSpec | None = None, **overrides) -> Path:
    """Writes a target GGUF; returns its path."""
    from gguf import GGUFWriter

    spec = dataclasses.replace(spec or TargetSpec(), **overrides)
    tok = _load_vocab(spec.vocab)
    n_vocab = _n_vocab(tok)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    a = spec.arch
    writer = GGUFWriter(str(path), a)
    writer.add_string("general.name", spec.name)
    writer.add_uint32("general.file_type", _file_type(spec.dtype))
    writer.add_uint32(f"{a}.context_length", spec.n_ctx)
    writer.add_uint32(f"{a}.embedding_length", spec.n_embd)
    writer.add_uint32(f"{a}.block_count", spec.n_layer)
    writer.add_uint32(f"{a}.feed_forward_length", spec.n_ff)
    writer.add_uint32(f"{a}.attention.head_count", spec.n_head)
    writer.add_uint32(f"{a}.attention.head_count_kv", spec.n_head_kv)
    writer.add_uint32(f"{a}.attention.key_length", spec.head_dim)
    writer.add_uint32(f"{a}.attention.value_length", spec.head_dim)
    writer.add_uint32(f"{a}.rope.dimension_count", spec.head_dim)
    writer.add_float32(f"{a}.rope.freq_base", spec.rope_theta)
    writer.add_float32(f"{a}.attention.layer_norm_rms_epsilon", spec.rms_eps)
    writer.add_uint32(f"{a}.vocab_size", n_vocab)
    for k, v in spec.extra_kv.items():
        _add_any(writer, k, v)
    _write_tokenizer(writer, tok, mask_token_id=None, chat_template=spec.chat_template)
    _add_tensors(writer, target_weights(spec, n_vocab), spec.dtype)
    _finish(writer)
    return path


def default_target_layers(n_target_layers: int, n: int = 2) -> tuple[int, ...]:
    """GGUF target layer ids (HF id + 1) spread over the target, each below its layer count."""
    n = max(1, min(n, n_target_layers - 1))
    ids = np.linspace(1, n_target_layers - 1, n).round().astype(int)
    return tuple(int(i) for i in sorted(set(ids)))


def drafter_weights(spec: DrafterSpec, tspec: TargetSpec, n_vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec.seed)
    d = spec.n_embd or tspec.n_embd
    nh = spec.n_head or tspec.n_head
    nkv = spec.n_head_kv or tspec.n_head_kv
    hd = spec.head_dim or tspec.head_dim
    ff = spec.n_ff or tspec.n_ff
    layers = spec.target_layers or default_target_layers(tspec.n_layer)
    w: dict[str, np.ndarray] = {
        "fc.weight": _randn(rng, (d, len(layers) * tspec.n_embd)) / np.sqrt(len(layers) * tspec.n_embd),
        "enc.output_norm.weight": np.ones(d),
        "output_norm.weight": np.ones(d),
    }
    for i in range(spec.n_layer):
        w.update(_block(rng, i, d, nh, nkv, hd, ff, spec.draft_scale, qk_norm=True))
    if spec.dspark:
        rank = 16
        w["markov_w1.weight"] = 0.01 * _randn(rng, (n_vocab, rank))
        w["markov_w2.weight"] = 0.01 * _randn(rng, (n_vocab, rank))
        w["conf_proj.weight"] = _randn(rng, (1, d + rank)) / np.sqrt(d + rank)
        w["conf_proj.bias"] = np.array([2.0])
    return w


def write_drafter(
    path: str | Path, target: TargetSpec | None = None, spec: DrafterSpec | None = None, **overrides
) -> Path:
    """Writes a DFlash (or DSpark) drafter GGUF for a target written from ``target``."""
    from gguf import GGUFWriter

    tspec = target or TargetSpec()
    spec = dataclasses.replace(spec or DrafterSpec(), **overrides)
    tok = _load_vocab(tspec.vocab)
    n_vocab = _n_vocab(tok)
    d = spec.n_embd or tspec.n_embd
    nh = spec.n_head or tspec.n_head
    nkv = spec.n_head_kv or tspec.n_head_kv
    hd = spec.head_dim or tspec.head_dim
    ff = spec.n_ff or tspec.n_ff
    layers = spec.target_layers or default_target_layers(tspec.n_layer)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), "dflash")
    writer.add_string("general.name", spec.name)
    writer.add_uint32("general.file_type", _file_type(spec.dtype))
    writer.add_uint32("dflash.context_length", tspec.n_ctx)
    writer.add_uint32("dflash.embedding_length", d)
    writer.add_uint32("dflash.block_count", spec.n_layer)
    writer.add_uint32("dflash.feed_forward_length", ff)
    writer.add_uint32("dflash.attention.head_count", nh)
    writer.add_uint32("dflash.attention.head_count_kv", nkv)
    writer.add_uint32("dflash.attention.key_length", hd)
    writer.add_uint32("dflash.attention.value_length", hd)
    writer.add_float32("dflash.rope.freq_base", spec.rope_theta)
    writer.add_float32("dflash.attention.layer_norm_rms_epsilon", spec.rms_eps)
    writer.add_array("dflash.target_layers", [int(x) for x in layers])
    writer.add_uint32("dflash.block_size", spec.block_size)
    if spec.sliding_window:
        pattern = spec.sliding_window_pattern or tuple(i % 2 == 0 for i in range(spec.n_layer))
        writer.add_uint32("dflash.attention.sliding_window", spec.sliding_window)
        writer.add_array("dflash.attention.sliding_window_pattern", [bool(x) for x in pattern])
    if spec.dspark:
        writer.add_bool("dflash.sample_from_anchor", True)
        writer.add_bool("dflash.has_confidence_head", True)
    for k, v in spec.extra_kv.items():
        _add_any(writer, k, v)
    mask = None
    if spec.with_mask_token:
        mask = (
            spec.mask_token_id
            if spec.mask_token_id is not None
            else (tspec.mask_token_id if tspec.mask_token_id is not None else default_mask_token(n_vocab))
        )
    _write_tokenizer(writer, tok, mask_token_id=mask, chat_template=tspec.chat_template)
    _add_tensors(writer, drafter_weights(spec, tspec, n_vocab), spec.dtype)
    _finish(writer)
    return path


def write_pair(
    folder: str | Path, target: TargetSpec | None = None, drafter: DrafterSpec | None = None, stem: str = "tiny"
) -> tuple[Path, Path]:
    """Writes ``<stem>-target.gguf`` and ``<stem>-dflash.gguf`` into ``folder``."""
    folder = Path(folder)
    tspec = target or TargetSpec()
    t = write_target(folder / f"{stem}-target.gguf", tspec)
    d = write_drafter(folder / f"{stem}-dflash.gguf", tspec, drafter or DrafterSpec())
    return t, d


def write_drafter_for(target: str | Path, path: str | Path, spec: DrafterSpec | None = None, **overrides) -> Path:
    """A random-weight DFlash drafter shaped for an existing target GGUF (its width, heads, layers for
    the target layer ids) that carries the target's own tokenizer, so the pairing checks pass. Its
    drafts are noise: it serves losslessness and loading tests on real targets (e.g. SmolLM2)."""
    from .modelinfo import inspect_model

    t = inspect_model(target)
    if (
        t.n_embd is None
        or t.n_layer is None
        or t.n_head is None
        or t.n_head_kv is None
        or t.head_dim is None
        or t.n_ff is None
    ):
        raise ValueError(f"{target}: its header lacks the dimensions a drafter is shaped by")
    tspec = TargetSpec(
        arch=t.arch or "llama",
        vocab=str(target),
        n_embd=t.n_embd,
        n_layer=t.n_layer,
        n_head=t.n_head,
        n_head_kv=t.n_head_kv,
        head_dim=t.head_dim,
        n_ff=t.n_ff,
        n_ctx=t.context_length or 4096,
        rope_theta=t.rope_theta or 10000.0,
        chat_template=None,
    )
    spec = spec or DrafterSpec(name=f"synthetic drafter for {Path(target).name}", rope_theta=t.rope_theta or 10000.0)
    return write_drafter(path, tspec, spec, **overrides)


def _add_any(writer, key: str, value) -> None:
    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_uint32(key, value) if value >= 0 else writer.add_int32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    elif isinstance(value, (list, tuple)):
        writer.add_array(key, list(value))
    else:
        raise TypeError(f"cannot write {key}={value!r} into GGUF")


def _finish(writer) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_lora(
    path: str | Path,
    target: TargetSpec | None = None,
    drafter: DrafterSpec | None = None,
    *,
    rank: int = 4,
    scale: float = 1.0,
    seed: int = 7,
    arch: str = "dflash",
    modules: tuple[str, ...] = ("attn_q", "attn_k", "attn_v", "attn_output"),
    n_embd: int | None = None,
) -> Path:
    """Writes a LoRA adapter GGUF for a drafter made from (target, drafter) specs.

    ``scale`` sizes the update (B @ A) relative to the base weights; ``arch`` and ``n_embd`` can be
    set to something else to build an adapter for another model.
    """
    from gguf import GGUFWriter

    tspec, dspec = target or TargetSpec(), drafter or DrafterSpec()
    rng = np.random.default_rng(seed)
    d = n_embd or dspec.n_embd or tspec.n_embd
    nh = dspec.n_head or tspec.n_head
    nkv = dspec.n_head_kv or tspec.n_head_kv
    hd = dspec.head_dim or tspec.head_dim
    out_dims = {"attn_q": nh * hd, "attn_k": nkv * hd, "attn_v": nkv * hd, "attn_output": d}
    in_dims = {"attn_q": d, "attn_k": d, "attn_v": d, "attn_output": nh * hd}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), arch)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))
    writer.add_string("general.name", f"dflash-studio tiny LoRA r{rank}")
    for i in range(dspec.n_layer):
        for m in modules:
            a = _randn(rng, (rank, in_dims[m])) / np.sqrt(in_dims[m])
            b = scale * _randn(rng, (out_dims[m], rank)) / np.sqrt(rank)
            writer.add_tensor(f"blk.{i}.{m}.weight.lora_a", a.astype(np.float32))
            writer.add_tensor(f"blk.{i}.{m}.weight.lora_b", b.astype(np.float32))
    _finish(writer)
    return path
