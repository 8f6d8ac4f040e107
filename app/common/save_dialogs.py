"""Where save dialogs open: the folder the user saved into last, else their documents folder.

Qt's dialogs open in the process's current directory when given a bare file name; started from a
checkout (``make run``) that is the repository, and exports landed in it. Every export asks here
instead. The last folder is remembered for the session; it is not a setting worth persisting.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QStandardPaths
from PySide6.QtWidgets import QFileDialog

_last_folder: Path | None = None


def documents_folder() -> Path:
    """The user's documents folder where it exists, else their home folder."""
    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return Path(docs) if docs and Path(docs).is_dir() else Path.home()


def start_folder() -> Path:
    """The folder the next save dialog opens in."""
    if _last_folder is not None and _last_folder.is_dir():
        return _last_folder
    return documents_folder()


def remember(path) -> None:
    """A file was saved at ``path``: the next dialog opens in its folder."""
    global _last_folder
    _last_folder = Path(path).parent


def ask_save_path(parent, title: str, file_name: str, name_filter: str) -> str:
    """A save dialog proposing ``file_name`` in the start folder; '' when cancelled. The chosen
    folder is remembered."""
    path, _ = QFileDialog.getSaveFileName(parent, title, str(start_folder() / file_name), name_filter)
    if path:
        remember(path)
    return path
