"""Checkpoints as safetensors shards (the GPU machine returns files of at most 16 MiB each)."""

from __future__ import annotations

import json
from pathlib import Path


def save_sharded(state: dict, folder: str | Path, prefix: str, *, max_bytes: int = 15_000_000,
                 dtype=None, config: dict | None = None) -> list[Path]:
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shards, cur, size = [], {}, 0
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
    from safetensors.torch import load_file

    folder = Path(folder)
    state = {}
    for p in sorted(folder.glob(f"{prefix}-*.safetensors")):
        for k, v in load_file(str(p)).items():
            state[k] = v.to(torch.float32) if v.is_floating_point() else v
    cfg_path = folder / f"{prefix}.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else None
    return state, cfg
