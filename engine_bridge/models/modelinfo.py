"""Inspection of a model from its headers alone: GGUF files and Hugging Face folders.

``inspect_model(path)`` reads metadata and the tensor directory (never tensor data), works out
what the file is (target, DFlash or DSpark drafter, LoRA adapter), its dimensions, tokenizer,
rope, sliding-window layout and whether its data is all there. It is cache-free: the library
caches results keyed on path, size and mtime.

A drafter's dimensions come from its own tensor shapes, never from its target (field report 000:
a Qwen3.6 drafter has head_dim 128 where its target has 256); the metadata is cross-checked
against the shapes and every disagreement is listed in ``dim_mismatches``.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from . import dflash_names, header_values
from . import llama_facts as facts
from ..common.errors import UnreadableModelError
from .gguf_header import GGUFHeader, GGUFHeaderError, read_header

ROLE_TARGET = "target"
ROLE_DFLASH = "dflash"  # DFlash drafter
ROLE_DSPARK = "dspark"  # DFlash drafter with a DSpark Markov head
ROLE_LORA = "lora"  # LoRA adapter
ROLE_UNKNOWN = "unknown"
DRAFTER_ROLES = (ROLE_DFLASH, ROLE_DSPARK)

#: HF ``model_type`` -> llama.cpp architecture name (the ones a DFlash pair is likely to meet).
HF_ARCH = {
    "llama": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3moe",
    "qwen3_next": "qwen3next",
    "qwen3_5": "qwen35",
    "qwen3_5_moe": "qwen35moe",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",
    "gemma4": "gemma4",
    "gemma4_text": "gemma4",
    "gpt_oss": "gpt-oss",
    "mistral": "llama",
    "phi3": "phi3",
    "lfm2": "lfm2",
}

_SAFETENSORS_DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
}


@dataclass
class TensorSummary:
    name: str
    shape: tuple[int, ...]  # numpy order (rows first)
    dtype: str


@dataclass
class ModelInfo:
    path: str
    format: str  # gguf | hf
    size_bytes: int
    mtime: float
    role: str = ROLE_UNKNOWN
    arch: str | None = None
    name: str | None = None
    n_params: int = 0
    quant_types: dict[str, int] = field(default_factory=dict)  # dtype -> number of tensors
    file_type: int | None = None
    context_length: int | None = None
    n_layer: int | None = None
    n_embd: int | None = None
    n_head: int | None = None
    n_head_kv: int | None = None
    head_dim: int | None = None
    head_dim_v: int | None = None
    n_ff: int | None = None
    rope_theta: float | None = None
    rope_scaling: dict | None = None
    sliding_window: int | None = None
    sliding_window_pattern: tuple[bool, ...] | None = None  # per layer: True = sliding
    layer_types: tuple[str, ...] | None = None  # HF layer_types, as written
    use_sliding_window: bool | None = None  # HF flag (None: not stated)
    kv_lora_rank: int | None = None  # MLA models: K and V types must match
    embedding_scale: float | None = None  # <arch>.embedding_scale (drafters: dflash.embedding_scale)
    final_logit_softcapping: float | None = None  # <arch>.final_logit_softcapping (absent: none)
    # tokenizer
    tokenizer_model: str | None = None
    tokenizer_pre: str | None = None
    vocab_size: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    tokens_hash: str | None = None  # sha256 of the serialised token list
    has_chat_template: bool = False
    chat_template_hash: str | None = None
    mask_token_id: int | None = None
    mask_token: str | None = None
    # drafter
    block_size: int | None = None
    target_layers: tuple[int, ...] | None = None  # GGUF convention: HF target_layer_ids + 1
    fc_in: int | None = None  # fc.weight input width = captured layers x hidden
    captured_layers: int | None = None  # fc_in / n_embd, from the tensor shape
    dspark: bool = False
    markov_rank: int | None = None
    markov_vocab: int | None = None
    has_confidence_head: bool = False
    sample_from_anchor: bool | None = None
    dflash2: bool = False
    # LoRA adapter
    adapter_type: str | None = None
    lora_alpha: float | None = None
    lora_pairs: dict[str, dict] = field(default_factory=dict)  # base tensor -> {"a": shape, "b": shape}
    # integrity and consistency
    data_complete: bool = True
    data_expected_bytes: int | None = None
    dims_from_tensors: dict[str, int] = field(default_factory=dict)
    dim_mismatches: list[str] = field(default_factory=list)
    value_problems: list[str] = field(default_factory=list)  # header values out of llama.cpp's domain
    tensor_names: tuple[str, ...] = ()
    tensor_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # numpy order
    notes: list[str] = field(default_factory=list)

    @property
    def is_drafter(self) -> bool:
        return self.role in DRAFTER_ROLES

    @property
    def size_gib(self) -> float:
        return self.size_bytes / 2**30

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tensor_names"] = len(self.tensor_names)  # counts, not thousands of names
        d.pop("tensor_shapes")
        d["lora_pairs"] = len(self.lora_pairs)
        return d

    def to_record(self) -> dict:
        """Everything, JSON-ready (the library's cache); from_record() restores it exactly."""
        d = asdict(self)
        d["tensor_shapes"] = {k: list(v) for k, v in self.tensor_shapes.items()}
        return d

    @classmethod
    def from_record(cls, d: dict) -> "ModelInfo":
        d = dict(d)
        for key in ("sliding_window_pattern", "layer_types", "target_layers", "tensor_names"):
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        d["tensor_shapes"] = {k: tuple(v) for k, v in (d.get("tensor_shapes") or {}).items()}
        d["lora_pairs"] = {k: {p: tuple(s) for p, s in v.items()} for k, v in (d.get("lora_pairs") or {}).items()}
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def summary_lines(self) -> list[str]:
        """A human-readable report, one fact a line (the CLI's ``inspect``)."""
        L = [f"{self.path}", f"  role            {self.role}   format {self.format}   arch {self.arch}"]
        L.append(f"  size            {self.size_bytes / 2**20:.1f} MiB   params {self.n_params:,}")
        if self.quant_types:
            L.append("  tensor types    " + ", ".join(f"{k} x{v}" for k, v in sorted(self.quant_types.items())))
        L.append(
            f"  layers {self.n_layer}  hidden {self.n_embd}  heads {self.n_head}/{self.n_head_kv} kv"
            f"  head_dim {self.head_dim}  n_ff {self.n_ff}  ctx {self.context_length}"
        )
        L.append(
            f"  rope theta      {self.rope_theta}" + (f"  scaling {self.rope_scaling}" if self.rope_scaling else "")
        )
        if self.sliding_window:
            n_swa = sum(self.sliding_window_pattern or ())
            L.append(f"  sliding window  {self.sliding_window} on {n_swa}/{self.n_layer} layers")
        L.append(
            f"  tokenizer       {self.tokenizer_model} ({self.tokenizer_pre}) vocab {self.vocab_size}"
            f" bos {self.bos_token_id} eos {self.eos_token_id} hash {(self.tokens_hash or '-')[:12]}"
        )
        L.append(f"  chat template   {'yes' if self.has_chat_template else 'no'}")
        if self.is_drafter:
            L.append(
                f"  block size      {self.block_size}   target layers {list(self.target_layers or ())}"
                f"   captured (fc) {self.captured_layers}"
            )
            L.append(
                f"  mask token      {self.mask_token_id} {self.mask_token!r}"
                if self.mask_token_id is not None
                else "  mask token      MISSING"
            )
            if self.dspark:
                L.append(
                    f"  DSpark          markov rank {self.markov_rank}, confidence head "
                    f"{'yes' if self.has_confidence_head else 'no'}, sample_from_anchor {self.sample_from_anchor}"
                )
        if self.role == ROLE_LORA:
            L.append(f"  adapter         {self.adapter_type} alpha {self.lora_alpha} on {len(self.lora_pairs)} tensors")
        L.append(
            "  data            "
            + (
                "complete"
                if self.data_complete
                else f"TRUNCATED: needs {self.data_expected_bytes:,} bytes, has {self.size_bytes:,}"
            )
        )
        for m in self.dim_mismatches:
            L.append(f"  MISMATCH        {m}")
        for n in self.notes:
            L.append(f"  note            {n}")
        return L


def inspect_model(path: str | os.PathLike) -> ModelInfo:
    """Headers-only inspection of a GGUF file or an HF folder; UnreadableModelError otherwise."""
    p = Path(path)
    try:
        if p.is_dir():
            return _inspect_hf(p)
        if not p.exists():
            raise UnreadableModelError(f"{p}: no such file or folder", p)
        if p.suffix == ".json" or p.suffix == ".safetensors":
            return _inspect_hf(p.parent)
        return _inspect_gguf(p)
    except UnreadableModelError:
        raise
    except (GGUFHeaderError, OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        raise UnreadableModelError(f"{p}: {exc}", p) from exc


# --------------------------------------------------------------------------------------------
# GGUF


def _int(v) -> int | None:
    # a float header value that is not finite (block_count = inf) has no integer; header_values names it
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _str(v) -> str | None:
    # a header string field that holds another type (a number, an array) names nothing
    return v if isinstance(v, str) else None


def _inspect_gguf(p: Path) -> ModelInfo:
    h = read_header(p)
    st = p.stat()
    f = h.fields
    arch = _str(f.get("general.architecture"))
    a = arch or ""
    info = ModelInfo(
        path=str(p),
        format="gguf",
        size_bytes=st.st_size,
        mtime=st.st_mtime,
        arch=arch,
        name=_str(f.get("general.name")),
        file_type=_int(f.get("general.file_type")),
    )
    _gguf_tensors(info, h)
    _gguf_role(info, h)

    info.context_length = _int(f.get(f"{a}.context_length"))
    meta = {
        "n_layer": _int(f.get(f"{a}.block_count")),
        "n_embd": _int(f.get(f"{a}.embedding_length")),
        "n_head": _int(f.get(f"{a}.attention.head_count")),
        "n_head_kv": _int(f.get(f"{a}.attention.head_count_kv")),
        "head_dim": _int(f.get(f"{a}.attention.key_length")),
        "n_ff": _int(f.get(f"{a}.feed_forward_length")),
    }
    if meta["n_head_kv"] is None:
        meta["n_head_kv"] = meta["n_head"]  # llama.cpp's default
    if meta["head_dim"] is None and meta["n_embd"] and meta["n_head"]:
        meta["head_dim"] = meta["n_embd"] // meta["n_head"]
    _merge_dims(info, meta, _dims_from_gguf_tensors(h))
    info.value_problems = header_values.problems(arch, f)
    info.head_dim_v = _int(f.get(f"{a}.attention.value_length")) or info.head_dim
    info.kv_lora_rank = _int(f.get(f"{a}.attention.kv_lora_rank"))

    for key in ("embedding_scale", "final_logit_softcapping"):
        v = f.get(f"{a}.{key}")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            setattr(info, key, float(v))
    theta = f.get(f"{a}.rope.freq_base")
    info.rope_theta = float(theta) if isinstance(theta, (int, float)) else None
    scaling = {k.split(".rope.scaling.", 1)[1]: v for k, v in f.items() if k.startswith(f"{a}.rope.scaling.")}
    info.rope_scaling = scaling or None

    swa = _int(f.get(f"{a}.attention.sliding_window"))
    if swa and info.arch in facts.SWA_DISABLED:
        info.notes.append(
            f"sliding window {swa} in the file, but llama.cpp runs every {info.arch} layer with full attention"
        )
    elif swa:
        info.sliding_window = swa
        pat = f.get(f"{a}.attention.sliding_window_pattern")
        default = facts.SWA_DEFAULT_PATTERN.get(a)
        n_pattern, dense_first = default if default else (None, False)
        if isinstance(pat, list):
            info.sliding_window_pattern = tuple(bool(x) for x in pat)
        elif isinstance(pat, int) and not isinstance(pat, bool):
            n_pattern = pat
        if info.sliding_window_pattern is None and n_pattern is not None and info.n_layer:
            # as llama.cpp's loader does: the architecture's own layout unless the file names another
            info.sliding_window_pattern = facts.swa_layout(n_pattern, info.n_layer, dense_first)

    _gguf_tokenizer(info, h)
    _gguf_drafter(info, h)
    _gguf_lora(info, h)
    return info


def _gguf_tensors(info: ModelInfo, h: GGUFHeader) -> None:
    types: Counter = Counter()
    n_params = 0
    for t in h.tensors.values():
        types[t.type_name] += 1
        n_params += t.n_elements
    info.n_params = n_params
    info.quant_types = dict(types)
    info.tensor_names = tuple(h.tensors)
    info.tensor_shapes = {t.name: t.shape for t in h.tensors.values()}
    needed = h.data_needed
    info.data_expected_bytes = needed
    if needed is None:
        info.notes.append("a tensor type unknown to the gguf package: data size not checked")
    elif h.tensors and h.file_size < needed:
        info.data_complete = False


def _gguf_role(info: ModelInfo, h: GGUFHeader) -> None:
    f = h.fields
    if f.get("general.type") == "adapter" or "adapter.type" in f:
        info.role = ROLE_LORA
    elif info.arch == "dflash":
        info.role = ROLE_DSPARK if "markov_w1.weight" in h.tensors else ROLE_DFLASH
    elif h.tensors and info.arch and ("token_embd.weight" in h.tensors or "output.weight" in h.tensors):
        info.role = ROLE_TARGET
    else:
        info.role = ROLE_UNKNOWN
        if not h.tensors:
            info.notes.append("no tensors: a vocabulary-only file")


def _dims_from_gguf_tensors(h: GGUFHeader) -> dict[str, int]:
    """Dimensions read off tensor shapes (ggml ne order: ne[0] = input width)."""
    t = h.tensors
    d: dict[str, int] = {}
    blocks = {i for n in t if (i := dflash_names.layer_index(n)) is not None}
    if blocks:
        d["n_layer"] = max(blocks) + 1
    for name in ("output_norm.weight", "enc.output_norm.weight", "blk.0.attn_norm.weight"):
        if name in t and t[name].ne:
            d["n_embd"] = t[name].ne[0]
            break
    if "fc.weight" in t and len(t["fc.weight"].ne) == 2:
        d["n_embd"] = t["fc.weight"].ne[1]
        d["fc_in"] = t["fc.weight"].ne[0]
    for name in ("blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight"):
        if name in t and t[name].ne:
            d["head_dim"] = t[name].ne[0]
            break
    hd = d.get("head_dim")
    if hd and "blk.0.attn_q.weight" in t and len(t["blk.0.attn_q.weight"].ne) == 2:
        d["n_head"] = t["blk.0.attn_q.weight"].ne[1] // hd
    if hd and "blk.0.attn_k.weight" in t and len(t["blk.0.attn_k.weight"].ne) == 2:
        d["n_head_kv"] = t["blk.0.attn_k.weight"].ne[1] // hd
    for name in ("blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"):
        if name in t and len(t[name].ne) == 2:
            d["n_ff"] = t[name].ne[1]
            break
    return d


def _merge_dims(info: ModelInfo, meta: dict, from_tensors: dict) -> None:
    """Tensor shapes win (they are what llama.cpp will check); disagreements are recorded."""
    info.dims_from_tensors = dict(from_tensors)
    for key in ("n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_ff"):
        m, t = meta.get(key), from_tensors.get(key)
        if m is not None and t is not None and m != t:
            info.dim_mismatches.append(f"{key}: metadata says {m}, tensor shapes say {t}")
        setattr(info, key, t if t is not None else m)
    info.fc_in = from_tensors.get("fc_in")
    if info.fc_in and info.n_embd:
        info.captured_layers = info.fc_in // info.n_embd if info.fc_in % info.n_embd == 0 else None
        if info.fc_in % info.n_embd:
            info.dim_mismatches.append(
                f"fc.weight input width {info.fc_in} is not a multiple of the hidden size {info.n_embd}"
            )


def _gguf_tokenizer(info: ModelInfo, h: GGUFHeader) -> None:
    f = h.fields
    info.tokenizer_model = _str(f.get("tokenizer.ggml.model"))
    info.tokenizer_pre = _str(f.get("tokenizer.ggml.pre"))
    info.vocab_size = h.array_len("tokenizer.ggml.tokens") or _int(f.get(f"{info.arch}.vocab_size"))
    info.bos_token_id = _int(f.get("tokenizer.ggml.bos_token_id"))
    info.eos_token_id = _int(f.get("tokenizer.ggml.eos_token_id"))
    info.tokens_hash = h.span_sha256("tokenizer.ggml.tokens")
    tmpl = f.get("tokenizer.chat_template")
    if isinstance(tmpl, str) and tmpl.strip():
        import hashlib

        info.has_chat_template = True
        info.chat_template_hash = hashlib.sha256(tmpl.encode()).hexdigest()
    info.mask_token_id = _int(f.get("tokenizer.ggml.mask_token_id"))
    if info.mask_token_id is not None:
        info.mask_token = h.string_at("tokenizer.ggml.tokens", info.mask_token_id)


def _gguf_drafter(info: ModelInfo, h: GGUFHeader) -> None:
    if info.arch != "dflash":
        return
    f, t = h.fields, h.tensors
    info.block_size = _int(f.get("dflash.block_size"))
    layers = f.get("dflash.target_layers")
    if isinstance(layers, list):
        info.target_layers = tuple(int(x) for x in layers)
    info.sample_from_anchor = bool(f["dflash.sample_from_anchor"]) if "dflash.sample_from_anchor" in f else None
    info.dflash2 = "selector_hidden.weight" in t
    if "markov_w1.weight" in t:
        info.dspark = True
        ne = t["markov_w1.weight"].ne
        info.markov_rank = ne[0] if ne else None
        info.markov_vocab = ne[1] if len(ne) > 1 else None
    info.has_confidence_head = "conf_proj.weight" in t or bool(f.get("dflash.has_confidence_head"))


def _gguf_lora(info: ModelInfo, h: GGUFHeader) -> None:
    if info.role != ROLE_LORA:
        return
    f = h.fields
    info.adapter_type = _str(f.get("adapter.type"))
    alpha = f.get("adapter.lora.alpha")
    info.lora_alpha = float(alpha) if isinstance(alpha, (int, float)) else None
    for t in h.tensors.values():
        for suffix, part in ((".lora_a", "a"), (".lora_b", "b")):
            if t.name.endswith(suffix):
                info.lora_pairs.setdefault(t.name[: -len(suffix)], {})[part] = t.shape


# --------------------------------------------------------------------------------------------
# Hugging Face folders: config.json + safetensors headers


def _safetensors_header(path: Path) -> tuple[dict, int, int]:
    """(tensor table, bytes the data needs, header size) of one safetensors file."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise UnreadableModelError(f"{path}: too short for a safetensors header", path)
        n = struct.unpack("<Q", raw)[0]
        if n > min(size - 8, 100 * 2**20):
            raise UnreadableModelError(f"{path}: safetensors header length {n} is impossible", path)
        table = json.loads(fh.read(n))
    end = 0
    for name, meta in table.items():
        if name == "__metadata__":
            continue
        end = max(end, int(meta["data_offsets"][1]))
    return table, 8 + n + end, size


def _inspect_hf(folder: Path) -> ModelInfo:
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise UnreadableModelError(f"{folder}: no config.json (not a Hugging Face model folder)", folder)
    cfg = json.loads(cfg_path.read_text())
    if not isinstance(cfg, dict):
        raise UnreadableModelError(f"{cfg_path}: not a JSON object", folder)
    text = tc if isinstance(tc := cfg.get("text_config"), dict) else {}
    c = {**cfg, **text}
    files = sorted(folder.glob("*.safetensors"))
    total = sum(fp.stat().st_size for fp in files) + cfg_path.stat().st_size
    mtime = max([fp.stat().st_mtime for fp in files] + [cfg_path.stat().st_mtime])
    info = ModelInfo(path=str(folder), format="hf", size_bytes=total, mtime=mtime)
    archs = " ".join(c.get("architectures") or [])
    dflash_cfg = dc if isinstance(dc := c.get("dflash_config"), dict) else {}

    tensors: dict[str, tuple[tuple[int, ...], str]] = {}
    needed_total = 0
    for fp in files:
        table, needed, size = _safetensors_header(fp)
        needed_total += needed
        if size < needed:
            info.data_complete = False
            info.notes.append(f"{fp.name}: needs {needed:,} bytes, has {size:,}")
        for name, meta in table.items():
            if name != "__metadata__":
                tensors[name] = (tuple(int(x) for x in meta["shape"]), str(meta["dtype"]))
    info.data_expected_bytes = needed_total
    if not files:
        info.notes.append("no .safetensors files")
    info.n_params = sum(_prod(s) for s, _ in tensors.values())
    info.quant_types = dict(Counter(dt for _, dt in tensors.values()))
    info.tensor_names = tuple(tensors)
    info.tensor_shapes = {n: s for n, (s, _) in tensors.items()}

    if (folder / "adapter_config.json").is_file():
        info.role = ROLE_LORA
        info.arch = "peft"
    elif "DSpark" in archs or "markov_head.markov_w1.weight" in tensors:
        info.role, info.arch = ROLE_DSPARK, "dflash"
    elif "DFlash" in archs or dflash_cfg or "fc.weight" in tensors:
        info.role, info.arch = ROLE_DFLASH, "dflash"
    else:
        info.role = ROLE_TARGET if files else ROLE_UNKNOWN
        mt = str(c.get("model_type", ""))
        info.arch = HF_ARCH.get(mt, mt or None)
    info.name = folder.name
    info.context_length = _int(c.get("max_position_embeddings"))

    meta = {
        "n_layer": _int(c.get("num_hidden_layers")),
        "n_embd": _int(c.get("hidden_size")),
        "n_head": _int(c.get("num_attention_heads")),
        "n_head_kv": _int(c.get("num_key_value_heads")),
        "head_dim": _int(c.get("head_dim")),
        "n_ff": _int(c.get("intermediate_size")),
    }
    if meta["head_dim"] is None and meta["n_embd"] and meta["n_head"]:
        meta["head_dim"] = meta["n_embd"] // meta["n_head"]
    # Shapes through the GGUF names, so one derivation serves both formats.
    as_gguf = {}
    for name, (shape, _) in tensors.items():
        g = dflash_names.hf_to_gguf(name)
        if g is not None:
            as_gguf[g] = shape
    _merge_dims(info, meta, _dims_from_shapes(as_gguf))
    info.head_dim_v = info.head_dim

    theta, _source = hf_rope_theta(c)
    info.rope_theta = theta
    rope = c.get("rope_parameters") or c.get("rope_scaling")
    if isinstance(rope, dict):
        extra = {k: v for k, v in rope.items() if k != "rope_theta" and v not in (None, "default")}
        if extra.get("rope_type") or extra.get("type") or extra.get("factor"):
            info.rope_scaling = extra

    layer_types = c.get("layer_types")
    if isinstance(layer_types, list):
        info.layer_types = tuple(str(x) for x in layer_types)
    info.use_sliding_window = c.get("use_sliding_window") if "use_sliding_window" in c else None
    window, pattern = hf_sliding_window(c, dflash_cfg, info.n_layer)
    info.sliding_window, info.sliding_window_pattern = window, pattern

    info.vocab_size = _int(c.get("vocab_size"))
    info.bos_token_id = _int(c.get("bos_token_id"))
    info.eos_token_id = _int(c.get("eos_token_id")) if not isinstance(c.get("eos_token_id"), list) else None
    _hf_tokenizer(info, folder)

    if info.is_drafter:
        mask = dflash_cfg.get("mask_token_id", c.get("mask_token_id"))
        info.mask_token_id = _int(mask)
        block = dflash_cfg.get("block_size", c.get("block_size"))
        info.block_size = _int(block)
        ids, source = hf_target_layer_ids(c, dflash_cfg, info.n_layer)
        if ids:
            info.target_layers = tuple(int(i) + 1 for i in ids)  # HF ids + 1, as in GGUF
            if source and source.startswith("build_target_layer_ids"):
                info.notes.append(f"target_layer_ids absent: {source}")
        if "markov_head.markov_w1.weight" in tensors:
            info.dspark = True
            shape = tensors["markov_head.markov_w1.weight"][0]
            info.markov_vocab, info.markov_rank = (shape + (None, None))[:2]
        info.has_confidence_head = "confidence_head.proj.weight" in tensors
        if "sample_from_anchor" in c:
            info.sample_from_anchor = bool(c["sample_from_anchor"])
    return info


def _dims_from_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """The GGUF derivation, fed numpy-order shapes (reversed into ggml order)."""

    class _T:
        def __init__(self, shape):
            self.ne = tuple(reversed(shape))

    class _H:
        tensors = {n: _T(s) for n, s in shapes.items()}

    return _dims_from_gguf_tensors(_H)  # type: ignore[arg-type]


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def hf_rope_theta(cfg: dict) -> tuple[float | None, str | None]:
    """rope_theta from a nested ``rope_parameters`` block, else the top level; never a default.

    Field report 001: Qwen3.6 drafters keep their true 10M under ``rope_parameters``; a reader
    that only looked at the top level baked in a 1M default and collapsed acceptance.
    """
    for block in ("rope_parameters", "rope_scaling"):
        nested = cfg.get(block)
        if isinstance(nested, dict) and isinstance(nested.get("rope_theta"), (int, float)):
            return float(nested["rope_theta"]), f"{block}.rope_theta"
    if isinstance(cfg.get("rope_theta"), (int, float)):
        return float(cfg["rope_theta"]), "rope_theta"
    return None, None


def hf_sliding_window(cfg: dict, dflash_cfg: dict, n_layer: int | None):
    """(window, per-layer pattern) the way llama.cpp's DFlash converter decides it.

    Field report 002: Qwen3.6 drafters mark 4 of 5 layers ``sliding_attention``; ignoring
    ``layer_types`` silently runs them as full attention. With ``use_sliding_window`` false the
    reference model agrees with this rule: z-lab ``dflash/model.py`` takes ``config.sliding_window``
    for those layers, and transformers' ``Qwen3Config`` sets it to None unless ``use_sliding_window``
    is true, so they run full attention there too (tests/engine_bridge/models/test_converter_peer.py checks
    this against transformers itself).
    """
    use = bool(cfg.get("use_sliding_window", False) or dflash_cfg.get("use_swa", False))
    window = dflash_cfg.get("swa_window_size") or cfg.get("sliding_window")
    if not (use and window):
        return None, None
    if dflash_cfg.get("use_swa", False):
        pattern = tuple([True] * (n_layer or 0))
    else:
        pattern = tuple(lt == "sliding_attention" for lt in (cfg.get("layer_types") or []))
    return int(window), pattern


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """The HF target layer ids the reference model uses when config.json names none.

    The rule of z-lab ``dflash/model.py`` ``build_target_layer_ids``: one draft layer reads the
    middle target layer; otherwise the draft layers spread evenly from layer 1 to
    ``num_target_layers - 3``.
    """
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    return [int(round(start + i * (end - start) / (num_draft_layers - 1))) for i in range(num_draft_layers)]


def hf_target_layer_ids(
    cfg: dict, dflash_cfg: dict, n_layer: int | None, n_target_layers: int | None = None
) -> tuple[list[int] | None, str | None]:
    """(HF target layer ids, where they came from): dflash_config, the top level, or the reference's
    build_target_layer_ids(num_target_layers, num_hidden_layers) when config.json names none.

    ``n_target_layers`` stands in for a missing ``num_target_layers`` (the target's block count)."""
    ids = dflash_cfg.get("target_layer_ids", cfg.get("target_layer_ids"))
    if isinstance(ids, list) and ids:
        return [
            int(i) for i in ids
        ], "dflash_config.target_layer_ids" if "target_layer_ids" in dflash_cfg else "target_layer_ids"
    n_t = _int(cfg.get("num_target_layers"))
    source = "num_target_layers"
    if n_t is None and n_target_layers:
        n_t, source = int(n_target_layers), "the target's block count"
    if not n_t or not n_layer:
        return None, None
    return build_target_layer_ids(n_t, int(n_layer)), (
        f"build_target_layer_ids({n_t} from {source}, {n_layer} draft layers), as the reference model fills them"
    )


def _hf_tokenizer(info: ModelInfo, folder: Path) -> None:
    tok = folder / "tokenizer.json"
    if tok.is_file():
        try:
            model = json.loads(tok.read_text()).get("model", {})
            info.tokenizer_model = str(model.get("type", "")).lower() or None
        except (ValueError, OSError):
            info.notes.append("tokenizer.json is unreadable")
    tcfg = folder / "tokenizer_config.json"
    template = None
    if (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text()
    elif tcfg.is_file():
        try:
            template = json.loads(tcfg.read_text()).get("chat_template")
        except (ValueError, OSError):
            template = None
    if isinstance(template, str) and template.strip():
        import hashlib

        info.has_chat_template = True
        info.chat_template_hash = hashlib.sha256(template.encode()).hexdigest()


def signature(path: str | os.PathLike) -> tuple[int, int]:
    """(bytes, newest mtime in ns) of what inspect_model reads: the library's cache key.

    A folder counts its config.json and safetensors files, the same set the inspection reads.
    """
    p = Path(path)
    if p.is_dir():
        files = [p / "config.json", *sorted(p.glob("*.safetensors"))]
        stats = [f.stat() for f in files if f.exists()]
        return sum(s.st_size for s in stats), max((s.st_mtime_ns for s in stats), default=0)
    st = p.stat()
    return st.st_size, st.st_mtime_ns
