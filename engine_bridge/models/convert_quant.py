"""Tensor storage types for drafter GGUFs, and quantised drafter variants (f16, q8_0, q4_0).

Policy, the same for the converter and for re-quantising an existing drafter: norms, biases and
other 1-D tensors stay F32 (every llama.cpp converter keeps them so; they are tiny and precision
sensitive); matrices take the requested type when their rows split into whole blocks, else F16.
In q4_0 the DSpark Markov and confidence heads stay q8_0: field report 003 found near-tie
corrections depend on their precision, while the q4 backbone was acceptance-neutral.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, GGUFWriter
from gguf import quants

from .dflash_names import is_norm_or_vector
from ..common.errors import EngineError
from .gguf_header import read_header

Q = GGMLQuantizationType
OUT_TYPES: dict[str, GGMLQuantizationType] = {
    "f32": Q.F32,
    "f16": Q.F16,
    "bf16": Q.BF16,
    "q8_0": Q.Q8_0,
    "q4_0": Q.Q4_0,
}
#: general.file_type values (llama.cpp's LLAMA_FTYPE_*).
FILE_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "bf16": 32}
#: Drafter variants offered by the library and the CLI.
VARIANTS = ("f16", "q8_0", "q4_0")
_HEAD_PREFIXES = ("markov_w1.", "markov_w2.", "conf_proj.")


class ConversionError(EngineError):
    """A conversion or quantisation refused its input; nothing was written."""


def storage_type(name: str, ne: tuple[int, ...], out_type: str) -> GGMLQuantizationType:
    """The type a tensor is stored in for a drafter of ``out_type`` (ne in ggml order)."""
    if out_type not in OUT_TYPES:
        raise ConversionError(f"unknown output type {out_type!r}; choose from {', '.join(OUT_TYPES)}")
    if is_norm_or_vector(name, ne):
        return Q.F32
    want = OUT_TYPES[out_type]
    if want == Q.Q4_0 and name.startswith(_HEAD_PREFIXES):
        want = Q.Q8_0
    block = GGML_QUANT_SIZES[want][0]
    rows = int(np.prod(ne[1:])) if len(ne) > 1 else 1
    if block > 1 and (ne[0] % block or rows < 2):
        return Q.F16
    return want


#: the largest magnitude each type stores finitely: f16 itself, and the f16 block scale of q8_0 (max/127)
#: and q4_0 (max/8); beyond it the file would hold inf weights, and every draft NaN
_FINITE_LIMIT = {Q.F16: 65504.0, Q.Q8_0: 65504.0 * 127, Q.Q4_0: 65504.0 * 8}


def encode(
    arr: np.ndarray, qtype: GGMLQuantizationType, name: str = ""
) -> tuple[np.ndarray, GGMLQuantizationType | None]:
    """Array to write and raw dtype for GGUFWriter.add_tensor (None: numpy's own dtype)."""
    a = np.ascontiguousarray(arr, dtype=np.float32)
    limit = _FINITE_LIMIT.get(qtype)
    if limit is not None and a.size and float(np.abs(a).max()) > limit:
        raise ConversionError(
            f"tensor {name or '?'} holds a weight of {float(np.abs(a).max()):.4g}, beyond what "
            f"{qtype.name} stores ({limit:.4g}); choose --type f32 or bf16"
        )
    if qtype == Q.F32:
        return a, None
    if qtype == Q.F16:
        return a.astype(np.float16), None
    return quants.quantize(a, qtype), qtype


def decode(data: bytes, qtype: int, shape: tuple[int, ...]) -> np.ndarray:
    """Raw GGUF tensor bytes (numpy-order shape) to float32."""
    t = GGMLQuantizationType(qtype)
    if t == Q.F32:
        return np.frombuffer(data, dtype=np.float32).reshape(shape)
    if t == Q.F16:
        return np.frombuffer(data, dtype=np.float16).reshape(shape).astype(np.float32)
    raw = np.frombuffer(data, dtype=np.uint8)
    byte_shape = quants.quant_shape_to_byte_shape(shape, t)
    return quants.dequantize(raw.reshape(byte_shape), t).astype(np.float32)


def copy_fields(writer: GGUFWriter, hdr, skip=(), override: dict | None = None) -> None:
    """Copies every metadata field of a parsed header with its exact GGUF types."""
    override = override or {}
    for key, (vtype, elem) in hdr.types.items():
        if key in skip or key in override or key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = hdr.value(key)
        if vtype == GGUFValueType.ARRAY:
            if isinstance(value, np.ndarray):
                value = value.tolist()
            writer.add_key_value(key, value, GGUFValueType(vtype), sub_type=GGUFValueType(elem))
        else:
            writer.add_key_value(key, value, GGUFValueType(vtype))
    for key, (value, vtype) in override.items():
        writer.add_key_value(key, value, vtype)


def write_atomically(out: Path, fill, overwrite: bool = False) -> Path:
    """Writes through a temporary file in the same folder and renames it: no half-written output,
    and an existing file is only replaced when asked."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise ConversionError(f"{out} exists; pass overwrite=True (--force) to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.part")
    try:
        fill(tmp)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out


def quantize_drafter(
    src: str | os.PathLike, out: str | os.PathLike, out_type: str = "q8_0", *, overwrite: bool = False
) -> Path:
    """Writes a drafter variant of ``out_type`` from a drafter GGUF (any float or quantised input)."""
    src, out = Path(src), Path(out)
    if out_type not in OUT_TYPES:
        raise ConversionError(f"unknown output type {out_type!r}; choose from {', '.join(OUT_TYPES)}")
    if src.resolve() == out.resolve():
        raise ConversionError("the output would overwrite the input")
    try:
        hdr = read_header(src)
    except (OSError, ValueError) as exc:
        raise ConversionError(f"{src}: {exc}") from exc
    if hdr.fields.get("general.architecture") != "dflash":
        raise ConversionError(
            f"{src} is not a DFlash drafter (architecture {hdr.fields.get('general.architecture')!r})"
        )
    needed = hdr.data_needed
    if needed is None or hdr.file_size < needed:
        raise ConversionError(f"{src} is truncated or holds tensor types this tool cannot read")

    def fill(tmp: Path) -> None:
        writer = GGUFWriter(str(tmp), "dflash")
        copy_fields(writer, hdr, override={"general.file_type": (FILE_TYPE[out_type], GGUFValueType.UINT32)})
        for name, t in hdr.tensors.items():
            arr = decode(hdr.tensor_bytes(name), t.ggml_type, t.shape)
            data, raw = encode(arr, storage_type(name, t.ne, out_type), name)
            writer.add_tensor(name, data, raw_dtype=raw)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    return write_atomically(out, fill, overwrite)


def variant_path(drafter: str | os.PathLike, out_type: str) -> Path:
    """Where the library keeps a drafter's variant: next to it, the type in the name."""
    p = Path(drafter)
    stem = p.stem
    for t in OUT_TYPES:
        if stem.lower().endswith("-" + t):
            stem = stem[: -len(t) - 1]
    return p.with_name(f"{stem}-{out_type}.gguf")
