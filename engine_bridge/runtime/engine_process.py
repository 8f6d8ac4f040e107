"""An Engine in a child process: what the app always loads (unless its in-process setting is on),
and what the CLI loads when RPC servers are configured.

llama.cpp ends the process on any failed assertion (GGML_ASSERT aborts: a model file with a value
out of its domain, loaded without the pairing checks, does it at the first decode), and ggml-rpc's
client aborts the process that loses a server (every failed send or receive ends in GGML_ABORT,
and nothing times out: docs/design/rpc-plan.md). The system's out-of-memory killer ends it too. In
the GUI's process any of these would take the window and the conversation with it. So the engine
runs here, in a child that may die alone:

* the parent talks to it over a socket pair with pickled messages; tokens and step records stream
  back as they commit, so the UI sees the same callbacks as with an in-process Engine. They go in
  batches: the first step's at once, then at most every ``STREAM_FLUSH_S`` (at a step's end),
  because each message wakes the parent, and on a small CPU that wake-up pre-empts one of the
  engine's threads mid-step (the others wait for it at a barrier): ``docs/benchmarks.md``;
* Stop sends SIGUSR1: the child's handler sets the generation's cancel event between two steps;
  a load is cancelled by killing the child (llama.cpp cannot be interrupted mid-load);
* when the child dies or, with RPC servers, goes quiet past the watchdog (a server that hangs
  without closing its socket), the parent kills it, probes each server to name the one that was
  lost, and raises ``RpcError`` (reason "lost") or ``EngineProcessError`` whose ``reason`` names
  the death (aborted, crashed, out_of_memory, killed, exited, hung); ``reload()`` starts a fresh
  child on the same configuration.

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

#: seconds without a word from the child while it generates (a step) before it counts as hung; only
#: with RPC servers (a frozen server): a local step, a long prompt's prefill on a CPU, may take longer
GENERATE_WATCHDOG_S = 120.0
#: ... while it loads (weights travel to the servers: minutes for a large model)
LOAD_WATCHDOG_S = 3600.0
#: how often the child sends what committed (seconds; the UI redraws at most 20 times a second)
STREAM_FLUSH_S = 0.05
#: the methods the parent may call (the Engine API the app and the CLI use)
CALLS = frozenset(
    {
        "format_chat",
        "tokenize_chat",
        "tokenize",
        "detokenize",
        "chat_template",
        "describe",
        "memory",
        "llama_messages",
        "swap_drafter",
        "set_adapters",
        "reset",
        "snapshot_target",
        "restore_target",
        "catch_up_drafter",
    }
)
#: the Engine properties it may read
PROPERTIES = frozenset({"has_drafter", "tree_capable", "tree_reason", "span_rollback", "config"})


class EngineProcessError(EngineError):
    """The engine's process ended or stopped answering; the engine is gone and needs a reload.

    ``reason``: aborted (SIGABRT: a llama.cpp assertion), crashed (SIGSEGV, SIGBUS, SIGFPE, SIGILL),
    out_of_memory (SIGKILL while the memory cgroup counted an OOM kill), killed (another SIGKILL or
    signal), exited, hung (the watchdog), or "" when not known."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):
        return (type(self), (str(self), self.reason))


class EngineLoadCancelled(EngineError):
    """The caller cancelled a load; the child that was loading was killed."""


def _oom_kills() -> int | None:
    """The memory cgroup's count of out-of-memory kills (cgroup v2 or v1), None where unreadable."""
    for path, key in (
        ("/sys/fs/cgroup/memory.events", "oom_kill"),
        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
    ):
        try:
            for line in Path(path).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


#: how each deadly signal is said, and its reason
_SIGNALS = {
    signal.SIGABRT: ("aborted", "llama.cpp aborted the engine (SIGABRT)"),
    signal.SIGSEGV: ("crashed", "the engine crashed (SIGSEGV: a bad memory access)"),
    signal.SIGBUS: ("crashed", "the engine crashed (SIGBUS: a bad memory access)"),
    signal.SIGFPE: ("crashed", "the engine crashed (SIGFPE: an arithmetic fault)"),
    signal.SIGILL: ("crashed", "the engine crashed (SIGILL: an instruction this CPU lacks)"),
    signal.SIGKILL: ("killed", "the engine was killed (SIGKILL: by the out-of-memory killer or another program)"),
}


def death_of(rc: int | None, oom_before: int | None, oom_after: int | None) -> tuple[str, str]:
    """(reason, sentence) for a child that ended with return code ``rc`` (negative: a signal)."""
    if rc is None:
        return "", "it ended"
    if rc == -signal.SIGKILL and oom_before is not None and oom_after is not None and oom_after > oom_before:
        return "out_of_memory", "the system ran out of memory and its out-of-memory killer ended the engine (SIGKILL)"
    if rc < 0:
        try:
            sig = signal.Signals(-rc)
        except ValueError:
            return "killed", f"the engine ended with signal {-rc}"
        return _SIGNALS.get(sig, ("killed", f"the engine ended with {sig.name}"))
    return "exited", f"the engine exited with code {rc}"


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
            return ln.split("/")[-1]  # the file's name, not the build machine's path
    return lines[-1][:300] if lines else ""


