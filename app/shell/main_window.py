"""The main window: wires the panels to the engine worker, the conversation store and settings.

Layout: the chat (with the conversation list), the profiler and the model browser are tabs in the
middle; pairing and settings share a dock on the left; the live plots sit in a dock on the right.
Everything slow runs on the engine worker or the task pool; this class only routes requests and
results. Token and step events are drained from the worker's stream channel through a throttle,
so the transcript, plots and table redraw at most 20 times a second however fast tokens come.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QAction, QIcon, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QScrollArea, QSplitter, QTabWidget, QWidget

from engine_bridge.common.resources import resource
from engine_bridge.runtime.config import KVTypes

from .app_settings import StudioSettings, config_changes, open_settings
from ..bench.bench_view import BenchView
from ..chat.chat_session import ChatSession, describe_error
from ..chat.chat_view import ChatView
from ..chat.conversation_list import ConversationList
from ..chat.conversations import ConversationStore
from ..pairing.kv_advisor import KVAdvisor
from ..diagnostics.live_plots import LivePlots
from ..models.model_browser import ModelBrowser
from ..pairing.pairing_panel import PairingPanel
from ..diagnostics.profiler_view import ProfilerView
from .settings_panel import SettingsPanel
from .status_bar import StudioStatusBar, backend_text, backend_tip
from ..common.file_names import short_path
from ..common.tasks import TaskRunner
from ..serve.local_server import LocalServer
from ..serve.server_panel import ServerPanel
from ..training.train_panel import TrainPanel
from .workers import EMPTY, GENERATING, LOADING, READY, EngineClient, LoadCancelled

ICON = resource("icons", "dflash-studio.svg")  # the checkout's or the bundle's resources/
#: default and least widths (px) of the Pair dock, the plots dock and the tabs between them; at the
#: default window size (1480) the pairing report shows all four columns (docs/pairing-report.png)
PAIR_DOCK_WIDTH, PLOTS_DOCK_WIDTH = 440, 440
PAIR_DOCK_MIN, PLOTS_DOCK_MIN, CENTRE_MIN = 320, 300, 420


def _scrolling(page: QWidget) -> QScrollArea:
    """Wide pages scroll instead of forcing the whole window wider than the screen."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    area.setWidget(page)
    return area


