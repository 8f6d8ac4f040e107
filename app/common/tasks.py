"""Short background jobs (pair checks, inspections, the demo pair, downloads) off the UI thread.

Each job is a plain function run on a private QThreadPool. It gets a ``Job`` handle through which
it may report progress and poll ``cancelled``; its result or exception comes back as a signal on
the UI thread. Closing the window cancels what runs and waits for the pool, so no thread outlives
the window.
"""

from __future__ import annotations

import threading
from typing import Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, QTimer, Signal


class Job(QObject):
    """One job: its signals are delivered on the UI thread (the Job lives there)."""

    progress = Signal(object)  # whatever the function reports (text, (done, total), ...)
    succeeded = Signal(object)
    failed = Signal(object)  # the exception
    finished = Signal()  # after succeeded / failed, also when cancelled

    def __init__(self, name: str, parent: QObject | None = None):
        super().__init__(parent)
        self.name = name
        self._cancel = threading.Event()
        self.launched = False
        self.done = False

    # -- for the running function ---------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        return self._cancel

    def report(self, value) -> None:
        self.progress.emit(value)

    # -- for the UI -----------------------------------------------------------------------------------
    def cancel(self) -> None:
        self._cancel.set()


class _Runnable(QRunnable):
    def __init__(self, job: Job, fn: Callable, args: tuple, kwargs: dict):
        super().__init__()
        self.setAutoDelete(True)
        self.job, self.fn, self.args, self.kwargs = job, fn, args, kwargs

    def run(self) -> None:
        job = self.job
        try:
            result = self.fn(job, *self.args, **self.kwargs)
        except Exception as exc:  # noqa: BLE001 - the UI shows it
            job.failed.emit(exc)
        else:
            job.succeeded.emit(result)
        finally:
            job.done = True  # set here, on the pool thread: true even before the UI hears of it
            job.finished.emit()


class TaskRunner(QObject):
    def __init__(self, parent: QObject | None = None, max_threads: int = 4):
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(max_threads)
        self._jobs: set[Job] = set()
        self._closed = False

    def start(self, name: str, fn: Callable, *args, **kwargs) -> Job:
        """Runs ``fn(job, *args, **kwargs)`` on the pool; connect to the job's signals at once.

        The job starts on the next turn of the event loop, not here: a fast job could otherwise
        finish and emit before the caller has connected to its signals, and the result be lost.
        """
        job = Job(name, self)
        self._jobs.add(job)
        job.finished.connect(lambda j=job: self._forget(j))
        runnable = _Runnable(job, fn, args, kwargs)
        QTimer.singleShot(0, self, lambda: self._launch(runnable))
        return job

    def _launch(self, runnable: _Runnable) -> None:
        job = runnable.job
        if self._closed or job.cancelled:
            job.done = True
            self._jobs.discard(job)
            return
        job.launched = True
        self._pool.start(runnable)

    def _forget(self, job: Job) -> None:
        self._jobs.discard(job)

    def running(self) -> list[Job]:
        return [j for j in self._jobs if not j.done]

    def shutdown(self, timeout_ms: int = 30000) -> bool:
        self._closed = True  # jobs not launched yet never start
        for job in list(self._jobs):
            job.cancel()
            if not job.launched:
                job.done = True
                self._jobs.discard(job)
        return self._pool.waitForDone(timeout_ms)