class EngineProcess:
    """The subset of ``Engine`` that the app's worker and the CLI use, served by a child process."""

    def __init__(
        self, config: EngineConfig, *, watchdog_s: float | None = None, load_watchdog_s: float = LOAD_WATCHDOG_S
    ):
        self.config = config
        # None: no watchdog on a generation (a local engine is not waiting on a server)
        self.watchdog_s = (
            watchdog_s if watchdog_s is not None else (GENERATE_WATCHDOG_S if config.rpc_servers else None)
        )
        self.load_watchdog_s = load_watchdog_s
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._log = Path(tempfile.mkstemp(prefix="dflash-engine-", suffix=".log")[1])
        self._lock = threading.Lock()  # one request at a time, as with an Engine
        self.dead: str | None = None  # why the child is gone (None while it serves)
        self.death: EngineError | None = None  # the error that said so (for those who did not get it)
        self._preflight = None  # the pairing checks handed to load(), for reload()
        self._oom_at_start: int | None = None

    # -- life ---------------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        config: EngineConfig,
        *,
        preflight=None,
        check: bool = True,
        progress: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        **kw,
    ) -> "EngineProcess":
        """``preflight`` as for Engine.load; it goes to the child by pickle (by reference).
        ``cancel``: set it to stop the load (the child is killed; EngineLoadCancelled)."""
        eng = cls(config, **kw)
        eng._preflight = preflight
        try:
            eng._start(check, progress, cancel)
        except BaseException:
            eng._log.unlink(missing_ok=True)
            raise
        return eng

    def reload(
        self, progress: Callable[[str], None] | None = None, check: bool = True, cancel: threading.Event | None = None
    ) -> None:
        """A fresh child on the same configuration (after a lost server came back, or a crash)."""
        self._kill()
        self._start(check, progress, cancel)

    def _start(self, check: bool, progress, cancel: threading.Event | None = None) -> None:
        parent, child = socket.socketpair()
        self._log.write_bytes(b"")
        err = open(self._log, "ab")
        env = dict(os.environ)
        # ggml's abort attaches gdb for a backtrace: seconds, and pages of output nobody asked for
        env.setdefault("GGML_NO_BACKTRACE", "1")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "engine_bridge.runtime.engine_process", str(child.fileno())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                env=env,
                cwd=Path(__file__).resolve().parents[2],
            )
        finally:
            err.close()
            child.close()
        self._conn = Connection(parent.detach())
        self.dead = None
        self.death = None
        self._oom_at_start = _oom_kills()
        try:
            self._request(
                ("load", self.config, check, self._preflight),
                progress=progress,
                watchdog=self.load_watchdog_s,
                cancel=cancel,
            )
        except BaseException:
            self._kill()
            raise

    def close(self) -> None:
        if self._proc is None:
            return
        if self.dead is None and self._proc.poll() is None:
            try:
                self._proc.send_signal(signal.SIGUSR1)  # a generation left running (Ctrl-C) stops first
                with self._lock:
                    self._conn.send(("close",))
                self._proc.wait(10)
            except (OSError, EOFError, subprocess.TimeoutExpired):
                pass
        self._kill()
        self._log.unlink(missing_ok=True)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()  # never ask a child whose server is gone to free its buffers: it aborts
            self._proc.wait(10)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- requests -----------------------------------------------------------------------------------
    def _request(
        self,
        msg,
        *,
        progress=None,
        on_token=None,
        on_step=None,
        cancel: threading.Event | None = None,
        watchdog: float | None = None,
    ):
        if self.dead is not None:
            raise EngineProcessError(f"the engine is gone ({self.dead}); reload the pair")
        watchdog = watchdog or self.watchdog_s
        loading = msg[0] == "load"
        with self._lock:
            if not loading and self._proc.poll() is not None:
                self._lost("while idle")  # it died between two requests (the OOM killer picks idle ones too)
            try:
                self._conn.send(msg)
            except OSError:
                self._lost("while taking a request")
            heard = time.monotonic()
            cancelled = False
            failed: BaseException | None = None  # a callback of ours that raised: drain, then re-raise
            while True:
                if cancel is not None and cancel.is_set() and not cancelled:
                    cancelled = True
                    if loading:  # llama.cpp cannot stop a load: the child goes, with what it loaded
                        self._kill()
                        self.dead = "load cancelled"
                        raise EngineLoadCancelled("load cancelled")
                    self._proc.send_signal(signal.SIGUSR1)
                try:
                    ready = self._conn.poll(0.05)
                except (OSError, EOFError):
                    ready = True
                if not ready:
                    if self._proc.poll() is not None:
                        self._lost(self._during(msg))
                    if watchdog is not None and time.monotonic() - heard > watchdog:
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
                if kind == "events":  # the child's batch: tokens, then the records of their steps
                    if failed is None:
                        try:
                            tokens, records = value
                            if on_token is not None:
                                for ev in tokens:
                                    on_token(ev)
                            if on_step is not None:
                                for rec in records:
                                    on_step(rec)
                        except BaseException as exc:  # noqa: BLE001 - as below
                            failed = exc
                            cancelled = True
                            self._proc.send_signal(signal.SIGUSR1)
                    continue
                callback = {"token": on_token, "step": on_step, "progress": progress}.get(kind, False)
                if callback is False:
                    raise EngineProcessError(f"the engine process said {kind!r}")
                if callback is not None and failed is None:
                    try:
                        callback(value)
                    except BaseException as exc:  # noqa: BLE001 - as in-process: the caller gets it,
                        failed = exc  # once the child has stopped and answered
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
            reason, why = "hung", f"no answer for {hung:g} s"
        else:
            reason, why = death_of(rc, self._oom_at_start, _oom_kills())
        lost = []
        for ep in self.config.rpc_servers:
            try:
                rpc.probe(ep, timeout=2.0)
            except rpc.RpcError as probe_error:
                lost.append(probe_error)
        self.dead = f"{why} {during}"
        detail = f" (llama.cpp: {words})" if words else ""
        exc: EngineError
        if lost:
            first = lost[0]
            now = (
                "it accepts connections but does not answer (frozen, or taken by another client)"
                if first.reason == "busy"
                else str(first)
            )
            self.dead = f"RPC server {first.endpoint} lost {during}"
            exc = rpc.RpcError(
                first.endpoint,
                "lost",
                f"RPC server {first.endpoint} was lost {during}: {now}. The engine stopped ({why}){detail}; "
                "the conversation is kept. Start the server again and reload the pair, "
                "or remove the server from the RPC list.",
            )
        else:
            exc = EngineProcessError(f"The engine stopped {during}: {why}{detail}. Reload the pair.", reason)
        self.death = exc
        raise exc

    # -- the Engine API -----------------------------------------------------------------------------
    def generate(
        self,
        prompt: str | list[int],
        settings: GenerationSettings | None = None,
        *,
        on_token: Callable | None = None,
        on_step: Callable | None = None,
        cancel: threading.Event | None = None,
        on_progress: Callable[[str], None] | None = None,
    ) -> GenerationResult:
        return self._request(
            ("generate", prompt, settings), on_token=on_token, on_step=on_step, cancel=cancel, progress=on_progress
        )

    def swap_drafter(self, path, **kwargs) -> None:
        self._request(("call", "swap_drafter", (path,), kwargs))
        self.config = self._request(("get", "config"))  # the new drafter: what a reload loads

    def set_adapters(self, adapters, **kwargs) -> None:
        self._request(("call", "set_adapters", (adapters,), kwargs))
        self.config = self._request(("get", "config"))

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
    try:  # die with the parent (Linux)
        import ctypes

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
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
        except Exception:  # noqa: BLE001 - an exception that does not pickle arrives as text
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
                tokens: list = []  # committed since the last message, with the steps that did it
                steps: list = []
                sent = [0.0]  # when the last batch went (0: the first step's goes at once)

                def flush():
                    if tokens or steps:
                        send("events", (tokens[:], steps[:]))
                        tokens.clear()
                        steps.clear()
                    sent[0] = time.monotonic()

                def on_step(rec):
                    steps.append(rec)
                    if time.monotonic() - sent[0] >= STREAM_FLUSH_S:
                        flush()

                try:
                    res = engine.generate(
                        prompt,
                        settings,
                        on_token=tokens.append,
                        on_step=on_step,
                        cancel=cancel,
                        on_progress=lambda m: send("progress", m),  # (auto's calibration; each also feeds the watchdog)
                    )
                finally:
                    flush()
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


def open_engine(
    config: EngineConfig,
    *,
    preflight=None,
    check: bool = True,
    progress: Callable[[str], None] | None = None,
    isolate: bool | None = None,
    cancel: threading.Event | None = None,
):
    """The engine for ``config``: in this process, or in a child when RPC servers are configured
    (``isolate`` True forces a child; False keeps it here unless RPC servers need one).
    ``preflight``: the pairing checks, as for Engine.load; ``cancel`` stops a child's load."""
    from .engine import Engine

    if isolate or bool(config.rpc_servers):
        return EngineProcess.load(config, preflight=preflight, check=check, progress=progress, cancel=cancel)
    return Engine.load(config, preflight=preflight, check=check, progress=progress)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
    os._exit(0)  # skip interpreter teardown: llama.cpp's objects are already freed
