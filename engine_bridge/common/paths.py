"""Where DFlash Studio keeps the user's data (library, conversations, downloaded models)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """DFLASH_DATA_DIR, else $XDG_DATA_HOME/dflash-studio, else ~/.local/share/dflash-studio."""
    env = os.environ.get("DFLASH_DATA_DIR")
    if env:
        base = Path(env)
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "dflash-studio"
    base.mkdir(parents=True, exist_ok=True)
    return base


def models_dir() -> Path:
    d = data_dir() / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d
