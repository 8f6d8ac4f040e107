"""File and model names are shown as text, never as markup (issue 32).

A Hub file named ``<font size=7>…<a href=…>`` restyled the window and showed fake text in the status
bar, the pairing message and the path labels. Here a real pair is copied under such names, checked
and loaded in a real window; every label and tooltip that shows the name must show it literally.
"""

from __future__ import annotations

import shutil

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from app_helpers import load_pair

HOSTILE = "<font size=7 color=red>HUGE<a href=evil>click me"


def _showing_markup(window):
    """Labels and tooltips whose text holds the hostile name and would render it as rich text."""
    bad = []
    for label in window.findChildren(QLabel):
        if "<font size=7" in label.text() and label.textFormat() != Qt.TextFormat.PlainText:
            bad.append(f"label {label.objectName() or label.text()[:30]!r}")
    for w in window.findChildren(QWidget):
        if "<font size=7" in w.toolTip():  # an escaped tooltip holds &lt;font, never the raw tag
            bad.append(f"tooltip of {w.objectName() or type(w).__name__}")
    return bad


def test_hostile_file_names_are_plain_text_everywhere(qtbot, make_window, tiny_pair, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    target = folder / f"{HOSTILE} target.gguf"
    drafter = folder / f"{HOSTILE} drafter.gguf"
    shutil.copy(tiny_pair[0], target)
    shutil.copy(tiny_pair[1], drafter)
    w = make_window(max_tokens=4)
    load_pair(qtbot, w, (target, drafter))
    assert HOSTILE in w.status.pair.text()
    shown = [lbl for lbl in w.findChildren(QLabel) if "<font size=7" in lbl.text()]
    assert len(shown) >= 3, [lbl.objectName() for lbl in shown]  # status bar, both slots at least
    bad = _showing_markup(w)
    assert bad == [], "; ".join(bad)
