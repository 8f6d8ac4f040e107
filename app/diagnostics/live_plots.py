"""Live per-step diagnostics drawn with pyqtgraph.

Six plots: tok/s per step with a moving average, the acceptance rate per step, commit length per
step, a histogram of commit lengths, each step's time split into its phases (draft, inject,
verify, accept, other), stacked, and the draft's shape per step: nodes verified, depth and the
accepted path length (a tree step's ``tree_nodes``, ``tree_depth`` and ``path_len``; a chain step
is a tree of one branch, so its nodes and depth are ``drafted`` and its path is ``accepted``).
Steps of requests to the local server (app.serve) come in among the chat's, marked: the throughput
plot draws them again in their own colour ("served"), and the summary counts them.

Step records go into fixed-capacity ring buffers as they arrive; a throttle redraws at most 5
times a second (under the issue's ceiling of 20; the chat keeps 20; less often when the UI's CPU
budget says so, see ``ui_budget``), only when new records came in and only while the plots are
visible, so an idle or hidden panel costs no CPU (no timer runs).

Painting is kept cheap because it competes with generation for the CPU: all six plots live in
one graphics view (one paint per update, not one per plot), and the axes change range only in
1-2-5 steps (``nice_ceiling``), so pyqtgraph's cached axis pictures are reused on most updates
instead of being laid out and drawn again (auto-ranging redid that on every update).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from engine_bridge.runtime.records import PHASES

from ..common.ring_buffer import RingBuffer
from ..common.throttle import Throttle

CAPACITY = 512  # steps on screen (older ones scroll out; the profiler keeps every step)
SMOOTH_WINDOW = 16  # steps in the moving average
#: plots redraw at most 5 times a second (the issue's ceiling is 20; the chat text keeps 20): on a
#: machine whose cores all decode, every millisecond the UI thread paints is taken from the engine
REDRAW_MS = 200
PHASE_COLOURS = {"draft": "#4a7fd4", "inject": "#9b59b6", "verify": "#e0902a", "accept": "#2ca02c", "other": "#999999"}
SHAPE_COLOURS = {"nodes": "#4a7fd4", "depth": "#e0902a", "path": "#2ca02c"}

# columns of the ring buffer
X, TOKS, ACCEPT, COMMIT, DRAFTED, ACCEPTED, WALL, NODES, DEPTH, PATH = range(10)
PHASE0 = 10
SERVED = PHASE0 + len(PHASES)  # 1.0: a served request's step (app.serve), 0.0: a chat turn's
WIDTH = SERVED + 1
SERVED_COLOUR = "#8e44ad"


def trailing_mean(y: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start); NaNs are skipped."""
    ok = np.isfinite(y)
    vals = np.where(ok, y, 0.0)
    c = np.concatenate(([0.0], np.cumsum(vals)))
    n = np.concatenate(([0], np.cumsum(ok)))
    idx = np.arange(1, len(y) + 1)
    lo = np.maximum(idx - window, 0)
    count = n[idx] - n[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (c[idx] - c[lo]) / np.maximum(count, 1), np.nan)


