"""Pairing: Target and Drafter slots, each model's key facts, and the compatibility report.

A slot takes a dropped GGUF file or Hugging Face folder, a file or folder picker, or a library
entry. Dropping two files at once (on either slot) sorts them by what they are: the drafter goes
to the Drafter slot. Every change re-runs ``engine_bridge.models.compat.check`` on a worker thread; Load
stays disabled while a FAIL stands, and WARN rows need an explicit confirmation. The panel never
judges a pair itself: inspection and checks are the model library's (its cached inspections,
and ``Library.check_pair`` records each pair's last check). A Hugging Face drafter folder cannot
run in llama.cpp; once a GGUF target is chosen, the panel offers the library's conversion.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from .compat_view import CompatReportView
from .first_start import FirstStartOffer
from ..common.file_names import short_path
from ..common.plain_text import plain, plain_tip
from ..common.tasks import TaskRunner


def dropped_paths(mime) -> list[str]:
    """Local GGUF files and folders in a drag's mime data (other things are not models)."""
    out = []
    if mime is None or not mime.hasUrls():
        return out
    for url in mime.urls():
        if not url.isLocalFile():
            continue
        p = Path(url.toLocalFile())
        if p.is_dir() or p.suffix.lower() == ".gguf":
            out.append(str(p))
    return out


def facts_text(info) -> str:
    """Key facts of a modelinfo.ModelInfo, two short lines."""
    size = info.size_bytes / 2**20
    kinds = ", ".join(sorted(info.quant_types)) if info.quant_types else "?"
    role = {"target": "target", "dflash": "DFlash drafter", "dspark": "DSpark drafter", "lora": "LoRA adapter"}.get(
        info.role, info.role
    )
    first = f"{role} · {info.arch or '?'} · {info.n_params / 1e6:.1f}M params · {size:.1f} MiB · {kinds}"
    if info.is_drafter:
        second = (
            f"{info.n_layer} layers · hidden {info.n_embd} · block {info.block_size} · "
            f"reads target layers {list(info.target_layers or ())}"
        )
    else:
        second = (
            f"{info.n_layer} layers · hidden {info.n_embd} · heads {info.n_head}/{info.n_head_kv} · "
            f"ctx {info.context_length} · vocab {info.vocab_size} · "
            f"{'chat template' if info.has_chat_template else 'no chat template'}"
        )
    if not info.data_complete:
        second += " · TRUNCATED"
    return f"{first}\n{second}"


class ElidedLabel(QLabel):
    """A one-line label that elides long text in the middle (paths) instead of widening the panel."""

    def __init__(self, text: str = "", parent=None, objectName: str = ""):
        super().__init__(parent, objectName=objectName)
        self.setTextFormat(Qt.TextFormat.PlainText)  # paths are text, never markup
        self._full = text
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(40)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt naming)
        self._full = text
        self._elide()

    def full_text(self) -> str:
        return self._full

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideMiddle, max(40, self.width()))
        super().setText(shown)


