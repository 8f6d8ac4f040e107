"""Names for model files that tell two files apart.

Every drafter this project ships is called ``drafter.gguf`` (one per folder), so a file's name alone
says little: the Bench tab's pair label, the pairing slots and the library show the folder too, and
as many folders as it takes where two files would otherwise read the same.
"""

from __future__ import annotations

from pathlib import Path, PurePath


def short_path(path) -> str:
    """``folder/name``: the file and the folder it sits in (``name`` alone at the root)."""
    p = PurePath(str(path))
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


def distinct_labels(paths) -> list[str]:
    """For each path, the shortest tail (name, folder/name, ...) no other path in ``paths`` shares,
    never shorter than ``folder/name``. Identical paths keep their full path."""
    parts = [PurePath(str(p)).parts for p in paths]
    labels = []
    for i, own in enumerate(parts):
        n = min(2, len(own))
        while n < len(own) and any(j != i and other != own and other[-n:] == own[-n:] for j, other in enumerate(parts)):
            n += 1
        labels.append(str(PurePath(*own[-n:])) if n < len(own) else str(Path(*own)))
    return labels
