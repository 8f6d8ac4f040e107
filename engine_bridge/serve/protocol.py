"""OpenAI's wire format: a request body read into what the engine needs, and the bodies, stream
chunks, ``usage`` and llama.cpp-style ``timings`` sent back. Errors take OpenAI's shape:
``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from ..runtime.config import MODES, GenerationSettings
from ..runtime.records import PHASES, GenerationResult

#: The engine's finish reasons, as OpenAI names them ("cancelled" only reaches a client that left).
FINISH = {"eog": "stop", "stop": "stop", "max_tokens": "length", "context_full": "length", "cancelled": "stop"}
MAX_STOPS = 16


class ApiError(Exception):
    """An answer that is not a completion: status, message and OpenAI's error type / param / code."""

    TYPES = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        413: "invalid_request_error",
        503: "server_busy",
        500: "server_error",
    }

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.TYPES.get(self.status, "error"),
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass
class CompletionRequest:
    """One request, checked: what the worker renders, tokenizes and generates."""

    kind: str  # "chat" | "completion"
    model: str
    messages: list[dict] | None  # chat
    prompt: str | list[int] | None  # completion: text or token ids
    settings: GenerationSettings
    max_tokens_given: bool  # False: up to the end of the context
    stops: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    variant: str | None = None  # a draft variant's name (None: the one loaded now stays)


@dataclass(frozen=True)
class Defaults:
    """The server's settings a request may override (from the serve command's flags)."""

    mode: str
    budget: int
    # (mode, budget) pairs, set when --budget was left out: a request that picks another mode and no
    # budget then gets that mode's own default (runtime.default_mode.default_budget, read once at
    # start; a GPU build's chain 5 would otherwise run tree 5, whose top-k is on the host there)
    mode_budgets: tuple[tuple[str, int], ...] = ()
    p_min: float = 0.0
    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class Limits:
    """What the loaded pair can honour, for refusing a ``speculative`` override it cannot."""

    has_drafter: bool
    max_draft: int  # chain: most draft tokens per step (the drafter's block size - 1)
    tree_nodes: int  # tree: most nodes (0: no tree verification on this target)
    n_ctx: int
    variants: tuple[str, ...] = ()  # draft variants by name ("base": --draft; then each --variant)


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value" if param else None)


def _number(body: dict, key: str, kind, lo=None, hi=None, default=None):
    v = body.get(key)
    if v is None:
        return default
    ok = isinstance(v, int) if kind is int else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok:
        raise _bad(f"'{key}' must be {'an integer' if kind is int else 'a number'}, not {v!r}", key)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise _bad(f"'{key}' must be {rng}, not {v!r}", key)
    return kind(v)


def _content(msg: dict, i: int) -> str:
    """A message's text: a string, or OpenAI's list of parts of which only text is served."""
    c = msg.get("content")
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        parts = []
        for p in c:
            if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                raise _bad(f"messages[{i}].content: only text parts are served (a target here reads text)", "messages")
            parts.append(p["text"])
        return "".join(parts)
    raise _bad(f"messages[{i}].content must be a string or a list of text parts", "messages")


def _messages(body: dict) -> list[dict]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _bad("'messages' must be a non-empty list of {role, content}", "messages")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"messages[{i}] must be an object with a 'role'", "messages")
        role = "system" if m["role"] == "developer" else m["role"]
        if role not in ("system", "user", "assistant", "tool"):
            raise _bad(
                f"messages[{i}].role {m['role']!r} is not one of system, developer, user, assistant, tool", "messages"
            )
        out.append({"role": role, "content": _content(m, i)})
    return out


def _prompt(body: dict) -> str | list[int]:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
        p = p[0]
    if isinstance(p, str):
        if not p:
            raise _bad("'prompt' is empty", "prompt")
        return p
    if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in p):
        return list(p)
    raise _bad(
        "'prompt' must be a string (or one string in a list, or a list of token ids); "
        "several prompts in one request are not served",
        "prompt",
    )


