"""The profiler table filters and exports; the live plots draw from ring buffers, throttled."""

from __future__ import annotations

import csv
import json

import numpy as np

from app.live_plots import LivePlots, trailing_mean
from app.profiler_view import KEYS, ProfilerView, parse_conditions
from engine_bridge.records import StepRecord


def _steps(n, start=0):
    rng = np.random.default_rng(0)
    out = []
    for i in range(start, start + n):
        drafted = 15
        accepted = int(rng.integers(0, 6))
        out.append(StepRecord(step=i, pos=10 + i, drafted=drafted, accepted=accepted, committed=accepted + 1,
                              t_draft=0.002, t_inject=0.001, t_verify=0.004 + 0.001 * (i % 3), t_accept=0.0005,
                              t_other=0.0002, t_native=0.007, wall=0.008 + 0.001 * (i % 3)))
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
    assert {"run", "drafted", "accepted", "committed", "t_verify", "tok_per_s"} <= set(rows[0])
    view.filter_edit.setText("")
    assert view.export(tmp_path / "all.json") == 40
    data = json.loads((tmp_path / "all.json").read_text())
    assert data[0]["run"] == 1 and data[-1]["run"] == 2 and data[3]["t_draft"] == steps[3].t_draft
    view.filter_edit.setText("not-a-condition 7")            # falls back to a text match
    assert not view.proxy.numeric
    # sorting by a column uses numbers, not text
    view.filter_edit.setText("")
    view.table.sortByColumn(4, view.table.horizontalHeader().sortIndicatorOrder().DescendingOrder)
    top = view.proxy.index(0, 4).data()
    assert int(top) == max(s.accepted for s in steps)


def test_parse_conditions():
    conds = parse_conditions("accepted >= 2 and verify ms < 5")
    assert [(KEYS[c], v) for c, _, v in conds] == [("accepted", 2.0), ("verify_ms", 5.0)]
    assert KEYS[parse_conditions("tok/s > 100")[0][0]] == "tok_per_s"
    assert parse_conditions("hello") is None and parse_conditions("nope>1") is None


def test_live_plots_redraw_throttled_only_when_visible_and_stay_idle(qtbot):
    plots = LivePlots(capacity=64)
    qtbot.addWidget(plots)
    plots.add_steps(_steps(1))                 # hidden: data is kept, nothing is drawn
    assert plots.redraws.calls == 0 and plots.step_count() == 1
    plots.show()                               # shown: drawn once
    qtbot.waitUntil(lambda: plots.redraws.calls == 1, timeout=1000)
    qtbot.wait(150)
    plots.clear()
    calls = plots.redraws.calls
    for i in range(100):                       # 100 batches in a burst: one draw now, one merged later
        plots.add_steps(_steps(1, start=i))
    assert plots.redraws.calls == calls + 1
    qtbot.waitUntil(lambda: plots.redraws.calls == calls + 2, timeout=1000)
    qtbot.wait(250)
    assert plots.redraws.calls == calls + 2    # nothing runs while idle
    assert plots.step_count() == 64            # the ring buffer keeps the newest steps
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
    from app.live_plots import nice_ceiling

    assert [nice_ceiling(v) for v in (0.3, 1, 1.1, 2, 3, 7, 12, 99, 101, 480)] == \
        [0.5, 1, 2, 2, 5, 10, 20, 100, 200, 500]
    assert nice_ceiling(float("nan")) == 1.0 and nice_ceiling(0) == 1.0