class ModelSlot(QFrame):
    """One side of the pair. Emits ``pathsDropped`` with every model dropped or picked."""

    pathsDropped = Signal(list)
    cleared = Signal()

    def __init__(self, role: str, parent=None):
        super().__init__(parent)
        self.role = role
        self.setObjectName(f"{role}Slot")
        self.setAcceptDrops(True)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.path = ""
        self.info = None  # modelinfo.ModelInfo once inspected
        self.title = QLabel(f"<b>{role.capitalize()}</b>", self)
        self.path_label = ElidedLabel("drop a GGUF file or a Hugging Face folder here", self, objectName=f"{role}Path")
        # what the engine runs for this slot: after "Swap drafter" that is a variant, not the chosen file
        self.loaded_label = QLabel("", self, objectName=f"{role}Loaded")
        self.loaded_label.setWordWrap(True)
        self.loaded_label.setStyleSheet("color: #1a7f37;")
        self.loaded_label.hide()
        self.loaded_path = ""
        self.facts = QLabel("", self, objectName=f"{role}Facts")
        self.facts.setWordWrap(True)
        self.facts.setStyleSheet("color: #555;")
        plain(self.loaded_label, self.facts)  # file and model names are text, never markup
        self.facts.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.browse = QPushButton("File…", self, objectName=f"{role}BrowseButton")
        self.folder = QPushButton("Folder…", self, objectName=f"{role}FolderButton")
        self.library = QPushButton("Library", self, objectName=f"{role}LibraryButton")
        self.clear_button = QPushButton("Clear", self, objectName=f"{role}ClearButton")
        self.browse.clicked.connect(self._pick_file)
        self.folder.clicked.connect(self._pick_folder)
        self.clear_button.clicked.connect(self.cleared)
        head = QHBoxLayout()
        head.addWidget(self.title)
        head.addStretch(1)
        for b in (self.browse, self.folder, self.library, self.clear_button):
            b.setAutoDefault(False)
            head.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addLayout(head)
        lay.addWidget(self.path_label)
        lay.addWidget(self.loaded_label)
        lay.addWidget(self.facts)

    def set_path(self, path: str) -> None:
        self.path = path
        self.info = None
        self.set_loaded(self.loaded_path)
        self.path_label.setText(path or "drop a GGUF file or a Hugging Face folder here")
        self.path_label.setToolTip(plain_tip(path))
        self.facts.setText("reading…" if path else "")

    def set_loaded(self, path: str) -> None:
        """The file the engine has loaded for this slot ('' when none)."""
        self.loaded_path = path or ""
        if not path:
            self.loaded_label.hide()
            return
        if self.path and Path(path).resolve() == Path(self.path).resolve():
            text = f"loaded: {short_path(path)}"
        else:
            what = "a variant of the file above" if self.role == "drafter" and self.path else "not the file above"
            text = f"loaded: {short_path(path)} ({what})"
        self.loaded_label.setText(text)
        self.loaded_label.setToolTip(plain_tip(path))
        self.loaded_label.show()

    def set_facts(self, text: str, error: bool = False) -> None:
        self.facts.setStyleSheet("color: #b00020;" if error else "color: #555;")
        self.facts.setText(text)

    # -- drag and drop ----------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if dropped_paths(event.mimeData()):
            event.acceptProposedAction()
            self._hover(True)
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: N802
        if dropped_paths(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragLeaveEvent(self, event) -> None:  # noqa: N802
        self._hover(False)

    def dropEvent(self, event) -> None:  # noqa: N802
        self._hover(False)
        paths = dropped_paths(event.mimeData())
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        self.pathsDropped.emit(paths)

    def _hover(self, on: bool) -> None:
        self.setStyleSheet("ModelSlot { border: 2px dashed #4a7fd4; }" if on else "")

    # -- pickers ----------------------------------------------------------------------------------
    def _pick_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, f"Choose the {self.role}", "", "GGUF models (*.gguf)")
        if path:
            self.pathsDropped.emit([path])

    def _pick_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, f"Choose the {self.role}'s Hugging Face folder")
        if path:
            self.pathsDropped.emit([path])


