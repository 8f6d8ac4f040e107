"""Counts a real context's decodes inside a test: ``Context.process`` and ``Context.greedy_run`` (an AR
run's decodes in one call, patch 0028) are wrapped on that one instance (the test's monkeypatch undoes
it), so the decodes still run through llama.cpp."""

from __future__ import annotations


def count_decodes(monkeypatch, ctx) -> list[int]:
    """Returns a one-item list whose item counts the decodes ``ctx`` runs from now on."""
    n = [0]
    process = ctx.process

    def counted(batch):
        n[0] += 1
        process(batch)

    greedy_run = ctx.greedy_run

    def counted_run(*args):
        picks, ns, rc = greedy_run(*args)
        n[0] += len(picks) + (rc != 0)  # a failed decode is counted, as process counts it
        return picks, ns, rc

    monkeypatch.setattr(ctx, "process", counted)
    monkeypatch.setattr(ctx, "greedy_run", counted_run)
    return n
