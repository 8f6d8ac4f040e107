"""The one thread that drives the engine, and the bounded queue of requests waiting for it.

An Engine is not thread-safe (runtime.engine), so every request runs here, one at a time, as the
app's chat worker does. A request is a Job: the HTTP side (asyncio) reads its events, the worker
thread puts them with ``loop.call_soon_threadsafe``. Setting ``job.cancel`` (a client that left)
stops its generation within one step, or skips it while it still waits; the engine is then ready
for the next request (Engine.generate's contract)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque

from ..common.errors import ContextOverflowError, EngineError, IncompatiblePairError, UnsupportedSettingError
from ..runtime.chat_template import ChatTemplateError
from .protocol import FINISH, ApiError, CompletionRequest
from .stops import StopFilter


#: Streaming: the shortest time between two hand-overs of text to the HTTP side (the first goes at
#: once). Per step on the 15.7 M reference pair on a 2-core CPU (~2.5 ms steps), handing over every
#: step cost ~10 % of the engine's speed (docs/benchmarks.md, "Serving"); 20 ms is 50 updates a
#: second, smoother than a chat window redraws.
STREAM_FLUSH_S = 0.02


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
        except RuntimeError:   # the event loop is closed: the server is shutting down
            self.cancel.set()


class EngineWorker:
    """Owns the engine once started; ``submit`` queues a job or refuses it (503) when
    ``max_waiting`` jobs already wait. ``variants``: draft variants by name, "base" the drafter
    loaded first; a request naming another swaps it in (Engine.swap_drafter: the pairing checks,
    then a drafter load; the target stays), and the next request without one swaps "base" back."""

    def __init__(self, engine, max_waiting: int = 8, retry_after_s: int = 1, variants: dict | None = None,
                 check: bool = True, stream_flush_s: float = STREAM_FLUSH_S):
        if max_waiting < 1:
            raise ValueError("the queue must hold at least one waiting request")
        self.engine = engine
        self.variants = dict(variants or {})
        self.stream_flush_s = stream_flush_s
        self.check = check
        self.current = "base" if engine.drafter is not None else None
        self.max_waiting = max_waiting
        self.retry_after_s = retry_after_s
        self._waiting: deque[Job] = deque()
        self._cv = threading.Condition()
        self._held = False                 # hold(): no new job starts
        self._stopping = False
        self.busy = False
        self.served = 0        # requests answered (a completion, or an error from the engine side)
        self.cancelled = 0     # requests whose client left (while waiting or generating)
        self.last: tuple[str, object] | None = None   # (engine finish reason, summary) of the last run
        self._thread = threading.Thread(target=self._run, name="dflash-serve-engine", daemon=True)

    # -- the HTTP side ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._cv:
            if self._stopping:
                raise ApiError(503, "the server is shutting down", code="shutting_down")
            if len(self._waiting) >= self.max_waiting:
                raise ApiError(503, f"the server is busy: {len(self._waiting)} requests are waiting for the "
                                    f"engine (the queue holds {self.max_waiting}); try again shortly",
                               code="queue_full", headers={"Retry-After": str(self.retry_after_s)})
            self._waiting.append(job)
            self._cv.notify()

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

    def stop(self, timeout: float = 10.0) -> None:
        with self._cv:
            self._stopping = True
            for job in self._waiting:
                job.cancel.set()
            self._cv.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the engine thread --------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cv:
                while (not self._waiting or self._held) and not self._stopping:
                    self._cv.wait()
                if self._stopping and not self._waiting:
                    return
                job = self._waiting.popleft()
                self.busy = True
            try:
                if job.cancel.is_set():
                    self.cancelled += 1
                    job.emit("error", ApiError(499, "the client left before its turn"))
                    continue
                self._serve(job)
            finally:
                self.busy = False

    def _serve(self, job: Job) -> None:
        eng, req = self.engine, job.req
        try:
            prompt = job.req.prompt
            if req.kind == "chat":
                prompt = eng.format_chat(req.messages)
            tokens = eng.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
            n_ctx = eng.target_ctx.n_ctx
            if not tokens:
                raise ApiError(400, "the prompt is empty once tokenized", param="prompt")
            if len(tokens) >= n_ctx:
                raise ApiError(400, f"the prompt has {len(tokens)} tokens but the context holds {n_ctx}; "
                                    "shorten the prompt or start the server with a larger --n-ctx",
                               param="messages" if req.kind == "chat" else "prompt",
                               code="context_length_exceeded")
            if req.kind == "completion" and isinstance(prompt, list):
                vocab = eng.target.n_vocab
                if max(tokens) >= vocab:
                    raise ApiError(400, f"token id {max(tokens)} is outside the vocabulary ({vocab})",
                                   param="prompt")
            want = req.variant or ("base" if "base" in self.variants else self.current)
            if want != self.current:
                self.current = None    # unknown until the swap is done (a failed load leaves no drafter)
                eng.swap_drafter(self.variants[want], check=self.check)
                self.current = want
            job.emit("start", len(tokens))
            stop = StopFilter(req.stops)

            step_text: list[str] = []

            def on_token(ev):
                out = stop.feed(ev.piece)
                if out:
                    step_text.append(out)
                if stop.hit:
                    job.cancel.set()   # ends the run within this step

            last_emit = [0.0]   # the first text goes at once (time to first token); later ones batch

            def on_step(rec):
                # every hand-over wakes the event loop, whose Python competes with this thread's for the
                # GIL: streaming hands text over at most every `stream_flush_s`; not streaming, at the end
                if step_text and req.stream and time.perf_counter() - last_emit[0] >= self.stream_flush_s:
                    job.emit("text", "".join(step_text))
                    step_text.clear()
                    last_emit[0] = time.perf_counter()

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
        except IncompatiblePairError as exc:   # a draft variant that does not pair with the target
            self.served += 1
            job.emit("error", ApiError(400, f"the draft variant cannot run with this target: {exc}",
                                       param="speculative.draft_variant", code="incompatible_variant"))
        except ChatTemplateError as exc:   # the model's template refused these messages (roles out of order...)
            self.served += 1
            job.emit("error", ApiError(400, f"the model's chat template refused the messages: {exc}",
                                       param="messages", code="chat_template"))
        except (ContextOverflowError, UnsupportedSettingError, ValueError) as exc:
            self.served += 1
            job.emit("error", ApiError(400, str(exc)))
        except EngineError as exc:   # a decode error: this request fails, the next one runs
            self.served += 1
            job.emit("error", ApiError(500, str(exc), code="engine_error"))
        except Exception as exc:     # never a dead worker: the next request still runs
            self.served += 1
            job.emit("error", ApiError(500, f"the engine failed: {type(exc).__name__}: {exc}", code="engine_error"))
