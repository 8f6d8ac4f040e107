"""A plain run streams a step's tokens while the next decode runs (generation.OVERLAP_COMMIT_ENV).

On a GPU ``llama_decode`` returns once the decode is queued, so the Python that streams a step's
tokens (detokenising, the events, the step's record) can run while the device decodes the next
batch instead of between the steps. The tokens, events and steps must be the same either way; only
the moment an event arrives moves. On this CPU build the decode returns when it is done, so the
default is off here (on a GPU it is on: sitting s71 measured a small gain) and the tests force it on
to check the bookkeeping.
"""

from __future__ import annotations

import threading

import pytest

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import generation
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

from decode_count import count_decodes
from test_ar_steps import PROMPT
from test_eog_cache import eos_pair  # noqa: F401 - a fixture: the tiny pair with an EOS it reaches

MODES = [("ar", 1), ("chain", 3), ("chain", 7)]


def _run(eng, monkeypatch, overlap: str, mode: str, budget: int, max_tokens: int, cut: int | None = None):
    """One greedy run from an empty cache: what every callback saw, and for each token how many
    target decodes had been queued when it was streamed."""
    monkeypatch.setenv(generation.OVERLAP_COMMIT_ENV, overlap)
    ctx = eng.target_ctx
    decodes = count_decodes(monkeypatch, ctx)
    events, steps, decodes_at, cache_at = [], [], [], []
    cancel = threading.Event()

    def on_token(ev):
        events.append((ev.token, ev.source, ev.step, ev.index))
        decodes_at.append(decodes[0])
        cache_at.append(len(eng.kv))
        if cut is not None and ev.index == cut:
            cancel.set()

    eng.reset()
    res = eng.generate(
        PROMPT,
        # AR one decode a call: the streaming of AR runs (ar_run.py) is test_ar_run.py's
        GenerationSettings(mode=mode, budget=budget, max_tokens=max_tokens, ar_runs=False),
        on_token=on_token,
        on_step=lambda r: steps.append((r.step, r.drafted, r.accepted, r.committed)),
        cancel=cancel,
    )
    monkeypatch.undo()
    seen = {
        "tokens": list(res.tokens),
        "sources": list(res.sources),
        "events": events,
        "on_step": steps,
        "steps": [(r.step, r.drafted, r.accepted, r.committed) for r in res.steps],
        "finish": res.summary.finish_reason,
        "cache": list(eng.kv),
    }
    # the cache's length at each token, less its step's start: a plain AR step appends its input
    # before streaming (1), a plain chain or tree step after (0)
    seen["cache_ahead"] = [n - res.steps[e[2]].pos for n, e in zip(cache_at, events)]
    return seen, [d - decodes_at[0] for d in decodes_at]


@pytest.mark.parametrize("mode,budget", MODES)
@pytest.mark.parametrize("max_tokens", [1, 2, 24])
def test_overlapped_runs_stream_what_plain_runs_stream(tiny_engine, monkeypatch, mode, budget, max_tokens):
    plain, plain_at = _run(tiny_engine, monkeypatch, "0", mode, budget, max_tokens)
    overlapped, at = _run(tiny_engine, monkeypatch, "1", mode, budget, max_tokens)
    assert overlapped.pop("cache_ahead") >= plain.pop("cache_ahead")
    assert overlapped == plain
    later = [b - a for a, b in zip(plain_at, at)]
    last_step = [e[2] for e in plain["events"]].index(plain["events"][-1][2])
    # the prefill's token and the last step's (it ends the run: nothing is queued after it) stream
    # at once; every other step's tokens stream after the next step's decode is queued
    assert later[0] == 0 and set(later[last_step:]) == {0}
    assert set(later[1:last_step]) <= {1}
    if max_tokens == 24:
        assert 1 in later


