"""Hands token and step events from the engine's thread to the UI without a signal per token.

The engine calls ``on_token`` / ``on_step`` on its own thread, possibly thousands of times a
second. Emitting a queued Qt signal for each would flood the UI's event queue and steal time from
generation. Instead the engine thread appends to a deque (atomic under the GIL) and emits
``ready`` only when no notification is outstanding; the UI takes everything queued in one
``drain()``. The UI clears the flag *before* draining, so an event appended during a drain
either is drained now or raises a fresh notification: nothing is ever stranded.
"""

from __future__ import annotations

from collections import deque

from PySide6.QtCore import QObject, Signal

TOKEN, STEP = 0, 1


class StreamChannel(QObject):
    #: emitted from the engine's thread; connect it (queued) to a UI slot that calls drain()
    ready = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._queue: deque = deque()
        self._notified = False

    # -- engine thread ------------------------------------------------------------------------------
    def push_token(self, event) -> None:
        self._queue.append((TOKEN, event))
        self._notify()

    def push_step(self, record) -> None:
        self._queue.append((STEP, record))
        self._notify()

    def _notify(self) -> None:
        if not self._notified:
            self._notified = True
            self.ready.emit()

    # -- UI thread ------------------------------------------------------------------------------------
    def drain(self) -> tuple[list, list]:
        """(token events, step records) queued since the last drain, each in arrival order."""
        self._notified = False
        tokens, steps = [], []
        q = self._queue
        while q:
            kind, item = q.popleft()
            (tokens if kind == TOKEN else steps).append(item)
        return tokens, steps

    def clear(self) -> None:
        self._notified = False
        self._queue.clear()
