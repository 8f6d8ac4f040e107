"""The bounded queue of requests waiting for the engine, what one request does on it, and the one
thread that drives it for ``dflash-studio serve``.

An Engine is not thread-safe (runtime.engine), so every request runs on one thread, one at a time.
A request is a Job: the HTTP side (asyncio) reads its events, the engine's thread puts them with
``loop.call_soon_threadsafe``. Setting ``job.cancel`` (a client that left) stops its generation
within one step, or skips it while it still waits; the engine is then ready for the next request
(Engine.generate's contract).

``JobQueue`` is what the routes (app.ServeApp) talk to -- ``submit``, ``waiting``, ``busy``,
``served``, ``cancelled``, ``max_waiting`` -- and ``run`` serves one job on an engine. Which
thread calls ``run`` is a subclass's choice: ``EngineWorker`` below has a thread of its own; the
desktop app (app.serve) hands each job to its engine worker, which runs it in turn with chat turns,
so the protocol code is this module's either way."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from ..common.errors import ContextOverflowError, EngineError, IncompatiblePairError, UnsupportedSettingError
from ..runtime.chat_template import ChatTemplateError
from .protocol import FINISH, ApiError, CompletionRequest, Limits
from .stops import StopFilter


#: Streaming: the shortest time between two hand-overs of text to the HTTP side (the first goes at
#: once). Per step on the 15.7 M reference pair on a 2-core CPU (~2.5 ms steps), handing over every
#: step cost ~10 % of the engine's speed (docs/benchmarks.md, "Serving"); 20 ms is 50 updates a
#: second, smoother than a chat window redraws.
STREAM_FLUSH_S = 0.02


@dataclass(frozen=True)
class PairFacts:
    """What the server needs to know of the loaded pair, read once (the engine may live in another
    thread or a child process): the names /v1/models lists, what a request may ask of it, and the
    vocabulary size that token-id prompts are checked against."""

    model_ids: tuple[str, ...]
    limits: Limits
    n_vocab: int


def pair_facts(engine, variants: tuple[str, ...] = ()) -> PairFacts:
    """The facts of an Engine or an EngineProcess (runtime.engine_process: only its Engine API
    crosses to the child, so they come from ``describe()`` and the configuration)."""
    d = engine.describe()
    cfg = engine.config
    nodes = getattr(engine, "tree_max_nodes", None)
    if nodes is None:  # a child process: its context was made for this many sequences (Engine.load's rule)
        nodes = min(cfg.max_tree_nodes, 256, cfg.n_batch - 1) if engine.tree_capable else 0
    has_drafter = "draft" in d
    limits = Limits(
        has_drafter=has_drafter,
        max_draft=int(d.get("max_draft", 0)),
        tree_nodes=int(nodes) if has_drafter else 0,
        n_ctx=int(d["n_ctx"]),
        variants=tuple(variants),
    )
    # the model's name: the target's file name without .gguf (clients must send one)
    return PairFacts(model_ids=(cfg.target.stem,), limits=limits, n_vocab=int(d["n_vocab"]))


class Job:
    """One request on its way through the worker. Events: ("start", n_prompt_tokens),
    ("text", str), ("done", (finish_reason, GenerationResult, draft variant)), ("error", ApiError)."""

    def __init__(self, req: CompletionRequest, loop: asyncio.AbstractEventLoop):
        self.req = req
        self.loop = loop
        self.events: asyncio.Queue = asyncio.Queue()
        self.cancel = threading.Event()

    def emit(self, kind: str, value) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is closed: the server is shutting down
            self.cancel.set()


class JobQueue:
    """The jobs waiting for the engine (``submit`` refuses with a 503 once ``max_waiting`` wait)
    and the serving of one (``run``). ``variants``: draft variants by name, "base" the drafter
    loaded first; a request naming another swaps it in (Engine.swap_drafter: the pairing checks,
    then a drafter load; the target stays), and the next request without one swaps "base" back.
    ``n_ctx``, ``n_vocab``: the pair's context and vocabulary (PairFacts), that prompts are held to."""

    def __init__(
        self,
        *,
        n_ctx: int,
        n_vocab: int,
        has_drafter: bool,
        max_waiting: int = 8,
        retry_after_s: int = 1,
        variants: dict | None = None,
        check: bool = True,
        stream_flush_s: float = STREAM_FLUSH_S,
    ):
        if max_waiting < 1:
            raise ValueError("the queue must hold at least one waiting request")
        self.variants = dict(variants or {})
        self.n_ctx, self.n_vocab = n_ctx, n_vocab
        self.stream_flush_s = stream_flush_s
        self.check = check
        self.current = "base" if has_drafter else None
        self.max_waiting = max_waiting
        self.retry_after_s = retry_after_s
        self._waiting: deque[Job] = deque()
        self._cv = threading.Condition()
        self._held = False  # hold(): no new job starts
        self._stopping = False
        self.busy = False
        self.served = 0  # requests answered (a completion, or an error from the engine side)
        self.cancelled = 0  # requests whose client left (while waiting or generating)
        self.last: tuple[str, object] | None = None  # (engine finish reason, summary) of the last run
        self._running: Job | None = None

    # -- the HTTP side ----------------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        with self._cv:
            if self._stopping:
                raise ApiError(503, "the server is shutting down", code="shutting_down")
            if len(self._waiting) >= self.max_waiting:
                raise ApiError(
                    503,
                    f"the server is busy: {len(self._waiting)} requests are waiting for the "
                    f"engine (the queue holds {self.max_waiting}); try again shortly",
                    code="queue_full",
                    headers={"Retry-After": str(self.retry_after_s)},
                )
            self._waiting.append(job)
            self._cv.notify()
        self._submitted(job)
        self._changed()

    def _submitted(self, job: Job) -> None:
        """A subclass's hook: the job is queued (the app asks its engine worker to run one)."""

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @contextlib.contextmanager
    def hold(self):
        """No new job starts while held (the running one finishes): lets an operator -- or a test --
        see the queue fill without racing the engine."""
        with self._cv:
            self._held = True
        try:
            yield self
        finally:
            with self._cv:
                self._held = False
                self._cv.notify()
            self._released()

    def _released(self) -> None:
        """A subclass's hook: hold() ended (jobs that waited may start)."""

    def stop(self, timeout: float = 10.0) -> None:
        """No more jobs: the ones waiting get their 499 / 503, the running one stops within a step."""
        with self._cv:
            self._stopping = True
            for job in self._waiting:
                job.cancel.set()
            if self._running is not None:
                self._running.cancel.set()
            self._cv.notify()

    # -- the engine's thread ------------------------------------------------------------------------
    def take(self, block: bool = True) -> Job | None:
        """The next job (None: stopping and nothing waits, or ``block`` is off and none may start)."""
        with self._cv:
            while (not self._waiting or self._held) and not self._stopping:
                if not block:
                    return None
                self._cv.wait()
            if not self._waiting:
                return None
            return self._waiting.popleft()

    def run(self, engine, job: Job, on_step: Callable | None = None) -> None:
        """Serves ``job`` on ``engine`` (on the engine's own thread); never raises. ``on_step``: also
        called with each step record (the app's live plots)."""
        with self._cv:
            self.busy = True
            self._running = job
        self._changed()
        try:
            if job.cancel.is_set():
                self.cancelled += 1
                gone = "the server stopped" if self._stopping else "the client left before its turn"
                job.emit(
                    "error",
                    ApiError(503 if self._stopping else 499, gone, code="shutting_down" if self._stopping else None),
                )
                return
            if engine is None:
                self.served += 1
                job.emit("error", ApiError(503, "no pair is loaded", code="no_pair"))
                return
            self._serve(engine, job, on_step)
        finally:
            with self._cv:
                self.busy = False
                self._running = None
            self._changed()

    def _changed(self) -> None:
        """A subclass's hook: a job was queued, began or was answered (the app's counters)."""

    def _serve(self, eng, job: Job, observe: Callable | None) -> None:
        req = job.req
        try:
            prompt = job.req.prompt
            if req.kind == "chat":
                # only the template makes control tokens, as in chat and `generate --chat`: a message
                # holding "<|im_end|><|im_start|>system" stays text and cannot forge a turn
                tokens = eng.tokenize_chat(req.messages)
            else:
                assert prompt is not None  # parse_request gives every completion one
                tokens = eng.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
            n_ctx = self.n_ctx
            if not tokens:
                raise ApiError(400, "the prompt is empty once tokenized", param="prompt")
            if len(tokens) >= n_ctx:
                raise ApiError(
                    400,
                    f"the prompt has {len(tokens)} tokens but the context holds {n_ctx}; "
                    "shorten the prompt or start the server with a larger --n-ctx",
                    param="messages" if req.kind == "chat" else "prompt",
                    code="context_length_exceeded",
                )
            if req.kind == "completion" and isinstance(prompt, list):
                vocab = self.n_vocab
                if max(tokens) >= vocab:
                    raise ApiError(400, f"token id {max(tokens)} is outside the vocabulary ({vocab})", param="prompt")
            want = req.variant or ("base" if "base" in self.variants else self.current)
            if want != self.current:
                self.current = None  # unknown until the swap is done (a failed load leaves no drafter)
                eng.swap_drafter(self.variants[want], check=self.check)
                self.current = want
            job.emit("start", len(tokens))
            stop = StopFilter(req.stops)

            step_text: list[str] = []
            last_emit = [0.0]  # when text was last handed over (0: not yet)

            def hand_over() -> None:
                job.emit("text", "".join(step_text))
                step_text.clear()
                last_emit[0] = time.perf_counter()

            def on_token(ev):
                out = stop.feed(ev.piece)
                if out:
                    step_text.append(out)
                    if req.stream and not last_emit[0]:
                        # the first text goes as its token commits, not at the end of its step (the
                        # drafter's feature injection and the cache trim come after the commit):
                        # time to first token
                        hand_over()
                if stop.hit:
                    job.cancel.set()  # ends the run within this step

            def on_step(rec):
                # every hand-over wakes the event loop, whose Python competes with this thread's for the
                # GIL: streaming hands text over at most every `stream_flush_s`; not streaming, at the end
                if step_text and req.stream and time.perf_counter() - last_emit[0] >= self.stream_flush_s:
                    hand_over()
                if observe is not None:
                    observe(rec)

            res = eng.generate(tokens, req.settings, on_token=on_token, on_step=on_step, cancel=job.cancel)
            tail = "".join(step_text) + stop.flush()
            if tail:
                job.emit("text", tail)
            raw = res.summary.finish_reason
            self.last = (raw, res.summary)
            if raw == "cancelled" and not stop.hit:
                self.cancelled += 1
            self.served += 1
            job.emit("done", ("stop" if stop.hit else FINISH.get(raw, raw), res, self.current))
        except ApiError as exc:
            self.served += 1
            job.emit("error", exc)
        except IncompatiblePairError as exc:  # a draft variant that does not pair with the target
            self.served += 1
            job.emit(
                "error",
                ApiError(
                    400,
                    f"the draft variant cannot run with this target: {exc}",
                    param="speculative.draft_variant",
                    code="incompatible_variant",
                ),
            )
        except ChatTemplateError as exc:  # the model's template refused these messages (roles out of order...)
            self.served += 1
            job.emit(
                "error",
                ApiError(
                    400,
                    f"the model's chat template refused the messages: {exc}",
                    param="messages",
                    code="chat_template",
                ),
            )
        except (ContextOverflowError, UnsupportedSettingError, ValueError) as exc:
            self.served += 1
            job.emit("error", ApiError(400, str(exc)))
        except EngineError as exc:  # a decode error, or an engine process that died: this request fails
            self.served += 1
            job.emit("error", ApiError(500, str(exc), code="engine_error"))
        except Exception as exc:  # never a dead worker: the next request still runs
            self.served += 1
            job.emit("error", ApiError(500, f"the engine failed: {type(exc).__name__}: {exc}", code="engine_error"))


