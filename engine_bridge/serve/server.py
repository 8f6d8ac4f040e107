"""Serving a loaded engine: the worker, the routes and uvicorn on a bound socket.

``Server`` runs in the calling thread (the CLI) or in a thread of its own (``start_in_thread``,
the tests, the desktop app); the socket is bound first, so port 0 means any free port and
``url`` is known before the first request."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import uvicorn

from .app import ServeApp
from .binding import Binding
from .protocol import Defaults
from .worker import EngineWorker, JobQueue, PairFacts, pair_facts


def variant_table(engine, paths) -> dict:
    """Draft variants by name: "base" (the drafter loaded) and each file's name without .gguf.
    A missing file or a name given twice is a ValueError for the user."""
    table = {"base": engine.config.draft} if engine.config.draft is not None else {}
    if paths and not table:
        raise ValueError("--variant needs a drafter (--draft) to vary")
    for p in map(Path, paths or ()):
        if not p.is_file():
            raise ValueError(f"--variant {p}: no such file")
        if p.stem in table:
            raise ValueError(f"--variant {p}: the name {p.stem!r} is taken; rename the file")
        table[p.stem] = p
    return table


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class Server:
    """``engine``: the loaded pair, served by an EngineWorker of the server's own; or None with
    ``worker`` (a JobQueue whose jobs another thread runs: the desktop app's engine worker) and
    ``facts`` (the pair's, read on that thread)."""

    def __init__(
        self,
        engine,
        binding: Binding,
        defaults: Defaults,
        *,
        max_waiting: int = 8,
        worker: JobQueue | None = None,
        variants=(),
        check: bool = True,
        facts: PairFacts | None = None,
    ):
        self.engine = engine
        if worker is None:
            table = variant_table(engine, variants)
            facts = pair_facts(engine, tuple(table))
            worker = EngineWorker(engine, max_waiting=max_waiting, variants=table, check=check, facts=facts)
            self._own_worker = True
        else:
            if facts is None:
                if engine is None:
                    raise ValueError("a server on another thread's worker needs the pair's facts")
                facts = pair_facts(engine, tuple(worker.variants))
            self._own_worker = False
        self.worker = worker
        self.sock = bind(binding.host, binding.port)
        self.binding = Binding(binding.host, self.sock.getsockname()[1], binding.api_key, binding.key_source)
        self.app = ServeApp(self.worker, facts.model_ids, defaults, facts.limits, binding.api_key)
        self._uv = uvicorn.Server(
            uvicorn.Config(
                self.app.asgi, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
            )
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.binding.url

    def run(self) -> None:
        """Serves until interrupted (Ctrl-C) or ``stop``."""
        if self._own_worker:
            assert isinstance(self.worker, EngineWorker)  # made in __init__
            self.worker.start()
        try:
            self._uv.run(sockets=[self.sock])
        finally:
            self._close()

    def start_in_thread(self, timeout: float = 10.0) -> "Server":
        self._thread = threading.Thread(target=self.run, name="dflash-serve-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uv.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._uv.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    def _close(self) -> None:
        if self._own_worker:
            self.worker.stop()
        self.sock.close()
