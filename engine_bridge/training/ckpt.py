"""Checkpoints as safetensors shards (the GPU machine returns files of at most 16 MiB each).

The GPU machine has torch but not the ``safetensors`` package, so the format (an 8-byte header
length, a JSON header, raw little-endian data) is also written and read here directly
(``_save_file`` / ``_load_file``); the files are ordinary safetensors either way.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

_ST_DTYPES = {
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
    "float64": "F64",
}


def _save_file(tensors: dict, path: str) -> None:
    """safetensors.torch.save_file without the package (torch tensors, CPU, contiguous)."""
    import torch

    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        dt = _ST_DTYPES[str(t.dtype).replace("torch.", "")]
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def _load_file(path: str) -> dict:
    import torch

    back = {v: getattr(torch, k) for k, v in _ST_DTYPES.items()}
    data = Path(path).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = bytearray(data[base + a : base + b])
        t = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)
        out[name] = t.view(back[info["dtype"]]).reshape(info["shape"]).clone()
    return out


def _st():
    try:
        from safetensors.torch import load_file, save_file

        return save_file, load_file
    except ImportError:
        return _save_file, _load_file


def save_sharded(
    state: dict, folder: str | Path, prefix: str, *, max_bytes: int = 15_000_000, dtype=None, config: dict | None = None
) -> list[Path]:
    save_file, _ = _st()

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shards: list[dict] = []
    cur: dict = {}
    size = 0
    for name, t in state.items():
        t = t.detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        t = t.contiguous()
        nbytes = t.numel() * t.element_size()
        if cur and size + nbytes > max_bytes:
            shards.append(cur)
            cur, size = {}, 0
        cur[name] = t
        size += nbytes
    if cur:
        shards.append(cur)
    paths = []
    for i, shard in enumerate(shards):
        p = folder / f"{prefix}-{i:02d}.safetensors"
        save_file(shard, str(p))
        paths.append(p)
    if config is not None:
        (folder / f"{prefix}.json").write_text(json.dumps(config, indent=1))
    return paths


def load_sharded(folder: str | Path, prefix: str) -> tuple[dict, dict | None]:
    """(state dict of float32 tensors, config or None)."""
    import torch

    _, load_file = _st()
    folder = Path(folder)
    state = {}
    for p in sorted(folder.glob(f"{prefix}-*.safetensors")):
        for k, v in load_file(str(p)).items():
            state[k] = v.to(torch.float32) if v.is_floating_point() else v
    cfg_path = folder / f"{prefix}.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else None
    return state, cfg
