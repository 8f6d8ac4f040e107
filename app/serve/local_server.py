"""The local server's life in the app: started on the pair that is loaded, stopped when that pair
goes (a load, an unload) or the window closes, and what it shows.

Starting reads the pair's facts on the engine's thread (an EngineTask: the engine is never touched
from here), then binds the socket and runs uvicorn in a thread of its own (engine_bridge.serve's
Server over an EngineJobQueue). Served steps come back through a StreamChannel of their own, so a
chat answer's channel never sees them, and go to the live plots and the profiler marked as served.
The status bar shows the URL, the queue, the requests served and their speed: the running request's
tok/s from its steps so far, then the last one's (its ``timings.predicted_per_second``); the label is
redrawn through a throttle, never once per request or step. Stopping answers what waits (503),
stops the running request within a step, then joins uvicorn's thread: nothing is left running."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QLabel

from engine_bridge.runtime.records import RunSummary
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
    return Defaults(mode=g.mode, budget=g.budget, temperature=g.temperature, top_k=g.top_k, top_p=g.top_p, seed=g.seed)


class LocalServer(QObject):
    stateChanged = Signal(str)  # OFF / STARTING / SERVING
    failed = Signal(str)  # a sentence: why it could not start (or stopped)
    countsChanged = Signal()  # emitted from any thread; queued to the UI
    _factsReady = Signal(object, object)  # (PairFacts or exception, start token): engine thread -> UI

    def __init__(self, engine: EngineClient, status_bar, plots, profiler, settings, parent: QObject | None = None):
        """``settings``: () -> StudioSettings, read when the server starts and when they change."""
        super().__init__(parent)
        self.engine, self.plots, self.profiler = engine, plots, profiler
        self._settings = settings
        self.server: Server | None = None
        self.queue: EngineJobQueue | None = None
        self.options = ServerSettings()
        self.state = OFF
        self.wanted = False  # the switch: serve whatever pair is loaded
        self._token = 0  # a start that is overtaken (stop, another load) is dropped
        self.label = QLabel("", status_bar, objectName="statusServer")
        plain(self.label)  # the URL and the model's name are text
        self.label.hide()
        status_bar.addPermanentWidget(self.label)
        self.steps = StreamChannel(self)
        self._drain = Throttle(self._take_steps, parent=self)
        self.steps.ready.connect(self._on_steps)  # a slot of this object: queued from the engine's thread
        # a burst of requests (a storm of 503s, many short ones) redraws the label at most every 50 ms
        self._counts = Throttle(self._show_counts, parent=self)
        self.countsChanged.connect(self._on_counts)
        self._live: tuple[int, int, float] = (0, 0, 0.0)  # the running served run: (number, tokens, step s)
        self._factsReady.connect(self._on_facts)
        engine.stateChanged.connect(self._on_engine_state)
        engine.drafterChanged.connect(lambda info: self._restart())  # the limits (max draft) may differ

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
            self.options.binding()  # the key rule, said before anything starts
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
        queue = EngineJobQueue(
            self.engine,
            facts,
            max_waiting=self.options.queue,
            on_step=lambda run, rec: self.steps.push_step((run, rec)),
            on_change=self.countsChanged.emit,
        )
        try:
            binding = self.options.binding()
            server = Server(
                None, binding, defaults_from(self._settings(), facts.limits.has_drafter), worker=queue, facts=facts
            )
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
        if state in (LOADING, EMPTY):  # the pair being served goes: stop; serve the next one when it comes
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
        self._live = (0, 0, 0.0)  # the next queue numbers its runs from 1 again
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
        self._counts.cancel()

    # -- what it shows ------------------------------------------------------------------------------
    @Slot()
    def _show_counts(self) -> None:
        q = self.queue
        if self.state == SERVING and q is not None and self.server is not None:
            speed, said = self.served_tok_per_s()
            self.label.setText(
                f"serving {self.server.url} · queue {q.waiting}/{q.max_waiting}"
                f"{' · busy' if q.busy else ''} · {q.served} served" + (f" · {speed:.1f} tok/s" if speed > 0 else "")
            )
            self.label.setToolTip(
                plain_tip(
                    f"model {self.server.app.model_ids[0]}; requests wait here in turn "
                    f"with chat turns (past {q.max_waiting} waiting: 503); {q.cancelled} "
                    f"cancelled by their clients" + (f"; {said}" if said else "")
                )
            )
            self.label.show()
        elif self.state == STARTING:
            self.label.setText("server: starting…")
            self.label.show()
        elif not self.wanted:
            self.label.hide()

    @property
    def served(self) -> int:
        return self.queue.served if self.queue is not None else 0

    def served_tok_per_s(self) -> tuple[float, str]:
        """(tok/s, what it is) of served requests: the running one's from its steps so far, else the
        last finished one's (generated tokens over its generation time, as its timings say); 0 if none."""
        q = self.queue
        if q is None:
            return 0.0, ""
        run, tokens, wall = self._live
        if q.busy and run == q.run_no and wall > 0:
            return tokens / wall, f"the running request: {tokens} tokens so far"
        last = q.last[1] if q.last is not None else None
        if isinstance(last, RunSummary) and last.n_generated:
            return last.tok_per_s, f"the last request: {last.n_generated} tokens"
        return 0.0, ""

    @Slot()
    def _on_counts(self) -> None:
        self._counts()

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
        run, tokens, wall = self._live
        for r, rec in items:  # the running request's speed so far (runs are numbered in order)
            if r != run:
                run, tokens, wall = r, 0, 0.0
            tokens, wall = tokens + rec.committed, wall + rec.wall
        self._live = (run, tokens, wall)
        self._counts()
