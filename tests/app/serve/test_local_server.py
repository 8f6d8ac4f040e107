"""The "Local server" switch (issue 31): a real window (offscreen) on the reference pair, the switch
turned on, the official `openai` client streaming and not streaming on 127.0.0.1, requests taking
turns with chat turns on the one engine worker, the status bar's counters, served steps in the
plots and profiler, and closing the window stopping the server and freeing its port."""

from __future__ import annotations

import csv
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest
from app_helpers import ANSWER_TIMEOUT_MS, LOAD_TIMEOUT_MS, ask, load_pair

from engine_bridge.models.demo import reference_pair
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import GenerationSettings
from engine_bridge.runtime.engine import Engine

MESSAGES = [{"role": "user", "content": "Write a function that reverses a list"}]
PROMPT = "def fibonacci(n):\n"


@pytest.fixture
def pool():
    ex = ThreadPoolExecutor(4)  # the clients: off the UI thread, as other programs are
    yield ex
    ex.shutdown(wait=True, cancel_futures=True)


def _pair():
    pair = reference_pair()
    if pair is None:
        pytest.fail("the reference pair resources/models/target.gguf + drafter.gguf is missing")
    return pair


def _serving(qtbot, w, **options):
    panel = w.server_panel
    panel.port.setValue(0)  # any free port
    for name, value in options.items():
        getattr(panel, name).setText(value)
    w.side_tabs.setCurrentWidget(panel)
    panel.switch.click()
    qtbot.waitUntil(lambda: w.local_server.state == "serving", timeout=LOAD_TIMEOUT_MS)
    return w.local_server.url


def _client(url, key="unused"):
    from openai import OpenAI

    return OpenAI(base_url=url, api_key=key, max_retries=0, timeout=120)


def _wait(qtbot, future):
    qtbot.waitUntil(future.done, timeout=ANSWER_TIMEOUT_MS)
    return future.result()


def _headless(w):
    """An engine of its own on the window's pair and load settings: what `generate` prints."""
    return Engine.load(w.settings.engine_config(), preflight=PAIR_PREFLIGHT)


