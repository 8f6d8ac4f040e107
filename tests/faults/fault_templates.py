"""Hostile chat templates in a model file's metadata (``tokenizer.chat_template``).

Each template goes into a real GGUF (a copy of a tiny target with that one key changed), the engine
loads it, and the chat is formatted as the app and the CLI do (Engine.format_chat). The user must
get a ChatTemplateError that says what happened; the engine must still generate afterwards, and
an honest template must still render (the renderer process is replaced after a timeout).
"""

from __future__ import annotations

import resource
from pathlib import Path

from engine_bridge.runtime import chat_template
from engine_bridge.runtime.chat_template import ChatTemplateError
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

from fault_outcomes import REFUSED, Outcome
from modelfiles import rewrite_gguf

#: name -> (template, error kind, a piece of the message the user sees)
HOSTILE = {
    "escape: dunder attributes": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "sandbox", "sandbox forbids"),
    "escape: a global's module": (
        "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
        "sandbox",
        "sandbox forbids",
    ),
    "escape: format string": (
        "{{ '{0.__class__.__init__.__globals__}'.format(messages) }}",
        "sandbox",
        "sandbox forbids",
    ),
    "escape: mutate the messages": (
        "{{ messages.append({'role': 'system', 'content': 'x'}) }}",
        "sandbox",
        "sandbox forbids",
    ),
    "escape: read a file": ("{% include '/etc/passwd' %}", "failed", "TemplateNotFound"),
    "loop: nested ranges": (
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        "timeout",
        "took longer than",
    ),
    "loop: endless recursion": (
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "recursion",
        "recursed too deeply",
    ),
    "huge: one string": ("{{ 'x' * 2000000000 }}", "memory", "MiB of memory"),
    "huge: doubling": (
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        "memory",
        "MiB of memory",
    ),
    "huge: many pieces": ("{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}", "too_large", "characters"),
    "huge: padding filter": ("{{ 'x' | center(2000000000) }}", "memory", "MiB of memory"),
    "huge: number": ("{{ 10 ** 10000000 }}", "timeout", "took longer than"),
    "refusal by the template": (
        "{{ raise_exception('Conversation roles must alternate user/assistant') }}",
        "refused",
        "roles must alternate",
    ),
    "not Jinja": ("{% for m in messages %}{{ m.content }", "syntax", "not valid Jinja"),
}

CHAT = [{"role": "user", "content": "Hello"}]
HONEST = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}<assistant>"


def template_target(base: Path, folder: Path, name: str, template: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / (name.replace(":", "").replace(" ", "-") + ".gguf")
    return rewrite_gguf(base, dst, set_kv={"tokenizer.chat_template": template})


def case_template(base: Path, folder: Path, name: str) -> Outcome:
    template, kind, says = HOSTILE[name]
    path = template_target(base, folder, name, template)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Engine.load(EngineConfig(target=path, n_ctx=256), preflight=PAIR_PREFLIGHT) as eng:
        assert eng.chat_template() == template, "the model file does not carry the template"
        try:
            eng.format_chat(CHAT)
        except ChatTemplateError as exc:
            err = exc
        else:
            raise AssertionError(f"{name}: the template rendered")
        assert err.kind == kind, f"{name}: kind {err.kind!r}, expected {kind!r} ({err})"
        assert says in str(err) and "chat template" in str(err), (
            f"{name}: the message {str(err)!r} does not say {says!r}"
        )
        # the engine is untouched: it still generates
        res = eng.generate("Hello", GenerationSettings(mode="ar", max_tokens=4))
        assert len(res.tokens) == 4
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert grew_mb < 256, f"{name}: the app's own peak memory grew by {grew_mb:.0f} MB"
    return Outcome(f"template: {name}", REFUSED, str(err), figures={"peak_growth_mb": grew_mb})


def case_honest_after(base: Path, folder: Path) -> Outcome:
    """After every hostile template: an honest one renders (and the renderer was restarted if it had to be)."""
    path = template_target(base, folder, "honest", HONEST)
    with Engine.load(EngineConfig(target=path, n_ctx=256), preflight=PAIR_PREFLIGHT) as eng:
        prompt = eng.format_chat(CHAT)
    assert prompt == "<user>Hello</user><assistant>", prompt
    return Outcome(
        "template: honest one afterwards",
        "recovered",
        prompt,
        figures={"renderer_starts": chat_template.renderer_starts()},
    )
