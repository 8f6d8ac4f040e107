"""The local server's queue, run by the app's engine worker instead of a thread of its own.

engine_bridge.serve's routes talk to a JobQueue (submit, waiting, busy, served, cancelled); here each
job that is queued asks the app's engine worker for one turn (an EngineTask, a queued signal), so a
served request runs on the one engine thread behind whatever is queued there already -- a chat turn,
a load -- and a chat turn sent meanwhile waits behind it. Nothing here touches the engine outside
that thread. The protocol (prompts, stops, streaming hand-over, errors) is JobQueue.run's, the same
code ``dflash-studio serve`` runs."""

from __future__ import annotations

import itertools
from typing import Callable

from engine_bridge.serve.protocol import ApiError
from engine_bridge.serve.worker import Job, JobQueue, PairFacts

from ..shell.workers import EngineClient, EngineTask


class EngineJobQueue(JobQueue):
    """``on_step(run, record)`` is called on the engine's thread for each step of a served run (runs
    numbered from 1); ``on_change()`` from any thread when the counts change. Both must be cheap and
    never block (the app hands them to the UI through a StreamChannel and a queued signal)."""

    def __init__(
        self,
        engine: EngineClient,
        facts: PairFacts,
        *,
        max_waiting: int,
        on_step: Callable[[int, object], None],
        on_change: Callable[[], None],
    ):
        lim = facts.limits
        super().__init__(
            n_ctx=lim.n_ctx,
            n_vocab=facts.n_vocab,
            has_drafter=lim.has_drafter,
            max_waiting=max_waiting,
            # the drafter loaded is "base"; the app's own variant choice stays the app's
            variants={"base": None} if lim.has_drafter else {},
        )
        self._engine = engine
        self._on_step, self._on_change = on_step, on_change
        self._runs = itertools.count(1)
        self.run_no = 0  # the latest served run's number (its steps carry it to on_step)

    # -- any thread ---------------------------------------------------------------------------------
    def _submitted(self, job: Job) -> None:
        self._engine.run_on_engine(EngineTask(self._run_next))

    def _released(self) -> None:
        for _ in range(self.waiting):  # turns that came while held found nothing to start
            self._engine.run_on_engine(EngineTask(self._run_next))

    def _changed(self) -> None:
        self._on_change()

    def stop(self, timeout: float = 10.0) -> None:
        """No more jobs: those waiting are answered 503 now (not when their turn comes: the engine's
        thread may be busy with a long chat turn, or about to end); the running one stops within a step."""
        super().stop(timeout)
        while (job := self.take(block=False)) is not None:
            self.cancelled += 1
            job.emit("error", ApiError(503, "the server stopped", code="shutting_down"))
        self._on_change()

    # -- the engine's thread ------------------------------------------------------------------------
    def _run_next(self, engine) -> None:
        job = self.take(block=False)
        if job is None:  # answered by stop(), or held
            return
        run = self.run_no = next(self._runs)
        self.run(engine, job, on_step=lambda rec: self._on_step(run, rec))
