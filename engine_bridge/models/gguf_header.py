"""A fast, memory-mapped GGUF header reader: metadata and tensor directory, never tensor data.

``gguf.GGUFReader`` builds one numpy view per array element; on GPT-2's 50k-token vocabulary
that alone takes about two seconds (five for a 150k Qwen vocabulary), far too slow to inspect a
models folder. This reader walks the same format with ``struct`` over an ``mmap``: large arrays
are skipped (string arrays by hopping over their length prefixes) and only remembered by their
byte span, so the token list can be hashed without decoding it. It uses the ``gguf`` package's
type tables so both readers agree on what a type means; the tests cross-check them.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

GGUF_MAGIC = b"GGUF"
#: The GGUF versions the vendored llama.cpp loads (ggml/src/gguf.cpp, gguf_init_from_file_impl: 0 is
#: "bad", 1 "no longer supported", above GGUF_VERSION (3, gguf.h) "only supports up to version 3",
#: and a file of the other byte order is refused): a header we accept must be one it loads.
GGUF_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
#: Arrays at most this long are decoded into Python lists; longer ones are only spanned.
SMALL_ARRAY = 4096

_SCALAR_FMT: dict[int, str] = {
    GGUFValueType.UINT8: "B",
    GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I",
    GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f",
    GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT64: "d",
}


class GGUFHeaderError(ValueError):
    """The file is not a GGUF file, or its header is cut short or malformed."""


@dataclass(frozen=True)
class ArraySpan:
    """A long array left undecoded: element type, length and its bytes in the file."""

    elem_type: int
    count: int
    start: int  # first byte of the elements (after type and count)
    end: int  # one past the last byte


@dataclass(frozen=True)
class TensorEntry:
    name: str
    ne: tuple[int, ...]  # ggml order: ne[0] is the row length (input features)
    ggml_type: int
    offset: int  # relative to the data section
    n_bytes: int | None  # None: a type the gguf package does not know

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy order (rows first), as safetensors and PyTorch write it."""
        return tuple(reversed(self.ne))

    @property
    def type_name(self) -> str:
        try:
            return GGMLQuantizationType(self.ggml_type).name
        except ValueError:
            return f"type{self.ggml_type}"

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.ne:
            n *= d
        return n


