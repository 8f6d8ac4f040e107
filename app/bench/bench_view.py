"""The Bench tab [benchView]: autoregressive vs speculative on a prompt suite, with sweeps and exports.

Embedding (the main window owns the tab)::

    view = BenchView(parent=None)
    view.set_pair(target_path, draft_path, engine_config_kwargs)   # before Run; again on every pair change
    view.set_check(report, target_path)   # the Pair tab's check: a FAIL there disables Run here
    ...
    view.shutdown()   # on window close: cancels a run and joins its thread (also done on app quit)

``engine_config_kwargs`` are EngineConfig's other fields (n_ctx, n_gpu_layers, flash_attn,
target_kv=KVTypes(...), draft_kv, n_threads, adapters, ...). The bench loads its own engine from
them (it reloads per K/V configuration and swaps drafters per variant), so it never disturbs the
chat's engine — but both pairs sit in memory while a bench runs.

The run happens in ``engine_bridge.bench.runner.run_bench`` on a worker QThread; its progress arrives as
queued signals, Cancel sets the run's ``threading.Event`` (it stops within one decoding step) and
what finished is still summarised, shown and exportable. Signals: ``runStarted()``,
``runFinished(report: dict)``, ``runFailed(message: str)``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine_bridge.bench.runner import DEFAULT_BLOCK, BenchProgress, BenchSpec, parse_sweep, run_bench
from engine_bridge.bench.export import write_report
from engine_bridge.bench.report import build_report, summary_table
from engine_bridge.bench.suites import builtin_names, load_suite
from engine_bridge.runtime.config import EngineConfig
from engine_bridge.runtime.default_mode import default_budget

from ..common.file_names import short_path
from ..common.plain_text import plain, plain_tip
from ..common.save_dialogs import ask_save_path
from ..common.throttle import Throttle

OTHER_SUITE = "Other JSONL file…"
EXPORTS = {
    "json": ("JSON", "JSON (*.json)"),
    "csv": ("CSV", "CSV (*.csv)"),
    "md": ("Markdown", "Markdown (*.md)"),
    "html": ("HTML", "HTML (*.html)"),
}
AR_BRUSH, SPEC_BRUSH = "#999999", "#4a7fd4"


def _eta(s: float | None) -> str:
    if s is None:
        return "ETA --:--"
    s = int(s + 0.5)
    return f"ETA {s // 60}:{s % 60:02d}"


class BenchWorker(QObject):
    """Runs one bench on its thread; every result goes back as a queued signal."""

    progress = Signal(object)  # BenchProgress
    finished = Signal(object)  # BenchResult (complete or cancelled)
    failed = Signal(str)

    def __init__(self, spec: BenchSpec, cancel: threading.Event):
        super().__init__()
        self.spec = spec
        self.cancel = cancel

    @Slot()
    def run(self) -> None:
        try:
            result = run_bench(self.spec, on_progress=self.progress.emit, cancel=self.cancel)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message in the tab
            self.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.finished.emit(result)
        QThread.currentThread().quit()


class BenchView(QWidget):
    runStarted = Signal()
    runFinished = Signal(object)  # the report dict
    runFailed = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("benchView")
        self._pair: tuple[Path, Path, dict] | None = None
        self._check: tuple[object, str] | None = None  # (the Pair tab's CompatReport, its target path)
        self._user_suite: str | None = None
        self._thread: QThread | None = None
        self._worker: BenchWorker | None = None
        self._cancel = threading.Event()
        self.result = None  # the last BenchResult
        self.report: dict | None = None
        self._live: dict[str, list[float]] = {}  # row id -> tok/s of each finished generation
        self._labels: dict[str, tuple[str, str]] = {}  # row id -> (label, kind)
        self._redraw = Throttle(self._draw_live, parent=self)
        self._build()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)

    # -- layout -------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.pair_label = QLabel("no pair chosen", objectName="benchPairLabel")
        plain(self.pair_label)
        self.suite_combo = QComboBox(objectName="benchSuiteCombo")
        self.suite_combo.addItems(builtin_names() + [OTHER_SUITE])
        self.suite_combo.setCurrentText("code")
        self.suite_combo.activated.connect(self._suite_chosen)
        self.limit_spin = QSpinBox(objectName="benchLimitSpin", minimum=0, maximum=10000, value=0)
        self.limit_spin.setSpecialValueText("all")
        self.reps_spin = QSpinBox(objectName="benchRepsSpin", minimum=1, maximum=100, value=3)
        self.tokens_spin = QSpinBox(objectName="benchMaxTokensSpin", minimum=1, maximum=8192, value=64)
        self.block_spin = QSpinBox(objectName="benchBlockSpin", minimum=0, maximum=10000, value=DEFAULT_BLOCK)
        self.block_spin.setSpecialValueText("whole suite")
        self.block_spin.setToolTip(
            "Each configuration runs this many prompts before the next one takes the same prompts. "
            "A GPU's speed can drift by 10 % over a minute; small blocks put seconds, not a whole "
            "suite, between a configuration and its baseline (each block has its own warm-up)."
        )
        # the budget chat starts with (5 for chain on a GPU build, else 7): a first bench measures
        # what a first chat runs
        self.budget_edit = QLineEdit(str(default_budget("chain")), objectName="benchBudgetEdit")
        self.verify_edit = QLineEdit("chain", objectName="benchVerifyEdit")
        self.kv_edit = QLineEdit("", objectName="benchKvEdit", placeholderText="pair's K/V, or e.g. f16,q8_0/q8_0")
        self.variant_edit = QLineEdit(
            "base", objectName="benchVariantEdit", placeholderText="base, other-drafter.gguf, lora:adapter.gguf@0.5"
        )
        for e, tip in (
            (self.budget_edit, "draft budgets, comma-separated: 4,8,15 sweeps three"),
            (self.verify_edit, "chain, tree, or chain,tree to compare"),
            (self.kv_edit, "target K/V cache types to sweep (each needs a reload)"),
            (self.variant_edit, "drafter variants: base, another drafter GGUF, lora:PATH@SCALE"),
        ):
            e.setToolTip(tip)
        form = QFormLayout()
        form.addRow("Pair", self.pair_label)
        form.addRow("Suite", self.suite_combo)
        form.addRow("Prompts", self.limit_spin)
        form.addRow("Repetitions", self.reps_spin)
        form.addRow("Max tokens", self.tokens_spin)
        form.addRow("Prompts per turn", self.block_spin)
        sweep = QFormLayout()
        sweep.addRow("Budget", self.budget_edit)
        sweep.addRow("Verify mode", self.verify_edit)
        sweep.addRow("K/V types", self.kv_edit)
        sweep.addRow("Draft variant", self.variant_edit)
        sweep_box = QGroupBox("Sweep (comma-separated values)")
        sweep_box.setLayout(sweep)

        self.run_button = QPushButton("Run bench", objectName="benchRunButton")
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel", objectName="benchCancelButton", enabled=False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress_bar = QProgressBar(objectName="benchProgress", minimum=0, maximum=1, value=0)
        self.status_label = QLabel("", objectName="benchStatus", wordWrap=True)
        plain(self.status_label)

        self.plot = pg.PlotWidget(background="w")
        self.plot.setObjectName("benchPlot")
        self.plot.setTitle("tok/s per configuration (whiskers: 95% interval when done)", color="#333", size="9pt")
        self.plot.setLabel("left", "tok/s")
        # tok/s as tok/s: no "(x0.001)" prefix; and no bars below zero, so no axis down to -400
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.plot.getPlotItem().getViewBox().setLimits(yMin=0)
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(y=True, alpha=0.2)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.6, brushes=[])
        self.errors = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0), beam=0.2)
        self.plot.addItem(self.bars)
        self.plot.addItem(self.errors)
        self.plot.setMinimumHeight(160)
        self._frame(0)

        self.baseline_combo = QComboBox(objectName="benchBaselineCombo", enabled=False)
        self.baseline_combo.activated.connect(self._baseline_chosen)
        self.table = QTableWidget(0, 0, objectName="benchTable")
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)  # the "row" column already names each row
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.export_buttons: dict[str, QPushButton] = {}
        # two rows: the baseline and the four exports side by side made the tab wider than the space
        # between the docks, which cut off the sweep panel (issue 33)
        baseline = QHBoxLayout()
        baseline.addWidget(QLabel("Deltas against"))
        baseline.addWidget(self.baseline_combo, 1)
        exports = QHBoxLayout()
        for kind, (name, _) in EXPORTS.items():
            b = QPushButton(f"Export {name}…", objectName=f"benchExport{name}", enabled=False)
            b.clicked.connect(lambda _=False, k=kind: self._export_dialog(k))
            self.export_buttons[kind] = b
            exports.addWidget(b)
        exports.addStretch(1)

        top = QGridLayout()
        top.addLayout(form, 0, 0)
        top.addWidget(sweep_box, 0, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress_bar, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addLayout(buttons)
        lay.addWidget(self.status_label)
        lay.addWidget(self.plot, 1)
        lay.addWidget(self.table, 1)
        lay.addLayout(baseline)
        lay.addLayout(exports)

    # -- inputs -------------------------------------------------------------------------------------
    def set_pair(self, target_path, draft_path, engine_config_kwargs: dict | None = None) -> None:
        """The pair to bench, with the EngineConfig fields it is loaded with (n_ctx, K/V, ...)."""
        self._pair = (Path(target_path), Path(draft_path), dict(engine_config_kwargs or {}))
        # the folder too: every shipped drafter is a drafter.gguf
        self.pair_label.setText(f"{short_path(target_path)} + {short_path(draft_path)}")
        self.pair_label.setToolTip(plain_tip(f"{target_path}\n{draft_path}"))
        self._update_run_button()

    def set_check(self, report, target_path) -> None:
        """The Pair tab's pairing check (compat.CompatReport, or None when it could not run) for the
        pair whose target is ``target_path``. While it has a FAIL for this tab's pair, Run stays
        disabled and the status line gives the same reasons: the engine would refuse the pair anyway,
        row by row, after loading the target."""
        self._check = (report, str(target_path)) if report is not None else None
        self._update_run_button()

    def refusal(self) -> str | None:
        """Why this pair cannot be benched (the Pair tab's FAIL checks), or None."""
        if self._check is None or self._pair is None:
            return None
        report, target = self._check
        if report.ok or target != str(self._pair[0]):
            return None
        reasons = "; ".join(f"{c.name}: {c.reason}" for c in report.failures)
        return (
            f"The Pair tab's check refuses this pair ({len(report.failures)} FAIL): {reasons}. "
            "Fix the pair there, then run the bench."
        )

    def _update_run_button(self) -> None:
        refusal = self.refusal()
        self.run_button.setEnabled(not self.running and refusal is None)
        self.run_button.setToolTip(refusal or "")
        if refusal is not None:
            self._status(refusal, error=True)
        elif self.status_label.text().startswith("The Pair tab's check refuses"):
            self._status("")

    def set_suite_file(self, path) -> None:
        """Uses a user JSONL suite (what the 'Other JSONL file…' entry picks)."""
        self._user_suite = str(path)
        idx = self.suite_combo.findText(self._user_suite)
        if idx < 0:
            self.suite_combo.insertItem(self.suite_combo.count() - 1, self._user_suite)
            idx = self.suite_combo.findText(self._user_suite)
        self.suite_combo.setCurrentIndex(idx)

    def _suite_chosen(self, index: int) -> None:
        if self.suite_combo.itemText(index) != OTHER_SUITE:
            return
        path, _ = QFileDialog.getOpenFileName(self, "Prompt suite", "", "JSON Lines (*.jsonl)")
        if path:
            self.set_suite_file(path)
        else:
            self.suite_combo.setCurrentIndex(0)

    def build_spec(self) -> BenchSpec:
        """The BenchSpec the inputs describe; raises ValueError (with the reason) when they are wrong."""
        if self._pair is None:
            raise ValueError("choose a target and a drafter first")
        target, draft, kwargs = self._pair
        suite_name = self.suite_combo.currentText()
        if suite_name == OTHER_SUITE:
            raise ValueError("choose a JSONL file for the suite")
        suite = load_suite(suite_name).head(self.limit_spin.value() or None)
        settings, sweep = {}, []
        for axis, edit in (
            ("budget", self.budget_edit),
            ("verify_mode", self.verify_edit),
            ("kv", self.kv_edit),
            ("draft_variant", self.variant_edit),
        ):
            values = [v.strip() for v in edit.text().split(",") if v.strip()]
            if len(values) > 1 or (axis in ("kv", "draft_variant") and values and values != ["base"]):
                sweep.append(f"{axis}={','.join(values)}")
            elif values:
                settings[axis] = values[0]
        parsed = parse_sweep(sweep)
        single = parse_sweep([f"{k}={v}" for k, v in settings.items()])
        return BenchSpec(
            engine=EngineConfig(target=target, draft=draft, **kwargs),
            suite=suite,
            reps=self.reps_spin.value(),
            max_tokens=self.tokens_spin.value(),
            round_prompts=self.block_spin.value(),
            budget=single.get("budget", [default_budget(single.get("verify_mode", ["chain"])[0])])[0],
            verify_mode=single.get("verify_mode", ["chain"])[0],
            sweep=parsed,
        )

    # -- running ----------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> bool:
        """Starts a run from the inputs; False (and the reason in the status line) if it cannot."""
        if self.running:
            return False
        refusal = self.refusal()
        if refusal is not None:
            self._status(refusal, error=True)
            return False
        try:
            spec = self.build_spec()
        except (ValueError, OSError) as exc:
            self._status(str(exc), error=True)
            return False
        self._cancel = threading.Event()
        self._live.clear()
        self._labels.clear()
        self.report = self.result = None
        self._set_exports(False)
        self.table.setRowCount(0)
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self._thread = QThread()
        self._thread.setObjectName("benchThread")
        self._worker = BenchWorker(spec, self._cancel)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.run)
        self._worker.progress.connect(self._on_progress)
        self._worker.finished.connect(self._on_finished)
        self._worker.failed.connect(self._on_failed)
        self._thread.finished.connect(self._on_thread_done)
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self._status("starting…")
        self._thread.start()
        self.runStarted.emit()
        return True

    def cancel(self) -> None:
        """Stops the run within one decoding step; what finished is still reported."""
        self._cancel.set()
        self.cancel_button.setEnabled(False)
        if self.running:
            self._status("cancelling…")

    def shutdown(self) -> None:
        """Cancels and joins the worker thread (window close, app quit, test teardown)."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.quit()
            self._thread.wait()
            self._on_thread_done()

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)

    @Slot(object)
    def _on_progress(self, p: BenchProgress) -> None:
        self.progress_bar.setRange(0, max(1, p.total))
        self.progress_bar.setValue(p.done)
        if p.row_id and p.row_id not in self._labels:
            self._labels[p.row_id] = (p.row_label, "ar" if p.row_label.startswith("autoregressive") else "spec")
        if p.measurement is not None:
            s = p.measurement.summary
            ts = s["n_generated"] / s["t_generate"] if s["t_generate"] > 0 else 0.0
            self._live.setdefault(p.row_id, []).append(ts)
            self._redraw()
        where = f"{p.row_id} {p.row_label}" + (f" · {p.prompt_id} rep {p.rep}" if p.prompt_id else f" · {p.stage}")
        line = f"{p.done}/{p.total} · {_eta(p.eta_s)} · {where}"
        if p.message:
            line += f" · {p.message}"
        self._status(line, error=p.stage == "failed")

    @Slot(object)
    def _on_finished(self, result) -> None:
        self.result = result
        self._show_report(build_report(result))
        n_failed = sum(r.status == "failed" for r in result.rows)
        state = "cancelled: showing what finished" if result.cancelled else "done"
        self._status(
            f"{state} · {len(result.measurements)} timed generations"
            + (f" · {n_failed} row(s) failed (see the table)" if n_failed else "")
        )
        self.runFinished.emit(self.report)

    @Slot(str)
    def _on_failed(self, message: str) -> None:
        self._status(message, error=True)
        self.runFailed.emit(message)

    @Slot()
    def _on_thread_done(self) -> None:
        if self._thread is None:
            return
        if self._thread.isRunning():  # finished fired while shutting down: wait is done by shutdown
            self._thread.wait()
        self._thread.deleteLater()
        self._worker.deleteLater()
        self._thread = self._worker = None
        self.cancel_button.setEnabled(False)
        self.run_button.setEnabled(self.refusal() is None)

    # -- results ------------------------------------------------------------------------------------
    def _show_report(self, report: dict) -> None:
        self.report = report
        headers, rows = summary_table(report)
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for j, cell in enumerate(row):
                item = QTableWidgetItem(cell)
                if cell.startswith("failed") or cell == "NO":
                    item.setForeground(pg.mkColor("#b00020"))
                elif cell.startswith("real"):
                    item.setForeground(pg.mkColor("#0a6b20"))
                self.table.setItem(i, j, item)
        self.baseline_combo.clear()
        for r in report["rows"]:
            self.baseline_combo.addItem(f"{r['id']}: {r['label']}", r["id"])
        base = report["settings"]["baseline_row"]
        self.baseline_combo.setCurrentIndex(max(0, self.baseline_combo.findData(base)))
        self.baseline_combo.setEnabled(bool(report["rows"]))
        self._set_exports(True)
        self._redraw.cancel()
        self._draw_final()

    def _baseline_chosen(self, index: int) -> None:
        if self.result is not None:
            self._show_report(build_report(self.result, baseline=self.baseline_combo.itemData(index)))

    def _set_exports(self, on: bool) -> None:
        for b in self.export_buttons.values():
            b.setEnabled(on)

    def export(self, kind: str, path) -> Path:
        """Writes the current report as json | csv | md | html to ``path``."""
        if self.report is None:
            raise RuntimeError("no bench results to export yet")
        key = {"json": "json_path", "csv": "csv_path", "md": "md_path", "html": "html_path"}[kind]
        return write_report(self.report, **{key: path})[0]

    def _export_dialog(self, kind: str) -> None:
        name, filt = EXPORTS[kind]
        path = ask_save_path(self, f"Export bench report as {name}", f"bench.{kind}", filt)
        if path:
            try:
                self._status(f"wrote {self.export(kind, path)}")
            except OSError as exc:
                self._status(f"could not write {path}: {exc}", error=True)

    # -- plot ---------------------------------------------------------------------------------------
    def _set_bars(self, ids: list[str], means: list[float], kinds: list[str], lo=None, hi=None) -> None:
        x = np.arange(len(ids), dtype=float)
        brushes = [pg.mkBrush(AR_BRUSH if k == "ar" else SPEC_BRUSH) for k in kinds]
        self.bars.setOpts(x=x, height=np.asarray(means, dtype=float), width=0.6, brushes=brushes)
        if lo is None:
            self.errors.setData(x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0))
        else:
            m = np.asarray(means, dtype=float)
            self.errors.setData(x=x, y=m, top=np.asarray(hi) - m, bottom=m - np.asarray(lo))
        self.plot.getAxis("bottom").setTicks([[(float(i), rid) for i, rid in enumerate(ids)]])
        self._frame(len(ids))

    def _frame(self, n_bars: int) -> None:
        """Autorange around bars; with none (before a run), an empty 0..1 frame."""
        vb = self.plot.getPlotItem().getViewBox()
        if n_bars:
            vb.enableAutoRange()
        else:
            vb.setRange(xRange=(-0.5, 0.5), yRange=(0.0, 1.0), padding=0)
            self.plot.getAxis("bottom").setTicks([[]])  # no rows, no row labels (not -0.4 … 0.4)

    def _draw_live(self) -> None:
        ids = list(self._live)
        self._set_bars(
            ids, [float(np.mean(self._live[i])) for i in ids], [self._labels.get(i, ("", "spec"))[1] for i in ids]
        )

    def _draw_final(self) -> None:
        rows = [r for r in (self.report or {}).get("rows", []) if r["avg_ts"] is not None]
        self._set_bars(
            [r["id"] for r in rows],
            [r["avg_ts"] for r in rows],
            [r["kind"] for r in rows],
            [r["ts_ci_lo"] for r in rows],
            [r["ts_ci_hi"] for r in rows],
        )

    def bar_heights(self) -> list[float]:
        """What the plot shows now (one bar per row), for tests and screenshots."""
        h = self.bars.opts.get("height")
        return [] if h is None else [float(v) for v in h]

    def _status(self, text: str, error: bool = False) -> None:
        self.status_label.setText(text)
        self.status_label.setStyleSheet("color: #b00020;" if error else "")
