"""The chat-template renderer's own process (started by ``chat_template``; imports only jinja2).

A chat template comes from a model file, so it is untrusted code. Here it runs in jinja2's
ImmutableSandboxedEnvironment (no attribute access to internals, no mutation of the messages), in a
process whose address space is capped (a template that builds a huge string gets MemoryError, not
the app's memory) and that the app kills when a render runs past its deadline (a template that
loops). The environment matches llama-cpp-python's Jinja2ChatFormatter and Transformers' chat
templates: trim_blocks, lstrip_blocks, loop controls, the ``{% generation %}`` tag passed through,
``tojson`` as json.dumps, ``raise_exception`` and ``strftime_now``.

Protocol: one JSON object per line on stdin ({template, messages, bos_token, eos_token,
add_generation_prompt}); one JSON object per line on stdout: {"prompt": ...} or
{"error": kind, "message": ...}. The first line out is {"ready": true}.
"""

from __future__ import annotations

import json
import sys

#: Set by the parent through argv: address-space cap (bytes) and the largest prompt (characters).
MEMORY_BYTES = int(sys.argv[1]) if len(sys.argv) > 1 else 512 << 20
MAX_CHARS = int(sys.argv[2]) if len(sys.argv) > 2 else 8 << 20


class TemplateRefused(Exception):
    """raise_exception() called by the template itself (e.g. roles that do not alternate)."""


class TooLarge(Exception):
    pass


def _limit_resources() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    except (ImportError, ValueError, OSError):
        pass
    try:  # die with the parent: a looping render must not outlive the app (Linux)
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class IgnoreGenerationTags(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            parser.stream.skip(1)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    env = ImmutableSandboxedEnvironment(
        loader=jinja2.BaseLoader(),
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[IgnoreGenerationTags, jinja2.ext.loopcontrols],
    )

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise TemplateRefused(str(message))

    def strftime_now(fmt):
        from datetime import datetime

        return datetime.now().strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now)
    return env


def render(env, cache: dict, req: dict) -> str:
    tmpl = cache.get(req["template"])
    if tmpl is None:
        cache.clear()
        tmpl = cache[req["template"]] = env.from_string(req["template"])
    out, n = [], 0
    # generate(): pieces as they are made, so the size cap stops a template that builds a prompt
    # piece by piece long before it reaches the memory cap.
    for piece in tmpl.generate(
        messages=req["messages"],
        bos_token=req["bos_token"],
        eos_token=req["eos_token"],
        add_generation_prompt=req["add_generation_prompt"],
        functions=None,
        function_call=None,
        tools=None,
        tool_choice=None,
    ):
        n += len(piece)
        if n > MAX_CHARS:
            raise TooLarge()
        out.append(piece)
    return "".join(out)


def answer(env, cache: dict, req: dict) -> dict:
    import jinja2
    from jinja2.exceptions import SecurityError

    try:
        return {"prompt": render(env, cache, req)}
    except TemplateRefused as exc:
        return {"error": "refused", "message": str(exc)}
    except TooLarge:
        return {"error": "too_large", "message": f"more than {MAX_CHARS:,} characters"}
    except MemoryError:
        return {"error": "memory", "message": f"more than {MEMORY_BYTES >> 20} MiB of memory"}
    except SecurityError as exc:
        return {"error": "sandbox", "message": str(exc)}
    except jinja2.TemplateSyntaxError as exc:
        return {"error": "syntax", "message": f"line {exc.lineno}: {exc.message}"}
    except RecursionError:
        return {"error": "recursion", "message": "it recursed too deeply"}
    except Exception as exc:  # noqa: BLE001 - any failure of untrusted code is reported, not raised
        return {"error": "failed", "message": f"{type(exc).__name__}: {exc}"[:500]}


def main() -> None:
    _limit_resources()
    env = _environment()
    cache: dict = {}
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            reply = answer(env, cache, json.loads(line))
        except MemoryError:
            reply = {"error": "memory", "message": f"more than {MEMORY_BYTES >> 20} MiB of memory"}
        except (ValueError, KeyError) as exc:
            reply = {"error": "failed", "message": f"bad request: {exc}"}
        try:
            text = json.dumps(reply)
        except MemoryError:
            text = json.dumps({"error": "memory", "message": f"more than {MEMORY_BYTES >> 20} MiB of memory"})
        out.write(text + "\n")
        out.flush()


if __name__ == "__main__":
    main()
