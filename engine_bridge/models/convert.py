"""Hugging Face DFlash drafter folder + target GGUF -> drafter GGUF, written with the gguf package.

It follows llama.cpp's own converter (``conversion/qwen.py`` classes ``DFlashModel`` and
``DSparkModel``): tokenizer keys from the target, ``dflash.target_layers`` = HF ``target_layer_ids``
+ 1 (the *input* of the next layer), block size and mask token from ``dflash_config``,
sliding-window layers from ``layer_types`` / ``sliding_window`` only when ``use_sliding_window``
(or ``dflash_config.use_swa``) is on, degenerate M-RoPE sections ``[head_dim/2, 0, 0, 0]`` for an
M-RoPE target, no ``lm_head`` for a full-vocabulary DSpark drafter, norms kept F32.
tests/engine_bridge/models/test_converter_peer.py runs upstream's converter on realistic drafter folders
and holds both outputs equal; docs/converter-peer.md lists every difference and why.

It differs where upstream and the reference model (z-lab ``dflash/model.py``) disagree, following
the reference (it defines what the weights were trained for): a config.json without
``target_layer_ids`` gets the reference's ``build_target_layer_ids(num_target_layers,
num_hidden_layers)`` (upstream writes no ``dflash.target_layers`` and its file does not load). And
where the field reports showed silent failures: rope theta is read from a nested
``rope_parameters`` block or the top level and a missing value is an error, never a default
(report 001); dimensions come from tensor shapes and must agree with config.json (report 000); the
pair invariants llama.cpp would abort on (hidden size, layer ids, mask id) are refused before
anything is written.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGUFValueType, GGUFWriter

from . import dflash_names, header_values
from .convert_quant import FILE_TYPE, OUT_TYPES, ConversionError, copy_fields, encode, storage_type, write_atomically
from .gguf_header import GGUFHeaderError, read_header
from .modelinfo import hf_rope_theta, hf_sliding_window, hf_target_layer_ids

SUPPORTED_ACTIVATIONS = ("silu", "gelu", "gelu_pytorch_tanh")  # src/models/dflash.cpp
_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


@dataclass
class SafetensorsTensor:
    file: Path
    dtype: str
    shape: tuple[int, ...]
    begin: int  # absolute byte offsets in the file
    end: int

    def load(self) -> np.ndarray:
        """float32 copy of the tensor (BF16 widened bit-exactly)."""
        with open(self.file, "rb") as f:
            f.seek(self.begin)
            raw = f.read(self.end - self.begin)
        if len(raw) != self.end - self.begin:
            raise ConversionError(f"{self.file.name}: tensor data cut short (file truncated)")
        arr = np.frombuffer(raw, dtype=_ST_DTYPES[self.dtype])
        if self.dtype == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return arr.astype(np.float32).reshape(self.shape)


@dataclass
class ConversionResult:
    path: Path
    tensors: int
    notes: list[str] = field(default_factory=list)


def read_safetensors(folder: Path) -> dict[str, SafetensorsTensor]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ConversionError(f"{folder}: no .safetensors files")
    out: dict[str, SafetensorsTensor] = {}
    for fp in files:
        size = fp.stat().st_size
        with open(fp, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ConversionError(f"{fp.name}: not a safetensors file")
            n = struct.unpack("<Q", head)[0]
            if n > size - 8:
                raise ConversionError(f"{fp.name}: header length {n} exceeds the file")
            try:
                table = json.loads(f.read(n))
            except ValueError as exc:
                raise ConversionError(f"{fp.name}: unreadable header ({exc})") from exc
        if not isinstance(table, dict):
            raise ConversionError(f"{fp.name}: the header is not a JSON object")
        for name, meta in table.items():
            if name == "__metadata__":
                continue
            if not isinstance(meta, dict):
                raise ConversionError(f"{fp.name}: tensor {name}: its header entry is not an object")
            dtype = meta.get("dtype")
            if dtype not in _ST_DTYPES:
                raise ConversionError(f"{fp.name}: tensor {name} has dtype {dtype}; supported: F32, F16, BF16")
            b, e, shape = _entry_bounds(fp.name, name, meta)
            need = _prod_int(shape) * np.dtype(_ST_DTYPES[dtype]).itemsize
            if e - b != need:
                raise ConversionError(
                    f"{fp.name}: tensor {name}: shape {list(shape)} of {dtype} needs {need} bytes, its "
                    f"byte range holds {e - b}"
                )
            t = SafetensorsTensor(fp, dtype, shape, 8 + n + b, 8 + n + e)
            if t.end > size:
                raise ConversionError(f"{fp.name} is truncated: tensor {name} ends at byte {t.end}, file has {size}")
            out[name] = t
    return out


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _entry_bounds(file: str, name: str, meta: dict) -> tuple[int, int, tuple[int, ...]]:
    offsets, shape = meta.get("data_offsets"), meta.get("shape")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(_is_int(x) for x in offsets)
        and 0 <= offsets[0] <= offsets[1]
    ):
        raise ConversionError(f"{file}: tensor {name}: data_offsets {offsets!r} is not a byte range [begin, end]")
    if not (isinstance(shape, list) and all(_is_int(x) and x >= 0 for x in shape)):
        raise ConversionError(f"{file}: tensor {name}: shape {shape!r} is not a list of sizes")
    return offsets[0], offsets[1], tuple(shape)


def _prod_int(shape) -> int:
    out = 1
    for x in shape:
        out *= x
    return out


def _config(folder: Path) -> tuple[dict, dict]:
    path = folder / "config.json"
    if not path.is_file():
        raise ConversionError(f"{folder}: no config.json")
    try:
        cfg = json.loads(path.read_text())
    except ValueError as exc:
        raise ConversionError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(cfg, dict):
        raise ConversionError(f"{path}: not a JSON object (a {type(cfg).__name__})")
    if not (
        isinstance(cfg.get("architectures", []), list)
        and all(isinstance(a, str) for a in cfg.get("architectures") or [])
    ):
        raise ConversionError(f"{path}: architectures {cfg.get('architectures')!r} is not a list of names")
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}
    dcfg = dc if isinstance(dc := cfg.get("dflash_config"), dict) else {}
    archs = " ".join(cfg.get("architectures") or [])
    if "DFlash" not in archs and "DSpark" not in archs and not dcfg:
        raise ConversionError(
            f"{folder}: config.json describes {archs or cfg.get('model_type')!r}, not a DFlash drafter"
        )
    if "DFlash2" in archs or "conv_kernel_size" in dcfg:
        raise ConversionError("DFlash2 (conv/selector) drafters are not supported by this converter")
    return cfg, dcfg


def _dims(tensors: dict[str, SafetensorsTensor], cfg: dict) -> dict[str, int]:
    """Drafter dimensions from tensor shapes, cross-checked against config.json (report 000)."""

    def shape(name):
        t = tensors.get(name)
        return t.shape if t else None

    need = [
        "fc.weight",
        "hidden_norm.weight",
        "norm.weight",
        "layers.0.self_attn.q_norm.weight",
        "layers.0.self_attn.q_proj.weight",
        "layers.0.self_attn.k_proj.weight",
        "layers.0.mlp.gate_proj.weight",
    ]
    missing = [n for n in need if n not in tensors]
    if missing:
        raise ConversionError(f"the checkpoint lacks {', '.join(missing)}")
    d = {
        "n_embd": shape("fc.weight")[0],
        "fc_in": shape("fc.weight")[1],
        "head_dim": shape("layers.0.self_attn.q_norm.weight")[0],
        "n_ff": shape("layers.0.mlp.gate_proj.weight")[0],
        "n_layer": 1 + max(int(n.split(".")[1]) for n in tensors if n.startswith("layers.")),
    }
    d["n_head"] = shape("layers.0.self_attn.q_proj.weight")[0] // d["head_dim"]
    d["n_head_kv"] = shape("layers.0.self_attn.k_proj.weight")[0] // d["head_dim"]
    stated = {
        "n_embd": cfg.get("hidden_size"),
        "head_dim": cfg.get("head_dim"),
        "n_ff": cfg.get("intermediate_size"),
        "n_layer": cfg.get("num_hidden_layers"),
        "n_head": cfg.get("num_attention_heads"),
        "n_head_kv": cfg.get("num_key_value_heads"),
    }
    hf_key = {
        "n_embd": "hidden_size",
        "head_dim": "head_dim",
        "n_ff": "intermediate_size",
        "n_layer": "num_hidden_layers",
        "n_head": "num_attention_heads",
        "n_head_kv": "num_key_value_heads",
    }
    for k, v in stated.items():
        if v is not None and not (_is_int(v) and 0 < v < 1 << 31):
            raise ConversionError(f"config.json {hf_key[k]} = {str(v)[:40]!r} is not a positive integer")
    bad = [f"{k}: config.json {v}, tensors {d[k]}" for k, v in stated.items() if v is not None and int(v) != d[k]]
    if bad:
        raise ConversionError("config.json disagrees with the tensor shapes: " + "; ".join(bad))
    return d


def convert_hf_drafter(
    hf_dir: str | os.PathLike,
    target: str | os.PathLike,
    out: str | os.PathLike,
    out_type: str = "f16",
    *,
    overwrite: bool = False,
    name: str | None = None,
) -> ConversionResult:
    """Converts an HF DFlash/DSpark drafter folder for ``target`` into a drafter GGUF at ``out``.
    Anything it cannot convert is a ConversionError; nothing is written then."""
    try:
        return _convert(hf_dir, target, out, out_type, overwrite=overwrite, name=name)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, struct.error) as exc:
        # a value of a type or size no check above foresaw: still a refusal, never a traceback
        raise ConversionError(
            f"config.json or the checkpoint holds a value this converter cannot use ({type(exc).__name__}: {exc})"
        ) from exc


def _convert(hf_dir, target, out, out_type: str, *, overwrite: bool, name: str | None) -> ConversionResult:
    folder, target, out = Path(hf_dir), Path(target), Path(out)
    if out_type not in OUT_TYPES:
        raise ConversionError(f"unknown output type {out_type!r}; choose from {', '.join(OUT_TYPES)}")
    cfg, dcfg = _config(folder)
    try:
        thdr = read_header(target)
    except (OSError, GGUFHeaderError) as exc:
        raise ConversionError(f"target {target}: {exc}") from exc
    tarch = thdr.fields.get("general.architecture")
    if tarch == "dflash":
        raise ConversionError(f"{target} is a drafter; --target must be the target model GGUF")
    t_embd = thdr.fields.get(f"{tarch}.embedding_length")
    t_layers = thdr.fields.get(f"{tarch}.block_count")
    if t_layers is not None and not (isinstance(t_layers, int) and not isinstance(t_layers, bool)):
        raise ConversionError(f"target {target}: {tarch}.block_count {t_layers!r} is not an integer")
    t_vocab = thdr.array_len("tokenizer.ggml.tokens")
    if t_vocab is None:
        raise ConversionError(f"{target} carries no tokenizer (tokenizer.ggml.tokens)")

    tensors = read_safetensors(folder)
    dims = _dims(tensors, cfg)
    notes: list[str] = []

    theta, source = hf_rope_theta(cfg)
    if theta is None:
        raise ConversionError(
            "config.json has no rope_theta (neither at the top level nor under rope_parameters); "
            "refusing to guess: a wrong theta silently collapses acceptance"
        )
    notes.append(f"rope theta {theta:g} from {source}")

    raw_ids = dcfg.get("target_layer_ids", cfg.get("target_layer_ids"))
    if raw_ids is not None and not (
        isinstance(raw_ids, list) and all(_is_int(i) and 0 <= i < 1 << 16 for i in raw_ids)
    ):
        raise ConversionError(f"target_layer_ids {str(raw_ids)[:60]} is not a list of layer numbers (integers >= 0)")
    if cfg.get("num_target_layers") is not None and not _is_int(cfg.get("num_target_layers")):
        raise ConversionError(f"num_target_layers {cfg.get('num_target_layers')!r} is not an integer")
    ids, ids_source = hf_target_layer_ids(cfg, dcfg, dims["n_layer"], t_layers)
    if not ids:
        raise ConversionError(
            "config.json names no dflash_config.target_layer_ids and no num_target_layers to derive them from"
        )
    if ids_source and ids_source.startswith("build_target_layer_ids"):
        notes.append(
            f"target_layer_ids absent: {ids} from {ids_source} (z-lab dflash/model.py); "
            "llama.cpp's converter would write no dflash.target_layers"
        )
    layers = [int(i) + 1 for i in ids]  # GGUF stores the input of the next layer
    if t_layers is not None and any(not 0 <= x < int(t_layers) for x in layers):
        raise ConversionError(f"target_layer_ids {ids} do not fit the {t_layers}-layer target")
    if dims["n_embd"] != t_embd:
        raise ConversionError(f"drafter hidden size {dims['n_embd']} != target hidden size {t_embd}")
    if dims["fc_in"] != len(layers) * dims["n_embd"]:
        raise ConversionError(
            f"fc.weight reads {dims['fc_in'] // dims['n_embd']} layers, target_layer_ids lists {len(layers)}"
        )

    mask = dcfg.get("mask_token_id", cfg.get("mask_token_id"))
    if mask is None:
        raise ConversionError("config.json names no dflash_config.mask_token_id; the drafter cannot draft without it")
    if not _is_int(mask):
        raise ConversionError(f"mask_token_id {mask!r} is not a token number")
    if not 0 <= int(mask) < t_vocab:
        raise ConversionError(f"mask_token_id {mask} is outside the target vocabulary ({t_vocab} tokens)")

    act = cfg.get("hidden_act", "silu")
    if act not in SUPPORTED_ACTIVATIONS:
        raise ConversionError(f"hidden_act {act!r} is not supported by llama.cpp's DFlash graph")
    eps = cfg.get("rms_norm_eps")
    if eps is None:
        raise ConversionError("config.json has no rms_norm_eps")
    block = dcfg.get("block_size", cfg.get("block_size", 16))

    window, pattern = hf_sliding_window(cfg, dcfg, dims["n_layer"])
    if window and len(pattern) != dims["n_layer"]:
        raise ConversionError(f"layer_types has {len(pattern)} entries for {dims['n_layer']} layers")
    if not window and any(x == "sliding_attention" for x in cfg.get("layer_types") or []):
        notes.append(
            "layer_types marks sliding layers but use_sliding_window is off: written as full attention, "
            "as the reference model runs them (transformers' Qwen3Config drops sliding_window unless "
            "use_sliding_window is true) and as llama.cpp's converter writes them"
        )
    if cfg.get("rope_is_neox_style") is False:
        raise ConversionError(
            "rope_is_neox_style false (interleaved rope) is not supported; use llama.cpp's "
            "convert_hf_to_gguf.py, which permutes q/k for it"
        )
    if (folder / "mask_embedding.pt").is_file():
        raise ConversionError(
            "mask_embedding.pt (a drafter-provided mask embedding) is not supported; use "
            "llama.cpp's convert_hf_to_gguf.py --target-model-dir"
        )
    rope = (
        rp
        if isinstance(rp := cfg.get("rope_parameters"), dict)
        else (rs if isinstance(rs := cfg.get("rope_scaling"), dict) else {})
    )
    prf = rope.get("partial_rotary_factor")
    if prf is not None and not (isinstance(prf, (int, float)) and not isinstance(prf, bool) and 0 < prf <= 1):
        raise ConversionError(f"partial_rotary_factor {prf!r} is not a number in (0, 1]")
    rope_dims = int(dims["head_dim"] * float(prf)) if prf is not None else None
    # An M-RoPE target (qwen35, qwen3vl, ...) carries rope sections; the drafter ropes on the
    # temporal dimension only, so it gets degenerate sections, as llama.cpp's converter writes.
    t_sections = thdr.fields.get(f"{tarch}.rope.dimension_sections")
    if t_sections is not None and not (isinstance(t_sections, list) and all(_is_int(x) for x in t_sections)):
        raise ConversionError(
            f"target {target}: {tarch}.rope.dimension_sections {t_sections!r} is not a list of integers"
        )
    mrope = isinstance(t_sections, list) and any(t_sections)
    scalars = {
        "dflash.attention.value_scale": dcfg.get("attention_value_scale"),
        "dflash.logit_scale": dcfg.get("output_multiplier", cfg.get("output_multiplier")),
        "dflash.final_logit_softcapping": dcfg.get("final_logit_softcapping", cfg.get("final_logit_softcapping")),
        "dflash.embedding_scale": dcfg.get("input_embedding_scale", cfg.get("input_embedding_scale")),
    }
    if scalars["dflash.final_logit_softcapping"] is not None and float(scalars["dflash.final_logit_softcapping"]) <= 0:
        scalars["dflash.final_logit_softcapping"] = None

    _refuse_out_of_domain(cfg, thdr.fields.get(f"{tarch}.context_length"), dims, theta, eps, block, window, scalars)

    mapped: list[tuple[str, SafetensorsTensor]] = []
    for hf_name, t in tensors.items():
        g = dflash_names.hf_to_gguf(hf_name)
        if g is None:
            raise ConversionError(f"tensor {hf_name} has no llama.cpp DFlash counterpart")
        mapped.append((g, t))
    dspark = any(g == "markov_w1.weight" for g, _ in mapped)
    if dspark:
        n_vocab = int(cfg.get("vocab_size") or t_vocab)
        draft_vocab = int(cfg.get("draft_vocab_size") or n_vocab)
        if draft_vocab < n_vocab:
            raise ConversionError(
                f"draft_vocab_size {draft_vocab} < vocab_size {n_vocab}: a reduced-vocabulary "
                "DSpark drafter (d2t table) is not supported"
            )
        if any(g == "output.weight" for g, _ in mapped):
            # llama.cpp's DSparkModel drops it too: a full-vocabulary DSpark drafter scores with the
            # target's output head, and a drafter output.weight would replace that head.
            mapped = [(g, t) for g, t in mapped if g != "output.weight"]
            notes.append("lm_head dropped: a full-vocabulary DSpark drafter uses the target's output head")

    def fill(tmp: Path) -> None:
        w = GGUFWriter(str(tmp), "dflash")
        w.add_string("general.type", "model")
        w.add_string("general.name", name or folder.name)
        w.add_uint32("general.file_type", FILE_TYPE[out_type])
        w.add_uint32("general.quantization_version", 2)  # GGML_QNT_VERSION, as every llama.cpp converter writes
        w.add_uint32("dflash.context_length", _context_length(cfg, thdr.fields.get(f"{tarch}.context_length")))
        w.add_uint32("dflash.embedding_length", dims["n_embd"])
        w.add_uint32("dflash.block_count", dims["n_layer"])
        w.add_uint32("dflash.feed_forward_length", dims["n_ff"])
        w.add_uint32("dflash.attention.head_count", dims["n_head"])
        w.add_uint32("dflash.attention.head_count_kv", dims["n_head_kv"])
        w.add_uint32("dflash.attention.key_length", dims["head_dim"])
        w.add_uint32("dflash.attention.value_length", dims["head_dim"])
        w.add_float32("dflash.rope.freq_base", float(theta))
        w.add_float32("dflash.attention.layer_norm_rms_epsilon", float(eps))
        w.add_array("dflash.target_layers", layers)
        w.add_uint32("dflash.block_size", int(block))
        if window:
            w.add_uint32("dflash.attention.sliding_window", int(window))
            w.add_array("dflash.attention.sliding_window_pattern", [bool(x) for x in pattern])
        if act != "silu":
            w.add_string("dflash.hidden_activation", act)
        if rope_dims is not None:
            w.add_uint32("dflash.rope.dimension_count", rope_dims)
        if mrope:
            w.add_array("dflash.rope.dimension_sections", [dims["head_dim"] // 2, 0, 0, 0])
        for key, value in scalars.items():
            if value is not None:
                w.add_float32(key, float(value))
        causal = cfg.get("is_causal", dcfg.get("causal"))
        if causal is not None:
            w.add_bool("dflash.attention.causal", bool(causal))
        if dspark:
            w.add_bool("dflash.sample_from_anchor", bool(cfg.get("sample_from_anchor", True)))
            w.add_bool("dflash.has_confidence_head", any(g == "conf_proj.weight" for g, _ in mapped))
        # The drafter carries the target's tokenizer (it shares its embeddings and lm_head).
        tok_keys = {k for k in thdr.types if k.startswith("tokenizer.")}
        copy_fields(
            w,
            thdr,
            skip=set(thdr.types) - tok_keys - {"tokenizer.ggml.mask_token_id"},
            override={"tokenizer.ggml.mask_token_id": (int(mask), GGUFValueType.UINT32)},
        )
        for g, t in mapped:
            arr = t.load()
            if not np.isfinite(arr).all():  # NaN or inf weights make every draft NaN
                raise ConversionError(f"tensor {g} holds weights that are not finite (NaN or inf)")
            ne = tuple(reversed(arr.shape))
            data, raw = encode(arr, storage_type(g, ne, out_type), g)
            w.add_tensor(g, data, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    path = write_atomically(out, fill, overwrite)
    return ConversionResult(path, len(mapped), notes)


def _context_length(cfg: dict, target_ctx) -> int:
    return int(cfg.get("max_position_embeddings") or target_ctx or 4096)


def _refuse_out_of_domain(cfg: dict, target_ctx, dims: dict, theta, eps, block, window, scalars: dict) -> None:
    """The values the drafter's header would carry, checked as the pairing checks check a file
    (header_values): a NaN or negative epsilon written here aborts llama.cpp at the first decode."""
    header = {
        "dflash.embedding_length": dims["n_embd"],
        "dflash.block_count": dims["n_layer"],
        "dflash.feed_forward_length": dims["n_ff"],
        "dflash.attention.head_count": dims["n_head"],
        "dflash.attention.head_count_kv": dims["n_head_kv"],
        "dflash.attention.key_length": dims["head_dim"],
        "dflash.rope.freq_base": theta,
        "dflash.attention.layer_norm_rms_epsilon": eps,
        "dflash.block_size": block,
        **{k: v for k, v in scalars.items() if v is not None},
    }
    if window:
        header["dflash.attention.sliding_window"] = window
    try:
        header["dflash.context_length"] = _context_length(cfg, target_ctx)
    except (TypeError, ValueError, OverflowError):
        header["dflash.context_length"] = cfg.get("max_position_embeddings")
    bad = header_values.problems("dflash", header)
    if bad:
        raise ConversionError(
            "config.json gives values llama.cpp cannot run: "
            + "; ".join(bad)
            + " (as config.json writes them: "
            + _hf_names(bad)
            + ")"
        )


def _hf_names(problems: list[str]) -> str:
    hf = {
        "layer_norm_rms_epsilon": "rms_norm_eps",
        "freq_base": "rope_theta",
        "context_length": "max_position_embeddings",
        "block_size": "block_size",
        "embedding_length": "hidden_size",
        "block_count": "num_hidden_layers",
        "head_count_kv": "num_key_value_heads",
        "head_count": "num_attention_heads",
        "feed_forward_length": "intermediate_size",
        "key_length": "head_dim",
        "logit_scale": "output_multiplier",
        "embedding_scale": "input_embedding_scale",
        "final_logit_softcapping": "final_logit_softcapping",
        "value_scale": "attention_value_scale",
    }
    names = []
    for p in problems:
        key = p.split(" = ", 1)[0].rsplit(".", 1)[-1]
        names.append(hf.get(key, key))
    return ", ".join(dict.fromkeys(names))
