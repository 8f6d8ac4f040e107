"""The Train tab [trainPanel]: train a DFlash drafter for a target GGUF, watch it, cancel it, load the pair.

The training itself is engine_bridge's (``engine_bridge.training.train_for_target.run``, what
``dflash-studio train-drafter`` runs; ``start_training`` below is the one place that calls it). It
runs on a worker QThread, the bench tab's pattern: its events (stage, step, ETA, loss, log lines)
arrive as queued signals, Cancel sets the run's ``threading.Event`` (generation and training poll it
every batch and step; a cancelled run exports nothing), and errors come back as a signal whose
message the tab shows; the app stays up whatever happens.
The loss curve redraws through a throttle (at most 5 times a second, like the live plots),
however fast steps come. When a drafter is written, ``drafterTrained(target, drafter)`` tells the
main window, which pairs and loads it through the pairing panel.

Signals: ``trainingStarted()``, ``progressed(event)`` (every event, after the tab showed it),
``drafterTrained(target: str, drafter: str)``, ``trainingFailed(message: str)``, ``trainingCancelled()``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ..common.plain_text import plain, plain_tip
from ..common.throttle import Throttle

#: the loss curve redraws at most 5 times a second (the live plots' rate; training steps may come faster)
REDRAW_MS = 200
DEVICES = ("auto", "cuda", "cpu")
LOG_LINES = 500  # the log view keeps the newest lines (the run folder's train-log.txt has all)
PROGRESS_STEPS = 1000  # the progress bar's resolution
STAGE_NAMES = {
    "prepare": "preparing prompts",
    "generate": "generating answers",
    "train": "training",
    "export": "exporting",
    "evaluate": "evaluating",
}


@dataclass(frozen=True)
class TrainRequest:
    """What the tab asks the trainer for (plain data: it crosses to the worker thread)."""

    target: Path
    out: Path
    layers: int = 3
    block_size: int = 16
    seconds: float = 540.0  # training time budget
    gen_seconds: float = 180.0  # time budget for generating the target's responses
    device: str = "auto"
    gpus: int = 1  # GPUs of this machine (more than one: one process each, then torchrun)
    work: Path | None = None  # where data and checkpoints go (default: next to out, "<stem>.train")
    prompts: Path | None = None  # the user's extra training prompts (JSONL), beside the shipped set
    #: further trainer options (name, value): prompts per category, max_steps, batch, ... (tests: tiny runs)
    extra: tuple = ()


def resolve_device(device: str) -> str:
    """``auto``: CUDA when PyTorch sees a device, else the CPU (slow: fine for small targets only)."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def start_training(req: TrainRequest, on_event, cancel: threading.Event) -> Path | None:
    """Runs prepare -> generate + train -> export (blocking; called on the worker thread).

    ``engine_bridge.training.train_for_target.run`` does the work (the CLI's ``train-drafter`` runs the
    same call). Returns the drafter GGUF, or None when cancelled: then nothing is exported, and the
    work folder keeps the generated data and the last checkpoint (a rerun with the same name and
    options resumes from them)."""
    from engine_bridge.training import train_chat, train_for_target

    device = resolve_device(req.device)
    train_chat.pick_device(device)  # no CUDA for "cuda": say so before minutes of preparation
    train_chat.check_gpus(device, req.gpus)  # ...and too few GPUs for the count asked
    train_for_target.run(
        req.target,
        req.out,
        stages=("prepare", "train", "export"),
        work=req.work,
        device=device,
        n_layer=req.layers,
        block_size=req.block_size,
        seconds=req.seconds,
        gen_seconds=req.gen_seconds,
        gpus=req.gpus,
        extra_prompts=req.prompts,
        progress=on_event,
        cancel=cancel,
        log=lambda line: on_event({"log": str(line)}),
        **dict(req.extra),
    )
    if cancel.is_set() or not req.out.exists():
        return None
    from engine_bridge.models.library import Library

    Library().record_made(req.out, "trained drafter")  # the library's Forget may delete it
    return req.out