def _stops(body: dict) -> list[str]:
    s = body.get("stop")
    if s is None:
        return []
    s = [s] if isinstance(s, str) else s
    if not isinstance(s, list) or not all(isinstance(x, str) for x in s) or len(s) > MAX_STOPS:
        raise _bad(f"'stop' must be a string or a list of at most {MAX_STOPS} strings", "stop")
    return [x for x in s if x]


def _speculative(body: dict, d: Defaults, lim: Limits) -> tuple[str, int, str | None]:
    """The mode, budget and draft variant for this request: the server's, or the ``speculative``
    object's when the pair can honour them (else 400, never a silent fallback)."""
    sp = body.get("speculative")
    if sp is None:
        return d.mode, d.budget, None
    if not isinstance(sp, dict):
        raise _bad("'speculative' must be an object {mode, budget, draft_variant}", "speculative")
    unknown = set(sp) - {"mode", "budget", "draft_variant"}
    if unknown:
        raise _bad(
            f"'speculative' has {', '.join(sorted(unknown))}: this server takes mode, budget and draft_variant",
            "speculative",
        )
    variant = sp.get("draft_variant")
    if variant is not None and variant not in lim.variants:
        served = ", ".join(lim.variants) or "none (the server runs the target alone)"
        raise _bad(
            f"speculative.draft_variant {variant!r} is not served; the variants are: {served} "
            "(start the server with --variant PATH to add one)",
            "speculative.draft_variant",
        )
    mode = sp.get("mode", d.mode)
    if mode not in MODES:
        raise _bad(f"speculative.mode {mode!r} is not one of {', '.join(MODES)}", "speculative.mode")
    if "budget" in sp:
        budget = sp["budget"]
    else:
        budget = d.budget if mode == d.mode else dict(d.mode_budgets).get(mode, d.budget)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise _bad(f"speculative.budget must be an integer >= 1, not {budget!r}", "speculative.budget")
    if mode in ("chain", "tree", "auto") and not lim.has_drafter:
        raise _bad(
            f"speculative.mode {mode!r} needs a drafter, and this server runs the target alone", "speculative.mode"
        )
    if mode == "chain" and budget > lim.max_draft:
        raise _bad(
            f"speculative.budget {budget}: the drafter drafts at most {lim.max_draft} tokens a step",
            "speculative.budget",
        )
    if mode == "tree":
        if lim.tree_nodes <= 1:
            raise _bad("speculative.mode 'tree': this target cannot verify a tree", "speculative.mode")
        if budget > lim.tree_nodes:
            raise _bad(
                f"speculative.budget {budget}: the context was made for {lim.tree_nodes} tree nodes",
                "speculative.budget",
            )
    return mode, budget, variant


