"""The HTTP routes (Starlette): /health, /v1/models, /v1/chat/completions, /v1/completions.

Every route answers JSON; errors in OpenAI's shape (protocol.ApiError), never a traceback. A
streaming answer is server-sent events ending with ``data: [DONE]``; when its client disconnects,
Starlette cancels the stream and the job's cancel event stops the engine within one step. A
non-streaming request watches for the disconnect itself, for the same reason."""

from __future__ import annotations

import asyncio
import hmac
import json
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .protocol import Answer, ApiError, Defaults, Limits, parse_request
from .worker import Job, JobQueue

MAX_BODY = 16 * 2**20  # 16 MiB: far past any context this serves, short of exhausting memory


def _error(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def _sse(obj) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


class ServeApp:
    """The routes over one EngineWorker. ``model_ids``: the names /v1/models lists (the first is
    the target's file name without .gguf); a request naming another model gets 404."""

    def __init__(
        self,
        worker: JobQueue,
        model_ids: tuple[str, ...],
        defaults: Defaults,
        limits: Limits,
        api_key: str | None = None,
    ):
        self.worker, self.model_ids, self.defaults, self.limits = worker, model_ids, defaults, limits
        self.api_key = api_key
        self.started = int(time.time())
        self.asgi = Starlette(
            routes=[
                Route("/health", self.health, methods=["GET"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
            ],
            exception_handlers={
                HTTPException: self._http_error,  # type: ignore[dict-item]  # called with its key's type
                Exception: self._crash,
            },
        )

    # -- plumbing ---------------------------------------------------------------------------------
    async def _http_error(self, request: Request, exc: HTTPException) -> JSONResponse:
        what = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
        return _error(ApiError(exc.status_code, what.get(exc.status_code, str(exc.detail))))

    async def _crash(self, request: Request, exc: Exception) -> JSONResponse:
        return _error(ApiError(500, f"internal error: {type(exc).__name__}: {exc}"))

    def _authorise(self, request: Request) -> None:
        if self.api_key is None:
            return
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise ApiError(401, "an API key is needed: send 'Authorization: Bearer KEY'", code="missing_api_key")
        if not hmac.compare_digest(token.strip().encode(), self.api_key.encode()):
            raise ApiError(401, "the API key is wrong", code="invalid_api_key")

    async def _body(self, request: Request):
        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise ApiError(413, f"the request body is {len(raw)} bytes; at most {MAX_BODY} are read")
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ApiError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None

    # -- routes -----------------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        w = self.worker
        return JSONResponse(
            {
                "status": "ok",
                "busy": w.busy,
                "waiting": w.waiting,
                "queue": w.max_waiting,
                "served": w.served,
                "cancelled": w.cancelled,
            }
        )

    async def models(self, request: Request) -> Response:
        try:
            self._authorise(request)
        except ApiError as exc:
            return _error(exc)
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": self.started, "owned_by": "dflash-studio"}
                    for m in self.model_ids
                ],
            }
        )

    async def chat(self, request: Request) -> Response:
        return await self._complete(request, "chat")

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, "completion")

    async def _complete(self, request: Request, kind: str) -> Response:
        try:
            self._authorise(request)
            req = parse_request(kind, await self._body(request), self.model_ids, self.defaults, self.limits)
            job = Job(req, asyncio.get_running_loop())
            self.worker.submit(job)
        except ApiError as exc:
            return _error(exc)
        # wait for the worker to accept the prompt (it may still refuse it: over the context, a template error)
        first = await self._next_or_gone(job, request)
        if first is None:
            return Response(status_code=499)
        if first[0] == "error":
            return _error(first[1])
        if req.stream:
            return StreamingResponse(
                self._stream(job, Answer(req)),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        parts = []
        while True:
            ev = await self._next_or_gone(job, request)
            if ev is None:
                return Response(status_code=499)
            kind_, value = ev
            if kind_ == "text":
                parts.append(value)
            elif kind_ == "error":
                return _error(value)
            else:
                finish, res, variant = value
                answer = Answer(req)
                answer.variant = variant
                return JSONResponse(answer.full("".join(parts), finish, res))

    async def _next_or_gone(self, job: Job, request: Request):
        """The job's next event, or None (and the job cancelled) when the client disconnects first."""
        get = asyncio.ensure_future(job.events.get())
        gone = asyncio.ensure_future(self._disconnected(request))
        try:
            done, _ = await asyncio.wait({get, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            job.cancel.set()
            raise
        finally:
            gone.cancel()
        if get in done:
            return get.result()
        get.cancel()
        job.cancel.set()
        return None

    @staticmethod
    async def _disconnected(request: Request) -> None:
        while True:
            msg = await request.receive()
            if msg["type"] == "http.disconnect":
                return

    async def _stream(self, job: Job, answer: Answer):
        """Server-sent events: a role chunk, a chunk per committed piece of text, the finish chunk
        (with timings), the usage chunk when asked for, then [DONE]. Leaving early (a disconnect
        cancels this generator) cancels the job."""
        try:
            if answer.req.kind == "chat":
                yield _sse(answer.chunk("", first=True))
            pending = None
            while True:
                kind, value = pending or await job.events.get()
                pending = None
                if kind == "text":
                    # what piled up while the last chunk was sent goes out as one chunk: a client slower
                    # than the engine costs fewer writes, never tokens
                    parts = [value]
                    while not job.events.empty():
                        nxt = job.events.get_nowait()
                        if nxt[0] != "text":
                            pending = nxt
                            break
                        parts.append(nxt[1])
                    yield _sse(answer.chunk("".join(parts)))
                elif kind == "error":  # after the stream began: an error event, then the end
                    yield _sse(value.body())
                    break
                else:
                    finish, res, answer.variant = value
                    yield _sse(answer.chunk(None, finish, res=res))
                    if answer.req.include_usage:
                        yield _sse(answer.usage_chunk(res))
                    break
            yield b"data: [DONE]\n\n"
        finally:
            job.cancel.set()  # a no-op once the run ended; stops it within one step otherwise