class PairingPanel(QWidget):
    #: (target, drafter) — the user asked to load this pair (after any WARN confirmation)
    loadRequested = Signal(str, str)
    cancelRequested = Signal()
    demoRequested = Signal()
    pairChanged = Signal(str, str)
    #: the check finished: the report (compat.CompatReport) or None when it could not run
    reportReady = Signal(object)
    #: (target ModelInfo or None, drafter ModelInfo or None) after each inspection
    modelsInspected = Signal(object, object)

    def __init__(self, tasks: TaskRunner, parent=None):
        super().__init__(parent)
        self.setObjectName("pairingPanel")
        self.tasks = tasks
        self.target = ModelSlot("target", self)
        self.drafter = ModelSlot("drafter", self)
        self.report_view = CompatReportView(self)
        # first start: fetch the default target, choose a GGUF, or the built-in pair (first_start.py)
        self.demo_offer = FirstStartOffer(tasks, self)
        self.demo_button = self.demo_offer.demo_button
        self.demo_offer.builtinRequested.connect(self.demoRequested)
        self.demo_offer.pickRequested.connect(self.target.browse.click)
        # the fetched target makes SmolLM2 the default pair, unless the user chose a target meanwhile
        self.demo_offer.fetched.connect(lambda path: None if self.target.path else self.demoRequested.emit())
        self.demo_offer.hide()

        self.progress = QProgressBar(self, objectName="pairingProgress")
        self.progress.setRange(0, 0)  # a busy bar: checks and loads report no percentage
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(8)
        self.progress.hide()
        self.message = QLabel("", self, objectName="pairingMessage")
        plain(self.message)
        self.message.setWordWrap(True)
        self.message.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.convert_button = QPushButton("Convert drafter to GGUF", self, objectName="convertButton")
        self.convert_button.setToolTip(
            "Converts the Hugging Face drafter folder against the chosen target "
            "(f16) into the models folder, then pairs the result"
        )
        self.convert_button.hide()
        self.convert_button.clicked.connect(self.convert_drafter)
        self.load_button = QPushButton("Load pair", self, objectName="loadButton")
        self.cancel_button = QPushButton("Cancel", self, objectName="cancelLoadButton")
        self.cancel_button.hide()
        self.load_button.clicked.connect(self._load_clicked)
        self.cancel_button.clicked.connect(self.cancelRequested)

        buttons = QHBoxLayout()
        buttons.addWidget(self.message, 1)
        buttons.addWidget(self.convert_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.load_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.demo_offer)
        lay.addWidget(self.target)
        lay.addWidget(self.drafter)
        lay.addWidget(QLabel("<b>Compatibility</b>", self))
        lay.addWidget(self.report_view, 1)
        lay.addWidget(self.progress)
        lay.addLayout(buttons)

        for slot in (self.target, self.drafter):
            slot.pathsDropped.connect(lambda paths, s=slot: self.assign(paths, s.role))
        self.target.cleared.connect(lambda: self.set_pair("", self.drafter.path))
        self.drafter.cleared.connect(lambda: self.set_pair(self.target.path, ""))

        self.check_options: dict = {}  # kv, draft_kv, flash_attn, budget, adapters (from settings)
        self.report = None
        self._check_serial = 0
        self._checking = False
        self._engine_busy = False
        self._loading = False
        self.library_entries: Callable[[str], list[tuple[str, str]]] | None = None
        self.target.library.clicked.connect(lambda: self._library_menu(self.target))
        self.drafter.library.clicked.connect(lambda: self._library_menu(self.drafter))
        self._update_load_button()

    # -- choosing models --------------------------------------------------------------------------
    def assign(self, paths: list[str], role: str) -> None:
        """One path goes to the slot it was given to; two are sorted into target and drafter."""
        if len(paths) >= 2:
            job = self.tasks.start("sort dropped models", _sort_by_role, paths[:2])
            job.succeeded.connect(lambda pair: self.set_pair(*pair))
            job.failed.connect(lambda exc: self.set_pair(paths[0], paths[1]))
            return
        if role == "target":
            self.set_pair(paths[0], self.drafter.path)
        else:
            self.set_pair(self.target.path, paths[0])

    def set_pair(self, target: str, drafter: str) -> None:
        changed = (target, drafter) != (self.target.path, self.drafter.path)
        for slot, path in ((self.target, target), (self.drafter, drafter)):
            if path != slot.path or not slot.facts.text():
                slot.set_path(path)
                if path:
                    self._inspect(slot, path)
        self.demo_offer.setVisible(False)
        self._update_convert_button()
        if changed:
            self.pairChanged.emit(target, drafter)
            self.modelsInspected.emit(self.target.info, self.drafter.info)
        self.recheck()

    def show_loaded(self, target: str, drafter: str) -> None:
        """What the engine runs now (paths, '' for none), shown in each slot under the chosen file."""
        self.target.set_loaded(target)
        self.drafter.set_loaded(drafter)

    def offer_demo(self, show: bool = True) -> None:
        self.demo_offer.setVisible(show)

    def _inspect(self, slot: ModelSlot, path: str) -> None:
        job = self.tasks.start(f"inspect {path}", lambda job, p: _library().inspect(p), path)
        job.succeeded.connect(lambda info, s=slot, p=path: self._on_inspected(s, p, info))
        job.failed.connect(lambda exc, s=slot, p=path: s.path == p and s.set_facts(str(exc), error=True))

    def _on_inspected(self, slot: ModelSlot, path: str, info) -> None:
        if slot.path != path:
            return  # the slot changed meanwhile
        slot.info = info
        slot.set_facts(facts_text(info))
        self._update_convert_button()
        self.modelsInspected.emit(self.target.info, self.drafter.info)

    # -- converting an HF drafter -----------------------------------------------------------------
    def _update_convert_button(self) -> None:
        d, t = self.drafter.info, self.target.info
        self.convert_button.setVisible(
            bool(d is not None and d.format == "hf" and d.is_drafter and t is not None and t.format == "gguf")
        )

    def convert_drafter(self):
        """Runs the library's HF -> GGUF drafter conversion on the pool, then pairs the result."""
        hf_dir, target = self.drafter.path, self.target.path
        self.convert_button.setEnabled(False)
        self.show_message(f"converting {Path(hf_dir).name} against {Path(target).name}…")
        job = self.tasks.start("convert drafter", _convert, hf_dir, target)
        job.succeeded.connect(lambda out: (self.show_message(f"converted: {out}"), self.set_pair(target, str(out))))
        job.failed.connect(lambda exc: self.show_message(f"conversion refused: {exc}", error=True))
        job.finished.connect(lambda: self.convert_button.setEnabled(True))
        return job

    def _library_menu(self, slot: ModelSlot) -> None:
        entries = self.library_entries(slot.role) if self.library_entries else []
        menu = QMenu(self)
        if not entries:
            menu.addAction("The library has no models of this kind yet").setEnabled(False)
        for label, path in entries:
            act = menu.addAction(label)
            act.setToolTip(plain_tip(path))
            act.triggered.connect(lambda checked=False, p=path, s=slot: self.assign([p], s.role))
        menu.exec(slot.library.mapToGlobal(slot.library.rect().bottomLeft()))

    # -- checking ---------------------------------------------------------------------------------
    def set_check_options(self, **options) -> None:
        if options != self.check_options:
            self.check_options = options
            self.recheck()

    def recheck(self) -> None:
        self._check_serial += 1
        serial = self._check_serial
        self.report = None
        if not self.target.path:
            self.report_view.set_message("WARN", "target", "no target chosen", "drop a target GGUF on the Target slot")
            self._checking = False
            self._update_load_button()
            return
        self._checking = True
        self._update_load_button()
        job = self.tasks.start(
            "check pair", _run_check, self.target.path, self.drafter.path or None, dict(self.check_options)
        )
        job.succeeded.connect(lambda report, n=serial: self._on_report(n, report))
        job.failed.connect(lambda exc, n=serial: self._on_check_failed(n, exc))

    def _on_report(self, serial: int, report) -> None:
        if serial != self._check_serial:
            return  # a newer choice superseded this check
        self._checking = False
        self.report = report
        self.report_view.set_report(report)
        self._update_load_button()
        self.reportReady.emit(report)

    def _on_check_failed(self, serial: int, exc) -> None:
        if serial != self._check_serial:
            return
        self._checking = False
        self.report_view.set_message(
            "FAIL",
            "check",
            f"the pairing check could not run: {exc}",
            "make sure the engine and model library are installed",
        )
        self._update_load_button()
        self.reportReady.emit(None)

    # -- loading ----------------------------------------------------------------------------------
    @property
    def can_load(self) -> bool:
        return (
            bool(self.target.path)
            and self.report is not None
            and self.report.ok
            and not self._checking
            and not self._engine_busy
        )

    def set_engine_busy(self, busy: bool, loading: bool = False) -> None:
        self._engine_busy = busy
        self._loading = loading
        self.cancel_button.setVisible(loading)
        self.progress.setVisible(loading or self._checking)
        self._update_load_button()

    def show_message(self, text: str, error: bool = False) -> None:
        self.message.setStyleSheet("color: #b00020;" if error else "")
        self.message.setText(text)

    def _update_load_button(self) -> None:
        self.load_button.setEnabled(self.can_load)
        self.progress.setVisible(self._loading or self._checking)
        if self.report is not None and not self.report.ok:
            self.load_button.setToolTip("a FAIL check stands: fix it before loading")
        elif self.report is not None and self.report.warnings:
            self.load_button.setToolTip("WARN checks: loading asks for confirmation")
        else:
            self.load_button.setToolTip("")

    def _load_clicked(self) -> None:
        if not self.can_load:
            return
        if self.report.warnings and not self.confirm_warnings(self.report.warnings):
            return
        self.loadRequested.emit(self.target.path, self.drafter.path)

    def confirm_warnings(self, warnings) -> bool:
        text = "\n".join(f"• {w.name}: {w.reason}" for w in warnings)
        answer = QMessageBox.question(
            self,
            "Load despite warnings?",
            f"The pairing check raised {len(warnings)} warning(s):\n\n{text}\n\nLoad the pair anyway?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        return answer == QMessageBox.StandardButton.Yes


def _library():
    from engine_bridge.models.library import Library

    return Library()


def _run_check(job, target: str, drafter: str | None, options: dict):
    kwargs = dict(
        adapters=options.get("adapters", ()),
        kv=options.get("kv"),
        draft_kv=options.get("draft_kv"),
        flash_attn=options.get("flash_attn", "auto"),
        budget=options.get("budget"),
    )
    if drafter:
        return _library().check_pair(target, drafter, **kwargs)  # also remembered as the pair's last check
    from engine_bridge.models import compat

    return compat.check(target, None, **kwargs)


def _convert(job, hf_dir: str, target: str) -> Path:
    from engine_bridge.models.convert import convert_hf_drafter
    from engine_bridge.common.paths import models_dir

    out = models_dir() / f"{Path(hf_dir).name}-for-{Path(target).stem}-f16.gguf"
    result = convert_hf_drafter(hf_dir, target, out, "f16", overwrite=True)
    lib = _library()
    lib.add(result.path)
    lib.record_made(result.path, "drafter converted to GGUF")  # Forget may delete it
    return result.path


def _sort_by_role(job, paths: list[str]) -> tuple[str, str]:
    """(target, drafter) among two dropped paths, by what their headers say they are."""
    lib = _library()
    roles = []
    for p in paths:
        try:
            roles.append(lib.inspect(p).is_drafter)
        except Exception:  # noqa: BLE001 - an unreadable file keeps its drop position
            roles.append(None)
    if roles[0] is True and roles[1] is not True:
        return paths[1], paths[0]
    return paths[0], paths[1]
