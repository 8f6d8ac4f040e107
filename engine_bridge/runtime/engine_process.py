"""An Engine in a child process: what the app and the CLI load when RPC servers are configured.

ggml-rpc's client aborts the process that loses a server (every failed send or receive ends in
GGML_ABORT, and nothing times out: docs/design/rpc-plan.md). In the GUI's process that would take
the window and the conversation with it. So the engine runs here, in a child that may die alone:

* the parent talks to it over a socket pair with pickled messages; tokens and step records stream
  back as they commit, so the UI sees the same callbacks as with an in-process Engine;
* Stop sends SIGUSR1: the child's handler sets the generation's cancel event between two steps;
* when the child dies (SIGABRT from ggml-rpc) or goes quiet past the watchdog (a server that hangs
  without closing its socket), the parent kills it, probes each server to name the one that was
  lost, and raises ``RpcError`` (reason "lost") or ``EngineProcessError``; ``reload()`` starts a
  fresh child on the same configuration once the server is back.

The child's stderr goes to a file, so llama.cpp's last words (the abort message) reach the user.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

from ..common.errors import EngineError
from .config import EngineConfig, GenerationSettings
from .records import GenerationResult

#: seconds without a word from the child while it generates (a step) before it counts as hung
GENERATE_WATCHDOG_S = 120.0
#: ... while it loads (weights travel to the servers: minutes for a large model)
LOAD_WATCHDOG_S = 3600.0
#: the methods the parent may call (the Engine API the app and the CLI use)
CALLS = frozenset({"format_chat", "tokenize_chat", "tokenize", "detokenize", "chat_template", "describe", "memory",
                   "llama_messages", "swap_drafter", "set_adapters", "reset"})
#: the Engine properties it may read
PROPERTIES = frozenset({"has_drafter", "tree_capable", "tree_reason", "span_rollback"})


class EngineProcessError(EngineError):
    """The engine's process ended or stopped answering; the engine is gone and needs a reload."""


def _stderr_tail(path: Path, n: int = 65536) -> str:
    try:
        data = path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""
    return data.strip()


#: ggml_abort's line: "file.cpp:123: message"
_ABORT_LINE = re.compile(r"^\S+\.(?:c|cc|cpp|cu):\d+: .+")


def _last_words(tail: str) -> str:
    """The line of llama.cpp's output that says why (the last abort message), else the last line."""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if _ABORT_LINE.match(ln):
            return ln.split("/")[-1]        # the file's name, not the build machine's path
    return lines[-1][:300] if lines else ""


