"""The engine's worker thread and the UI-side client that talks to it.

napari's rule: the model stays Qt-free and slow work runs in a worker whose results and errors
arrive as signals. ``EngineWorker`` (a QObject moved to a QThread) owns the one ``Engine``; it
takes requests through queued signals, so the UI thread never waits on loading or generating.
``EngineClient`` lives on the UI thread, owns the thread, tracks the state the UI shows
(empty / loading / ready / generating) and stops the worker cleanly on close.

Stopping a generation does not go through the worker's event queue (that is blocked while it
generates): the client sets the request's ``threading.Event`` directly and the engine returns
within one step with finish_reason 'cancelled'.

The engine itself runs in a child process (``engine_bridge.runtime.engine_process``) unless the
load asks for it in this one: a llama.cpp abort, a crash or the out-of-memory killer then ends the
child, not the window. The worker unloads the dead engine and says so (``lost``); the client keeps
what was loaded so that ``reload()`` loads it again.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Callable

from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine_bridge.runtime.config import EngineConfig, GenerationSettings

from ..common.stream_channel import StreamChannel

EMPTY, LOADING, READY, GENERATING = "empty", "loading", "ready", "generating"


@dataclass(frozen=True)
class LoadRequest:
    config: EngineConfig
    check: bool = True
    cancel: threading.Event = field(default_factory=threading.Event)
    in_process: bool = False  # the engine in the app's process: no IPC, but an abort ends the app


@dataclass(frozen=True)
class GenerateRequest:
    request_id: int
    settings: GenerationSettings
    messages: tuple[dict, ...] | None = None  # rendered with the target's chat template
    prompt: str | None = None  # used as is when there are no messages
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class EngineTask:
    """Work from outside the chat that needs the engine (the local server's requests, app.serve):
    ``run(engine)`` on the engine's thread, queued behind what is already queued, so it never runs
    at once with a chat turn or a load. ``engine`` is None when no pair is loaded. It must not raise."""

    run: Callable[[object], None]


@dataclass(frozen=True)
class Loaded:
    """What the UI shows about a freshly loaded engine (plain data, safe across threads)."""

    config: EngineConfig
    describe: dict
    memory: dict
    chat_template: str | None
    llama_messages: tuple = ()  # llama.cpp's warnings from the load (engine_bridge.runtime.llama_log)


class LoadCancelled(Exception):
    """The user cancelled a load; the engine that finished loading meanwhile was closed."""


class EngineWorker(QObject):
    progress = Signal(str)
    loaded = Signal(object)  # Loaded
    loadFailed = Signal(object)  # exception
    generated = Signal(int, object)  # request id, GenerationResult
    generateFailed = Signal(int, object)  # request id, exception
    generateProgress = Signal(int, str)  # request id, what runs before its first token (auto's calibration)
    drafterChanged = Signal(object)  # Loaded (after swap_drafter / set_adapters)
    drafterFailed = Signal(object)
    memoryChanged = Signal(object)  # Engine.memory()
    unloaded = Signal()
    lost = Signal(object)  # the engine's process died (EngineProcessError / RpcError)

    def __init__(self, channel: StreamChannel):
        super().__init__()
        self._channel = channel
        self.engine = None

    def _loaded(self) -> Loaded:
        e = self.engine
        return Loaded(e.config, e.describe(), e.memory(), e.chat_template(), tuple(e.llama_messages()))

    def _gone(self, exc) -> bool:
        """After a failed request: when the engine's process is gone, unload it and say so."""
        if self.engine is None or not getattr(self.engine, "dead", None):
            return False
        self._close_engine()
        self.lost.emit(exc)
        self.unloaded.emit()
        return True

    @Slot(object)
    def load(self, req: LoadRequest) -> None:
        from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
        from engine_bridge.runtime.engine_process import EngineLoadCancelled, open_engine

        if req.cancel.is_set():
            self.loadFailed.emit(LoadCancelled("load cancelled"))
            return
        self._close_engine()  # free the old pair's memory before loading the new one
        try:
            # in a child process (always with RPC servers): an abort, a crash or a lost server ends
            # that process, not the app; a cancel kills it mid-load
            eng = open_engine(
                req.config,
                preflight=PAIR_PREFLIGHT,
                check=req.check,
                progress=self.progress.emit,
                isolate=not req.in_process,
                cancel=req.cancel,
            )
        except EngineLoadCancelled:
            self.loadFailed.emit(LoadCancelled("load cancelled"))
            return
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message in the UI
            self.loadFailed.emit(exc)
            return
        if req.cancel.is_set():  # llama.cpp cannot be interrupted mid-load: discard the result
            eng.close()
            self.loadFailed.emit(LoadCancelled("load cancelled"))
            return
        self.engine = eng
        try:
            info = self._loaded()
        except Exception as exc:  # noqa: BLE001 - the child died right after loading
            self._close_engine()
            self.loadFailed.emit(exc)
            return
        self.loaded.emit(info)

    @Slot(object)
    def generate(self, req: GenerateRequest) -> None:
        try:
            if self.engine is None:
                raise RuntimeError("no pair is loaded")
            # only the template makes control tokens: a message holding <|im_end|> stays text
            prompt = self.engine.tokenize_chat(list(req.messages)) if req.messages else req.prompt
            res = self.engine.generate(
                prompt,
                req.settings,
                on_token=self._channel.push_token,
                on_step=self._channel.push_step,
                cancel=req.cancel,
                on_progress=lambda text: self.generateProgress.emit(req.request_id, text),
            )
        except Exception as exc:  # noqa: BLE001
            self.generateFailed.emit(req.request_id, exc)
            self._gone(exc)  # its process is gone (an abort, a kill, an RPC server lost): unload
            return
        self.generated.emit(req.request_id, res)
        try:
            self.memoryChanged.emit(self.engine.memory())
        except Exception as exc:  # noqa: BLE001 - the child died right after answering
            self._gone(exc)

    @Slot(object)
    def run_task(self, task: EngineTask) -> None:
        task.run(self.engine)
        if getattr(self.engine, "dead", None):  # as after a chat turn: its process is gone, unload
            from engine_bridge.runtime.engine_process import EngineProcessError

            self._gone(
                self.engine.death or EngineProcessError(f"The engine stopped: {self.engine.dead}. Reload the pair.")
            )

    @Slot(str)
    def swap_drafter(self, path: str) -> None:
        try:
            if self.engine is None:
                raise RuntimeError("no pair is loaded")
            self.progress.emit(f"swapping the drafter for {path}")
            self.engine.swap_drafter(path)
            info = self._loaded()
        except Exception as exc:  # noqa: BLE001
            self.drafterFailed.emit(exc)
            self._gone(exc)
            return
        self.drafterChanged.emit(info)

    @Slot(object)
    def set_adapters(self, adapters: list) -> None:
        try:
            if self.engine is None:
                raise RuntimeError("no pair is loaded")
            self.engine.set_adapters(adapters)
            info = self._loaded()
        except Exception as exc:  # noqa: BLE001
            self.drafterFailed.emit(exc)
            self._gone(exc)
            return
        self.drafterChanged.emit(info)

    @Slot()
    def reset(self) -> None:
        if self.engine is not None:
            try:
                self.engine.reset()
            except Exception as exc:  # noqa: BLE001 - only a dead child fails here
                self._gone(exc)

    @Slot()
    def unload(self) -> None:
        self._close_engine()
        self.unloaded.emit()

    @Slot()
    def shutdown(self) -> None:
        """Last request: frees the engine on its own thread, then ends the thread's loop."""
        self._close_engine()
        QThread.currentThread().quit()

    def _close_engine(self) -> None:
        if self.engine is not None:
            eng, self.engine = self.engine, None
            eng.close()


class EngineClient(QObject):
    """UI-thread handle on the worker. Every method returns at once."""

    stateChanged = Signal(str)
    progress = Signal(str)
    loaded = Signal(object)
    loadFailed = Signal(object)
    generated = Signal(int, object)
    generateFailed = Signal(int, object)
    generateProgress = Signal(int, str)  # request id, text (auto's first request calibrates first)
    drafterChanged = Signal(object)
    drafterFailed = Signal(object)
    memoryChanged = Signal(object)
    engineLost = Signal(object)  # the engine's process died (the exception names how); reload() brings it back

    # requests, delivered to the worker's thread (queued: the worker lives there)
    _load = Signal(object)
    _generate = Signal(object)
    _swap = Signal(str)
    _adapters = Signal(object)
    _reset = Signal()
    _unload = Signal()
    _shutdown = Signal()
    _task = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.channel = StreamChannel(self)
        self._thread = QThread()
        self._thread.setObjectName("engineThread")
        self._worker = EngineWorker(self.channel)
        self._worker.moveToThread(self._thread)
        w = self._worker
        self._load.connect(w.load)
        self._generate.connect(w.generate)
        self._swap.connect(w.swap_drafter)
        self._adapters.connect(w.set_adapters)
        self._reset.connect(w.reset)
        self._unload.connect(w.unload)
        self._shutdown.connect(w.shutdown)
        self._task.connect(w.run_task)
        w.progress.connect(self.progress)
        w.loaded.connect(self._on_loaded)
        w.loadFailed.connect(self._on_load_failed)
        w.generated.connect(self._on_generated)
        w.generateFailed.connect(self._on_generate_failed)
        w.generateProgress.connect(self.generateProgress)
        w.drafterChanged.connect(self._on_drafter_changed)
        w.drafterFailed.connect(self._on_drafter_failed)
        w.memoryChanged.connect(self.memoryChanged)
        w.unloaded.connect(self._on_unloaded)
        w.lost.connect(self.engineLost)
        self._ids = itertools.count(1)
        self._state = EMPTY
        self._pending_load: LoadRequest | None = None
        self._current: GenerateRequest | None = None
        self.info: Loaded | None = None
        self.last_load: LoadRequest | None = None  # what reload() loads again (its drafter kept current)
        self._closed = False
        self._thread.start()

    # -- state ----------------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.stateChanged.emit(state)

    @property
    def busy(self) -> bool:
        return self._state in (LOADING, GENERATING)

    @property
    def engine_pid(self) -> int | None:
        """The id of the process the engine runs in, when that is a child (None: in this process, or
        nothing loaded)."""
        return getattr(self._worker.engine, "pid", None)

    # -- requests -------------------------------------------------------------------------------------
    def load(self, config: EngineConfig, check: bool = True, *, in_process: bool = False) -> LoadRequest:
        """``in_process``: load the engine in the app's process (no child: a llama.cpp abort ends the app)."""
        if self.busy:
            raise RuntimeError(f"the engine is {self._state}")
        req = LoadRequest(config, check, in_process=in_process)
        self.last_load = req
        self._pending_load = req
        self.info = None
        self._set_state(LOADING)
        self._load.emit(req)
        return req

    def reload(self) -> LoadRequest | None:
        """Loads the last loaded pair again (after its process died); None when there is none."""
        last = self.last_load
        if last is None:
            return None
        return self.load(last.config, last.check, in_process=last.in_process)

    def cancel_load(self) -> None:
        if self._pending_load is not None:
            self._pending_load.cancel.set()

    def generate(self, settings: GenerationSettings, *, messages=None, prompt: str | None = None) -> int:
        if self._state != READY:
            raise RuntimeError("load a pair first" if self._state == EMPTY else f"the engine is {self._state}")
        req = GenerateRequest(next(self._ids), settings, tuple(messages) if messages else None, prompt)
        self._current = req
        self.channel.clear()
        self._set_state(GENERATING)
        self._generate.emit(req)
        return req.request_id

    def stop(self) -> None:
        """Stops the running generation within one step (safe to call any time)."""
        if self._current is not None:
            self._current.cancel.set()

    def run_on_engine(self, task: EngineTask) -> None:
        """Queues ``task`` on the engine's thread (callable from any thread: the signal is queued)."""
        if not self._closed:
            self._task.emit(task)

    def swap_drafter(self, path) -> None:
        self._swap.emit(str(path))

    def set_adapters(self, adapters: list) -> None:
        self._adapters.emit([(str(p), float(s)) for p, s in adapters])

    def reset(self) -> None:
        self._reset.emit()

    def unload(self) -> None:
        self._unload.emit()

    def shutdown(self, timeout_ms: int = 30000) -> bool:
        """Stops any generation, frees the engine on its thread and joins the thread."""
        if self._closed:
            return True
        self._closed = True
        self.stop()
        self.cancel_load()
        self._shutdown.emit()
        ok = self._thread.wait(timeout_ms)
        if ok:
            self._worker.deleteLater()
        return ok

    # -- worker replies -------------------------------------------------------------------------------
    @Slot(object)
    def _on_loaded(self, info: Loaded) -> None:
        self._pending_load = None
        self.info = info
        self._set_state(READY)
        self.loaded.emit(info)

    @Slot(object)
    def _on_load_failed(self, exc) -> None:
        self._pending_load = None
        self.info = None
        self._set_state(EMPTY)
        self.loadFailed.emit(exc)

    @Slot(int, object)
    def _on_generated(self, request_id: int, result) -> None:
        self._current = None
        self._set_state(READY)
        self.generated.emit(request_id, result)

    @Slot(int, object)
    def _on_generate_failed(self, request_id: int, exc) -> None:
        self._current = None
        self._set_state(READY)
        self.generateFailed.emit(request_id, exc)

    @Slot(object)
    def _on_drafter_changed(self, info: Loaded) -> None:
        self.info = info
        if self.last_load is not None:
            self.last_load = LoadRequest(info.config, self.last_load.check, in_process=self.last_load.in_process)
        self.drafterChanged.emit(info)

    @Slot(object)
    def _on_drafter_failed(self, exc) -> None:
        self.drafterFailed.emit(exc)

    @Slot()
    def _on_unloaded(self) -> None:
        self.info = None
        self._set_state(EMPTY)