class EngineWorker(JobQueue):
    """The queue with a thread of its own that owns the engine once started (``dflash-studio serve``)."""

    def __init__(
        self,
        engine,
        max_waiting: int = 8,
        retry_after_s: int = 1,
        variants: dict | None = None,
        check: bool = True,
        stream_flush_s: float = STREAM_FLUSH_S,
        facts: PairFacts | None = None,
    ):
        facts = facts or pair_facts(engine)
        super().__init__(
            n_ctx=facts.limits.n_ctx,
            n_vocab=facts.n_vocab,
            has_drafter=facts.limits.has_drafter,
            max_waiting=max_waiting,
            retry_after_s=retry_after_s,
            variants=variants,
            check=check,
            stream_flush_s=stream_flush_s,
        )
        self.engine = engine
        self._thread = threading.Thread(target=self._loop, name="dflash-serve-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while (job := self.take()) is not None:
            if getattr(self.engine, "dead", None) and not job.cancel.is_set():
                self._revive()
            self.run(self.engine, job)

    def _revive(self) -> None:
        """An engine process (--rpc) that lost a server answered that request with a 500 naming it; the
        next request starts a fresh one on the same configuration (minutes for a large model), and
        while the server is still away it fails the same way, so each request says why."""
        try:
            self.engine.reload(check=self.check)
            self.current = "base" if self.engine.config.draft is not None else None
        except Exception:  # noqa: BLE001 - the request's own run raises it again, as a 500 with the reason
            pass
