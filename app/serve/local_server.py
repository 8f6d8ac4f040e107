"""The local server's life in the app: started on the pair that is loaded, stopped when that pair
goes (a load, an unload) or the window closes, and what it shows.

Starting reads the pair's facts on the engine's thread (an EngineTask: the engine is never touched
from here), then binds the socket and runs uvicorn in a thread of its own (engine_bridge.serve's
Server over an EngineJobQueue). Served steps come back through a StreamChannel of their own, so a
chat answer's channel never sees them, and go to the live plots and the profiler marked as served.
The status bar shows the URL, the queue and the requests served. Stopping answers what waits (503),
stops the running request within a step, then joins uvicorn's thread: nothing is left running."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QLabel

from engine_bridge.serve.protocol import Defaults
from engine_bridge.serve.server import Server
from engine_bridge.serve.worker import pair_facts

from ..common.plain_text import plain, plain_tip
from ..common.stream_channel import StreamChannel
from ..common.throttle import Throttle
from ..shell.workers import EMPTY, GENERATING, LOADING, READY, EngineClient, EngineTask
from .engine_jobs import EngineJobQueue
from .server_settings import ServerSettings

OFF, STARTING, SERVING = "off", "starting", "serving"


def defaults_from(settings, has_drafter: bool) -> Defaults:
    """What a request that names none gets: the chat's own generation settings (app_settings)."""
    g = settings.generation_settings(has_drafter=has_drafter)
    return Defaults(mode=g.mode, budget=g.budget, temperature=g.temperature, top_k=g.top_k, top_p=g.top_p,
                    seed=g.seed)


