"""Merges bursts of calls into at most one call per interval (qutebrowser's throttle).

The first call runs at once, so a lone event is shown without delay; calls arriving while the
timer runs are merged into a single call when it fires. A burst of thousands of token events a
second therefore costs at most ``1000 / interval_ms`` redraws a second, and nothing when idle
(the timer is single-shot: it is not running unless something happened).
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, QTimer

#: 50 ms -> at most 20 redraws a second, the budget the issue sets for live views.
DEFAULT_INTERVAL_MS = 50


class Throttle(QObject):
    def __init__(self, func: Callable[[], None], interval_ms: int = DEFAULT_INTERVAL_MS, parent: QObject | None = None):
        super().__init__(parent)
        self._func = func
        self._pending = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._on_timeout)
        self.calls = 0  # how many times func ran (tests check the merging)

    def __call__(self) -> None:
        if self._timer.isActive():
            self._pending = True
            return
        self._run()

    def set_interval(self, interval_ms: int) -> None:
        """Changes how long later calls are merged for (a running timer keeps its old deadline)."""
        self._timer.setInterval(interval_ms)

    @property
    def interval_ms(self) -> int:
        return self._timer.interval()

    def flush(self) -> None:
        """Runs a merged call now (e.g. when a generation ends) instead of waiting for the timer."""
        if self._pending:
            self._timer.stop()
            self._run()

    def cancel(self) -> None:
        self._pending = False
        self._timer.stop()

    @property
    def pending(self) -> bool:
        return self._pending

    def _on_timeout(self) -> None:
        if self._pending:
            self._run()

    def _run(self) -> None:
        self._pending = False
        self.calls += 1
        # start before calling: a slow func must not let the next burst through unmerged
        self._timer.start()
        self._func()
