"""The chat-template renderer dies with the thread that started it (PR_SET_PDEATHSIG is per thread,
not per process): a request from another thread right after that thread ended found it killed and
failed with "the chat-template renderer stopped; try again" (a server's engine thread, a task
pool's thread). The request now goes to a fresh renderer, once."""

from __future__ import annotations

import threading

from engine_bridge.runtime.chat_template import render_chat, renderer_starts

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_render_right_after_the_starting_thread_ended_succeeds():
    msgs = [{"role": "user", "content": "hi"}]
    want = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    from engine_bridge.runtime import chat_template

    starts = renderer_starts()
    for _ in range(6):  # the kill races the next request: several rounds make the race likely
        chat_template.shutdown()
        t = threading.Thread(target=render_chat, args=(CHATML, msgs))
        t.start()
        t.join()
        assert render_chat(CHATML, msgs) == want
    # each round started the thread's renderer; whether this thread's request then needed a new one
    # depends on when the kill lands (on a loaded 2-core CI machine it sometimes lands after the
    # answer: 9 starts of 12 seen once). One last round waits for the kill before asking, so a fresh
    # renderer must start there.
    chat_template.shutdown()
    t = threading.Thread(target=render_chat, args=(CHATML, msgs))
    t.start()
    t.join()
    chat_template._renderer._proc.wait(timeout=10)  # killed with its thread (PR_SET_PDEATHSIG)
    assert render_chat(CHATML, msgs) == want
    assert renderer_starts() - starts >= 7 + 1