@dataclass
class GGUFHeader:
    path: Path
    version: int
    file_size: int
    fields: dict[str, object] = field(default_factory=dict)  # scalars, strings, short lists
    spans: dict[str, ArraySpan] = field(default_factory=dict)  # long arrays, undecoded
    types: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # key -> (type, array elem type)
    tensors: dict[str, TensorEntry] = field(default_factory=dict)
    alignment: int = DEFAULT_ALIGNMENT
    data_start: int = 0
    byteorder: str = "<"

    def array_len(self, key: str) -> int | None:
        if key in self.spans:
            return self.spans[key].count
        v = self.fields.get(key)
        return len(v) if isinstance(v, list) else None

    @property
    def data_needed(self) -> int | None:
        """Bytes the file must have for every tensor's data to be present (None: unknown type)."""
        end = self.data_start
        for t in self.tensors.values():
            if t.n_bytes is None:
                return None
            end = max(end, self.data_start + t.offset + t.n_bytes)
        return end

    def span_sha256(self, key: str) -> str | None:
        """sha256 of an array's raw bytes (count included): equal arrays give equal hashes."""
        span = self.spans.get(key)
        if span is not None:
            with open(self.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                h = hashlib.sha256(struct.pack("<Q", span.count))
                h.update(mm[span.start : span.end])
                return h.hexdigest()
        value = self.fields.get(key)
        if isinstance(value, list):
            h = hashlib.sha256(struct.pack("<Q", len(value)))
            for item in value:
                b = item.encode("utf-8") if isinstance(item, str) else repr(item).encode()
                h.update(struct.pack("<Q", len(b)) + b)
            return h.hexdigest()
        return None

    def value(self, key: str):
        """A field's full value; long arrays are decoded now (strings -> list, numbers -> ndarray)."""
        if key in self.fields:
            return self.fields[key]
        span = self.spans[key]
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if span.elem_type == GGUFValueType.STRING:
                out: list[str | bytes] = []
                off = span.start
                u64 = struct.Struct(self.byteorder + "Q").unpack_from
                for _ in range(span.count):
                    n = u64(mm, off)[0]
                    raw = mm[off + 8 : off + 8 + n]
                    try:
                        out.append(raw.decode("utf-8"))
                    except UnicodeDecodeError:  # kept as bytes: GGUFWriter writes bytes back unchanged
                        out.append(raw)
                    off += 8 + n
                return out
            import numpy as np

            dt = np.dtype(self.byteorder + _SCALAR_FMT[span.elem_type])
            return np.frombuffer(mm[span.start : span.end], dtype=dt).copy()

    def tensor_bytes(self, name: str) -> bytes:
        """Raw data of one tensor (for copying files; inspection never calls this)."""
        t = self.tensors[name]
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            start = self.data_start + t.offset
            return mm[start : start + (t.n_bytes or 0)]

    def string_at(self, key: str, index: int) -> str | None:
        """One element of a long string array, found by hopping over the ones before it."""
        value = self.fields.get(key)
        if isinstance(value, list):
            return value[index] if 0 <= index < len(value) else None
        span = self.spans.get(key)
        if span is None or span.elem_type != GGUFValueType.STRING or not 0 <= index < span.count:
            return None
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            off = span.start
            u64 = struct.Struct(self.byteorder + "Q").unpack_from
            for _ in range(index):
                off += 8 + u64(mm, off)[0]
            n = u64(mm, off)[0]
            return mm[off + 8 : off + 8 + n].decode("utf-8", "replace")


def tensor_nbytes(ggml_type: int, ne: tuple[int, ...]) -> int | None:
    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        return None
    n = 1
    for d in ne[1:]:
        n *= d
    return (ne[0] // block) * size * n if ne else 0


class _Cursor:
    """Bounds-checked reads over the mapped file; every overrun becomes GGUFHeaderError."""

    def __init__(self, mm, size: int, order: str):
        self.mm, self.size, self.off, self.order = mm, size, 0, order
        self._u32 = struct.Struct(order + "I")
        self._u64 = struct.Struct(order + "Q")

    def need(self, n: int) -> None:
        if n < 0 or self.off + n > self.size:
            raise GGUFHeaderError(f"header cut short at byte {self.off} (file has {self.size} bytes)")

    def u32(self) -> int:
        self.need(4)
        v = self._u32.unpack_from(self.mm, self.off)[0]
        self.off += 4
        return v

    def u64(self) -> int:
        self.need(8)
        v = self._u64.unpack_from(self.mm, self.off)[0]
        self.off += 8
        return v

    def string(self) -> str:
        n = self.u64()
        self.need(n)
        s = self.mm[self.off : self.off + n].decode("utf-8", "replace")
        self.off += n
        return s

    def skip_string(self) -> None:
        n = self.u64()
        self.need(n)
        self.off += n

    def scalar(self, vtype: int):
        fmt = _SCALAR_FMT.get(vtype)
        if fmt is None:
            raise GGUFHeaderError(f"unknown GGUF value type {vtype} at byte {self.off}")
        s = struct.Struct(self.order + fmt)
        self.need(s.size)
        v = s.unpack_from(self.mm, self.off)[0]
        self.off += s.size
        return v


def _read_value(cur: _Cursor, vtype: int, key: str, spans: dict):
    if vtype == GGUFValueType.STRING:
        return cur.string()
    if vtype != GGUFValueType.ARRAY:
        return cur.scalar(vtype)
    elem = cur.u32()
    count = cur.u64()
    start = cur.off
    if elem == GGUFValueType.ARRAY:
        raise GGUFHeaderError(f"{key}: nested arrays are not supported")
    if count <= SMALL_ARRAY:
        if elem == GGUFValueType.STRING:
            return [cur.string() for _ in range(count)]
        fmt = _SCALAR_FMT.get(elem)
        if fmt is None:
            raise GGUFHeaderError(f"{key}: unknown array element type {elem}")
        s = struct.Struct(cur.order + fmt * count)
        cur.need(s.size)
        values = list(s.unpack_from(cur.mm, cur.off))
        cur.off += s.size
        return values
    if elem == GGUFValueType.STRING:
        # Hop over length prefixes: the only per-element work a long string array needs.
        u64, mm, off, size = cur._u64.unpack_from, cur.mm, cur.off, cur.size
        for _ in range(count):
            if off + 8 > size:
                raise GGUFHeaderError(f"{key}: string array cut short at byte {off}")
            off += 8 + u64(mm, off)[0]
        if off > size:
            raise GGUFHeaderError(f"{key}: string array cut short")
        cur.off = off
    else:
        fmt = _SCALAR_FMT.get(elem)
        if fmt is None:
            raise GGUFHeaderError(f"{key}: unknown array element type {elem}")
        n = struct.calcsize(fmt) * count
        cur.need(n)
        cur.off += n
    spans[key] = ArraySpan(elem, count, start, cur.off)
    return None


def read_header(path: str | os.PathLike) -> GGUFHeader:
    """Parses a GGUF file's header; raises GGUFHeaderError (or OSError) for anything unreadable."""
    path = Path(path)
    size = path.stat().st_size
    if size < 24:
        raise GGUFHeaderError(f"{size} bytes is too short for a GGUF header")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        if mm[:4] != GGUF_MAGIC:
            raise GGUFHeaderError(f"not a GGUF file (starts with {bytes(mm[:4])!r})")
        version = struct.unpack_from("<I", mm, 4)[0]
        order = "<"
        if version & 0xFFFF == 0 and version:  # a big-endian file reads as a huge little-endian number
            order, version = ">", struct.unpack_from(">I", mm, 4)[0]
            if sys.byteorder == "little":
                raise GGUFHeaderError(
                    f"a big-endian GGUF file (version {version}): llama.cpp reads only files "
                    "of this machine's byte order; convert it to little-endian"
                )
        if version not in GGUF_VERSIONS:
            why = (
                "GGUFv1 is no longer supported; re-convert the model"
                if version < 2
                else "a newer format than this engine's; update llama.cpp or re-convert the model"
            )
            raise GGUFHeaderError(
                f"GGUF version {version}: the bundled llama.cpp reads versions "
                f"{GGUF_VERSIONS[0]} to {GGUF_VERSIONS[-1]} only ({why})"
            )
        cur = _Cursor(mm, size, order)
        cur.off = 8
        n_tensors, n_kv = cur.u64(), cur.u64()
        # A count no file could hold means a corrupt header, not a huge model.
        if n_tensors > size // 24 or n_kv > size // 12:
            raise GGUFHeaderError(f"implausible counts ({n_tensors} tensors, {n_kv} keys)")
        hdr = GGUFHeader(path=path, version=version, file_size=size, byteorder=order)
        for _ in range(n_kv):
            key = cur.string()
            vtype = cur.u32()
            elem = None
            if vtype == GGUFValueType.ARRAY:
                cur.need(4)
                elem = struct.unpack_from(order + "I", mm, cur.off)[0]
            hdr.types[key] = (vtype, elem)
            value = _read_value(cur, vtype, key, hdr.spans)
            if value is not None:
                hdr.fields[key] = value
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.u32()
            if n_dims > 8:
                raise GGUFHeaderError(f"tensor {name}: {n_dims} dimensions")
            ne = tuple(cur.u64() for _ in range(n_dims))
            gtype = cur.u32()
            offset = cur.u64()
            hdr.tensors[name] = TensorEntry(name, ne, gtype, offset, tensor_nbytes(gtype, ne))
        align = hdr.fields.get("general.alignment", DEFAULT_ALIGNMENT)
        hdr.alignment = align if isinstance(align, int) and align > 0 else DEFAULT_ALIGNMENT
        hdr.data_start = -(-cur.off // hdr.alignment) * hdr.alignment
        return hdr
