"""Time to first token on the server's side, checked by what is handed over, not by a clock: a
streaming request's first text leaves the engine's thread as its token commits, not at the end of
the step that committed it (the drafter's feature injection and the cache trim come after the
commit, issue 31); and the engine's own time to first token is in ``timings``."""

from __future__ import annotations

import asyncio

import pytest

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.serve.protocol import Defaults, parse_request
from engine_bridge.serve.worker import Job, JobQueue, pair_facts

from conftest import pair_config
from serve_util import BUDGET, MODE, client

CODE = "def add(a, b):\n    return"


class Recorded(Job):
    """A job whose events are kept in the order the engine's thread hands them over."""

    def __init__(self, req, loop):
        super().__init__(req, loop)
        self.handed: list[tuple[str, object]] = []

    def emit(self, kind: str, value) -> None:
        self.handed.append((kind, value))


@pytest.fixture(scope="module")
def engine():
    eng = Engine.load(pair_config(), preflight=PAIR_PREFLIGHT)
    yield eng
    eng.close()


def test_the_first_text_is_handed_over_as_its_token_commits(engine):
    settings = GenerationSettings(mode=MODE, budget=BUDGET, max_tokens=24)
    pieces, steps = [], []
    ref = engine.generate(CODE, settings, on_token=lambda ev: pieces.append((ev.step, ev.piece)))
    first_step = [p for s, p in pieces if s == pieces[0][0]]
    # step 0 commits the prefill's token alone (the first token is read from the prefill's last row,
    # no decode of its own); it is handed over before its step's record (checked below)
    assert pieces[0][0] == 0 and len(first_step) == 1 and first_step[0]

    facts = pair_facts(engine)
    req = parse_request(
        "completion",
        {"prompt": CODE, "max_tokens": 24, "stream": True, "temperature": 0},
        facts.model_ids,
        Defaults(mode=MODE, budget=BUDGET),
        facts.limits,
    )
    loop = asyncio.new_event_loop()
    try:
        job = Recorded(req, loop)
        q = JobQueue(n_ctx=facts.limits.n_ctx, n_vocab=facts.n_vocab, has_drafter=facts.limits.has_drafter)
        q.run(engine, job, on_step=lambda rec: steps.append(len(job.handed)))
    finally:
        loop.close()
    kinds = [k for k, _ in job.handed]
    assert kinds[0] == "start" and kinds[-1] == "done", kinds
    texts = [v for k, v in job.handed if k == "text"]
    assert "".join(texts) == ref.text  # the same text, only handed over sooner
    assert texts[0] == first_step[0]  # the first token alone, not its whole step
    assert steps[0] >= 2  # ... and before the first step's record


def test_timings_carry_the_engines_own_time_to_first_token(served):
    r = client(served).completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=8, temperature=0)
    t = (r.model_extra or {})["timings"]
    assert 0 < t["first_token_ms"] <= t["prompt_ms"] + t["predicted_ms"]
