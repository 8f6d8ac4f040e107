"""The Local server's status shows how fast served requests run (issue 31): a real window (offscreen)
on the default pair (SmolLM2-135M-Instruct + its shipped drafter), the switch on, the official
`openai` client on 127.0.0.1. While a request runs the label shows its tok/s so far (from its steps,
drained through the throttle); once it ends, its own figure, the one its ``timings`` report."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from app_helpers import ANSWER_TIMEOUT_MS, LOAD_TIMEOUT_MS, load_pair

from engine_bridge.models import demo, registry_models

#: read at import, before the app fixtures point DFLASH_DATA_DIR at a private folder
CACHED_TARGET = registry_models.cached()
MESSAGES = [{"role": "user", "content": "Write a Python function that reverses a list, with a docstring."}]


@pytest.fixture
def default_pair():
    if CACHED_TARGET is None:
        pytest.skip("the default target is not in the models cache: run `dflash-studio fetch-default`")
    drafter = demo.smollm2_drafter()
    if drafter is None:
        pytest.skip("the SmolLM2 drafter is not shipped in this checkout")
    return CACHED_TARGET, drafter


@pytest.fixture
def pool():
    ex = ThreadPoolExecutor(2)  # the clients: off the UI thread, as other programs are
    yield ex
    ex.shutdown(wait=True, cancel_futures=True)


def test_the_status_shows_the_speed_of_served_requests(qtbot, make_window, default_pair, pool):
    from openai import OpenAI

    w = make_window(mode="chain", budget=7, temperature=0.0)
    load_pair(qtbot, w, default_pair)
    panel, server = w.server_panel, w.local_server
    panel.port.setValue(0)
    w.side_tabs.setCurrentWidget(panel)
    panel.switch.click()
    qtbot.waitUntil(lambda: server.state == "serving", timeout=LOAD_TIMEOUT_MS)
    url, label = server.url, server.label
    assert label.text() == f"serving {url} · queue 0/8 · 0 served"  # nothing served: no speed yet
    api = OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    model = server.server.app.model_ids[0]
    assert model == default_pair[0].stem

    def stream(n):
        chunks = list(
            api.chat.completions.create(
                model=model,
                messages=MESSAGES,
                max_tokens=n,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        return chunks[-1].usage.completion_tokens, chunks[-1].model_extra["timings"]

    running = pool.submit(stream, 160)
    # while it runs: its speed so far, from its own steps (nothing was served before it)
    qtbot.waitUntil(
        lambda: "· busy · 0 served · " in label.text() and label.text().endswith(" tok/s"), timeout=ANSWER_TIMEOUT_MS
    )
    speed, said = server.served_tok_per_s()
    assert speed > 0 and said.startswith("the running request") and said in label.toolTip()
    qtbot.waitUntil(running.done, timeout=ANSWER_TIMEOUT_MS)
    n, timings = running.result()
    assert n == timings["predicted_n"] > 0
    # once it ended: its own figure, as its timings say
    want = f"serving {url} · queue 0/8 · 1 served · {timings['predicted_per_second']:.1f} tok/s"
    qtbot.waitUntil(lambda: label.text() == want, timeout=ANSWER_TIMEOUT_MS)
    assert f"the last request: {n} tokens" in label.toolTip()

    # the next request's figure replaces it (not streamed: the same count, from the run's end)
    full = pool.submit(api.chat.completions.create, model=model, messages=MESSAGES, max_tokens=12, temperature=0)
    qtbot.waitUntil(full.done, timeout=ANSWER_TIMEOUT_MS)
    second = full.result().model_extra["timings"]
    qtbot.waitUntil(
        lambda: label.text() == f"serving {url} · queue 0/8 · 2 served · {second['predicted_per_second']:.1f} tok/s",
        timeout=ANSWER_TIMEOUT_MS,
    )
    assert "the last request: 12 tokens" in label.toolTip()