def nice_ceiling(v: float) -> float:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is >= v (axis limits that rarely change)."""
    if not np.isfinite(v) or v <= 0:
        return 1.0
    base = 10.0 ** np.floor(np.log10(v))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * base >= v * (1 - 1e-9):
            return float(m * base)
    return float(10 * base)


def _plot(
    layout: pg.GraphicsLayoutWidget, row: int, col: int, title: str, left: str, bottom: str = "step", colspan: int = 1
) -> pg.PlotItem:
    p = layout.addPlot(row=row, col=col, colspan=colspan, title=f"<span style='font-size:9pt'>{title}</span>")
    p.setLabel("left", left)
    p.setLabel("bottom", bottom)
    # no grid: translucent grid lines across every plot doubled the cost of each repaint
    p.setMenuEnabled(False)
    p.setClipToView(True)
    p.setDownsampling(auto=True, mode="peak")
    p.disableAutoRange()  # ranges are set in LivePlots.redraw, in 1-2-5 steps
    p.setMouseEnabled(x=False, y=False)
    return p


class LivePlots(QWidget):
    def __init__(self, parent=None, capacity: int = CAPACITY):
        super().__init__(parent)
        self.setObjectName("livePlots")
        self.buffer = RingBuffer(capacity, WIDTH)
        self._x = 0
        self.min_interval_ms = REDRAW_MS
        self.redraws = Throttle(self.redraw, interval_ms=REDRAW_MS, parent=self)
        self._stale = False  # data arrived while hidden: draw when shown
        self._ranges: dict = {}  # plot -> (x range, y range) last set

        # one graphics view for all plots: one paint per update instead of one per plot
        self.canvas = pg.GraphicsLayoutWidget(self)
        self.canvas.setBackground("w")
        self.canvas.setObjectName("plotCanvas")
        self.toks_plot = _plot(self.canvas, 0, 0, "Throughput", "tok/s")
        # per-step values as thin light lines, the moving average bold (lines paint far cheaper than symbols)
        self.toks_points = self.toks_plot.plot([], [], pen=pg.mkPen("#b5c9ee", width=1), name="per step")
        self.toks_smooth = self.toks_plot.plot([], [], pen=pg.mkPen("#2b5797", width=2), name="smoothed")
        # served requests' steps drawn over them (NaN elsewhere: gaps, not lines across chat turns)
        self.toks_served = self.toks_plot.plot(
            [], [], pen=pg.mkPen(SERVED_COLOUR, width=2), name="served", connect="finite"
        )
        self.accept_plot = _plot(self.canvas, 0, 1, "Accept rate", "accepted / drafted")
        self.accept_plot.setYRange(0, 1)
        self.accept_points = self.accept_plot.plot([], [], pen=pg.mkPen("#bfe5bf", width=1))
        self.accept_smooth = self.accept_plot.plot([], [], pen=pg.mkPen("#2ca02c", width=2), connect="finite")
        self.commit_plot = _plot(self.canvas, 1, 0, "Commit length", "tokens")
        self.commit_points = self.commit_plot.plot([], [], pen=pg.mkPen("#f5d3a8", width=1))
        self.commit_smooth = self.commit_plot.plot([], [], pen=pg.mkPen("#e0902a", width=2))
        self.hist_plot = _plot(self.canvas, 1, 1, "Commit length histogram", "steps", "tokens committed")
        self.hist_bars = pg.BarGraphItem(x=[], height=[], width=0.8, brush="#e0902a")
        self.hist_plot.addItem(self.hist_bars)
        self.hist_plot.getAxis("bottom").setTickSpacing(1, 1)  # commit lengths are whole tokens
        # the two bottom rows span both columns, so their legends fit on one line
        self.phase_plot = _plot(self.canvas, 2, 0, "Step time by phase (stacked)", "ms", colspan=2)
        self.phase_plot.addLegend(
            offset=(5, 5),
            labelTextSize="8pt",
            colCount=len(PHASES),
            brush=pg.mkBrush(255, 255, 255, 210),
            pen=pg.mkPen("#cccccc"),
        )
        self.phase_curves = {}
        # drawn from the top of the stack down, each filled to zero, so the bands stack
        for p in reversed(PHASES):
            colour = PHASE_COLOURS[p]
            self.phase_curves[p] = self.phase_plot.plot(
                [], [], pen=pg.mkPen(colour), fillLevel=0, brush=pg.mkBrush(colour), name=p
            )
        # a chain step is one branch: nodes == depth == drafted, so those two lines coincide
        self.shape_plot = _plot(self.canvas, 3, 0, "Draft shape", "tokens", colspan=2)
        self.shape_plot.addLegend(
            offset=(5, 5),
            labelTextSize="8pt",
            colCount=3,
            brush=pg.mkBrush(255, 255, 255, 210),
            pen=pg.mkPen("#cccccc"),
        )
        # three thin lines: nodes the target verified, the draft's depth, the accepted path
        self.shape_curves = {
            key: self.shape_plot.plot([], [], pen=pg.mkPen(SHAPE_COLOURS[key], width=1), name=name)
            for key, name in (("nodes", "nodes"), ("depth", "depth"), ("path", "accepted path"))
        }
        self.summary = QLabel("no steps yet", self, objectName="plotSummary")
        # a fixed one-line label: a summary that changed width or height would re-layout the plots
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        clear = QPushButton("Clear", self, objectName="clearPlotsButton")
        clear.clicked.connect(self.clear)

        head = QHBoxLayout()
        head.addWidget(self.summary, 1)
        head.addWidget(clear)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(head)
        lay.addWidget(self.canvas, 1)

    # -- data -------------------------------------------------------------------------------------
    def add_steps(self, records, served: bool = False) -> None:
        # decode steps only: a request's first token comes from its prefill (a ~0.1 ms pick, whose
        # rate would spike the tok/s plot and the status bar's figure at every request)
        records = [r for r in records if not r.prefill]
        if not records:
            return
        rows = np.empty((len(records), WIDTH))
        rows[:, SERVED] = 1.0 if served else 0.0
        for i, r in enumerate(records):
            rows[i, X] = self._x
            self._x += 1
            rows[i, TOKS] = r.tok_per_s
            rows[i, ACCEPT] = r.accepted / r.drafted if r.drafted else np.nan
            rows[i, COMMIT] = r.committed
            rows[i, DRAFTED] = r.drafted
            rows[i, ACCEPTED] = r.accepted
            rows[i, WALL] = r.wall
            # a tree step reports its shape; a chain (or AR) step is one branch of ``drafted`` tokens
            tree = r.tree_nodes > 0
            rows[i, NODES] = r.tree_nodes if tree else r.drafted
            rows[i, DEPTH] = r.tree_depth if tree else r.drafted
            rows[i, PATH] = r.path_len if tree else r.accepted
            for j, p in enumerate(PHASES):
                rows[i, PHASE0 + j] = getattr(r, f"t_{p}") * 1000.0
        self.buffer.extend(rows)
        if self.isVisible():
            self.redraws()
        else:
            self._stale = True

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if self._stale:
            self._stale = False
            self.redraws()

    def clear(self) -> None:
        self.buffer.clear()
        self._x = 0
        self.redraws.cancel()
        self.redraw()

    def step_count(self) -> int:
        return len(self.buffer)

    def served_step_count(self) -> int:
        """Steps on screen that served requests made (the rest are chat turns')."""
        return int(self.buffer.values()[:, SERVED].sum())

    def recent_tok_per_s(self, window: int = 32) -> float:
        """Committed tokens over wall time of the last ``window`` steps (the status bar's figure)."""
        v = self.buffer.values()[-window:]
        wall = v[:, WALL].sum() if len(v) else 0.0
        return float(v[:, COMMIT].sum() / wall) if wall > 0 else 0.0

    # -- drawing ----------------------------------------------------------------------------------
    def _set_range(self, plot, x: tuple, y: tuple) -> None:
        if self._ranges.get(plot) != (x, y):  # unchanged ranges keep the axes' cached pictures
            self._ranges[plot] = (x, y)
            plot.setRange(xRange=x, yRange=y, padding=0)

    def _set_ranges(self, v: np.ndarray, counts: np.ndarray, stack: np.ndarray) -> None:
        if len(v):
            x0 = float(v[0, X]) // 100 * 100
            x1 = x0 + nice_ceiling(v[-1, X] + 1 - x0)
        else:
            x0, x1 = 0.0, 10.0
        xr = (x0, x1)
        top = lambda col: nice_ceiling(float(np.nanmax(col))) if len(col) and np.isfinite(col).any() else 1.0
        self._set_range(self.toks_plot, xr, (0.0, top(v[:, TOKS])))
        self._set_range(self.accept_plot, xr, (0.0, 1.0))
        self._set_range(self.commit_plot, xr, (0.0, top(v[:, COMMIT])))
        self._set_range(self.hist_plot, (-0.5, max(len(counts), 2) - 0.5), (0.0, top(counts.astype(float))))
        self._set_range(self.phase_plot, xr, (0.0, top(stack[:, -1]) if len(stack) else 1.0))
        self._set_range(self.shape_plot, xr, (0.0, top(v[:, NODES : PATH + 1].max(axis=1))))

    def redraw(self) -> None:
        v = self.buffer.values()
        x = v[:, X]
        self.toks_points.setData(x, v[:, TOKS])
        self.toks_smooth.setData(x, trailing_mean(v[:, TOKS], SMOOTH_WINDOW))
        self.toks_served.setData(x, np.where(v[:, SERVED] > 0, v[:, TOKS], np.nan))
        acc = v[:, ACCEPT]
        finite = np.isfinite(acc)
        self.accept_points.setData(x[finite], acc[finite])
        # smoothed as accepted / drafted over the window, so big drafts weigh more
        with np.errstate(invalid="ignore", divide="ignore"):
            smooth = trailing_mean(v[:, ACCEPTED], SMOOTH_WINDOW) / trailing_mean(v[:, DRAFTED], SMOOTH_WINDOW)
        self.accept_smooth.setData(x, np.where(np.isfinite(smooth), smooth, np.nan))
        self.commit_points.setData(x, v[:, COMMIT])
        self.commit_smooth.setData(x, trailing_mean(v[:, COMMIT], SMOOTH_WINDOW))
        counts = np.bincount(v[:, COMMIT].astype(np.int64)) if len(v) else np.zeros(0)
        self.hist_bars.setOpts(x=np.arange(len(counts)), height=counts, width=0.8)
        stack = np.cumsum(v[:, PHASE0 : PHASE0 + len(PHASES)], axis=1)
        for j, p in enumerate(PHASES):
            self.phase_curves[p].setData(x, stack[:, j])
        for key, col in (("nodes", NODES), ("depth", DEPTH), ("path", PATH)):
            self.shape_curves[key].setData(x, v[:, col])
        self._set_ranges(v, counts, stack)
        if len(v):
            drafted, accepted = v[:, DRAFTED].sum(), v[:, ACCEPTED].sum()
            rate = f"{accepted / drafted:.0%} accepted" if drafted else "no drafts (autoregressive)"
            served = int(v[:, SERVED].sum())  # first in the line: a narrow dock cuts its end
            self.summary.setText(
                f"{self.buffer.total} steps"
                + (f" ({served} served, purple)" if served else "")
                + f" · {self.recent_tok_per_s():.1f} tok/s (last 32) · "
                f"{v[:, COMMIT].mean():.2f} tok/step · {rate}"
            )
        else:
            self.summary.setText("no steps yet")
