"""Where the files shipped in ``resources/`` live (vocabularies, prompt suites, icons, models)."""

from __future__ import annotations

import os
from pathlib import Path

#: The project's resources folder; DFLASH_RESOURCES points elsewhere (packaged installs).
RESOURCES = Path(os.environ.get("DFLASH_RESOURCES", Path(__file__).resolve().parents[2] / "resources"))


def resource(*parts: str) -> Path:
    return RESOURCES.joinpath(*parts)


def vocab_path(name: str | os.PathLike) -> Path:
    """A vocab-only GGUF by short name (``gpt2``, ``phi3``) or by path."""
    p = Path(name)
    if p.suffix == ".gguf" and p.exists():
        return p
    cand = resource("vocab", f"{name}.gguf")
    if not cand.exists():
        known = sorted(f.stem for f in resource("vocab").glob("*.gguf"))
        raise FileNotFoundError(f"unknown vocabulary {name!r}; shipped: {', '.join(known)}")
    return cand
