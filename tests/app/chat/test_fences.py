"""Unbalanced ``` fences in a finished answer render as chat apps render them (issue 33, item 7):
a lone closing fence closes a block that began with the answer, and is not shown as content."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QTextCursor

from app.chat.conversations import Message
from app.chat.fences import CODE, MARKER, PROSE, fence_layout
from app.chat.transcript import TranscriptView
from engine_bridge.runtime.records import FROM_DRAFT, FROM_TARGET

CODE_TEXT = "def add(a, b):\n    return a + b\n"
PROSE_TEXT = "\nThis adds two numbers."
#: what the model printed: the code, only a closing fence, then prose (pieces as a tokenizer cuts them)
PIECES = [
    "def",
    " add",
    "(a,",
    " b):\n",
    "    return",
    " a",
    " +",
    " b\n",
    "``",
    "`\n",
    "\nThis",
    " adds",
    " two",
    " numbers",
    ".",
]


@pytest.fixture
def view(qtbot):
    v = TranscriptView()
    qtbot.addWidget(v)
    v.resize(600, 400)
    v.show()
    return v


def _answer() -> Message:
    text = "".join(PIECES)
    assert text == CODE_TEXT + "```\n" + PROSE_TEXT
    tokens = [(p, FROM_DRAFT if i % 3 else FROM_TARGET, i // 2) for i, p in enumerate(PIECES)]
    return Message("assistant", text, tokens=tokens)


def _fixed(view: TranscriptView, needle: str) -> bool:
    """Whether ``needle``'s first character is set in a fixed-pitch font in the view."""
    doc = view.document()
    found = doc.find(needle)
    assert not found.isNull(), (needle, doc.toPlainText())
    cur = QTextCursor(doc)
    cur.setPosition(found.selectionStart() + 1)  # the format of the character before the cursor
    fmt = cur.charFormat()
    return fmt.fontFixedPitch() or fmt.font().family() == view._mono.family()


def test_the_layout_reads_a_lone_closing_fence_as_the_end_of_a_block_that_began_with_the_answer():
    text = CODE_TEXT + "```\n" + PROSE_TEXT
    assert [(r.kind, text[r.start : r.end]) for r in fence_layout(text)] == [
        (CODE, CODE_TEXT),
        (MARKER, "```\n"),
        (PROSE, PROSE_TEXT),
    ]
    # an opener that is never closed (a cut-off answer) runs to the end, as CommonMark says
    cut = "Here it is:\n```python\nx = 1\n"
    assert [r.kind for r in fence_layout(cut)] == [PROSE, MARKER, CODE]
    # balanced fences stay as they are
    ok = "Use:\n```\nls\n```\ndone"
    assert [r.kind for r in fence_layout(ok)] == [PROSE, MARKER, CODE, MARKER, PROSE]


def test_a_stray_closing_fence_with_highlighting_on(view):
    msg = _answer()
    view.set_messages([Message("user", "add two numbers"), msg])
    assert _fixed(view, "return a + b")  # the code before the fence is code
    assert not _fixed(view, "This adds two numbers")  # the prose after it is prose
    marker = view.document().find("```")
    cur = QTextCursor(view.document())
    cur.setPosition(marker.selectionStart() + 1)
    assert cur.charFormat().foreground().color().name() == "#a0a0a0"  # a dimmed marker, not content
    # every token is still a span with its provenance, and the spans still spell the answer
    # (line breaks separate blocks in the document; they belong to no fragment)
    assert "".join(s.text for s in view.token_spans()) == msg.content.replace("\n", "")


def test_a_stray_closing_fence_with_highlighting_off(view):
    view.highlight = False
    view.set_messages([Message("user", "add two numbers"), _answer()])
    assert "```" not in view.toPlainText()  # the fence is markup, not shown
    assert _fixed(view, "return a + b") and not _fixed(view, "This adds two numbers")


def test_while_streaming_then_when_finished(view):
    """Streaming cannot know that a lone fence closes; the finished answer is rendered right."""
    from engine_bridge.runtime.records import TokenEvent

    view.set_messages([Message("user", "add two numbers")])
    view.begin_assistant()
    view.append_tokens(
        [TokenEvent(token=i, piece=p, source=FROM_TARGET, step=i, index=i) for i, p in enumerate(PIECES)]
    )
    view.end_assistant({"n_generated": len(PIECES)})
    assert _fixed(view, "return a + b") and not _fixed(view, "This adds two numbers")
