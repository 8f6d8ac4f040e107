"""``dflash-studio serve``: the loaded pair behind a local OpenAI-compatible HTTP server."""

from __future__ import annotations

import os
import sys

from ..runtime.config import MODES, GenerationSettings
from .engine import (
    ENGINE_EXITS,
    EXIT_FAIL,
    EXIT_OK,
    EXIT_UNREADABLE,
    _say_llama,
    add_engine_args,
    config_from_args,
    load_engine,
)


def register(sub) -> None:
    from ..serve.binding import DEFAULT_HOST, DEFAULT_PORT, KEY_ENV

    p = sub.add_parser(
        "serve",
        help="serve the pair over an OpenAI-compatible HTTP API",
        description="Loads the pair and serves it on http://HOST:PORT/v1 (chat/completions, "
        "completions, models; /health). Requests use the model's chat template; "
        "a request's `speculative` object {mode, budget} may override the mode "
        "and budget below. Binds 127.0.0.1 unless --host says otherwise, and "
        f"another address needs an API key (--api-key or {KEY_ENV}).",
        epilog=ENGINE_EXITS,
    )
    add_engine_args(p)
    p.add_argument(
        "--mode",
        choices=MODES,
        default=None,
        help="default mode (default with a drafter: chain on a GPU build, auto on a CPU-only one; else ar)",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=None,
        help="default draft tokens per step (tree: node budget; default 5 for chain on a GPU build, else 7)",
    )
    p.add_argument("--p-min", type=float, default=0.0, help="stop drafting below this drafter probability")
    p.add_argument("--temp", type=float, default=0.0, help="temperature when a request names none (default 0: greedy)")
    p.add_argument("--top-k", type=int, default=40, help="top-k when a request names none (default 40)")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="DRAFTER.gguf",
        help="another drafter file a request may ask for by name (its file name without .gguf) with "
        "speculative.draft_variant; repeatable (e.g. a q4_0 variant from `dflash-studio quantize`)",
    )
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--api-key", default=None, help=f"require 'Authorization: Bearer KEY' (or set {KEY_ENV})")
    p.add_argument(
        "--queue",
        type=int,
        default=8,
        help="requests that may wait for the engine (default 8); past that: 503 with Retry-After",
    )
    p.set_defaults(func=cmd_serve)


def cmd_serve(args) -> int:
    from ..serve.binding import resolve_binding
    from ..serve.protocol import Defaults

    try:
        binding = resolve_binding(args.host, args.port, args.api_key, os.environ)
        cfg = config_from_args(args)
        if args.queue < 1:
            raise ValueError("--queue must be at least 1")
        from ..runtime.default_mode import default_budget, default_mode

        mode = args.mode or default_mode(bool(cfg.draft))
        # without --budget each mode a request may pick has its own default, read once here
        mode_budgets = () if args.budget is not None else tuple((m, default_budget(m)) for m in MODES)
        if args.budget is None:
            args.budget = default_budget(mode)
        GenerationSettings(mode=mode, budget=args.budget)  # the same checks generate makes
        defaults = Defaults(
            mode=mode,
            budget=args.budget,
            mode_budgets=mode_budgets,
            p_min=args.p_min,
            temperature=args.temp,
            top_k=args.top_k,
        )
    except (ValueError, FileNotFoundError) as exc:
        print(f"dflash-studio serve: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    eng, rc = load_engine(cfg, args, "serve")
    if eng is None:
        return rc
    _say_llama(eng)
    from ..serve.server import Server

    try:
        try:
            server = Server(
                eng, binding, defaults, max_waiting=args.queue, variants=args.variant, check=not args.no_check
            )
        except ValueError as exc:
            print(f"dflash-studio serve: {exc}", file=sys.stderr)
            return EXIT_UNREADABLE
        except OSError as exc:
            print(
                f"dflash-studio serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr
            )
            return EXIT_FAIL
        key = (
            "no API key (loopback only)"
            if binding.api_key is None
            else f"API key from {binding.key_source}, sent as 'Authorization: Bearer KEY'"
        )
        draft = cfg.draft.name if cfg.draft else "none"
        more = [v for v in server.worker.variants if v != "base"]
        variants = f", variants {', '.join(more)}" if more else ""
        print(
            f"dflash-studio serve: {server.url}  model {server.app.model_ids[0]} (drafter {draft}{variants}, "
            f"{mode} {args.budget}, context {server.app.limits.n_ctx}); {key}; Ctrl-C stops",
            flush=True,
        )
        try:
            server.run()
        except KeyboardInterrupt:  # uvicorn shuts down cleanly, then re-raises the signal: the way to stop
            pass
        print(f"dflash-studio serve: stopped after {server.worker.served} requests", flush=True)
    finally:
        eng.close()
    return EXIT_OK
