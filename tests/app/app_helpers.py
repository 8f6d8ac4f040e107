"""Helpers the app tests share (imported by name: tests/app/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

LOAD_TIMEOUT_MS = 60_000
ANSWER_TIMEOUT_MS = 120_000


def wait_report(qtbot, window):
    """Waits until the pairing check for the panel's current choice has finished."""
    qtbot.waitUntil(lambda: window.pairing.report is not None and not window.pairing._checking, timeout=LOAD_TIMEOUT_MS)
    return window.pairing.report


def load_pair(qtbot, window, pair):
    """Chooses the pair in the panel, waits for its check and loads it with the Load button."""
    from PySide6.QtCore import Qt

    window.pairing.set_pair(str(pair[0]), str(pair[1]))
    report = wait_report(qtbot, window)
    assert report.ok, report.summary()
    with qtbot.waitSignal(window.pairLoaded, timeout=LOAD_TIMEOUT_MS):
        qtbot.mouseClick(window.pairing.load_button, Qt.MouseButton.LeftButton)


def ask(qtbot, window, text):
    """Sends a message and returns the GenerationResult of the answer."""
    with qtbot.waitSignal(window.answerFinished, timeout=ANSWER_TIMEOUT_MS) as blocker:
        window.chat.input.setPlainText(text)
        window.chat.send_button.click()
    return blocker.args[0]
