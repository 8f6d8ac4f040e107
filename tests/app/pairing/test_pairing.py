"""Pairing by drag and drop: the report shows, FAIL blocks Load, WARN asks, broken files are survived."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from app_helpers import LOAD_TIMEOUT_MS, wait_report


def drop_files(widget, paths):
    """Sends a real drag-enter + drop of local files onto ``widget``; returns whether it was accepted."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    pos = QPointF(widget.rect().center())
    enter = QDragEnterEvent(
        pos.toPoint(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(widget, enter)
    if not enter.isAccepted():
        return False
    drop = QDropEvent(pos, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, drop)
    return drop.isAccepted()


def test_dropping_two_files_sorts_them_and_shows_a_passing_report(qtbot, make_window, tiny_pair):
    w = make_window()
    assert w.pairing.demo_offer.isVisible()  # first start: the demo pair is offered
    target, drafter = tiny_pair
    # dropped in the "wrong" order on the drafter slot: the headers decide which is which
    assert drop_files(w.pairing.drafter, [drafter, target])
    qtbot.waitUntil(lambda: w.pairing.target.path == str(target), timeout=LOAD_TIMEOUT_MS)
    assert w.pairing.drafter.path == str(drafter)
    report = wait_report(qtbot, w)
    view = w.findChild(type(w.pairing.report_view), "compatReport")
    assert view is w.pairing.report_view
    statuses = view.statuses()
    assert statuses and set(statuses) == {"PASS"}, view.rows()
    names = [r[1] for r in view.rows()]
    assert {"hidden_size", "tokenizer", "mask_token"} <= set(names)
    assert len(view.rows()) == len(report.checks)
    assert w.pairing.load_button.isEnabled()
    assert not w.pairing.demo_offer.isVisible()
    # each slot shows the model's key facts
    qtbot.waitUntil(lambda: "DFlash drafter" in w.pairing.drafter.facts.text(), timeout=LOAD_TIMEOUT_MS)
    assert "layers" in w.pairing.target.facts.text() and "vocab 50257" in w.pairing.target.facts.text()


def test_non_model_drops_are_refused(qtbot, make_window, tmp_path):
    w = make_window()
    note = tmp_path / "notes.txt"
    note.write_text("not a model")
    assert not drop_files(w.pairing.target, [note])
    assert w.pairing.target.path == ""


def test_a_broken_file_gives_a_fail_row_and_blocks_load(qtbot, make_window, tiny_pair, tmp_path):
    w = make_window()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00 this header is cut short")
    assert drop_files(w.pairing.target, [broken])
    drop_files(w.pairing.drafter, [tiny_pair[1]])
    report = wait_report(qtbot, w)
    assert not report.ok
    rows = w.pairing.report_view.rows()
    assert rows[0][0] == "FAIL" and rows[0][1] == "target_readable"
    assert rows[0][3]  # a fix is offered
    assert not w.pairing.load_button.isEnabled()
    qtbot.waitUntil(lambda: w.pairing.target.facts.text() not in ("", "reading…"), timeout=LOAD_TIMEOUT_MS)
    assert "broken.gguf" in w.pairing.target.facts.text()
    # the app is alive: a good target is accepted afterwards
    drop_files(w.pairing.target, [tiny_pair[0]])
    assert wait_report(qtbot, w).ok
    assert w.pairing.load_button.isEnabled()


def test_a_truncated_drafter_fails_and_a_mismatched_pair_fails(
    qtbot, make_window, tiny_pair, tiny_llama_pair, tmp_path
):
    w = make_window()
    cut = tmp_path / "cut.gguf"
    data = tiny_pair[1].read_bytes()
    cut.write_bytes(data[: len(data) - 100_000])  # the header is whole, the tensor data is not
    w.pairing.set_pair(str(tiny_pair[0]), str(cut))
    report = wait_report(qtbot, w)
    assert "gguf_complete_drafter" in [c.name for c in report.failures]
    # the llama target's drafter with the qwen3 target: different hidden layers / tokenizer
    w.pairing.set_pair(str(tiny_pair[0]), str(tiny_llama_pair[1]))
    report = wait_report(qtbot, w)
    assert not report.ok and "FAIL" in w.pairing.report_view.statuses()
    assert not w.pairing.load_button.isEnabled()


def test_warnings_need_an_explicit_confirmation(qtbot, make_window, tiny_pair, monkeypatch):
    w = make_window()
    w.side_tabs.setCurrentWidget(w.settings_panel)
    w.settings_panel.budget.setValue(40)  # more than block size 16 drafts: a WARN
    w.pairing.set_pair(str(tiny_pair[0]), str(tiny_pair[1]))
    report = wait_report(qtbot, w)
    assert report.ok and [c.name for c in report.warnings] == ["block_size"]
    assert "WARN" in w.pairing.report_view.statuses()
    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a) or QMessageBox.StandardButton.No)
    w.pairing.load_button.click()
    qtbot.wait(50)
    assert len(asked) == 1 and w.engine.state == "empty"  # declined: nothing loads
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS):
        w.pairing.load_button.click()
    assert w.engine.state == "ready"


def test_first_start_offers_the_demo_pair_and_chat_works_offline(qtbot, make_window):
    w = make_window()
    assert w.pairing.demo_offer.isVisible()
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS):
        w.pairing.demo_button.click()
    from engine_bridge.models.demo import demo_pair

    target, _ = demo_pair()  # the shipped reference pair (or a generated one where none ships)
    assert target.name in w.status.pair.text()
    assert w.chat.send_button.isEnabled()
    assert w.settings.target == str(target)