class MainWindow(QMainWindow):
    pairLoaded = Signal(object)  # workers.Loaded
    pairLoadFailed = Signal(object)  # exception
    answerFinished = Signal(object)  # GenerationResult
    answerFailed = Signal(object)  # exception

    def __init__(
        self, qsettings: QSettings | None = None, store: ConversationStore | None = None, parent: QWidget | None = None
    ):
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.setWindowTitle("DFlash Studio")
        if ICON.exists():
            self.setWindowIcon(QIcon(str(ICON)))
        self.qsettings = qsettings if qsettings is not None else open_settings()
        self.settings, self.settings_resets = StudioSettings.load_checked(self.qsettings)
        self.store = store if store is not None else ConversationStore()
        self.tasks = TaskRunner(self)
        self.engine = EngineClient(self)
        self.advisor = KVAdvisor()
        self._autoload = False
        self._closed = False

        self._build_widgets()
        self._connect()
        self._restore()

    # -- construction -----------------------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.chat = ChatView(self)
        self.conversations = ConversationList(self)
        self.pairing = PairingPanel(self.tasks, self)
        self.settings_panel = SettingsPanel(self.settings, self)
        self.settings_panel.kv_verdict = self.advisor.verdict
        self.plots = LivePlots(self)
        self.profiler = ProfilerView(self)
        self.browser = ModelBrowser(self.tasks, self)
        self.bench = BenchView(self)  # the bench helper's tab; it loads its own engine
        self.train = TrainPanel(self)  # trains a drafter for a target; the pair loads at the end
        self.status = StudioStatusBar(self)
        self.setStatusBar(self.status)
        self.status.set_backend(backend_text(), backend_tip())

        chat_page = QSplitter(Qt.Orientation.Horizontal, self)
        chat_page.setObjectName("chatSplitter")
        chat_page.addWidget(self.conversations)
        chat_page.addWidget(self.chat)
        chat_page.setStretchFactor(1, 1)
        chat_page.setSizes([140, 800])
        self.tabs = QTabWidget(self, objectName="mainTabs")
        self.tabs.addTab(chat_page, "Chat")
        self.tabs.addTab(self.profiler, "Profiler")
        self.tabs.addTab(_scrolling(self.browser), "Models")
        self.tabs.addTab(_scrolling(self.bench), "Bench")
        self.tabs.addTab(_scrolling(self.train), "Train")
        self.setCentralWidget(self.tabs)

        self.side_tabs = QTabWidget(self, objectName="sideTabs")
        self.side_tabs.addTab(self.pairing, "Pair")
        self.side_tabs.addTab(self.settings_panel, "Settings")
        left = QDockWidget("Pairing and settings", self, objectName="pairDock")
        left.setWidget(self.side_tabs)
        left.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, left)
        right = QDockWidget("Live diagnostics", self, objectName="plotsDock")
        right.setWidget(self.plots)
        right.setFeatures(left.features())
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, right)
        # neither dock may squeeze the other (or the chat) to nothing when one is widened
        left.setMinimumWidth(PAIR_DOCK_MIN)
        right.setMinimumWidth(PLOTS_DOCK_MIN)
        self.tabs.setMinimumWidth(CENTRE_MIN)
        self.resizeDocks([left, right], [PAIR_DOCK_WIDTH, PLOTS_DOCK_WIDTH], Qt.Orientation.Horizontal)

        for text, keys, slot in (
            ("Quit", QKeySequence.StandardKey.Quit, self.close),
            ("Stop generating", QKeySequence(Qt.Key.Key_Escape), self.stop),
            ("New chat", QKeySequence.StandardKey.New, self.new_chat),
        ):
            action = QAction(text, self)
            action.setShortcut(keys)
            action.triggered.connect(slot)
            self.addAction(action)

        self.session = ChatSession(
            self.engine,
            self.store,
            self.chat,
            self.conversations,
            self.plots,
            self.profiler,
            self.status,
            lambda: self.settings,
            self.qsettings,
            self,
        )
        # the "Local server" switch: the loaded pair for other programs, run by the same engine worker
        self.local_server = LocalServer(
            self.engine, self.status, self.plots, self.profiler, lambda: self.settings, self
        )
        self.server_panel = ServerPanel(self.local_server, self.qsettings, self)
        self.side_tabs.addTab(self.server_panel, "Server")

    def _connect(self) -> None:
        e = self.engine
        e.stateChanged.connect(self._on_engine_state)
        e.progress.connect(lambda text: self.pairing.show_message(text))
        e.loaded.connect(self._on_loaded)
        e.loadFailed.connect(self._on_load_failed)
        e.drafterChanged.connect(self._on_drafter_changed)
        e.drafterFailed.connect(lambda exc: self._show_pair_error(exc))
        e.memoryChanged.connect(self.status.set_memory)
        e.engineLost.connect(self._on_engine_lost)
        self.chat.reloadRequested.connect(self.reload_engine)

        self.pairing.loadRequested.connect(self._on_load_requested)
        self.pairing.cancelRequested.connect(self.engine.cancel_load)
        self.pairing.demoRequested.connect(self.use_demo_pair)
        self.pairing.pairChanged.connect(self._on_pair_changed)
        self.pairing.pairChanged.connect(lambda target, drafter: self.train.set_current_target(target))
        self.train.drafterTrained.connect(self.use_trained_drafter)
        self.pairing.reportReady.connect(self._on_report)
        self.pairing.reportReady.connect(lambda report: self.browser.refresh())  # the check filed the pair
        # the bench runs the same pair: a FAIL here refuses it there, with the same reasons
        self.pairing.reportReady.connect(lambda report: self.bench.set_check(report, self.pairing.target.path))
        self.pairing.modelsInspected.connect(self._on_models_inspected)

        self.settings_panel.changed.connect(self._on_settings_changed)
        self.settings_panel.changed.connect(lambda s: self.local_server.settings_changed())  # after the line above
        self.status.switchToAutoRequested.connect(self.switch_to_auto)
        self.settings_panel.applyRequested.connect(self.apply_pending)

        self.chat.sendRequested.connect(self.send)
        self.chat.stopRequested.connect(self.stop)
        self.chat.regenerateRequested.connect(self.regenerate)
        self.chat.newChatRequested.connect(self.new_chat)
        self.chat.highlightToggled.connect(self._on_highlight)
        self.conversations.conversationChosen.connect(self.open_conversation)
        self.conversations.deleteRequested.connect(self.delete_conversation)
        self.session.stateChanged.connect(lambda: self._on_engine_state(self.engine.state))
        self.session.answerFinished.connect(self.answerFinished)
        self.session.answerFailed.connect(self.answerFailed)

        self.browser.useModel.connect(
            lambda path, role: (self.pairing.assign([path], role), self.side_tabs.setCurrentWidget(self.pairing))
        )
        self.pairing.library_entries = self.browser.library_entries
        self.browser.variantsChanged.connect(self._refresh_variants)

    def _restore(self) -> None:
        geometry = self.qsettings.value("ui/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            self.resize(1480, 900)
        state = self.qsettings.value("ui/state")
        if state is not None:
            self.restoreState(state)
        self.chat.set_highlight(self.settings.highlight_drafts)
        self._push_check_options()
        if self.settings.has_pair:
            self._autoload = True  # reopen the last pair once its check passes
            self.pairing.set_pair(self.settings.target, self.settings.drafter)
        elif self._default_pair_present():
            # nothing configured, and the default pair (SmolLM2 + its drafter) is here: a new user
            # chats with it at once, as the README promises, instead of meeting an offer to click
            self.pairing.recheck()
            self.use_demo_pair()
        else:
            self.pairing.recheck()
            self.pairing.offer_demo(True)
        notes = [f"Settings reset: {'; '.join(self.settings_resets)}."] if self.settings_resets else []
        self.session.open_last(notes)
        self._on_engine_state(self.engine.state)

    def show_page(self, page: QWidget) -> None:
        """Brings the main tab holding ``page`` (directly or inside its scroll area) to the front."""
        for i in range(self.tabs.count()):
            tab = self.tabs.widget(i)
            if tab is page or tab.isAncestorOf(page):
                self.tabs.setCurrentIndex(i)
                return

    # -- pairing and loading ----------------------------------------------------------------------
    @staticmethod
    def _default_pair_present() -> bool:
        """The SmolLM2 default pair is on disk (fetched target, shipped drafter): nothing to write."""
        from engine_bridge.models.demo import smollm2_pair

        return smollm2_pair() is not None

    def use_demo_pair(self) -> None:
        """Writes (once) and loads the embedded demo pair, off the UI thread."""
        from engine_bridge.models.demo import demo_pair

        self.pairing.offer_demo(False)
        self.pairing.show_message("preparing the demo pair…")
        self._autoload = True
        job = self.tasks.start("demo pair", lambda job: demo_pair())
        job.succeeded.connect(lambda pair: self.pairing.set_pair(str(pair[0]), str(pair[1])))
        job.failed.connect(self._on_load_failed)

    def use_trained_drafter(self, target: str, drafter: str) -> None:
        """The Train tab wrote a drafter: pair it with its target and load the pair (checked on load)."""
        self.pairing.set_pair(target, drafter)  # the settings follow through pairChanged
        self.side_tabs.setCurrentWidget(self.pairing)
        if self.engine.busy:
            self.pairing.show_message("the trained drafter is paired: press Load when the engine is free")
            return
        self.load_pair()

    def load_default_pair(self) -> None:
        """The configured pair, else the demo pair; loads as soon as its check passes."""
        if self._autoload:
            return  # a load of the configured or default pair is already on its way
        if self.settings.has_pair:
            self._autoload = True
            if self.pairing.report is not None and self.pairing.target.path == self.settings.target:
                self._on_report(self.pairing.report)
            else:
                self.pairing.set_pair(self.settings.target, self.settings.drafter)
        else:
            self.use_demo_pair()

    def _on_pair_changed(self, target: str, drafter: str) -> None:
        same_drafter = drafter == self.settings.drafter
        self.settings = self.settings.replace(
            target=target,
            drafter=drafter,
            draft_variant=self.settings.draft_variant if same_drafter else "",
            adapters=self.settings.adapters if same_drafter else [],
        )
        self.settings.save(self.qsettings)
        self.settings_panel.show_settings(self.settings)
        self._refresh_variants()
        self._push_bench_pair()
        self._show_pending()

    def _on_models_inspected(self, target_info, drafter_info) -> None:
        self.advisor.set_models(target_info, drafter_info)
        self.settings_panel.refresh_kv()
        self.settings_panel.cap_context(
            _context_cap(target_info, drafter_info, self.settings, bool(self.settings_panel.gpu_source()))
        )

    def _on_report(self, report) -> None:
        if self._closed:
            return  # late replies after close: the store and widgets are gone
        if not self._autoload or self.engine.state != EMPTY:
            return
        self._autoload = False
        if report is not None and report.ok and not report.warnings:
            self.load_pair()
        elif report is not None and report.ok:
            self.pairing.show_message("the check raised warnings: review them, then press Load")
        else:
            self.pairLoadFailed.emit(RuntimeError("the pairing check failed; see the report"))

    def _on_load_requested(self, target: str, drafter: str) -> None:
        if (target, drafter) != (self.settings.target, self.settings.drafter):
            self._on_pair_changed(target, drafter)
        self.load_pair()

    def load_pair(self) -> None:
        if self.engine.busy:
            return
        try:
            config = self.settings.engine_config()
        except ValueError as exc:
            self._show_pair_error(exc)
            return
        self.pairing.show_message(f"loading {Path(config.target).name}…")
        self.chat.hide_reload()
        self.engine.load(config, in_process=self.settings.engine_in_process)

    def reload_engine(self) -> None:
        """The chat's Reload button, after the engine's process died: the pair that was loaded, again."""
        if self.engine.busy:
            return
        self.chat.hide_reload()
        req = self.engine.reload()
        if req is None:
            self.load_pair()
            return
        self.pairing.show_message(f"reloading {Path(req.config.target).name}…")

    def apply_pending(self) -> None:
        """The settings banner's button: reload, or swap only the drafter."""
        loaded = self.engine.info.config if self.engine.info else None
        reload, swap = config_changes(loaded, self.settings.engine_config())
        if self.engine.busy:
            self.settings_panel.banner_text.setText("Wait for the current generation to finish, then apply.")
            return
        if reload or loaded is None:
            if self.pairing.report is not None and not self.pairing.report.ok:
                self.side_tabs.setCurrentWidget(self.pairing)
                self.pairing.show_message("the pairing check fails with these settings; see the report", error=True)
                return
            self.load_pair()
            return
        if "draft" in swap:
            self.engine.swap_drafter(self.settings.active_drafter)
        if "adapters" in swap:
            self.engine.set_adapters(self.settings.adapters)

    def _on_loaded(self, info) -> None:
        if self._closed:
            return  # late replies after close: the store and widgets are gone
        cfg = info.config
        self.setWindowTitle(f"DFlash Studio — {Path(cfg.target).name}")
        self.chat.show_template(info.chat_template)
        self.status.set_pair(str(cfg.target), str(cfg.draft) if cfg.draft else None)
        self.status.set_memory(info.memory)
        self.pairing.show_loaded(str(cfg.target), str(cfg.draft) if cfg.draft else "")
        self.pairing.show_message(
            "loaded: " + short_path(cfg.target) + (f" + {short_path(cfg.draft)}" if cfg.draft else " (no drafter)")
        )
        if info.llama_messages:  # llama.cpp's own log is quiet; its warnings are shown here
            self.status.showMessage("; ".join(info.llama_messages), 30000)
        self.chat.hide_reload()
        self._show_pending()
        self.pairLoaded.emit(info)

    def _on_engine_lost(self, exc) -> None:
        """The engine's process died (an abort, a crash, the OOM killer, a lost RPC server): the window
        and the conversation stay; the chat says what happened and offers to reload the pair."""
        if self._closed:
            return
        text = describe_error(exc)
        self.chat.show_engine_lost(f"{text} The window and the conversation are kept.")
        self.pairing.show_message(text, error=True)
        self.pairing.show_loaded("", "")
        self.status.set_pair(None, None)

    def _on_load_failed(self, exc) -> None:
        if self._closed:
            return  # late replies after close: the store and widgets are gone
        if isinstance(exc, LoadCancelled):
            self.pairing.show_message("load cancelled")
        else:
            self._show_pair_error(exc)
            report = getattr(exc, "report", None)
            if report is not None:
                self.pairing.report_view.set_report(report)
        self.status.set_pair(None, None)
        self.pairing.show_loaded("", "")
        self.pairLoadFailed.emit(exc)

    def _on_drafter_changed(self, info) -> None:
        cfg = info.config
        self.status.set_pair(str(cfg.target), str(cfg.draft) if cfg.draft else None)
        self.pairing.show_loaded(str(cfg.target), str(cfg.draft) if cfg.draft else "")
        self.pairing.show_message(f"drafter now {short_path(cfg.draft)}" if cfg.draft else "no drafter")
        self._show_pending()

    def _show_pair_error(self, exc) -> None:
        self.side_tabs.setCurrentWidget(self.pairing)
        self.pairing.show_message(describe_error(exc), error=True)

    # -- settings ---------------------------------------------------------------------------------
    def _on_settings_changed(self, s: StudioSettings) -> None:
        # the pair is the pairing panel's; the panel edits everything else
        self.settings = s.replace(
            target=self.settings.target, drafter=self.settings.drafter, highlight_drafts=self.settings.highlight_drafts
        )
        self.settings.save(self.qsettings)
        self._push_check_options()
        self._show_pending()

    def switch_to_auto(self) -> None:
        """The status bar's "switch to auto": verify mode auto from the next answer on (no reload)."""
        combo = self.settings_panel.mode
        i = combo.findData("auto")
        if i >= 0:
            combo.setCurrentIndex(i)  # the panel emits changed: saved like a user's choice
        self.status.switch_to_auto.hide()
        self.status.showMessage("verify mode is auto now: AR, chain or tree per step, whichever is fastest here", 10000)

    def _push_bench_pair(self) -> None:
        """The bench runs the pair and load settings chosen here (it loads them itself)."""
        s = self.settings
        if not (s.target and s.active_drafter):
            return
        try:
            cfg = s.engine_config()
        except ValueError:
            return
        fields = {
            f: getattr(cfg, f)
            for f in (
                "n_ctx",
                "n_gpu_layers",
                "draft_n_gpu_layers",
                "flash_attn",
                "target_kv",
                "draft_kv",
                "adapters",
                "exact",
                "draft_window",
            )
        }
        self.bench.set_pair(cfg.target, cfg.draft, fields)

    def _push_check_options(self) -> None:
        self._push_bench_pair()
        s = self.settings
        self.pairing.set_check_options(
            kv=KVTypes(s.target_k, s.target_v),
            draft_kv=KVTypes(s.draft_k, s.draft_v),
            flash_attn=s.flash_attn,
            budget=s.budget if s.mode != "ar" else None,
            adapters=tuple((p, sc) for p, sc in s.adapters),
        )

    def _show_pending(self) -> None:
        loaded = self.engine.info.config if self.engine.info else None
        if loaded is None or not self.settings.has_pair:
            self.settings_panel.show_pending([], [])
            return
        self.settings_panel.show_pending(*config_changes(loaded, self.settings.engine_config()))

    def _refresh_variants(self) -> None:
        self.settings_panel.set_variants(self.browser.drafter_variants(self.settings.drafter))

    def _on_highlight(self, on: bool) -> None:
        self.settings = self.settings.replace(highlight_drafts=on)
        self.settings.save(self.qsettings)

    # -- chat (the session does the work) ----------------------------------------------------------
    def send(self, text: str) -> None:
        self.session.send(text)

    def stop(self) -> None:
        self.session.stop()

    def regenerate(self) -> None:
        self.session.regenerate()

    def new_chat(self) -> None:
        self.session.new_chat()

    def open_conversation(self, conversation_id: int) -> None:
        self.session.open(conversation_id)

    def delete_conversation(self, conversation_id: int) -> None:
        self.session.delete(conversation_id)

    def _on_engine_state(self, state: str) -> None:
        self.chat.set_state(can_send=state in (READY, GENERATING), generating=state == GENERATING)
        self.pairing.set_engine_busy(state in (LOADING, GENERATING), loading=state == LOADING)
        self.settings_panel.apply_button.setEnabled(state in (READY, EMPTY))

    # -- closing ----------------------------------------------------------------------------------
    def closeEvent(self, event) -> None:  # noqa: N802
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stops generation, joins the worker and the task pool, saves state. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.plots.redraws.cancel()
        self.qsettings.setValue("ui/geometry", self.saveGeometry())
        self.qsettings.setValue("ui/state", self.saveState())
        self.settings.save(self.qsettings)
        self.bench.shutdown()
        self.train.shutdown()
        self.local_server.shutdown()  # before the engine: its requests run on the engine's thread
        if not self.engine.shutdown():
            # the window is closing: a modal box here held the exit until someone clicked, and hung
            # a run nobody watches (--screenshot, under Xvfb in make test) for good
            print("DFlash Studio: the engine did not stop within 30 s; closing anyway", file=sys.stderr)
        self.session.close()  # the generation stopped with the thread: keep what it committed
        self.tasks.shutdown()
        self.store.close()


def _context_cap(target_info, drafter_info, settings, on_gpu: bool) -> int | None:
    """The largest context the chosen pair's KV caches and weights leave room for in this machine's
    memory (the pairing check kv_memory's estimate); None on GPUs (split_fits judges VRAM there) or
    where a model or the memory cannot be read."""
    from engine_bridge.common.memory import available_memory
    from engine_bridge.models.compat import context_that_fits
    from engine_bridge.runtime.config import KVTypes

    free = available_memory()
    if on_gpu or free is None or target_info is None or target_info.format != "gguf":
        return None
    drafter = drafter_info if drafter_info is not None and drafter_info.format == "gguf" else None
    try:
        return context_that_fits(
            target_info,
            drafter,
            KVTypes(settings.target_k, settings.target_v),
            KVTypes(settings.draft_k, settings.draft_v),
            free,
        )
    except (KeyError, ValueError):  # a K/V type the estimate does not know: no cap
        return None