@pytest.mark.parametrize("mode,budget", MODES)
@pytest.mark.parametrize("cut", [0, 3, 9])
def test_a_callback_that_cancels_stops_at_the_same_token(tiny_engine, monkeypatch, mode, budget, cut):
    plain, _ = _run(tiny_engine, monkeypatch, "0", mode, budget, 40, cut)
    overlapped, _ = _run(tiny_engine, monkeypatch, "1", mode, budget, 40, cut)
    assert plain["finish"] == "cancelled"
    assert overlapped["finish"] == "cancelled" and overlapped["tokens"] == plain["tokens"]
    assert overlapped["events"] == plain["events"]
    assert overlapped["steps"] == plain["steps"]
    # the cache holds a prefix of the run's tokens, and what it holds is what eng.kv says: the next
    # request reuses it (an AR step cancelled after queueing its decode keeps that row, whose K/V is
    # the committed token's)
    n = len(plain["cache"])
    assert overlapped["cache"][:n] == plain["cache"]
    assert len(overlapped["cache"]) - n in (0, 1)
    assert tiny_engine.target_ctx.seq_pos_max(0) == len(overlapped["cache"]) - 1


@pytest.mark.parametrize("mode,budget", MODES)
def test_a_run_that_ends_on_eog_queues_nothing_after_it(eos_pair, monkeypatch, mode, budget):  # noqa: F811
    target, draft, answer = eos_pair
    eng = Engine.load(EngineConfig(target=target, draft=draft, n_ctx=512), preflight=PAIR_PREFLIGHT)
    try:
        runs = [_run(eng, monkeypatch, ov, mode, budget, 40)[0] for ov in ("0", "1")]
        assert runs[0].pop("cache_ahead") <= runs[1].pop("cache_ahead")
        assert runs[0] == runs[1]
        assert runs[1]["finish"] == "eog" and runs[1]["tokens"] == answer
        assert eng.target_ctx.seq_pos_max(0) == len(runs[1]["cache"]) - 1
    finally:
        eng.close()


def test_the_default_follows_where_the_target_runs(monkeypatch):
    on = generation.overlap_commit_on
    plain, exact, timed = (
        GenerationSettings(),
        GenerationSettings(exact_phases=True),
        GenerationSettings(overlap_commit=False),
    )
    monkeypatch.delenv(generation.OVERLAP_COMMIT_ENV, raising=False)
    # on by default where the target runs on a GPU (s71's A/B: generation.OVERLAP_COMMIT_ON_DEVICE)
    assert on(True, plain) and not on(False, plain)
    assert not on(True, exact) and not on(True, timed)
    monkeypatch.setenv(generation.OVERLAP_COMMIT_ENV, "1")
    assert on(False, exact) and on(False, plain)
    assert not on(True, timed)  # a caller that times auto's steps is never overlapped
    monkeypatch.setenv(generation.OVERLAP_COMMIT_ENV, "0")
    assert not on(True, plain)
    monkeypatch.setenv(generation.OVERLAP_COMMIT_ENV, "yes")
    with pytest.raises(ValueError, match=generation.OVERLAP_COMMIT_ENV):
        on(True, plain)


def test_a_cpu_target_does_not_overlap(tiny_engine, monkeypatch):
    assert not tiny_engine.target_on_device
    default, default_at = _run(tiny_engine, monkeypatch, "", "chain", 3, 24)
    plain, plain_at = _run(tiny_engine, monkeypatch, "0", "chain", 3, 24)
    assert (default, default_at) == (plain, plain_at)


def test_settings_can_turn_it_off(tiny_engine, monkeypatch):
    monkeypatch.setenv(generation.OVERLAP_COMMIT_ENV, "1")
    at = []
    tiny_engine.reset()
    tiny_engine.generate(
        PROMPT,
        GenerationSettings(mode="ar", max_tokens=12, overlap_commit=False, ar_runs=False),
        on_token=lambda ev: at.append(len(tiny_engine.kv) - ev.index),
    )
    assert len(set(at)) == 1  # each token streamed right after its own decode


def test_auto_never_defers(tiny_engine, monkeypatch):
    # auto's policy reads each step's record as the step ends, so its steps stream at once
    forced, _ = _run(tiny_engine, monkeypatch, "1", "auto", 7, 24)
    ar_steps = {r[0] for r in forced["steps"] if r[1] == 0}
    for (_, _, step, _), ahead in zip(forced["events"], forced["cache_ahead"]):
        assert ahead == (1 if step in ar_steps else 0)
    # the same measure on a plain run that overlaps: it reads further ahead
    overlapped, _ = _run(tiny_engine, monkeypatch, "1", "chain", 3, 24)
    assert max(overlapped["cache_ahead"]) >= 1
