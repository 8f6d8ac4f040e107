"""llama.cpp's own log: quiet by default, its warnings and errors kept for our messages.

llama-cpp-python installs a log callback that prints to stderr by its logger's level, but it maps
ggml's levels by an older enum (it reads WARN=3 as ERROR), so warnings such as "n_ctx_seq (4096) >
n_ctx_train (1024) -- possible training context overflow" reached the terminal in normal use. This
module replaces that callback (``llama_log_set`` sets llama.cpp's and ggml's logger):

* ``DFLASH_LLAMA_LOG`` set (any non-empty value but 0): every line goes to stderr as llama.cpp
  writes it — the switch for debugging a load.
* otherwise nothing is printed; WARN and ERROR lines are kept (deduplicated, bounded) and
  ``drain()`` hands them to whoever reports to the user (the CLI on stderr as its own lines,
  the app in its status bar) — see ``Engine.llama_messages``.
"""

from __future__ import annotations

import collections
import ctypes
import os
import sys
import threading

from .llama_ffi import C

# ggml.h of the vendored llama.cpp (0.3.36): NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5
DEBUG, INFO, WARN, ERROR, CONT = 1, 2, 3, 4, 5
LEVEL_NAMES = {WARN: "warning", ERROR: "error"}
#: at most this many distinct lines are kept between two drains
KEEP = 64


def verbose() -> bool:
    return os.environ.get("DFLASH_LLAMA_LOG", "") not in ("", "0")


_lock = threading.Lock()
_kept: collections.OrderedDict[tuple[int, str], None] = collections.OrderedDict()
_partial: list[str] = []  # a message llama.cpp writes in pieces (CONT), until its newline
_partial_level = 0


def _keep(level: int, text: str) -> None:
    global _partial_level
    if level != CONT:
        _partial.clear()
        _partial_level = level
    if _partial_level not in LEVEL_NAMES:
        return
    _partial.append(text)
    if not text.endswith("\n"):
        return
    line = "".join(_partial).strip()
    _partial.clear()
    if line:
        _kept[(_partial_level, line)] = None
        while len(_kept) > KEEP:
            _kept.popitem(last=False)


@C.llama_log_callback
def _callback(level: int, text: bytes, user_data) -> None:
    # called by llama.cpp from any thread; must never raise into C
    try:
        s = text.decode("utf-8", "replace") if text else ""
        if verbose():
            sys.stderr.write(s)
            sys.stderr.flush()
            return
        with _lock:
            _keep(int(level), s)
    except Exception:  # pragma: no cover - a log line is never worth a crash
        pass


_installed = False


def install() -> None:
    """Routes llama.cpp's log here (idempotent). The module-level ``_callback`` keeps the ctypes
    function object alive for as long as the process runs: llama.cpp holds only its address."""
    global _installed
    if not _installed:
        C.llama_log_set(_callback, ctypes.c_void_p(0))
        _installed = True


def drain() -> list[str]:
    """The warnings and errors llama.cpp logged since the last drain, oldest first, as
    "llama.cpp warning: ..." lines (one per distinct message)."""
    with _lock:
        lines = [f"llama.cpp {LEVEL_NAMES[level]}: {text}" for level, text in _kept]
        _kept.clear()
    return lines
