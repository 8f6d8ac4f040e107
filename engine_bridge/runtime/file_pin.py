"""A model file's identity at the pairing check, verified around llama.cpp's load.

The check reads headers; llama.cpp then opens the file by name. A file replaced or rewritten in
between would be loaded unchecked, and some unchecked files make llama.cpp abort the process (a
drafter whose target layer ids are out of range aborts at the first decode). So the engine pins
each file (device, inode, size, mtime) before the check and verifies the pin right before and
right after the load: a change in between is refused with a clear error, and nothing stays loaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import ModelLoadError


class ModelChangedError(ModelLoadError):
    """A model file changed or disappeared between the pairing check and the load."""


@dataclass(frozen=True)
class FilePin:
    path: Path
    role: str  # "target" | "drafter" (for the message)
    identity: tuple | None  # None: missing at check time (the check reports that)

    def verify(self) -> None:
        now = identity(self.path)
        if self.identity is None or now == self.identity:
            return
        if now is None:
            raise ModelChangedError(
                f"the {self.role} {self.path.name} was moved or deleted after the pairing check; nothing was loaded"
            )
        raise ModelChangedError(
            f"the {self.role} {self.path.name} changed after the pairing check (replaced or "
            "rewritten); nothing was loaded: load the pair again to check the new file"
        )


def identity(path: str | os.PathLike) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def pin(path: str | os.PathLike, role: str) -> FilePin:
    return FilePin(Path(path), role, identity(path))
