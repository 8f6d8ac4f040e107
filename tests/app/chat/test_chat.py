"""Load -> chat: tokens stream, drafts are highlighted with tooltips, plots and profiler fill, stop works."""

from __future__ import annotations

import json
import sqlite3

from app_helpers import ANSWER_TIMEOUT_MS, ask, load_pair

from engine_bridge.runtime.records import FROM_DRAFT


def test_chat_streams_highlights_and_feeds_plots_and_profiler(qtbot, make_window, tiny_pair, store_file):
    w = make_window(max_tokens=40)
    load_pair(qtbot, w, tiny_pair)
    assert "tiny-qwen3-target.gguf" in w.status.pair.text()
    assert w.status.backend.text().startswith(("CPU", "CUDA"))
    assert "mem" in w.status.memory.text()

    batches = []  # what reached the transcript before the answer ended
    original = w.chat.transcript.append_tokens
    w.chat.transcript.append_tokens = lambda events: (batches.append(len(events)), original(events))
    res = ask(qtbot, w, "Hello there")

    # streamed: tokens arrived in (throttled) batches, all of them, before the result
    assert res.summary.n_generated == 40 and sum(batches) == 40
    assert len(batches) >= 1
    spans = w.chat.transcript.token_spans()
    assert "".join(s.text for s in spans) == res.text
    # accepted drafts are highlighted, the target's own tokens are not
    n_draft = res.sources.count(FROM_DRAFT)
    assert n_draft > 0, "the tiny pair accepts some drafts"
    assert any(s.draft and s.highlighted for s in spans)
    assert all(s.highlighted == s.draft for s in spans)
    assert sum(len(s.text) for s in spans if s.draft) == sum(
        len(e) for e, src in zip(_pieces(w), res.sources) if src == FROM_DRAFT
    )
    # step boundaries: spans carry their step, and the steps cover the run
    assert {s.step for s in spans} == set(range(res.summary.n_steps)) - _empty_steps(res)
    # a tooltip per token: step, drafted, accepted
    draft_span = next(s for s in spans if s.draft)
    tip = w.chat.transcript.tooltip_for_position(draft_span.start)
    rec = res.steps[draft_span.step]
    assert tip.startswith(f"step {rec.step + 1} ") and f"drafted {rec.drafted}" in tip
    assert f"accepted {rec.accepted}" in tip and "drafted and accepted" in tip
    # the same through a real hover position in the viewport
    cur = w.chat.transcript.textCursor()
    cur.setPosition(draft_span.start + 1)
    rect = w.chat.transcript.cursorRect(cur)
    assert w.chat.transcript.tooltip_at(rect.center()) is not None
    # the profiler holds exactly this run's steps; the live plots its decode steps (step 0 is the
    # token the prefill picked, with no rate of its own)
    decodes = [r for r in res.steps if not r.prefill]
    assert res.steps[0].prefill and len(decodes) == len(res.steps) - 1
    assert w.plots.step_count() == len(decodes)
    assert len(w.plots.toks_points.getData()[0]) == len(decodes)
    assert w.plots.hist_bars.opts["height"].sum() == len(decodes)
    assert w.profiler.row_count() == len(res.steps)
    assert w.profiler.model.rows[-1][1].step == res.steps[-1].step
    assert "tok/s" in w.status.speed.text()
    assert w.chat.template_label.text() == "model's chat template"  # ChatML from the GGUF
    assert "im_start" in w.chat.template_label.toolTip()
    # committed to SQLite with provenance
    rows = sqlite3.connect(store_file).execute("SELECT role, content, tokens FROM messages ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["user", "assistant"]
    assert rows[1][1] == res.text and len(json.loads(rows[1][2])) == 40


def _pieces(w):
    return [t[0] for t in w.chat.transcript.messages[-1].tokens]


def _empty_steps(res):
    """Steps that committed no token (none in a normal run; kept for the end-of-run corner)."""
    return {r.step for r in res.steps if r.committed == 0}


def test_highlight_toggle_switches_to_markdown(qtbot, make_window, tiny_pair):
    w = make_window(max_tokens=12)
    load_pair(qtbot, w, tiny_pair)
    res = ask(qtbot, w, "Hi")
    assert w.chat.transcript.token_spans()
    w.chat.highlight_box.setChecked(False)
    assert not w.chat.transcript.token_spans()  # finished answers become markdown
    assert res.text.strip()[:8] in w.chat.transcript.toPlainText()
    assert w.settings.highlight_drafts is False
    w.chat.highlight_box.setChecked(True)
    assert w.chat.transcript.token_spans()


def test_stop_mid_generation_keeps_what_was_committed(qtbot, make_window, tiny_pair, store_file):
    w = make_window(max_tokens=4000)
    load_pair(qtbot, w, tiny_pair)
    with qtbot.waitSignal(w.answerFinished, timeout=ANSWER_TIMEOUT_MS) as done:
        w.chat.input.setPlainText("Tell me a long story")
        w.chat.send_button.click()
        assert w.chat.stop_button.isEnabled() and not w.chat.send_button.isEnabled()
        qtbot.waitUntil(lambda: len(w.chat.transcript.messages[-1].tokens) >= 5, timeout=ANSWER_TIMEOUT_MS)
        w.chat.stop_button.click()
    res = done.args[0]
    assert res.summary.finish_reason == "cancelled"
    assert 5 <= res.summary.n_generated < 4000
    assert w.chat.send_button.isEnabled() and not w.chat.stop_button.isEnabled()
    assert "cancelled" in w.chat.status.text()
    assert w.profiler.row_count() == len(res.steps)
    stored = sqlite3.connect(store_file).execute("SELECT content FROM messages WHERE role='assistant'").fetchall()
    assert stored == [(res.text,)]
    # the engine is ready for the next turn, which reuses the conversation's KV prefix
    w.settings = w.settings.replace(max_tokens=8)
    res2 = ask(qtbot, w, "Go on")
    assert res2.summary.n_prompt_reused > 0


def test_regenerate_and_new_chat(qtbot, make_window, tiny_pair, store_file):
    w = make_window(max_tokens=8, temperature=0.9, seed=1)
    load_pair(qtbot, w, tiny_pair)
    ask(qtbot, w, "First question")
    assert [m.role for m in w.chat.transcript.messages] == ["user", "assistant"]
    w.settings = w.settings.replace(seed=2)
    with qtbot.waitSignal(w.answerFinished, timeout=ANSWER_TIMEOUT_MS):
        w.chat.regenerate_button.click()
    assert [m.role for m in w.chat.transcript.messages] == ["user", "assistant"]
    db = sqlite3.connect(store_file)
    assert db.execute("SELECT count(*) FROM messages WHERE role='assistant'").fetchone() == (1,)
    w.chat.new_chat_button.click()
    assert w.chat.transcript.messages == [] and not w.chat.regenerate_button.isEnabled()
    ask(qtbot, w, "Second conversation")
    assert db.execute("SELECT count(*) FROM conversations").fetchone() == (2,)
    assert w.conversations.count() == 2
    assert w.conversations.item(0).text() == "Second conversation"  # newest first
    # opening the first conversation shows its messages
    first_id = w.conversations.ids()[1]
    w.open_conversation(first_id)
    assert w.chat.transcript.messages[0].content == "First question"


def test_a_prompt_larger_than_the_context_becomes_an_inline_error(qtbot, make_window, tiny_pair):
    w = make_window(max_tokens=8, n_ctx=256)
    load_pair(qtbot, w, tiny_pair)
    with qtbot.waitSignal(w.answerFailed, timeout=ANSWER_TIMEOUT_MS) as failed:
        w.chat.input.setPlainText("word " * 400)
        w.chat.send_button.click()
    assert type(failed.args[0]).__name__ == "ContextOverflowError"
    assert "context" in w.chat.status.text().lower()
    assert w.engine.state == "ready" and w.chat.send_button.isEnabled()
    assert [m.role for m in w.chat.transcript.messages] == ["user"]


def test_an_idle_window_uses_no_cpu(qtbot, make_window, tiny_pair):
    import time

    w = make_window(max_tokens=8)
    load_pair(qtbot, w, tiny_pair)
    ask(qtbot, w, "Then rest")
    qtbot.wait(300)  # let the last throttled redraws run
    before = time.thread_time()
    qtbot.wait(1000)
    used = time.thread_time() - before  # this (UI) thread's CPU, whatever else the machine runs
    assert used < 0.05, f"the idle UI thread used {used:.3f} s of CPU in 1 s"