def check_prompt_file(path: Path) -> int:
    """The number of prompts in a user's prompt file; ValueError naming the first bad line or the first
    prompt that overlaps a public benchmark (what prepare would refuse, said before anything runs)."""
    from engine_bridge.training import decontam
    from engine_bridge.training.chat_data import read_extra_prompts

    rows = read_extra_prompts(path)
    decontam.require_clean(
        [r["text"] for r in rows], [f"{path.name} line {r['line']}" for r in rows], what=f"the prompts of {path.name}"
    )
    return len(rows)


def work_folder(req: TrainRequest) -> Path:
    """Where a request's data, run and checkpoints go."""
    from engine_bridge.training.train_for_target import work_dir_for

    return Path(req.work) if req.work else work_dir_for(req.out)


def default_output(target: Path, folder: Path | None = None) -> Path:
    """``<models>/<target stem>-dflash.gguf``, numbered so an earlier drafter is never overwritten."""
    from engine_bridge.common.paths import models_dir

    folder = Path(folder or models_dir())
    out = folder / f"{target.stem}-dflash.gguf"
    n = 2
    while out.exists():
        out = folder / f"{target.stem}-dflash-{n}.gguf"
        n += 1
    return out


def _eta(s) -> str:
    if s is None:
        return "ETA --:--"
    s = int(s + 0.5)
    return f"ETA {s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"ETA {s // 60}:{s % 60:02d}"


def progress_fraction(event: dict) -> float | None:
    """How far the event's stage is: done/total for generation, elapsed against the ETA for training."""
    done, total = event.get("done"), event.get("total")
    if total:
        return min(1.0, float(done or 0) / float(total))
    el, eta = event.get("elapsed_s"), event.get("eta_s")
    if el is not None and eta is not None and el + eta > 0:
        return min(1.0, el / (el + eta))
    return None


class TrainWorker(QObject):
    """Runs one training on its thread; every result goes back as a queued signal."""

    event = Signal(object)
    finished = Signal(object)  # Path of the drafter
    failed = Signal(object)  # the exception
    cancelled = Signal()

    def __init__(self, request: TrainRequest, cancel: threading.Event):
        super().__init__()
        self.request = request
        self.cancel = cancel

    @Slot()
    def run(self) -> None:
        try:
            drafter = start_training(self.request, self.event.emit, self.cancel)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message in the tab
            self.failed.emit(exc)
        else:
            if drafter is None:
                self.cancelled.emit()
            else:
                self.finished.emit(drafter)
        QThread.currentThread().quit()


class TrainPanel(QWidget):
    trainingStarted = Signal()
    progressed = Signal(object)
    drafterTrained = Signal(str, str)  # target, drafter
    trainingFailed = Signal(str)
    trainingCancelled = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("trainPanel")
        self._thread: QThread | None = None
        self._worker: TrainWorker | None = None
        self._cancel = threading.Event()
        self._request: TrainRequest | None = None
        self._current_target = ""
        #: trainer options the form does not show (prompts per category, batch, max_steps, ...)
        self.extra_options: dict = {}
        self.steps: list[float] = []  # the loss curves' points
        self.losses: list[float] = []
        self.val_losses: list[float] = []
        self.events = 0  # events received in this run
        self.last_event = None
        self._started_at = 0.0
        self.redraws = Throttle(self._draw_loss, interval_ms=REDRAW_MS, parent=self)
        self._build()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)

    # -- layout -------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.target_edit = QLineEdit(
            objectName="trainTargetEdit", placeholderText="target GGUF (llama family, qwen2, qwen3)"
        )
        self.browse_button = QPushButton("Browse…", objectName="trainBrowseButton")
        self.browse_button.clicked.connect(self._browse)
        self.current_button = QPushButton("Current pair's target", objectName="trainCurrentTargetButton", enabled=False)
        self.current_button.clicked.connect(lambda: self.target_edit.setText(self._current_target))
        target_row = QHBoxLayout()
        target_row.addWidget(self.target_edit, 1)
        target_row.addWidget(self.browse_button)
        target_row.addWidget(self.current_button)

        self.layers_spin = QSpinBox(objectName="trainLayersSpin", minimum=1, maximum=16, value=3)
        self.layers_spin.setToolTip("drafter layers (each the target's width)")
        self.block_combo = QComboBox(objectName="trainBlockCombo")
        self.block_combo.addItems(["16", "8"])
        self.block_combo.setToolTip("the drafter's block size: the longest draft one step can propose")
        self.seconds_spin = QSpinBox(
            objectName="trainSecondsSpin", minimum=5, maximum=7 * 24 * 3600, value=540, suffix=" s", singleStep=60
        )
        self.seconds_spin.setToolTip(
            "time budget for training; the learning rate follows the clock, so the run ends annealed when it is spent"
        )
        self.gen_seconds_spin = QSpinBox(
            objectName="trainGenSecondsSpin", minimum=5, maximum=7 * 24 * 3600, value=180, suffix=" s", singleStep=60
        )
        self.gen_seconds_spin.setToolTip(
            "time budget for the target's own answers to the training prompts (the drafter learns to predict them)"
        )
        self.device_combo = QComboBox(objectName="trainDeviceCombo")
        self.device_combo.addItems(list(DEVICES))
        self.device_combo.setToolTip("cuda needs a CUDA device and PyTorch built for it; auto picks it when present")
        self.gpus_spin = QSpinBox(objectName="trainGpusSpin", minimum=1, maximum=64, value=1)
        self.gpus_spin.setToolTip(
            "GPUs of this machine to generate and train on: each writes a share of the target's answers, "
            "then the drafter trains on all of them at once (a batch per GPU)"
        )
        self.out_edit = QLineEdit(objectName="trainOutEdit", placeholderText="default: <models>/<target>-dflash.gguf")
        self.prompts_edit = QLineEdit(
            objectName="trainPromptsEdit", placeholderText='optional: one JSON object per line, {"text": ...}'
        )
        self.prompts_edit.setToolTip(
            "extra training prompts of your own, added to the shipped prompt set; each line "
            '{"text": ...} (or "prompt", or "messages") with an optional "category" '
            "(chat, instructions, writing, code, math, reasoning). Prompts that overlap a "
            "public benchmark (MT-Bench, GSM8K, HumanEval, ...) are refused."
        )
        self.prompts_button = QPushButton("Browse…", objectName="trainPromptsBrowseButton")
        self.prompts_button.clicked.connect(self._browse_prompts)
        prompts_row = QHBoxLayout()
        prompts_row.addWidget(self.prompts_edit, 1)
        prompts_row.addWidget(self.prompts_button)
        form = QFormLayout()
        form.addRow("Target", target_row)
        form.addRow("Drafter layers", self.layers_spin)
        form.addRow("Block size", self.block_combo)
        form.addRow("Data generation budget", self.gen_seconds_spin)
        form.addRow("Training budget", self.seconds_spin)
        form.addRow("Device", self.device_combo)
        form.addRow("GPUs", self.gpus_spin)
        form.addRow("Save drafter as", self.out_edit)
        form.addRow("Extra prompts (JSONL)", prompts_row)

        self.start_button = QPushButton("Train drafter", objectName="trainStartButton")
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel", objectName="trainCancelButton", enabled=False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress_bar = QProgressBar(objectName="trainProgress", minimum=0, maximum=1, value=0)
        self.stage_label = QLabel("", objectName="trainStage")
        self.status_label = QLabel("", objectName="trainStatus", wordWrap=True)
        plain(self.stage_label, self.status_label)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.plot = pg.PlotWidget(background="w")
        self.plot.setObjectName("trainLossPlot")
        self.plot.setTitle("training loss", color="#333", size="9pt")
        self.plot.setLabel("left", "loss")
        self.plot.setLabel("bottom", "step")
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(y=True, alpha=0.2)
        self.plot.getPlotItem().setDownsampling(auto=True, mode="mean")
        self.plot.getPlotItem().setClipToView(True)
        self.plot.addLegend(offset=(-5, 5), labelTextSize="8pt")
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#2b5797", width=2), name="train")
        self.val_curve = self.plot.plot([], [], pen=pg.mkPen("#e0902a", width=2), name="held-out")
        self.plot.setMinimumHeight(180)
        self.log_view = QPlainTextEdit(objectName="trainLog", readOnly=True)
        self.log_view.setMaximumBlockCount(LOG_LINES)
        self.log_view.setMaximumHeight(140)

        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress_bar, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addLayout(buttons)
        lay.addWidget(self.stage_label)
        lay.addWidget(self.status_label)
        lay.addWidget(self.plot, 1)
        lay.addWidget(self.log_view)

    # -- inputs -------------------------------------------------------------------------------------
    def set_current_target(self, path: str) -> None:
        """The loaded/chosen pair's target, offered by a button (and filled in when the field is empty)."""
        self._current_target = path or ""
        self.current_button.setEnabled(bool(path))
        self.current_button.setToolTip(plain_tip(path or "no pair chosen"))
        if path and not self.target_edit.text():
            self.target_edit.setText(path)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Choose the target GGUF",
            str(Path(self.target_edit.text()).parent),
            "GGUF models (*.gguf);;All files (*)",
        )
        if path:
            self.target_edit.setText(path)

    def _browse_prompts(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Choose a prompt file",
            str(Path(self.prompts_edit.text()).parent),
            "JSON lines (*.jsonl);;All files (*)",
        )
        if path:
            self.prompts_edit.setText(path)

    def build_request(self, **overrides) -> TrainRequest:
        """The request the inputs describe; ValueError with the reason when they describe none."""
        text = self.target_edit.text().strip()
        if not text:
            raise ValueError("choose a target GGUF first")
        target = Path(text).expanduser()
        if not target.is_file():
            raise ValueError(f"the target {target} is not a file")
        out_text = self.out_edit.text().strip()
        out = Path(out_text).expanduser() if out_text else default_output(target)
        if out.exists():
            raise ValueError(f"{out} already exists: choose another name (a drafter is never overwritten)")
        prompts = None
        if self.prompts_edit.text().strip():
            prompts = Path(self.prompts_edit.text().strip()).expanduser()
            check_prompt_file(prompts)
        fields = dict(
            target=target,
            out=out,
            prompts=prompts,
            layers=self.layers_spin.value(),
            block_size=int(self.block_combo.currentText()),
            seconds=float(self.seconds_spin.value()),
            gen_seconds=float(self.gen_seconds_spin.value()),
            device=self.device_combo.currentText(),
            gpus=self.gpus_spin.value(),
            extra=tuple(self.extra_options.items()),
        )
        fields.update(overrides)
        return TrainRequest(**fields)

    # -- running ------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, **overrides) -> bool:
        """Starts a training from the inputs; False (and the reason in the status line) if it cannot."""
        if self.running:
            return False
        from engine_bridge.training import unavailable

        why = unavailable()  # the one-file bundle carries no PyTorch
        if why:
            self._status(why, error=True)
            return False
        try:
            req = self.build_request(**overrides)
        except (ValueError, OSError) as exc:
            self._status(str(exc), error=True)
            return False
        self._request = req
        self._cancel = threading.Event()
        self.steps.clear()
        self.losses.clear()
        self.val_losses.clear()
        self.log_view.clear()
        self.events = 0
        self.last_event = None
        self.redraws.cancel()
        self.curve.setData([], [])
        self.val_curve.setData([], [])
        self.progress_bar.setRange(0, 0)  # busy until the trainer says how far it has to go
        self._thread = QThread()
        self._thread.setObjectName("trainThread")
        self._worker = TrainWorker(req, self._cancel)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.run)
        self._worker.event.connect(self._on_event)
        self._worker.finished.connect(self._on_finished)
        self._worker.failed.connect(self._on_failed)
        self._worker.cancelled.connect(self._on_cancelled)
        self._thread.finished.connect(self._on_thread_done)
        self._set_running(True)
        self._started_at = time.monotonic()
        self.stage_label.setText("starting…")
        self._status(f"training a drafter for {req.target.name} → {req.out}")
        self._thread.start()
        self.trainingStarted.emit()
        return True

    def cancel(self) -> None:
        """Asks the trainer to stop (it checks every step); the tab says so when it has."""
        self._cancel.set()
        self.cancel_button.setEnabled(False)
        if self.running:
            self._status("cancelling…")

    def shutdown(self, timeout_ms: int = 60000) -> bool:
        """Cancels and joins the worker thread (window close, app quit, test teardown)."""
        self._cancel.set()
        self.redraws.cancel()
        if self._thread is None:
            return True
        ok = self._thread.wait(timeout_ms)
        if ok:
            self._on_thread_done()
        return ok

    def closeEvent(self, event) -> None:  # noqa: N802
        self.shutdown()
        super().closeEvent(event)

    def _set_running(self, on: bool) -> None:
        self.start_button.setEnabled(not on)
        self.cancel_button.setEnabled(on)
        for w in (
            self.target_edit,
            self.browse_button,
            self.layers_spin,
            self.block_combo,
            self.seconds_spin,
            self.gen_seconds_spin,
            self.device_combo,
            self.gpus_spin,
            self.out_edit,
        ):
            w.setEnabled(not on)
        self.current_button.setEnabled(not on and bool(self._current_target))

    # -- worker replies -----------------------------------------------------------------------------
    @Slot(object)
    def _on_event(self, event: dict) -> None:
        """One trainer event: a log line, a stage start, a generation batch or a training log point."""
        self.events += 1
        self.last_event = event
        if "log" in event:
            self.log_view.appendPlainText(event["log"])
        stage = event.get("stage")
        if stage is None:
            self.progressed.emit(event)
            return
        frac = progress_fraction(event)
        if frac is None:
            self.progress_bar.setRange(0, 0)  # a stage that cannot say how far it is
        else:
            self.progress_bar.setRange(0, PROGRESS_STEPS)
            self.progress_bar.setValue(int(frac * PROGRESS_STEPS))
        parts = [STAGE_NAMES.get(stage, stage)]
        if event.get("total"):
            parts.append(f"{event.get('done', 0)}/{event['total']}")
        if event.get("step") is not None:
            parts.append(f"step {event['step']}")
        if "eta_s" in event:
            parts.append(_eta(event["eta_s"]))
        if event.get("loss") is not None:
            parts.append(f"loss {event['loss']:.3f}")
            self.steps.append(float(event.get("step", len(self.steps))))
            self.losses.append(float(event["loss"]))
            self.val_losses.append(float(event["val_loss"]) if event.get("val_loss") is not None else float("nan"))
            self.redraws()
        if event.get("val_walk") is not None:
            # what the engine will take: drafts accepted per chain-7 step on held-out answers
            parts.append(f"held-out drafts accepted/step {event['val_walk']:.2f}")
        elif event.get("val_accepted") is not None:
            parts.append(f"held-out accepted/block {event['val_accepted']:.2f}")
        if event.get("message"):
            parts.append(str(event["message"]))
        self.stage_label.setText(" · ".join(parts))
        self.progressed.emit(event)

    def _draw_loss(self) -> None:
        self.curve.setData(self.steps, self.losses)
        self.val_curve.setData(self.steps, self.val_losses, connect="finite")

    @Slot(object)
    def _on_finished(self, drafter) -> None:
        self.redraws.flush()
        req = self._request
        took = time.monotonic() - self._started_at
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(1)
        self.stage_label.setText(f"done in {took:.0f} s")
        self._status(f"drafter written: {drafter}; pairing it with {req.target.name}")
        self.drafterTrained.emit(str(req.target), str(drafter))

    @Slot(object)
    def _on_failed(self, exc) -> None:
        from ..chat.chat_session import describe_error

        self.redraws.flush()
        message = describe_error(exc)
        self.stage_label.setText("failed")
        self._status(message, error=True)
        self.trainingFailed.emit(message)

    @Slot()
    def _on_cancelled(self) -> None:
        self.redraws.flush()
        self.stage_label.setText("cancelled")
        self._status(
            f"training cancelled; no drafter was written (the generated data and the last checkpoint "
            f"stay in {work_folder(self._request)}: the same name and options resume from them)"
        )
        self.trainingCancelled.emit()

    @Slot()
    def _on_thread_done(self) -> None:
        if self._thread is None:
            return
        if self._thread.isRunning():
            self._thread.wait()
        self._thread.deleteLater()
        self._worker.deleteLater()
        self._thread = self._worker = None
        self._set_running(False)
        if self.progress_bar.maximum() == 0:  # a busy bar must not keep spinning after the run
            self.progress_bar.setRange(0, 1)

    def _status(self, text: str, error: bool = False) -> None:
        self.status_label.setText(text)
        self.status_label.setStyleSheet("color: #b00020;" if error else "")