class LocalServer(QObject):
    stateChanged = Signal(str)       # OFF / STARTING / SERVING
    failed = Signal(str)             # a sentence: why it could not start (or stopped)
    countsChanged = Signal()         # emitted from any thread; queued to the UI
    _factsReady = Signal(object, object)   # (PairFacts or exception, start token): engine thread -> UI

    def __init__(self, engine: EngineClient, status_bar, plots, profiler, settings, parent: QObject | None = None):
        """``settings``: () -> StudioSettings, read when the server starts and when they change."""
        super().__init__(parent)
        self.engine, self.plots, self.profiler = engine, plots, profiler
        self._settings = settings
        self.server: Server | None = None
        self.queue: EngineJobQueue | None = None
        self.options = ServerSettings()
        self.state = OFF
        self.wanted = False              # the switch: serve whatever pair is loaded
        self._token = 0                  # a start that is overtaken (stop, another load) is dropped
        self.label = QLabel("", status_bar, objectName="statusServer")
        plain(self.label)                # the URL and the model's name are text
        self.label.hide()
        status_bar.addPermanentWidget(self.label)
        self.steps = StreamChannel(self)
        self._drain = Throttle(self._take_steps, parent=self)
        self.steps.ready.connect(self._on_steps)      # a slot of this object: queued from the engine's thread
        self.countsChanged.connect(self._show_counts)
        self._factsReady.connect(self._on_facts)
        engine.stateChanged.connect(self._on_engine_state)
        engine.drafterChanged.connect(lambda info: self._restart())   # the limits (max draft) may differ

    # -- the switch ---------------------------------------------------------------------------------
    def set_enabled(self, on: bool, options: ServerSettings | None = None) -> None:
        if options is not None:
            self.options = options
        self.wanted = on
        if on:
            self._start()
        else:
            self.stop()

    @property
    def url(self) -> str | None:
        return self.server.url if self.server is not None else None

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.stateChanged.emit(state)
            self._show_counts()

    def _start(self) -> None:
        if self.state != OFF or not self.wanted:
            return
        if self.engine.state not in (READY, GENERATING) or self.engine.info is None:
            self._set_state(OFF)
            self.label.setText("server: waits for a pair")
            self.label.show()
            return
        try:
            self.options.binding()          # the key rule, said before anything starts
        except ValueError as exc:
            self._fail(str(exc))
            return
        self._token += 1
        token = self._token
        self._set_state(STARTING)

        def read(engine):
            try:
                facts = pair_facts(engine, ("base",)) if engine is not None else RuntimeError("no pair is loaded")
            except Exception as exc:  # noqa: BLE001 - said in the panel
                facts = exc
            self._factsReady.emit(facts, token)

        self.engine.run_on_engine(EngineTask(read))

    @Slot(object, object)
    def _on_facts(self, facts, token) -> None:
        if token != self._token or self.state != STARTING:
            return
        if isinstance(facts, Exception):
            self._fail(f"the pair could not be read: {facts}")
            return
        queue = EngineJobQueue(self.engine, facts, max_waiting=self.options.queue,
                               on_step=lambda run, rec: self.steps.push_step((run, rec)),
                               on_change=self.countsChanged.emit)
        try:
            binding = self.options.binding()
            server = Server(None, binding, defaults_from(self._settings(), facts.limits.has_drafter),
                            worker=queue, facts=facts)
        except ValueError as exc:
            self._fail(str(exc))
            return
        except OSError as exc:
            self._fail(f"cannot listen on {self.options.host}:{self.options.port}: {exc.strerror or exc}")
            return
        try:
            server.start_in_thread()
        except RuntimeError as exc:
            queue.stop()
            server.sock.close()
            self._fail(str(exc))
            return
        self.queue, self.server = queue, server
        self._set_state(SERVING)

    def settings_changed(self) -> None:
        """The chat's generation settings changed: the next request without its own gets them."""
        if self.server is not None:
            self.server.app.defaults = defaults_from(self._settings(), self.server.app.limits.has_drafter)

    def _fail(self, why: str) -> None:
        self.stop()
        self.wanted = False
        self.failed.emit(why)

    def _restart(self) -> None:
        if self.wanted and self.state != OFF:
            self.stop()
            self._start()

    # -- the engine's state ---------------------------------------------------------------------------
    @Slot(str)
    def _on_engine_state(self, state: str) -> None:
        if state in (LOADING, EMPTY):        # the pair being served goes: stop; serve the next one when it comes
            self.stop()
            if self.wanted:
                self.label.setText("server: waits for a pair")
                self.label.show()
        elif state in (READY, GENERATING) and self.wanted and self.state == OFF:
            self._start()

    # -- stopping -----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Answers what waits, stops the running request, joins the server's thread, frees the port."""
        self._token += 1
        queue, server = self.queue, self.server
        self.queue = self.server = None
        if queue is not None:
            queue.stop()
        if server is not None:
            server.stop()
        self._set_state(OFF)

    def shutdown(self) -> None:
        """Window close: before the engine worker stops."""
        self.wanted = False
        self.stop()
        self._drain.cancel()

    # -- what it shows ------------------------------------------------------------------------------
    @Slot()
    def _show_counts(self) -> None:
        q = self.queue
        if self.state == SERVING and q is not None and self.server is not None:
            self.label.setText(f"serving {self.server.url} · queue {q.waiting}/{q.max_waiting}"
                               f"{' · busy' if q.busy else ''} · {q.served} served")
            self.label.setToolTip(plain_tip(f"model {self.server.app.model_ids[0]}; requests wait here in turn "
                                            f"with chat turns (past {q.max_waiting} waiting: 503); {q.cancelled} "
                                            "cancelled by their clients"))
            self.label.show()
        elif self.state == STARTING:
            self.label.setText("server: starting…")
            self.label.show()
        elif not self.wanted:
            self.label.hide()

    @property
    def served(self) -> int:
        return self.queue.served if self.queue is not None else 0

    @Slot()
    def _on_steps(self) -> None:
        self._drain()

    def _take_steps(self) -> None:
        _, items = self.steps.drain()
        if not items:
            return
        runs: dict[int, list] = {}
        for run, rec in items:
            runs.setdefault(run, []).append(rec)
        for run, recs in runs.items():
            self.profiler.add_steps(run, recs, source="served")
        self.plots.add_steps([rec for _, rec in items], served=True)