def parse_request(kind: str, body, model_ids: tuple[str, ...], d: Defaults, lim: Limits) -> CompletionRequest:
    """A checked request, or ApiError (400 for a malformed field, 404 for an unknown model)."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model") or model_ids[0]
    if not isinstance(model, str):
        raise _bad("'model' must be a string", "model")
    if model not in model_ids:
        raise ApiError(
            404,
            f"The model '{model}' does not exist; this server serves {', '.join(model_ids)}",
            param="model",
            code="model_not_found",
        )
    messages = _messages(body) if kind == "chat" else None
    prompt = _prompt(body) if kind == "completion" else None
    _number(body, "n", int, 1, 1)  # one choice per request: n other than 1 is a 400
    max_tokens = _number(body, "max_completion_tokens", int, 1)
    max_tokens = _number(body, "max_tokens", int, 1, default=max_tokens)
    temperature = _number(body, "temperature", float, 0, 2, d.temperature)
    top_p = _number(body, "top_p", float, 0, 1, d.top_p)
    if top_p == 0:
        raise _bad("'top_p' must be above 0", "top_p")
    top_k = _number(body, "top_k", int, 0, default=d.top_k)
    seed = _number(body, "seed", int, default=d.seed)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("'stream' must be true or false", "stream")
    so = body.get("stream_options")
    if so is not None and (not isinstance(so, dict) or not isinstance(so.get("include_usage", False), bool)):
        raise _bad("'stream_options' must be an object {include_usage: bool}", "stream_options")
    mode, budget, variant = _speculative(body, d, lim)
    settings = GenerationSettings(
        mode=mode,
        budget=budget,
        p_min=d.p_min,
        max_tokens=max_tokens or max(1, lim.n_ctx),
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed & 0xFFFFFFFF,
    )
    return CompletionRequest(
        kind=kind,
        model=model,
        messages=messages,
        prompt=prompt,
        settings=settings,
        max_tokens_given=max_tokens is not None,
        stops=_stops(body),
        stream=stream,
        include_usage=bool(so and so.get("include_usage")),
        variant=variant,
    )


# -- answers ---------------------------------------------------------------------------------------
def usage(res: GenerationResult) -> dict:
    s = res.summary
    assert s is not None  # every finished generation has one
    return {
        "prompt_tokens": s.n_prompt,
        "completion_tokens": s.n_generated,
        "total_tokens": s.n_prompt + s.n_generated,
        "prompt_tokens_details": {"cached_tokens": s.n_prompt_reused},
    }


def timings(res: GenerationResult, variant: str | None = None) -> dict:
    """llama.cpp server's ``timings`` (prompt_n counts the tokens prefilled, cache_n those reused),
    plus what a speculative step did: mean commit length, acceptance and the phases' total ms."""
    s = res.summary
    assert s is not None
    fresh = s.n_prompt - s.n_prompt_reused
    p_ms, g_ms = s.t_prefill * 1e3, s.t_generate * 1e3
    return {
        "cache_n": s.n_prompt_reused,
        "prompt_n": fresh,
        "prompt_ms": p_ms,
        "prompt_per_token_ms": p_ms / fresh if fresh else 0.0,
        "prompt_per_second": fresh / s.t_prefill if s.t_prefill > 0 else 0.0,
        "predicted_n": s.n_generated,
        "predicted_ms": g_ms,
        "predicted_per_token_ms": g_ms / s.n_generated if s.n_generated else 0.0,
        "predicted_per_second": s.tok_per_s,
        "draft_n": s.n_drafted,
        "draft_n_accepted": s.n_accepted,
        # ours
        "mode": s.verify_mode if s.mode != "auto" else "auto",
        "budget": s.budget_effective,
        "steps": s.n_steps,
        "mean_commit_len": s.mean_commit_len,
        "acceptance_rate": s.acceptance_rate,
        # the engine's own time to first token (prefill and the first step; no HTTP, queue or tokenizing)
        "first_token_ms": s.t_first_token * 1e3,
        "phase_ms": {p: sum(getattr(r, f"t_{p}") for r in res.steps) * 1e3 for p in PHASES},
        "draft_variant": variant,
    }


class Answer:
    """Builds one request's bodies and chunks (ids and the creation time are shared by its chunks)."""

    def __init__(self, req: CompletionRequest):
        self.req = req
        self.variant: str | None = None  # the draft variant that ran (set by the worker's "done")
        chat = req.kind == "chat"
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.object = "chat.completion" if chat else "text_completion"

    def _head(self, obj: str) -> dict:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.req.model,
            "system_fingerprint": "dflash-studio",
        }

    def full(self, text: str, finish: str, res: GenerationResult) -> dict:
        if self.req.kind == "chat":
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": finish,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return {
            **self._head(self.object),
            "choices": [choice],
            "usage": usage(res),
            "timings": timings(res, self.variant),
        }

    def chunk(
        self, text: str | None, finish: str | None = None, *, first: bool = False, res: GenerationResult | None = None
    ) -> dict:
        if self.req.kind == "chat":
            delta = {}
            if first:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            out = {**self._head("chat.completion.chunk"), "choices": [choice]}
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
            out = {**self._head("text_completion"), "choices": [choice]}
        if res is not None:
            out["timings"] = timings(res, self.variant)
        return out

    def usage_chunk(self, res: GenerationResult) -> dict:
        obj = "chat.completion.chunk" if self.req.kind == "chat" else "text_completion"
        return {**self._head(obj), "choices": [], "usage": usage(res), "timings": timings(res, self.variant)}
