"""Where the files shipped in ``resources/`` live (vocabularies, prompt suites, icons, models)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _shipped() -> Path:
    """The checkout's resources/, or in the bundle (PyInstaller, packaging/bundle/) the copy beside
    the frozen modules: sys._MEIPASS is the bundle's _internal/ folder, read-only to us."""
    if getattr(sys, "frozen", False) and hasattr(sys, "_MEIPASS"):
        return Path(sys._MEIPASS) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


#: The shipped resources folder; DFLASH_RESOURCES points elsewhere (other packaged installs).
RESOURCES = Path(os.environ.get("DFLASH_RESOURCES") or _shipped())


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
