"""Renders a model's chat template, which is untrusted code from the model file, with bounds.

The template runs in jinja2's sandbox inside a separate, long-lived process
(``chat_template_worker.py``): its address space is capped at RENDER_MEMORY_BYTES, a prompt longer
than MAX_PROMPT_CHARS is refused, and a render that takes longer than RENDER_SECONDS is stopped
by killing that process (Python code cannot be interrupted reliably in-process; the next render
starts a fresh one). Whatever the template does, the caller gets either the prompt or a
ChatTemplateError that says what went wrong, and the app's own process is untouched.

Startup (a Python interpreter and jinja2, about 0.1 s) happens once per app process, on the first
render; later renders cost a pipe round trip.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..common.errors import EngineError

RENDER_SECONDS = 2.0
RENDER_MEMORY_BYTES = 512 << 20
MAX_PROMPT_CHARS = 8 << 20
#: The renderer's start (interpreter + jinja2) on a loaded machine; not part of a render's deadline.
START_SECONDS = 30.0

WORKER = Path(__file__).with_name("chat_template_worker.py")

_WHY = {
    "refused": "the model's chat template refused this conversation: {}",
    "too_large": "the model's chat template built a prompt of {}; it was stopped",
    "memory": "the model's chat template needed {}; it was stopped",
    "sandbox": "the model's chat template tried something the sandbox forbids ({}); it was stopped",
    "syntax": "the model's chat template is not valid Jinja ({})",
    "recursion": "the model's chat template failed: {}",
    "failed": "the model's chat template failed: {}",
}


class ChatTemplateError(EngineError):
    """The chat template could not render this conversation; ``kind`` says why (see _WHY, 'timeout')."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class _Gone(Exception):
    """The worker was killed by someone else before it answered (see _Renderer.render)."""


class _Renderer:
    """One worker process, one request at a time (a lock); restarted after a timeout or a crash."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self.starts = 0  # how many worker processes were started (tests read it)

    def _start(self) -> None:
        # -P: the script's folder (engine_bridge/runtime/) stays off sys.path, so nothing there shadows a module.
        self._proc = subprocess.Popen(
            [sys.executable, "-P", str(WORKER), str(RENDER_MEMORY_BYTES), str(MAX_PROMPT_CHARS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._buf = b""
        self.starts += 1
        ready = self._read_line(START_SECONDS)
        if ready is None or not json.loads(ready).get("ready"):
            self._stop()
            raise ChatTemplateError("the chat-template renderer did not start (is jinja2 installed?)", "start")

    def _stop(self) -> None:
        if self._proc is not None:
            try:
                self._proc.kill()
            except OSError:
                pass
            self._proc.wait()
            for pipe in (self._proc.stdin, self._proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            self._proc = None

    def _read_line(self, timeout: float) -> bytes | None:
        """The next line from the worker, or None if it did not come within ``timeout`` or the worker died."""
        deadline = time.monotonic() + timeout
        fd = self._proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 1 << 20)
                if not chunk:  # the worker is gone: reap it, so poll() says how it ended
                    try:
                        self._proc.wait(5)
                    except subprocess.TimeoutExpired:
                        pass
                    return None
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def render(self, request: dict, timeout: float) -> str:
        with self._lock:
            try:
                return self._render(request, timeout, retry=True)
            except _Gone:
                # the worker was killed, not by us: it dies with the *thread* that started it
                # (PR_SET_PDEATHSIG is per thread), e.g. a server's or a task pool's thread that has
                # ended since; a fresh one, started by this thread, takes the request -- once
                return self._render(request, timeout, retry=False)

    def _render(self, request: dict, timeout: float, retry: bool) -> str:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        try:
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
        except OSError:
            self._stop()
            if retry:
                raise _Gone() from None
            raise ChatTemplateError("the chat-template renderer stopped; try again", "crash") from None
        line = self._read_line(timeout)
        if line is None:
            timed_out = self._proc.poll() is None
            killed = self._proc.returncode == -signal.SIGKILL
            self._stop()
            if timed_out:
                raise ChatTemplateError(
                    f"the model's chat template took longer than {timeout:g} s to render "
                    "(does it loop?); it was stopped",
                    "timeout",
                )
            if killed and retry:
                raise _Gone()
            raise ChatTemplateError("the chat-template renderer stopped while rendering; try again", "crash")
        reply = json.loads(line)
        if "prompt" in reply:
            return reply["prompt"]
        kind = reply.get("error", "failed")
        raise ChatTemplateError(_WHY.get(kind, _WHY["failed"]).format(reply.get("message", "")), kind)

    def close(self) -> None:
        with self._lock:
            self._stop()


_renderer = _Renderer()
atexit.register(_renderer.close)


def render_chat(
    template: str,
    messages: list[dict],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    timeout: float = RENDER_SECONDS,
) -> str:
    """The prompt ``template`` makes of ``messages``; ChatTemplateError when it cannot (see module doc)."""
    return _renderer.render(
        {
            "template": template,
            "messages": [dict(m) for m in messages],
            "bos_token": bos_token,
            "eos_token": eos_token,
            "add_generation_prompt": add_generation_prompt,
        },
        timeout,
    )


def renderer_starts() -> int:
    return _renderer.starts


def shutdown() -> None:
    """Stops the worker process (it also dies with the app)."""
    _renderer.close()
