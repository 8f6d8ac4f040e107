"""The conversation as rich text: markdown for prose, token spans for DFlash provenance.

While an answer streams, each committed token is inserted as its own span whose character
format records the step that committed it and whether the drafter proposed it. With
highlighting on, accepted-draft tokens get a green background and every step's tokens an
underline whose colour alternates from one step to the next, so step boundaries show where the
colour changes. Hovering a token shows its step, how many tokens that step drafted and how many
the target accepted; those counts arrive with the step record after the tokens, so the tooltip
looks them up when shown rather than being baked into the span.

With highlighting off, finished answers are rendered as markdown (code blocks included). While
streaming, text inside a ``` fence is set in a monospace font either way; a finished answer's
code blocks follow ``fences.fence_layout`` (an unbalanced fence is read as chat apps read it).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocumentFragment,
    QTextFormat,
)
from PySide6.QtWidgets import QTextBrowser, QToolTip

from engine_bridge.runtime.records import FROM_DRAFT

from .conversations import Message
from .fences import CODE, MARKER, PROSE, FenceTracker, balanced_markdown, fence_layout

# Character-format properties that tag a token span.
PROP_MESSAGE = QTextFormat.Property.UserProperty + 1  # index of the message in the transcript
PROP_STEP = QTextFormat.Property.UserProperty + 2
PROP_DRAFT = QTextFormat.Property.UserProperty + 3  # True: an accepted draft token

DRAFT_BACKGROUND = QColor("#b9f0c0")
STEP_UNDERLINES = (QColor("#4a7fd4"), QColor("#e0902a"))
ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
FENCE_MARKER = QColor("#a0a0a0")  # a ``` line: shown, but as a marker, not as content


@dataclass(frozen=True)
class TokenSpan:
    """A run of text with one token format, as found in the document (for checks and tests)."""

    start: int
    text: str
    message: int
    step: int
    draft: bool
    highlighted: bool


def summary_line(summary: dict | None) -> str:
    if not summary:
        return ""
    parts = [f"{summary.get('n_generated', 0)} tokens"]
    if summary.get("n_steps"):
        parts.append(f"{summary.get('mean_commit_len', 0):.2f} tok/step")
    if summary.get("n_drafted"):
        parts.append(f"{summary.get('acceptance_rate', 0):.0%} of drafts accepted")
    parts.append(f"{summary.get('tok_per_s', 0):.1f} tok/s")
    if summary.get("finish_reason") not in (None, "eog", "max_tokens"):
        parts.append(str(summary["finish_reason"]))
    return " · ".join(parts)


class TranscriptView(QTextBrowser):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("chatTranscript")
        self.setOpenExternalLinks(True)
        self.setUndoRedoEnabled(False)  # a growing undo stack would only cost memory
        self.messages: list[Message] = []
        self.highlight = True
        self._mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self._live: Message | None = None
        self._live_start = -1  # document position where the live message's header begins
        self._parts: list[str] = []  # the live message's pieces (joined once per batch, not per token)
        self._fences = FenceTracker()

    # -- whole transcript -------------------------------------------------------------------------
    def set_messages(self, messages: list[Message]) -> None:
        self.messages = list(messages)
        self._live = None
        self._render_all()

    def append_message(self, msg: Message) -> None:
        self.messages.append(msg)
        self._render_message(self._end_cursor(), len(self.messages) - 1, msg, live=False)
        self._scroll_to_end()

    def pop_message(self) -> Message | None:
        """Removes the last message (regenerate, a failed answer) and redraws."""
        if not self.messages:
            return None
        msg = self.messages.pop()
        if msg is self._live:
            self._live = None
        self._render_all()
        return msg

    def set_highlight(self, on: bool) -> None:
        if on != self.highlight:
            self.highlight = on
            self._render_all()

    def _render_all(self) -> None:
        self.clear()
        cur = QTextCursor(self.document())
        cur.beginEditBlock()  # one layout pass for the whole conversation
        for i, msg in enumerate(self.messages):
            self._render_message(cur, i, msg, live=msg is self._live)
        cur.endEditBlock()
        self._scroll_to_end()

    # -- streaming --------------------------------------------------------------------------------
    def begin_assistant(self) -> Message:
        msg = Message("assistant", "")
        self._live = msg
        self._parts, self._fences = [], FenceTracker()
        self.messages.append(msg)
        cur = self._end_cursor()
        self._live_start = cur.position()
        self._render_message(cur, len(self.messages) - 1, msg, live=True)
        return msg

    def append_tokens(self, events) -> None:
        """Appends a batch of streamed tokens as one edit: the document lays out once per batch.

        Consecutive tokens that share a format (same step, same provenance, same code state) go in
        with one insertion; the document would merge them into one fragment anyway.
        """
        msg = self._live
        if msg is None or not events:
            return
        follow = self._at_bottom()
        cur = self._end_cursor()
        idx = len(self.messages) - 1
        cur.beginEditBlock()
        run, run_key = [], None
        for ev in events:
            key = (ev.step, ev.source == FROM_DRAFT, CODE if self._fences.feed(ev.piece) else PROSE)
            if key != run_key and run:
                cur.insertText("".join(run), self._token_format(idx, *run_key))
                run = []
            run_key = key
            run.append(ev.piece)
            msg.tokens.append((ev.piece, ev.source, ev.step))
            self._parts.append(ev.piece)
        cur.insertText("".join(run), self._token_format(idx, *run_key))
        cur.endEditBlock()
        msg.content = "".join(self._parts)
        if follow:
            self._scroll_to_end()

    def add_steps(self, records) -> None:
        if self._live is not None:
            for r in records:
                margins = tuple(getattr(r, "margins", ()) or ())
                self._live.steps[r.step] = (r.drafted, r.accepted, r.committed) + ((margins,) if margins else ())

    def end_assistant(self, summary: dict | None = None) -> Message | None:
        """Finishes the live message and re-renders it in its final form; returns it."""
        msg = self._live
        if msg is None:
            return None
        msg.summary = summary
        msg.content = "".join(self._parts)
        self._live = None
        cur = self._end_cursor()
        cur.setPosition(self._live_start, QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()
        self._render_message(cur, len(self.messages) - 1, msg, live=False)
        self._scroll_to_end()
        return msg

    @property
    def streaming(self) -> bool:
        return self._live is not None

    @property
    def live_message(self) -> Message | None:
        return self._live

    # -- rendering --------------------------------------------------------------------------------
    def _render_message(self, cur: QTextCursor, index: int, msg: Message, live: bool) -> None:
        head = QTextBlockFormat()
        head.setTopMargin(12 if cur.position() > 0 else 0)
        if cur.position() > 0 or not cur.block().text() == "":
            cur.insertBlock(head)
        else:
            cur.setBlockFormat(head)
        role = QTextCharFormat()
        role.setFontWeight(QFont.Weight.Bold)
        role.setForeground(QColor("#2b5797") if msg.role == "assistant" else QColor("#444444"))
        cur.insertText(ROLE_NAMES.get(msg.role, msg.role), role)
        note = "generating…" if live else summary_line(msg.summary)
        if note:
            grey = QTextCharFormat()
            grey.setForeground(QColor("#888888"))
            cur.insertText("   " + note, grey)
        cur.insertBlock(QTextBlockFormat(), QTextCharFormat())
        if msg.role == "assistant" and msg.tokens and live:
            fences = FenceTracker()
            for piece, source, step in msg.tokens:
                kind = CODE if fences.feed(piece) else PROSE
                cur.insertText(piece, self._token_format(index, step, source == FROM_DRAFT, kind))
        elif msg.role == "assistant" and msg.tokens and self.highlight:
            self._insert_tokens(cur, index, msg.tokens)
        elif msg.content:
            text = balanced_markdown(msg.content) if msg.role == "assistant" else msg.content
            cur.insertFragment(QTextDocumentFragment.fromMarkdown(text))

    def _insert_tokens(self, cur: QTextCursor, index: int, tokens) -> None:
        """A finished answer's tokens, each piece split where a code block or fence line begins or ends."""
        runs = fence_layout("".join(t[0] for t in tokens))
        r, start = 0, 0  # the run under the piece, where the piece begins in the answer
        for piece, source, step in tokens:
            pos, end = start, start + len(piece)
            while pos < end:
                while runs[r].end <= pos:
                    r += 1
                cut = min(end, runs[r].end)
                cur.insertText(
                    piece[pos - start : cut - start],
                    self._token_format(index, step, source == FROM_DRAFT, runs[r].kind),
                )
                pos = cut
            start = end

    def _token_format(self, message: int, step: int, draft: bool, kind: str) -> QTextCharFormat:
        f = QTextCharFormat()
        f.setProperty(PROP_MESSAGE, message)
        f.setProperty(PROP_STEP, step)
        f.setProperty(PROP_DRAFT, draft)
        if kind in (CODE, MARKER):
            f.setFont(self._mono)
        if kind == MARKER:
            f.setForeground(FENCE_MARKER)
        if self.highlight:
            if draft:
                f.setBackground(DRAFT_BACKGROUND)
            f.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SingleUnderline)
            f.setUnderlineColor(STEP_UNDERLINES[step % 2])
        return f

    # -- tooltips ---------------------------------------------------------------------------------
    def viewportEvent(self, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.ToolTip:
            text = self.tooltip_at(event.pos())
            if text:
                QToolTip.showText(event.globalPos(), text, self.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)

    def tooltip_at(self, pos: QPoint) -> str | None:
        """The token tooltip for a point in viewport coordinates, or None off a token."""
        cur = self.cursorForPosition(pos)
        p = cur.position()
        # cursorForPosition gives the nearest boundary; the hovered character is on its left
        # when the boundary lies to the right of the pointer.
        if self.cursorRect(cur).x() > pos.x() and p > 0:
            p -= 1
        return self.tooltip_for_position(p)

    def tooltip_for_position(self, position: int) -> str | None:
        cur = QTextCursor(self.document())
        cur.setPosition(position)
        if not cur.atBlockEnd():
            cur.movePosition(QTextCursor.MoveOperation.NextCharacter)
        fmt = cur.charFormat()  # the format of the character before the cursor
        if not fmt.hasProperty(PROP_STEP):
            return None
        step = fmt.intProperty(PROP_STEP)
        index = fmt.intProperty(PROP_MESSAGE)
        draft = fmt.boolProperty(PROP_DRAFT)
        origin = "drafted and accepted" if draft else "the target's own token"
        counts = self.messages[index].steps.get(step) if 0 <= index < len(self.messages) else None
        if counts is None:
            return f"step {step + 1} · {origin}"
        drafted, accepted, committed = counts[:3]
        tip = f"step {step + 1} · drafted {drafted} · accepted {accepted} · committed {committed} · {origin}"
        margins = counts[3] if len(counts) > 3 else ()
        k = self._token_in_step(position, index, step) if margins else None
        if k is not None and k < len(margins):
            # how near a tie the target's pick was: a parting from AR at a small margin is a
            # near-tie of rounding, at a large one a bug (issue 29)
            tip += f" · target's top-2 margin {margins[k]:.3g}"
        return tip

    def _token_in_step(self, position: int, index: int, step: int) -> int | None:
        """Which of the step's committed tokens the character at ``position`` belongs to: counts the
        characters of the step's text before it (in the document's units, UTF-16) along the
        message's pieces."""
        if not 0 <= index < len(self.messages):
            return None
        doc = self.document()

        def ours(q: int) -> bool:
            if q < 0:
                return False
            if doc.characterAt(q) == "\u2029":  # a block break: a "\n" of the step's text?
                return ours(q - 1)
            cur = QTextCursor(doc)
            cur.setPosition(q)
            if not cur.atBlockEnd():
                cur.movePosition(QTextCursor.MoveOperation.NextCharacter)
            f = cur.charFormat()
            return (
                f.hasProperty(PROP_STEP) and f.intProperty(PROP_STEP) == step and f.intProperty(PROP_MESSAGE) == index
            )

        start = position
        while ours(start - 1):
            start -= 1
        offset, at = position - start, 0
        pieces = [p for p, _src, st in self.messages[index].tokens if st == step]
        for k, piece in enumerate(pieces):
            at += len(piece.encode("utf-16-le")) // 2
            if offset < at:
                return k
        return None

    # -- introspection ----------------------------------------------------------------------------
    def token_spans(self) -> list[TokenSpan]:
        """Every token-formatted run of text in the document, in order."""
        out = []
        block = self.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                fmt = frag.charFormat()
                if frag.isValid() and fmt.hasProperty(PROP_STEP):
                    out.append(
                        TokenSpan(
                            frag.position(),
                            frag.text(),
                            fmt.intProperty(PROP_MESSAGE),
                            fmt.intProperty(PROP_STEP),
                            fmt.boolProperty(PROP_DRAFT),
                            fmt.hasProperty(QTextFormat.Property.BackgroundBrush),
                        )
                    )
                it += 1
            block = block.next()
        return out

    # -- helpers ----------------------------------------------------------------------------------
    def _end_cursor(self) -> QTextCursor:
        cur = QTextCursor(self.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        return cur

    def _at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 4

    def _scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())
