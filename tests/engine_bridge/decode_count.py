"""Counts a real context's decodes inside a test: ``Context.process`` is wrapped on that one instance
(the test's monkeypatch undoes it), so the decodes still run through llama.cpp."""

from __future__ import annotations


def count_decodes(monkeypatch, ctx) -> list[int]:
    """Returns a one-item list whose item counts the decodes ``ctx`` runs from now on."""
    n = [0]
    process = ctx.process

    def counted(batch):
        n[0] += 1
        process(batch)

    monkeypatch.setattr(ctx, "process", counted)
    return n