class EngineProcess:
    """The subset of ``Engine`` that the app's worker and the CLI use, served by a child process."""

    def __init__(self, config: EngineConfig, *, watchdog_s: float = GENERATE_WATCHDOG_S,
                 load_watchdog_s: float = LOAD_WATCHDOG_S):
        self.config = config
        self.watchdog_s = watchdog_s
        self.load_watchdog_s = load_watchdog_s
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._log = Path(tempfile.mkstemp(prefix="dflash-engine-", suffix=".log")[1])
        self._lock = threading.Lock()     # one request at a time, as with an Engine
        self.dead: str | None = None      # why the child is gone (None while it serves)
        self._preflight = None            # the pairing checks handed to load(), for reload()

    # -- life ---------------------------------------------------------------------------------------
    @classmethod
    def load(cls, config: EngineConfig, *, preflight=None, check: bool = True,
             progress: Callable[[str], None] | None = None, **kw) -> "EngineProcess":
        """``preflight`` as for Engine.load; it goes to the child by pickle (by reference)."""
        eng = cls(config, **kw)
        eng._preflight = preflight
        try:
            eng._start(check, progress)
        except BaseException:
            eng._log.unlink(missing_ok=True)
            raise
        return eng

    def reload(self, progress: Callable[[str], None] | None = None, check: bool = True) -> None:
        """A fresh child on the same configuration (after a lost server came back)."""
        self._kill()
        self._start(check, progress)

    def _start(self, check: bool, progress) -> None:
        parent, child = socket.socketpair()
        self._log.write_bytes(b"")
        err = open(self._log, "ab")
        env = dict(os.environ)
        # ggml's abort attaches gdb for a backtrace: seconds, and pages of output nobody asked for
        env.setdefault("GGML_NO_BACKTRACE", "1")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "engine_bridge.runtime.engine_process", str(child.fileno())],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env,
                cwd=Path(__file__).resolve().parents[2])
        finally:
            err.close()
            child.close()
        self._conn = Connection(parent.detach())
        self.dead = None
        try:
            self._request(("load", self.config, check, self._preflight), progress=progress,
                          watchdog=self.load_watchdog_s)
        except BaseException:
            self._kill()
            raise

    def close(self) -> None:
        if self._proc is None:
            return
        if self.dead is None and self._proc.poll() is None:
            try:
                self._proc.send_signal(signal.SIGUSR1)    # a generation left running (Ctrl-C) stops first
                with self._lock:
                    self._conn.send(("close",))
                self._proc.wait(10)
            except (OSError, EOFError, subprocess.TimeoutExpired):
                pass
        self._kill()
        self._log.unlink(missing_ok=True)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()     # never ask a child whose server is gone to free its buffers: it aborts
            self._proc.wait(10)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- requests -----------------------------------------------------------------------------------
    def _request(self, msg, *, progress=None, on_token=None, on_step=None, cancel: threading.Event | None = None,
                 watchdog: float | None = None):
        if self.dead is not None:
            raise EngineProcessError(f"the engine is gone ({self.dead}); reload the pair")
        watchdog = watchdog or self.watchdog_s
        with self._lock:
            try:
                self._conn.send(msg)
            except OSError:
                self._lost("while taking a request")
            heard = time.monotonic()
            cancelled = False
            failed: BaseException | None = None     # a callback of ours that raised: drain, then re-raise
            while True:
                if cancel is not None and cancel.is_set() and not cancelled:
                    cancelled = True
                    self._proc.send_signal(signal.SIGUSR1)
                try:
                    ready = self._conn.poll(0.05)
                except (OSError, EOFError):
                    ready = True
                if not ready:
                    if self._proc.poll() is not None:
                        self._lost(self._during(msg))
                    if time.monotonic() - heard > watchdog:
                        self._lost(self._during(msg), hung=watchdog)
                    continue
                try:
                    kind, value = self._conn.recv()
                except (OSError, EOFError):
                    self._lost(self._during(msg))
                heard = time.monotonic()
                if kind == "ok":
                    if failed is not None:
                        raise failed
                    return value
                if kind == "err":
                    raise failed or value
                callback = {"token": on_token, "step": on_step, "progress": progress}.get(kind, False)
                if callback is False:
                    raise EngineProcessError(f"the engine process said {kind!r}")
                if callback is not None and failed is None:
                    try:
                        callback(value)
                    except BaseException as exc:  # noqa: BLE001 - as in-process: the caller gets it,
                        failed = exc              # once the child has stopped and answered
                        cancelled = True
                        self._proc.send_signal(signal.SIGUSR1)

    @staticmethod
    def _during(msg) -> str:
        what = msg[1] if msg[0] in ("call", "get") else msg[0]
        return {"load": "while loading", "generate": "mid-generation"}.get(what, f"during {what}")

    def _lost(self, during: str, hung: float | None = None):
        """The child died or went quiet: kill it, find which server was lost, raise."""
        from . import rpc

        self._kill()
        rc = self._proc.returncode if self._proc else None
        words = _last_words(_stderr_tail(self._log))
        if hung:
            why = f"no answer for {hung:g} s"
        elif rc is not None and rc < 0:
            try:
                why = f"it ended with {signal.Signals(-rc).name}"
            except ValueError:
                why = f"it ended with signal {-rc}"
        else:
            why = f"it exited with {rc}"
        lost = []
        for ep in self.config.rpc_servers:
            try:
                rpc.probe(ep, timeout=2.0)
            except rpc.RpcError as exc:
                lost.append(exc)
        self.dead = f"{why} {during}"
        detail = f" (llama.cpp: {words})" if words else ""
        if lost:
            first = lost[0]
            now = ("it accepts connections but does not answer (frozen, or taken by another client)"
                   if first.reason == "busy" else str(first))
            self.dead = f"RPC server {first.endpoint} lost {during}"
            raise rpc.RpcError(first.endpoint, "lost",
                               f"RPC server {first.endpoint} was lost {during}: {now}. The engine stopped ({why}){detail}; "
                               "the conversation is kept. Start the server again and reload the pair, "
                               "or remove the server from the RPC list.")
        raise EngineProcessError(f"the engine process stopped {during}: {why}{detail}. Reload the pair.")

    # -- the Engine API -----------------------------------------------------------------------------
    def generate(self, prompt: str | list[int], settings: GenerationSettings | None = None, *,
                 on_token: Callable | None = None, on_step: Callable | None = None,
                 cancel: threading.Event | None = None) -> GenerationResult:
        return self._request(("generate", prompt, settings), on_token=on_token, on_step=on_step, cancel=cancel)

    def __getattr__(self, name: str):
        if name in PROPERTIES:
            return self._request(("get", name))
        if name not in CALLS:
            raise AttributeError(f"{type(self).__name__} has no {name!r} (the engine runs in a child process)")
        return lambda *args, **kwargs: self._request(("call", name, args, kwargs))

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None


