"""The official `openai` client against a real server on 127.0.0.1: chat and completions, streaming
and not, byte-identical to the headless engine's greedy output; usage and timings; stop strings;
per-request speculative settings; concurrent clients; a client that leaves mid-stream; the queue."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading

import pytest

from serve_util import BUDGET, MODE, QUEUE, client, connect, post, wait_for

CHAT = "Write a function that adds two numbers."
CODE = "import numpy as np\n\n\nclass "
LLAMA_TIMINGS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "draft_n", "draft_n_accepted")


def _timings(obj) -> dict:
    return (obj.model_extra or {})["timings"]


def test_chat_not_streaming_is_generate(served, reference):
    c = client(served)
    r = c.chat.completions.create(
        model=served.app.model_ids[0], messages=[{"role": "user", "content": CHAT}], max_tokens=40, temperature=0
    )
    assert r.choices[0].message.content == reference(CHAT, 40, chat=True)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    t = _timings(r)
    assert all(k in t for k in LLAMA_TIMINGS)
    assert t["predicted_n"] == r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert t["prompt_n"] + t["cache_n"] == r.usage.prompt_tokens
    assert t["mode"] == MODE and t["draft_n"] >= t["draft_n_accepted"] >= 0 and t["draft_n"] > 0
    assert t["mean_commit_len"] == pytest.approx(t["predicted_n"] / t["steps"])
    assert set(t["phase_ms"]) == {"draft", "inject", "verify", "accept", "other"}


def test_chat_streaming_is_generate(served, reference):
    c = client(served)
    chunks = list(
        c.chat.completions.create(
            model=served.app.model_ids[0],
            stream=True,
            max_tokens=40,
            messages=[{"role": "user", "content": CHAT}],
            temperature=0,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == reference(CHAT, 40, chat=True)
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].finish_reason in ("stop", "length")
    last = chunks[-1]  # include_usage: a last chunk with no choices, the usage and the timings
    assert last.choices == [] and last.usage.completion_tokens == _timings(last)["predicted_n"]
    assert len({ch.id for ch in chunks}) == 1


def test_completions_streaming_and_not_are_generate(served, reference):
    c = client(served)
    want = reference(CODE, 64)
    r = c.completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=64, temperature=0)
    assert r.choices[0].text == want and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 64 and _timings(r)["predicted_n"] == 64
    streamed = c.completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=64, stream=True)
    assert "".join(ch.choices[0].text for ch in streamed if ch.choices) == want


def test_sse_ends_with_done(served):
    conn = connect(served)
    conn.request("POST", "/v1/completions", json.dumps({"prompt": CODE, "max_tokens": 5, "stream": True}))
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("content-type").startswith("text/event-stream")
    lines = [ln for ln in r.read().decode().split("\n") if ln]
    conn.close()
    assert lines[-1] == "data: [DONE]" and all(ln.startswith("data: ") for ln in lines)


def test_speculative_override_per_request(served, reference):
    c = client(served)
    want = reference(CODE, 32)
    ar = c.completions.create(
        model=served.app.model_ids[0], prompt=CODE, max_tokens=32, extra_body={"speculative": {"mode": "ar"}}
    )
    assert ar.choices[0].text == want  # greedy: the same text whatever the mode
    assert _timings(ar)["mode"] == "ar" and _timings(ar)["draft_n"] == 0
    small = c.completions.create(
        model=served.app.model_ids[0],
        prompt=CODE,
        max_tokens=32,
        extra_body={"speculative": {"mode": "chain", "budget": 2}},
    )
    assert small.choices[0].text == want
    t = _timings(small)
    assert t["budget"] == 2 and t["draft_n"] <= 2 * t["steps"]
    # the server's default comes back on the next request
    assert _timings(c.completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=8))["budget"] == BUDGET


def test_draft_variant_per_request(served, reference, q4_variant):
    c = client(served)
    want = reference(CODE, 32)
    q4 = c.completions.create(
        model=served.app.model_ids[0],
        prompt=CODE,
        max_tokens=32,
        extra_body={"speculative": {"draft_variant": q4_variant.stem}},
    )
    assert _timings(q4)["draft_variant"] == q4_variant.stem and _timings(q4)["draft_n"] > 0
    assert q4.choices[0].text == want  # another drafter drafts other tokens; the target still decides
    assert served.worker.current == q4_variant.stem
    back = c.completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=32)
    assert _timings(back)["draft_variant"] == "base" and back.choices[0].text == want


def test_stop_string_cuts_the_text(served, reference):
    full = reference(CODE, 64)
    stop = full[10:14]  # a string the greedy text is known to contain
    r = client(served).completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=64, stop=[stop])
    assert r.choices[0].text == full[: full.index(stop)]
    assert r.choices[0].finish_reason == "stop"
    streamed = client(served).completions.create(
        model=served.app.model_ids[0], prompt=CODE, max_tokens=64, stop=stop, stream=True
    )
    assert "".join(ch.choices[0].text for ch in streamed if ch.choices) == full[: full.index(stop)]


def test_concurrent_clients_each_get_their_own_answer(served, reference):
    prompts = [CODE, "def fibonacci(n):\n", "# utilities\nimport os\n", "class Stack:\n"]
    got: dict[int, str] = {}

    def ask(i: int) -> None:
        c = client(served)
        if i % 2:
            got[i] = (
                c.completions.create(model=served.app.model_ids[0], prompt=prompts[i], max_tokens=24).choices[0].text
            )
        else:
            got[i] = "".join(
                ch.choices[0].text
                for ch in c.completions.create(
                    model=served.app.model_ids[0], prompt=prompts[i], max_tokens=24, stream=True
                )
                if ch.choices
            )

    assert len(prompts) <= QUEUE  # all of them fit in the queue, whatever the worker does meanwhile
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == {i: reference(p, 24) for i, p in enumerate(prompts)}


def test_disconnect_mid_stream_cancels_and_next_request_is_clean(served, reference):
    w = served.worker
    before = w.cancelled
    conn = connect(served)
    conn.request("POST", "/v1/completions", json.dumps({"prompt": CODE, "max_tokens": 900, "stream": True}))
    r = conn.getresponse()
    got = [r.readline() for _ in range(4)]  # a few tokens in, the client goes away
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    assert any(g.startswith(b"data: ") for g in got)
    wait_for(lambda: w.cancelled == before + 1 and not w.busy)
    finish, summary = w.last
    assert finish == "cancelled" and summary.n_generated < 900
    r = client(served).completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=48)
    assert r.choices[0].text == reference(CODE, 48)


def test_follow_up_turn_reuses_the_cached_prefix(served, reference):
    c = client(served)
    turn = [{"role": "user", "content": CHAT}]
    first = c.chat.completions.create(model=served.app.model_ids[0], messages=turn, max_tokens=24)
    turn += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Now make it subtract."},
    ]
    second = c.chat.completions.create(model=served.app.model_ids[0], messages=turn, max_tokens=24)
    t = _timings(second)
    assert t["cache_n"] >= first.usage.prompt_tokens  # the first turn's prompt was not prefilled again
    assert second.usage.prompt_tokens_details.cached_tokens == t["cache_n"]
    assert t["prompt_n"] == second.usage.prompt_tokens - t["cache_n"]


def test_non_streaming_client_that_leaves_cancels_its_run(served, reference):
    w = served.worker
    before = w.cancelled
    with pytest.raises(TimeoutError):  # the client gives up mid-generation and closes the connection
        post(served, "/completions", {"prompt": CODE, "max_tokens": 1000}, timeout=0.3)
    wait_for(lambda: w.cancelled == before + 1 and not w.busy)
    finish, summary = w.last
    assert finish == "cancelled" and summary.n_generated < 1000
    r = client(served).completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=48)
    assert r.choices[0].text == reference(CODE, 48)


def test_queue_full_is_503_with_retry_after(served, reference):
    from openai import APIStatusError

    w = served.worker
    answers: list[str] = []

    def ask() -> None:
        answers.append(
            client(served).completions.create(model=served.app.model_ids[0], prompt=CODE, max_tokens=16).choices[0].text
        )

    with w.hold():
        wait_for(lambda: not w.busy)
        waiting = [threading.Thread(target=ask) for _ in range(QUEUE)]
        for t in waiting:
            t.start()
        wait_for(lambda: w.waiting == QUEUE)
        status, headers, body = post(served, "/completions", {"prompt": CODE, "max_tokens": 4})
        assert status == 503 and int(headers["retry-after"]) >= 1
        assert body["error"]["code"] == "queue_full"
        with pytest.raises(APIStatusError) as exc:
            client(served).chat.completions.create(
                model=served.app.model_ids[0], max_tokens=4, messages=[{"role": "user", "content": "hi"}]
            )
        assert exc.value.status_code == 503
    for t in waiting:
        t.join(60)
    assert answers == [reference(CODE, 16)] * QUEUE  # the waiting ones were served once the engine was free


def test_client_that_leaves_while_waiting_is_skipped(served):
    w = served.worker
    before_cancel, before_served = w.cancelled, w.served
    with w.hold():
        wait_for(lambda: not w.busy)
        conn = connect(served)
        conn.request("POST", "/v1/completions", json.dumps({"prompt": CODE, "max_tokens": 500}))
        wait_for(lambda: w.waiting == 1)
        conn.sock.shutdown(socket.SHUT_RDWR)  # the client leaves while its request waits
        conn.close()
        wait_for(lambda: w._waiting[0].cancel.is_set())
    wait_for(lambda: w.cancelled == before_cancel + 1 and w.waiting == 0 and not w.busy)
    assert w.served == before_served  # skipped: the engine never ran it


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl binary on this machine")
def test_curl_streams_and_not(served, reference):
    """The README's curl line, run by the real curl binary: a JSON answer and an SSE stream that
    ends with [DONE], both the headless greedy text."""
    url = served.url.rstrip("/") + "/chat/completions"
    body = {"messages": [{"role": "user", "content": CHAT}], "max_tokens": 24, "temperature": 0}

    def curl(payload) -> str:
        out = subprocess.run(
            [
                "curl",
                "-sS",
                "-N",
                "--max-time",
                "120",
                url,
                "-H",
                "Content-Type: application/json",
                "-d",
                json.dumps(payload),
            ],
            capture_output=True,
            text=True,
            timeout=150,
            check=True,
        )
        return out.stdout

    want = reference(CHAT, 24, chat=True)
    assert json.loads(curl(body))["choices"][0]["message"]["content"] == want
    events = [ln[len("data: ") :] for ln in curl({**body, "stream": True}).splitlines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == want
