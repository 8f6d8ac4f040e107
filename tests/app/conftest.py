"""Fixtures for the desktop app: a main window on private settings, store and data folder.

Nothing here touches the user's own settings or data: QSettings goes to an ini file under
tmp_path, conversations to a SQLite file there, and DFLASH_DATA_DIR / XDG_* point at tmp_path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The app tests live in sub-folders that mirror app/; their shared helpers (app_helpers.py) stay here
# and are imported by bare name.
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from app.shell.app_settings import StudioSettings, open_settings  # noqa: E402 - after the path above
from app.chat.conversations import ConversationStore  # noqa: E402


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    return tmp_path


@pytest.fixture(autouse=True)
def no_modal_boxes(monkeypatch):
    """A modal message box in an offscreen test waits forever for a click nobody makes (it hung a CI
    run once: "The engine did not stop in time." at close). Here each one answers its default at
    once and the test fails at teardown naming it; a test that expects one patches it itself."""
    from PySide6.QtWidgets import QMessageBox

    shown = []

    def fake(kind):
        def box(parent, title, text, *args, **kwargs):
            shown.append(f"{kind}: {text}")
            return QMessageBox.StandardButton.No if kind == "question" else QMessageBox.StandardButton.Ok

        return box

    for kind in ("warning", "critical", "information", "question"):
        monkeypatch.setattr(QMessageBox, kind, fake(kind))
    yield shown
    assert not shown, f"unexpected modal message boxes: {shown}"


@pytest.fixture
def settings_file(tmp_path):
    return tmp_path / "settings.ini"


@pytest.fixture
def store_file(tmp_path):
    return tmp_path / "conversations.sqlite3"


@pytest.fixture
def make_window(qtbot, settings_file, store_file):
    """Builds a MainWindow on the test's settings and store; pytest-qt closes it at teardown."""
    from app.shell.main_window import MainWindow

    def make(first_run: bool = False, **settings):
        """``settings`` are saved before the window opens. The tests run a CPU build, whose first-run
        mode is auto (engine_bridge.runtime.default_mode); they are written for a chosen mode, chain
        unless they say, as a GPU build starts. ``first_run``: the window exactly as a new user gets it."""
        qs = open_settings(settings_file)
        if not first_run and not qs.contains("studio/mode"):
            settings.setdefault("mode", "chain")
        if settings:
            StudioSettings.load(qs).replace(**settings).save(qs)
        w = MainWindow(qsettings=qs, store=ConversationStore(store_file))
        qtbot.addWidget(w)
        w.show()
        return w

    return make