# -- the child ---------------------------------------------------------------------------------------
def _serve(fd: int) -> None:
    try:   # die with the parent (Linux)
        import ctypes

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    conn = Connection(fd)
    cancel = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: cancel.set())
    from .engine import Engine

    engine = None

    def send(kind, value):
        conn.send((kind, value))

    def send_error(exc: BaseException):
        try:
            pickle.loads(pickle.dumps(exc))
            send("err", exc)
        except Exception:   # noqa: BLE001 - an exception that does not pickle arrives as text
            send("err", EngineError(f"{type(exc).__name__}: {exc}"))

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        try:
            if msg[0] == "close":
                break
            if msg[0] == "load":
                _, config, check, preflight = msg
                engine = Engine.load(config, preflight=preflight, check=check, progress=lambda m: send("progress", m))
                send("ok", None)
            elif msg[0] == "generate":
                _, prompt, settings = msg
                cancel.clear()
                res = engine.generate(prompt, settings, on_token=lambda ev: send("token", ev),
                                      on_step=lambda rec: send("step", rec), cancel=cancel)
                send("ok", res)
            elif msg[0] == "get" and msg[1] in PROPERTIES:
                send("ok", getattr(engine, msg[1]))
            elif msg[0] == "call" and msg[1] in CALLS:
                _, name, args, kwargs = msg
                send("ok", getattr(engine, name)(*args, **kwargs))
            else:
                send("err", EngineProcessError(f"unknown request {msg[0]!r}"))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent as it was
            send_error(exc)
    if engine is not None:
        engine.close()


def open_engine(config: EngineConfig, *, preflight=None, check: bool = True,
                progress: Callable[[str], None] | None = None, isolate: bool | None = None):
    """The engine for ``config``: in this process, or in a child when RPC servers are configured
    (``isolate`` forces either). ``preflight``: the pairing checks, as for Engine.load."""
    from .engine import Engine

    if isolate if isolate is not None else bool(config.rpc_servers):
        return EngineProcess.load(config, preflight=preflight, check=check, progress=progress)
    return Engine.load(config, preflight=preflight, check=check, progress=progress)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
    os._exit(0)   # skip interpreter teardown: llama.cpp's objects are already freed
