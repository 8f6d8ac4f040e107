"""The window at its default size (issue 33, item 8): the pairing report shows every column with
its text whole, neither dock squeezes the other away, the Bench tab fits between the docks, and
its empty chart has a plain 0..1 tok/s axis."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QScrollArea

from app_helpers import wait_report

from app.pairing.compat_view import wrapped_height
from app.shell.main_window import PLOTS_DOCK_MIN


def test_the_pairing_report_shows_reason_and_fix_whole_at_the_default_size(qtbot, make_window, tiny_pair, tmp_path):
    from engine_bridge.models import synth

    target = tiny_pair[0]
    bad = synth.write_drafter_for(
        target, tmp_path / "nomask" / "drafter.gguf", synth.DrafterSpec(n_layer=1, with_mask_token=False)
    )
    w = make_window()
    assert (w.width(), w.height()) == (1480, 900)
    w.pairing.set_pair(str(target), str(bad))
    report = wait_report(qtbot, w)
    assert report.failures
    view = w.pairing.report_view
    qtbot.wait(50)  # the delayed relayout after the columns took their widths
    h = view.header()
    right = h.sectionPosition(3) + h.sectionSize(3)
    assert right <= view.viewport().width(), (right, view.viewport().width())  # Fix is on screen
    assert h.sectionSize(2) >= 100 and h.sectionSize(3) >= 100
    assert view.horizontalScrollBar().maximum() == 0
    # every row is as tall as its wrapped Reason and Fix: nothing is cut off or elided
    for i in range(view.topLevelItemCount()):
        item = view.topLevelItem(i)
        rect = view.visualItemRect(item)
        for col in (2, 3):
            need = wrapped_height(item.text(col), view.font(), h.sectionSize(col) - 10)
            assert rect.height() >= need, (item.text(1), col, rect.height(), need)
    fail = next(r for r in view.rows() if r[0] == "FAIL")
    assert fail[1] == "mask_token" and fail[3]  # the name as the report has it, with its fix


def test_widening_one_dock_leaves_the_other_its_width(qtbot, make_window):
    w = make_window()
    left = w.findChild(QDockWidget, "pairDock")
    right = w.findChild(QDockWidget, "plotsDock")
    w.resizeDocks([left], [1300], Qt.Orientation.Horizontal)
    qtbot.wait(50)
    assert right.width() >= PLOTS_DOCK_MIN, right.width()
    assert left.width() > 440


def test_the_bench_tab_fits_between_the_docks_and_its_empty_chart_has_a_plain_axis(qtbot, make_window):
    w = make_window()
    w.show_page(w.bench)
    qtbot.wait(50)
    scroll = w.tabs.currentWidget()
    assert isinstance(scroll, QScrollArea)
    assert w.bench.width() <= scroll.viewport().width(), (w.bench.width(), scroll.viewport().width())
    assert scroll.horizontalScrollBar().maximum() == 0  # the sweep panel is not cut off
    vb = w.bench.plot.getPlotItem().getViewBox()
    assert vb.viewRange()[1] == [0.0, 1.0]
    assert "x0.001" not in w.bench.plot.getAxis("left").labelString()
