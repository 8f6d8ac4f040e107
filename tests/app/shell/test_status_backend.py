"""The status bar's backend label says, in its tooltip, what the engine's CPU code was built for, and
on a CPU with AMX-INT8 running a portable engine (the one-file bundle's) that a build on it is faster."""

from __future__ import annotations

from PySide6.QtGui import QTextDocumentFragment

from app.shell.status_bar import StudioStatusBar, backend_text, backend_tip
from engine_bridge.runtime.cpu_build import engine_cpu_build


def test_the_backend_label_says_what_the_cpu_code_was_built_for(qtbot):
    bar = StudioStatusBar()
    qtbot.addWidget(bar)
    bar.set_backend(backend_text(), backend_tip())
    tip = QTextDocumentFragment.fromHtml(bar.backend.toolTip()).toPlainText()
    built, advice = engine_cpu_build()
    assert built != "unknown"  # make setup's engine records its flags
    assert tip.splitlines()[0] == f"CPU code built for {built}"
    assert ("AMX-INT8" in tip) == (advice is not None)
    assert bar.backend.text() == backend_text()
