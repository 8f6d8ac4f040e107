"""An AR request decodes its tokens in runs, several one-token decodes in one engine call (patch 0028,
runtime/ar_run.py), and commits them as the per-step loop does: the same tokens, events, steps,
finish and cache, with a stop taking effect at the same token.

Each case runs the request twice on the real tiny pair: in runs (the default for a CPU target) and
one decode a call (``GenerationSettings(ar_runs=False)``), with the per-step loop's streaming overlap
off and forced on (runs do not overlap: the one GPU measurement of overlapping runs was slower).
"""

from __future__ import annotations

import threading

import pytest

from engine_bridge.common.errors import ContextOverflowError, DecodeError
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import ar_run, generation, llama_ffi
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

from decode_count import count_decodes
from test_ar_steps import PROMPT
from test_eog_cache import eos_pair  # noqa: F401 - a fixture: the tiny pair with an EOS it reaches

pytestmark = pytest.mark.skipif(llama_ffi.greedy_run_api() is None, reason="this engine lacks patch 0028")


def _calls(monkeypatch, ctx) -> list[int]:
    """Counts the engine calls that decoded runs (each run's length is kept)."""
    lens: list[int] = []
    run = ctx.greedy_run

    def counted(*args):
        out = run(*args)
        lens.append(len(out[0]))
        return out

    monkeypatch.setattr(ctx, "greedy_run", counted)
    return lens


def _run(eng, monkeypatch, runs: bool, overlap: str, max_tokens: int, cut: int | None = None, stop_at_eog=True):
    monkeypatch.setenv(generation.OVERLAP_COMMIT_ENV, overlap)
    monkeypatch.delenv(ar_run.AR_RUN_ENV, raising=False)
    lens = _calls(monkeypatch, eng.target_ctx)
    decodes = count_decodes(monkeypatch, eng.target_ctx)
    events, on_step = [], []
    cancel = threading.Event()

    def on_token(ev):
        events.append((ev.token, ev.piece, ev.source, ev.step, ev.index))
        if cut is not None and ev.index == cut:
            cancel.set()

    eng.reset()
    res = eng.generate(
        PROMPT,
        GenerationSettings(mode="ar", max_tokens=max_tokens, stop_at_eog=stop_at_eog, ar_runs=runs),
        on_token=on_token,
        on_step=lambda r: on_step.append((r.step, r.pos, r.drafted, r.accepted, r.committed)),
        cancel=cancel,
    )
    monkeypatch.undo()
    seen = {
        "tokens": list(res.tokens),
        "text": res.text,
        "events": events,
        "on_step": on_step,
        "steps": [(r.step, r.pos, r.drafted, r.accepted, r.committed) for r in res.steps],
        "finish": res.summary.finish_reason,
        "n_steps": res.summary.n_steps,
    }
    return seen, res, list(eng.kv), lens, decodes[0]


@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("max_tokens", [1, 2, 5, 24, 90])
def test_runs_commit_what_the_per_step_loop_commits(tiny_engine, monkeypatch, overlap, max_tokens):
    plain, _, plain_cache, plain_lens, plain_decodes = _run(tiny_engine, monkeypatch, False, overlap, max_tokens)
    seen, res, cache, lens, decodes = _run(tiny_engine, monkeypatch, True, overlap, max_tokens)
    assert seen == plain
    # the prompt's one batch gives the first token, then one decode a token after it
    assert cache == plain_cache and decodes == plain_decodes == max_tokens
    assert tiny_engine.target_ctx.seq_pos_max(0) == len(cache) - 1
    assert plain_lens == []  # one decode a call: no run
    # every decode after the prefill's token went through runs, the first FIRST_RUN long
    assert sum(lens) == max_tokens - 1
    if max_tokens > 1 + ar_run.FIRST_RUN:
        assert lens[0] == ar_run.FIRST_RUN and len(lens) < max_tokens - 1
    # each step's time is its decode's, read by the engine
    walls = [r.wall for r in res.steps if not r.prefill]
    assert all(w > 0 for w in walls) and sum(walls) <= res.summary.t_generate


@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("cut", [0, 2, 7, 20])
def test_a_callback_that_cancels_stops_at_the_same_token(tiny_engine, monkeypatch, overlap, cut):
    plain, _, plain_cache, _, _ = _run(tiny_engine, monkeypatch, False, overlap, 60, cut)
    seen, _, cache, lens, _ = _run(tiny_engine, monkeypatch, True, overlap, 60, cut)
    assert plain["finish"] == seen["finish"] == "cancelled"
    assert seen == plain and len(seen["tokens"]) == cut + 1
    # a run decodes past the stop: the cache holds a longer prefix of the same answer, and eng.kv
    # says what it holds (the next request reuses it)
    assert cache[: len(plain_cache)] == plain_cache
    assert tiny_engine.target_ctx.seq_pos_max(0) == len(cache) - 1
    assert sum(lens) <= len(cache)


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_run_stops_at_end_of_generation(eos_pair, monkeypatch, overlap):  # noqa: F811
    target, draft, answer = eos_pair
    eng = Engine.load(EngineConfig(target=target, draft=draft, n_ctx=512), preflight=PAIR_PREFLIGHT)
    try:
        plain, _, plain_cache, _, _ = _run(eng, monkeypatch, False, overlap, 60)
        seen, _, cache, lens, _ = _run(eng, monkeypatch, True, overlap, 60)
        assert seen == plain and seen["finish"] == "eog" and seen["tokens"] == answer
        # the decode that picked the EOG token is the run's last: nothing is decoded after it
        assert cache == plain_cache and sum(lens) == len(answer)
        assert eng.target_ctx.seq_pos_max(0) == len(cache) - 1
        free, _, _, free_lens, _ = _run(eng, monkeypatch, True, overlap, 60, stop_at_eog=False)
        assert free["finish"] == "max_tokens" and free["tokens"][: len(answer)] == answer
        assert sum(free_lens) == 59
    finally:
        eng.close()


