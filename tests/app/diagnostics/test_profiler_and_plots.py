"""The profiler table filters and exports; the live plots draw from ring buffers, throttled."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.diagnostics.live_plots import LivePlots, trailing_mean
from app.diagnostics.profiler_view import KEYS, ProfilerView, parse_conditions
from engine_bridge.runtime.records import StepRecord


def _steps(n, start=0):
    rng = np.random.default_rng(0)
    out = []
    for i in range(start, start + n):
        drafted = 15
        accepted = int(rng.integers(0, 6))
        out.append(
            StepRecord(
                step=i,
                pos=10 + i,
                drafted=drafted,
                accepted=accepted,
                committed=accepted + 1,
                t_draft=0.002,
                t_inject=0.001,
                t_verify=0.004 + 0.001 * (i % 3),
                t_accept=0.0005,
                t_other=0.0002,
                t_native=0.007,
                wall=0.008 + 0.001 * (i % 3),
            )
        )
    return out


def test_profiler_filters_by_conditions_or_text_and_exports(qtbot, tmp_path):
    view = ProfilerView()
    qtbot.addWidget(view)
    steps = _steps(40)
    view.add_steps(1, steps[:25])
    view.add_steps(2, steps[25:])
    assert view.row_count() == 40 and view.count_label.text() == "40 / 40 steps"
    view.filter_edit.setText("accepted>=3, run=1")
    want = [s for s in steps[:25] if s.accepted >= 3]
    assert view.row_count() == len(want) and view.proxy.numeric
    n = view.export(tmp_path / "steps.csv")
    rows = list(csv.DictReader(open(tmp_path / "steps.csv")))
    assert n == len(rows) == len(want)
    assert [int(r["step"]) for r in rows] == [s.step for s in want]
    # the table's names and units: ms, as shown (issue 33, item 8: the export used to say seconds)
    assert {"run", "drafted", "accepted", "committed", "verify_ms", "wall_ms", "tok_per_s"} <= set(rows[0])
    assert not [k for k in rows[0] if k.startswith("t_") or k == "wall"]
    headers = [view.model.headerData(c, Qt.Orientation.Horizontal) for c in range(view.model.columnCount())]
    assert float(rows[0]["verify_ms"]) == pytest.approx(want[0].t_verify * 1000)
    assert view.model.data(view.model.index(0, headers.index("verify ms"))) == f"{steps[0].t_verify * 1000:.3f}"
    view.filter_edit.setText("")
    assert view.export(tmp_path / "all.json") == 40
    data = json.loads((tmp_path / "all.json").read_text())
    assert (
        data[0]["run"] == 1 and data[-1]["run"] == 2 and data[3]["draft_ms"] == pytest.approx(steps[3].t_draft * 1000)
    )
    view.filter_edit.setText("not-a-condition 7")  # falls back to a text match
    assert not view.proxy.numeric
    # sorting by a column uses numbers, not text
    view.filter_edit.setText("")
    view.table.sortByColumn(4, view.table.horizontalHeader().sortIndicatorOrder().DescendingOrder)
    top = view.proxy.index(0, 4).data()
    assert int(top) == max(s.accepted for s in steps)


def _prefill_pick(step=0):
    """A request's step 0: the token picked from the prompt's prefill, in ~0.1 ms (Generation._first_token)."""
    return StepRecord(step=step, pos=30, drafted=0, accepted=0, committed=1, t_accept=1e-4, wall=1e-4, prefill=True)


def test_the_prefills_token_is_in_the_ledger_but_not_in_the_plots(qtbot):
    view = ProfilerView()
    qtbot.addWidget(view)
    steps = [_prefill_pick()] + _steps(5, start=1)
    view.add_steps(1, steps)
    assert view.row_count() == 6
    view.filter_edit.setText("first token = 1")
    assert view.row_count() == 1 and view.proxy.visible_rows()[0][1].step == 0
    view.filter_edit.setText("tok/s > 1000")  # it has no per-step rate: 1 token in 0.1 ms is no decode
    assert view.row_count() == 0
    plots = LivePlots(capacity=64)
    qtbot.addWidget(plots)
    plots.add_steps(steps)
    assert plots.step_count() == 5  # decode steps only
    rate = sum(s.committed for s in steps[1:]) / sum(s.wall for s in steps[1:])
    assert plots.recent_tok_per_s() == pytest.approx(rate)
    plots.add_steps([_prefill_pick()])  # a batch of it alone draws nothing
    assert plots.step_count() == 5


def test_parse_conditions():
    conds = parse_conditions("accepted >= 2 and verify ms < 5")
    assert [(KEYS[c], v) for c, _, v in conds] == [("accepted", 2.0), ("verify_ms", 5.0)]
    assert KEYS[parse_conditions("tok/s > 100")[0][0]] == "tok_per_s"
    assert parse_conditions("hello") is None and parse_conditions("nope>1") is None


def test_live_plots_redraw_throttled_only_when_visible_and_stay_idle(qtbot):
    plots = LivePlots(capacity=64)
    qtbot.addWidget(plots)
    plots.add_steps(_steps(1))  # hidden: data is kept, nothing is drawn
    assert plots.redraws.calls == 0 and plots.step_count() == 1
    plots.show()  # shown: drawn once
    qtbot.waitUntil(lambda: plots.redraws.calls == 1, timeout=1000)
    qtbot.wait(150)
    plots.clear()
    calls = plots.redraws.calls
    for i in range(100):  # 100 batches in a burst: one draw now, one merged later
        plots.add_steps(_steps(1, start=i))
    assert plots.redraws.calls == calls + 1
    qtbot.waitUntil(lambda: plots.redraws.calls == calls + 2, timeout=1000)
    qtbot.wait(250)
    assert plots.redraws.calls == calls + 2  # nothing runs while idle
    assert plots.step_count() == 64  # the ring buffer keeps the newest steps
    x, y = plots.toks_points.getData()
    assert len(x) == 64 and x[0] == 36 and x[-1] == 99
    assert plots.hist_bars.opts["height"].sum() == 64
    stack_top = plots.phase_curves["other"].getData()[1]
    assert np.allclose(stack_top[-1], 1000 * sum(_steps(1, start=99)[0].phases.values()))
    assert plots.recent_tok_per_s() > 0
    plots.clear()
    assert plots.step_count() == 0 and plots.summary.text() == "no steps yet"


def test_trailing_mean_skips_gaps():
    y = np.array([1.0, np.nan, 3.0, 5.0])
    assert np.allclose(trailing_mean(y, 2), [1.0, 1.0, 3.0, 4.0])


def test_axis_limits_move_in_1_2_5_steps():
    from app.diagnostics.live_plots import nice_ceiling

    assert [nice_ceiling(v) for v in (0.3, 1, 1.1, 2, 3, 7, 12, 99, 101, 480)] == [
        0.5,
        1,
        2,
        2,
        5,
        10,
        20,
        100,
        200,
        500,
    ]
    assert nice_ceiling(float("nan")) == 1.0 and nice_ceiling(0) == 1.0


def _shape_steps():
    """A tree step, a chain step, a tree step that accepted nothing, and an autoregressive step."""
    common = dict(t_draft=0.002, t_verify=0.004, wall=0.007)
    return [
        StepRecord(
            step=0, pos=10, drafted=7, accepted=3, committed=4, tree_nodes=12, tree_depth=5, path_len=3, **common
        ),
        StepRecord(step=1, pos=14, drafted=9, accepted=2, committed=3, **common),
        StepRecord(
            step=2, pos=17, drafted=6, accepted=0, committed=1, tree_nodes=8, tree_depth=4, path_len=0, **common
        ),
        StepRecord(step=3, pos=18, drafted=0, accepted=0, committed=1, **common),
    ]


def test_live_plots_draw_the_draft_shape_of_tree_and_chain_steps(qtbot):
    plots = LivePlots(capacity=64)
    qtbot.addWidget(plots)
    plots.show()
    plots.add_steps(_shape_steps())
    qtbot.waitUntil(lambda: plots.redraws.calls >= 1, timeout=1000)
    want = {
        "nodes": [12, 9, 8, 0],  # tree: tree_nodes; chain: drafted
        "depth": [5, 9, 4, 0],  # tree: tree_depth; chain: drafted (a chain is one branch)
        "path": [3, 2, 0, 0],
    }  # tree: path_len; chain: accepted
    for key, ys in want.items():
        x, y = plots.shape_curves[key].getData()
        assert list(x) == [0, 1, 2, 3], key
        assert list(y) == ys, key
    assert [c.name() for c in plots.shape_curves.values()] == ["nodes", "depth", "accepted path"]
    # the y axis reaches the largest value in a 1-2-5 step, the x axis the steps shown
    (x0, x1), (y0, y1) = plots.shape_plot.viewRange()
    assert (y0, y1) == (0.0, 20.0) and x0 == 0.0 and x1 >= 3
    # a row of its own under the phase plot, both spanning the two columns (room for their legends)
    layout = plots.canvas.ci.layout
    assert [layout.itemAt(r, 0) for r in (2, 3)] == [plots.phase_plot, plots.shape_plot]
    assert [layout.itemAt(r, 1) for r in (2, 3)] == [plots.phase_plot, plots.shape_plot]
    plots.clear()
    assert all(c.getData()[1] is None or len(c.getData()[1]) == 0 for c in plots.shape_curves.values())


def test_profiler_shows_the_tree_shape_columns(qtbot):
    view = ProfilerView()
    qtbot.addWidget(view)
    steps = _shape_steps()
    view.add_steps(1, steps)
    headers = [view.model.headerData(c, Qt.Orientation.Horizontal) for c in range(view.model.columnCount())]
    assert {"tree nodes", "tree depth", "path len"} <= set(headers)
    for key in ("tree_nodes", "tree_depth", "path_len"):
        assert [view.model.value(r, KEYS.index(key)) for r in range(len(steps))] == [getattr(s, key) for s in steps]
    view.filter_edit.setText("path_len>=1, tree_nodes>0")  # tree steps that accepted something
    assert view.proxy.numeric and view.row_count() == 1
    view.filter_edit.setText("path len = 0 and tree depth > 0")
    assert view.row_count() == 1 and view.proxy.visible_rows()[0][1].step == 2