def test_switch_serves_the_loaded_pair_to_the_openai_client(qtbot, make_window, pool, tmp_path):
    w = make_window(mode="chain", budget=7, temperature=0.0, max_tokens=16)
    load_pair(qtbot, w, _pair())
    url = _serving(qtbot, w)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    label = w.local_server.label
    assert label.isVisible() and label.text() == f"serving {url} · queue 0/8 · 0 served"
    model = w.local_server.server.app.model_ids[0]
    assert model == "target"
    api = _client(url)

    assert [m.id for m in _wait(qtbot, pool.submit(api.models.list)).data] == [model]
    full = _wait(qtbot, pool.submit(api.chat.completions.create, model=model, messages=MESSAGES, max_tokens=24))
    chunks = _wait(
        qtbot,
        pool.submit(
            lambda: list(
                api.completions.create(
                    model=model, prompt=PROMPT, max_tokens=24, stream=True, stream_options={"include_usage": True}
                )
            )
        ),
    )
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)

    eng = _headless(w)
    try:
        greedy = GenerationSettings(mode="chain", budget=7, max_tokens=24)
        want_chat = eng.generate(eng.format_chat(MESSAGES), greedy).text
        want_text = eng.generate(PROMPT, greedy).text
    finally:
        eng.close()
    assert full.choices[0].message.content == want_chat and full.usage.completion_tokens == 24
    assert streamed == want_text and chunks[-1].usage.completion_tokens == 24
    assert full.model_extra["timings"]["mode"] == "chain"  # the chat's settings are the defaults

    qtbot.waitUntil(lambda: label.text().startswith(f"serving {url} · queue 0/8 · 2 served · "))
    # the served runs in the profiler and the plots, marked as served
    rows = w.profiler.model.rows
    # every step of both runs reaches the profiler (drained through a throttle)
    qtbot.waitUntil(lambda: sum(r[1].committed for r in rows if r[2] == "served") >= 48)
    assert {r[0] for r in rows if r[2] == "served"} == {1, 2}
    # the plots show decode steps: each request's step 0 (the prefill's token) is in the profiler only
    assert sum(1 for r in rows if r[1].prefill) == 2
    served = len(rows) - 2
    assert w.plots.served_step_count() == served
    qtbot.waitUntil(lambda: f"({served} served" in w.plots.summary.text())  # redrawn through a throttle
    assert w.profiler.export(tmp_path / "steps.csv") == len(rows)
    exported = list(csv.DictReader(open(tmp_path / "steps.csv")))
    assert {r["source"] for r in exported} == {"served"} and {r["run"] for r in exported} == {"1", "2"}

    # closing the window stops the server: its thread ends, the port is free again
    http_thread = w.local_server.server._thread
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    w.close()
    assert not http_thread.is_alive() and w.engine._thread.isFinished()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_served_requests_and_chat_turns_take_turns(qtbot, make_window, pool):
    """A served request sent while the chat generates waits in the queue (the status bar says so)
    and runs after the turn; a chat turn sent while a request is served waits behind it. Both answers
    are the headless ones: neither saw the other's KV."""
    w = make_window(mode="chain", budget=7, temperature=0.0, max_tokens=4000)
    load_pair(qtbot, w, _pair())
    url = _serving(qtbot, w)
    model = w.local_server.server.app.model_ids[0]
    api = _client(url)
    label = w.local_server.label
    # the order in which steps are made, seen on the engine's thread (the profiler's order is the
    # order of two throttled drains, which may interleave)
    order = []
    chat_push, served_push = w.engine.channel.push_step, w.local_server.steps.push_step
    w.engine.channel.push_step = lambda rec: (order.append("chat"), chat_push(rec))
    w.local_server.steps.push_step = lambda item: (order.append(f"served {item[0]}"), served_push(item))

    w.chat.input.setPlainText("Write a long class with many methods")
    w.chat.send_button.click()
    qtbot.waitUntil(lambda: len(w.chat.transcript.messages[-1].tokens) >= 3, timeout=ANSWER_TIMEOUT_MS)
    waiting = pool.submit(
        lambda: "".join(
            c.choices[0].text
            for c in api.completions.create(model=model, prompt=PROMPT, max_tokens=32, stream=True)
            if c.choices
        )
    )
    qtbot.waitUntil(lambda: "queue 1/8" in label.text(), timeout=ANSWER_TIMEOUT_MS)
    assert w.engine.state == "generating" and not waiting.done()
    with qtbot.waitSignal(w.answerFinished, timeout=ANSWER_TIMEOUT_MS):
        w.stop()
    served_text = _wait(qtbot, waiting)

    # the reverse: a long served request runs, a chat turn is sent meanwhile and waits for it
    w.settings_panel.max_tokens.setValue(16)
    long = pool.submit(api.completions.create, model=model, prompt=PROMPT, max_tokens=200)
    qtbot.waitUntil(lambda: "busy" in label.text(), timeout=ANSWER_TIMEOUT_MS)
    # ...and has made a step: under load "busy" (set as the job is taken) could be drawn before the
    # request's first step, and a flaky run saw the chat's steps first
    qtbot.waitUntil(lambda: "served 2" in order, timeout=ANSWER_TIMEOUT_MS)
    res = ask(qtbot, w, "Hello")
    long_text = _wait(qtbot, long).choices[0].text
    qtbot.waitUntil(lambda: "· 2 served · " in label.text())

    eng = _headless(w)
    try:
        want = [eng.generate(PROMPT, GenerationSettings(mode="chain", budget=7, max_tokens=n)).text for n in (32, 200)]
    finally:
        eng.close()
    assert [served_text, long_text] == want
    assert res.summary.n_generated >= 1
    # the engine ran one thing at a time: each run's steps are one unbroken block
    blocks = [order[0]] + [b for a, b in zip(order, order[1:]) if a != b]
    assert blocks == ["chat", "served 1", "served 2", "chat"]
    assert {(src, run) for run, _, src in w.profiler.model.rows} == {
        ("chat", 1),
        ("served", 1),
        ("served", 2),
        ("chat", 2),
    }


def test_a_key_is_asked_for_beyond_loopback_and_checked(qtbot, make_window, pool, monkeypatch):
    from openai import AuthenticationError

    monkeypatch.delenv("DFLASH_API_KEY", raising=False)
    w = make_window()
    load_pair(qtbot, w, _pair())
    panel = w.server_panel
    panel.host.setText("0.0.0.0")
    panel.port.setValue(0)
    panel.switch.click()
    assert not panel.switch.isChecked() and w.local_server.state == "off"
    assert "API key" in panel.message.text() and panel.host.isEnabled()
    panel.host.setText("127.0.0.1")
    with socket.socket() as taken:  # a port in use: said, and the switch goes back off
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        panel.port.setValue(taken.getsockname()[1])
        panel.switch.click()
        qtbot.waitUntil(lambda: not panel.switch.isChecked(), timeout=LOAD_TIMEOUT_MS)
        assert "cannot listen on 127.0.0.1" in panel.message.text() and w.local_server.state == "off"
    url = _serving(qtbot, w, api_key="k-31")
    with pytest.raises(AuthenticationError):
        _wait(qtbot, pool.submit(_client(url, "wrong").models.list))
    assert _wait(qtbot, pool.submit(_client(url, "k-31").models.list)).data
    panel.switch.click()  # off: the port closes, the fields unlock
    assert w.local_server.state == "off" and panel.port.isEnabled() and not w.local_server.label.isVisible()


