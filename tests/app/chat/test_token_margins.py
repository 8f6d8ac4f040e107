"""The token tooltip shows the target's top-2 margin of the hovered token when the step records
carry it (GenerationSettings.record_margins): how near a tie the target's pick was (issue 29)."""

from __future__ import annotations

import json

import numpy as np

from app.chat.conversations import Message, _decode
from app.chat.transcript import TranscriptView
from engine_bridge.runtime.config import GenerationSettings
from engine_bridge.runtime.generation import top2_margins


def _run(eng, mode, **kw):
    events = []
    eng.reset()
    res = eng.generate(
        "The history of the", GenerationSettings(mode=mode, budget=4, max_tokens=40, **kw), on_token=events.append
    )
    return res, events


def test_step_records_carry_the_targets_margin_of_each_committed_token(tiny_engine):
    eng = tiny_engine
    ar, _ = _run(eng, "ar", record_margins=True)
    plain, _ = _run(eng, "ar")
    assert ar.tokens == plain.tokens and all(not r.margins for r in plain.steps)
    # each AR step's margin is the top-2 gap of the target's own logits at that position
    gen, rows = eng.greedy_logits(eng.tokenize("The history of the"), 40)
    assert gen[: len(ar.tokens)] == ar.tokens
    got = [m for r in ar.steps for m in r.margins]
    assert np.allclose(got, top2_margins(rows, range(len(ar.tokens))), atol=1e-4)
    for mode in ("chain", "tree"):
        res, _ = _run(eng, mode, record_margins=True)
        assert res.tokens == ar.tokens
        assert all(len(r.margins) == r.committed for r in res.steps)
        assert np.allclose([m for r in res.steps for m in r.margins], got, atol=1e-3), mode


def test_tooltip_shows_the_hovered_tokens_margin(qtbot, tiny_engine):
    res, events = _run(tiny_engine, "chain", record_margins=True)
    view = TranscriptView()
    qtbot.addWidget(view)
    view.append_message(Message("user", "The history of the"))
    view.begin_assistant()
    view.append_tokens(events)
    view.add_steps(res.steps)
    msg = view.end_assistant({"n_generated": len(events)})
    spans = view.token_spans()
    base = spans[0].start
    checked = 0
    at = base
    for ev in events:  # every token with text: its own margin, 3 digits
        width = len(ev.piece.encode("utf-16-le")) // 2
        if width:
            rec = res.steps[ev.step]
            k = [e.index for e in events if e.step == ev.step].index(ev.index)
            tip = view.tooltip_for_position(at + width // 2)
            assert f"target's top-2 margin {rec.margins[k]:.3g}" in tip, (ev, tip)
            checked += 1
        at += width
    assert checked >= 20
    # kept with the conversation: the stored steps bring the margins back
    stored = json.dumps({str(k): v for k, v in msg.steps.items()})
    again = _decode(None, "assistant", msg.content, json.dumps([list(t) for t in msg.tokens]), stored, None)
    assert again.steps == {k: v[:3] + (tuple(float(m) for m in v[3]),) for k, v in msg.steps.items()}
    # records without margins: the tooltip as before
    view.add_steps([])
    old = Message("assistant", msg.content, tokens=msg.tokens, steps={k: v[:3] for k, v in msg.steps.items()})
    view.set_messages([old])
    assert "margin" not in view.tooltip_for_position(view.token_spans()[0].start)


def test_the_setting_asks_the_engine_for_margins():
    from app.shell.app_settings import StudioSettings

    assert not StudioSettings().generation_settings().record_margins
    assert StudioSettings(token_margins=True).generation_settings().record_margins