def test_a_run_stops_where_the_context_is_full(tiny_pair, monkeypatch):
    target, _ = tiny_pair
    eng = Engine.load(EngineConfig(target=target, n_ctx=64, n_batch=64, n_ubatch=64), preflight=PAIR_PREFLIGHT)
    try:
        plain, _, plain_cache, _, _ = _run(eng, monkeypatch, False, "0", 1000, stop_at_eog=False)
        seen, _, cache, lens, _ = _run(eng, monkeypatch, True, "0", 1000, stop_at_eog=False)
        assert seen == plain and seen["finish"] == "context_full"
        # (llama.cpp rounds the context up: 256 cells here)
        assert cache == plain_cache and len(cache) == eng.target_ctx.n_ctx - 1 and lens
    finally:
        eng.close()


def test_a_decode_that_fails_raises_after_the_picks_before_it(tiny_engine, monkeypatch):
    real = tiny_engine.target_ctx.greedy_run

    def failing(batch, token, pos, n_max, stop_at_eog):
        picks, ns, _ = real(batch, token, pos, min(n_max, 2), stop_at_eog)
        return picks, ns, 1  # as llama_process's "no KV slot" after two picks

    monkeypatch.setattr(tiny_engine.target_ctx, "greedy_run", failing)
    got = []
    tiny_engine.reset()
    with pytest.raises(ContextOverflowError, match="no room left in the KV cache"):
        tiny_engine.generate(
            PROMPT, GenerationSettings(mode="ar", max_tokens=20), on_token=lambda ev: got.append(ev.token)
        )
    assert len(got) == 3  # the prefill's token and the run's two picks were streamed first


def test_sampled_and_margin_runs_keep_one_decode_a_call(tiny_engine, monkeypatch):
    for settings in (
        GenerationSettings(mode="ar", max_tokens=12, temperature=0.8, seed=3),
        GenerationSettings(mode="ar", max_tokens=12, record_margins=True),
        GenerationSettings(mode="ar", max_tokens=12, ar_runs=False),
        GenerationSettings(mode="chain", budget=3, max_tokens=12),
    ):
        lens = _calls(monkeypatch, tiny_engine.target_ctx)
        tiny_engine.reset()
        tiny_engine.generate(PROMPT, settings)
        monkeypatch.undo()
        assert lens == [], settings


def test_auto_calibration_times_its_ar_steps_one_call_each(tiny_engine, monkeypatch):
    lens = _calls(monkeypatch, tiny_engine.target_ctx)
    tiny_engine.reset()
    tiny_engine.generate(PROMPT, GenerationSettings(mode="auto", budget=7, max_tokens=24))
    assert lens == []  # auto's steps, its AR ones and its calibration's, go one call each


def test_run_lengths():
    nl = ar_run.next_length
    assert nl(0, 0.0, 100) == ar_run.FIRST_RUN
    assert nl(0, 0.0, 2) == 2
    # about RUN_SECONDS at the last run's pace, at most doubling, at most MAX_RUN, at least 1
    assert nl(4, 4 * 0.001, 100) == 8
    assert nl(8, 8 * 0.001, 100) == 16
    assert nl(16, 16 * 0.001, 100) == int(ar_run.RUN_SECONDS / 0.001)
    assert nl(32, 32 * 1e-5, 100) == ar_run.MAX_RUN
    assert nl(4, 4 * 0.1, 100) == 1
    assert nl(16, 16 * 0.001, 3) == 3


def test_runs_are_on_wherever_the_target_runs_unless_switched_off(monkeypatch):
    monkeypatch.delenv(ar_run.AR_RUN_ENV, raising=False)
    # on a GPU as on a CPU: sitting s73's runs in the caller's thread read 1.0121x AR (ar_run.RUNS_ON_DEVICE)
    assert ar_run.runs_on(False) and ar_run.runs_on(True)
    monkeypatch.setattr(ar_run, "RUNS_ON_DEVICE", False)
    assert ar_run.runs_on(False) and not ar_run.runs_on(True)
    monkeypatch.setattr(ar_run, "RUNS_ON_DEVICE", True)
    monkeypatch.setenv(ar_run.AR_RUN_ENV, "1")
    assert ar_run.runs_on(True) and ar_run.runs_on(False)
    monkeypatch.setenv(ar_run.AR_RUN_ENV, "0")
    assert not ar_run.runs_on(False)
    monkeypatch.setenv(ar_run.AR_RUN_ENV, "yes")
    with pytest.raises(ValueError, match=ar_run.AR_RUN_ENV):
        ar_run.runs_on(False)


def test_the_switch_is_read_at_each_request(tiny_engine, monkeypatch):
    lens = _calls(monkeypatch, tiny_engine.target_ctx)
    for side, calls in (("0", False), ("1", True), ("", True)):
        monkeypatch.setenv(ar_run.AR_RUN_ENV, side)
        lens.clear()
        tiny_engine.reset()
        tiny_engine.generate(PROMPT, GenerationSettings(mode="ar", max_tokens=12))
        assert bool(lens) == calls, side


def test_a_run_without_a_pick_says_so(tiny_engine, monkeypatch):
    monkeypatch.setattr(tiny_engine.target_ctx, "greedy_run", lambda *args: ([], [], -1))
    tiny_engine.reset()
    with pytest.raises(DecodeError, match="backend sampler gave no token"):
        tiny_engine.generate(PROMPT, GenerationSettings(mode="ar", max_tokens=8))