def test_the_server_follows_the_loaded_pair(qtbot, make_window, tiny_pair, pool):
    """Loading another pair stops the server (a request now gets no answer from the old pair) and
    starts it again on the new one, without touching the switch."""
    w = make_window(mode="chain", budget=7)
    load_pair(qtbot, w, _pair())
    first = _serving(qtbot, w)
    assert w.local_server.server.app.model_ids == ("target",)
    load_pair(qtbot, w, tiny_pair)
    qtbot.waitUntil(
        lambda: w.local_server.state == "serving" and w.local_server.server.app.model_ids == ("tiny-qwen3-target",),
        timeout=LOAD_TIMEOUT_MS,
    )
    assert w.server_panel.switch.isChecked()
    url = w.local_server.url
    got = _wait(
        qtbot, pool.submit(_client(url).completions.create, model="tiny-qwen3-target", prompt="Hi", max_tokens=4)
    )
    assert got.usage.completion_tokens == 4
    qtbot.waitUntil(lambda: w.local_server.label.text().startswith(f"serving {url} · queue 0/8 · 1 served · "))
    if url != first:  # port 0: most likely another port; the old one is closed either way
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", int(first.rsplit(":", 1)[1].split("/")[0])), timeout=2).close()


def test_closing_while_a_request_is_served_and_one_waits(qtbot, make_window, pool):
    """Close mid-request: the running request stops within a step, the waiting one is answered 503,
    both clients get their answer (no hung client), and every thread has ended."""
    import time

    w = make_window(mode="chain", budget=7)
    load_pair(qtbot, w, _pair())
    url = _serving(qtbot, w)
    api = _client(url)
    label = w.local_server.label

    def stream(n):
        """("ok", tokens) or ("error", status or exception name)."""
        try:
            chunks = list(
                api.completions.create(
                    model="target", prompt=PROMPT, max_tokens=n, stream=True, stream_options={"include_usage": True}
                )
            )
            return "ok", chunks[-1].usage.completion_tokens
        except Exception as exc:  # the openai client raises for a 503 or a cut stream
            return "error", getattr(exc, "status_code", None) or type(exc).__name__

    running = pool.submit(stream, 900)
    qtbot.waitUntil(lambda: "busy" in label.text(), timeout=ANSWER_TIMEOUT_MS)
    waiting = pool.submit(stream, 8)
    qtbot.waitUntil(lambda: "queue 1/8" in label.text(), timeout=ANSWER_TIMEOUT_MS)
    http_thread = w.local_server.server._thread
    t0 = time.monotonic()
    w.close()
    assert time.monotonic() - t0 < 10 and not http_thread.is_alive() and w.engine._thread.isFinished()
    first, second = _wait(qtbot, running), _wait(qtbot, waiting)
    assert second == ("error", 503)
    # the running one was stopped, not run to its end: its stream was cut, or it ended early
    assert first[0] == "error" or first[1] < 900, first


def test_an_rpc_server_lost_mid_request_unloads_and_the_server_waits(qtbot, make_window, tiny_pair, pool, tmp_path):
    """With RPC servers the engine runs in a child process: a server killed while a request is served
    is a 500 naming it, the pair is unloaded as after a chat turn, the window stays, and the local
    server waits for the next pair."""
    from engine_bridge.runtime.rpc_server import RpcServerProcess

    srv = RpcServerProcess(threads=1, log=tmp_path / "server.log").start()
    try:
        w = make_window(n_ctx=1024, flash_attn="off", mode="chain", budget=7, rpc_servers=srv.endpoint)
        load_pair(qtbot, w, tiny_pair)
        url = _serving(qtbot, w)
        api = _client(url)
        first = _wait(qtbot, pool.submit(api.completions.create, model="tiny-qwen3-target", prompt="Hi", max_tokens=4))
        assert first.usage.completion_tokens == 4
        done = pool.submit(lambda: _status(api, 3000))
        qtbot.waitUntil(lambda: "busy" in w.local_server.label.text(), timeout=ANSWER_TIMEOUT_MS)
        srv.kill()
        status, message = _wait(qtbot, done)
        # the stream had begun: the error comes as its last event, which the openai client raises
        assert status == 500 and f"RPC server {srv.endpoint} was lost" in message, (status, message)
        qtbot.waitUntil(lambda: w.engine.state == "empty" and w.local_server.state == "off", timeout=LOAD_TIMEOUT_MS)
        assert w.isVisible() and w.server_panel.switch.isChecked()
        assert w.local_server.label.text() == "server: waits for a pair"
    finally:
        srv.stop()


def _status(api, n):
    """A long streaming request's end: ("ok", tokens), (HTTP status, message), or ("cut", reason)."""
    from openai import APIError, APIStatusError

    try:
        chunks = list(
            api.completions.create(model="tiny-qwen3-target", prompt="Tell a long story", max_tokens=n, stream=True)
        )
        return "ok", len(chunks)
    except APIStatusError as exc:
        return exc.status_code, str(exc)
    except APIError as exc:  # an error event inside the stream: the engine failed after the stream began
        return 500, str(exc)
    except Exception as exc:  # the connection dropped
        return "cut", repr(exc)
