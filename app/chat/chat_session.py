"""One chat at a time: turns go to the engine worker, answers stream back, everything is stored.

The session owns the flow of a conversation: a user turn is committed to the store before the
request leaves; the answer is drained from the worker's stream channel through a throttle (first
batch at once, later ones merged, at most 20 redraws a second, fewer when drawing would take more
than its CPU budget from generation: ``ui_budget``), fed to the transcript, the live
plots, the profiler and the status bar, and stored as it grows (at most once a second) and when
it ends. Stop, regenerate, new chat and switching conversations are refused while an answer
streams, except Stop.
"""

from __future__ import annotations

import time
from typing import Callable

from PySide6.QtCore import QObject, QSettings, Signal, Slot

from .conversations import ConversationStore, Message, StoreError
from ..common.throttle import Throttle
from ..common.ui_budget import CpuBudget
from .transcript import summary_line
from ..shell.workers import GENERATING, READY, EngineClient

LIVE_SAVE_S = 1.0  # a streaming answer is written to the store at most this often
CONVERSATION_KEY = "ui/conversation"


def engine_lost(exc) -> bool:
    """The engine's process died (an abort, a crash, the OOM killer, a lost RPC server)."""
    from engine_bridge.runtime.engine_process import EngineProcessError

    return isinstance(exc, EngineProcessError) or getattr(exc, "reason", None) == "lost"


def describe_error(exc) -> str:
    """A readable one-paragraph message for an engine or library exception."""
    from engine_bridge.runtime.engine_process import EngineProcessError

    if isinstance(exc, EngineProcessError):
        return str(exc)  # a whole sentence that names what ended the engine
    name = type(exc).__name__
    text = str(exc).strip() or name
    report = getattr(exc, "report", None)
    if report is not None and getattr(report, "failures", None):
        return "the pair cannot run together:\n" + "\n".join(f"• {c.name}: {c.reason}" for c in report.failures)
    return f"{name}: {text}"


class ChatSession(QObject):
    answerFinished = Signal(object)  # GenerationResult
    answerFailed = Signal(object)  # exception
    stateChanged = Signal()  # the chat's buttons may need updating

    def __init__(
        self,
        engine: EngineClient,
        store: ConversationStore,
        chat,
        conversations,
        plots,
        profiler,
        status,
        settings: Callable,
        qsettings: QSettings,
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self.engine, self.store, self.chat, self.conversations = engine, store, chat, conversations
        self.plots, self.profiler, self.status = plots, profiler, status
        self.settings = settings  # () -> StudioSettings, read at each request
        self.qsettings = qsettings
        self.conversation_id: int | None = None
        self._run: int | None = None
        self._live_saved_at = 0.0
        self._closed = False
        self._unsaved = ""  # why the streaming answer could not be stored, if it could not
        self._generating_text = ""  # the status line of the running request
        self._progress_shown = False  # the status line shows what runs before its first token
        self._stream = Throttle(self._drain, parent=self)
        self.budget = CpuBudget()  # stretches the redraw intervals if drawing gets dear
        engine.channel.ready.connect(self._on_stream_ready)
        engine.generated.connect(self._on_generated)
        engine.generateFailed.connect(self._on_generate_failed)
        engine.generateProgress.connect(self._on_generate_progress)

    @property
    def transcript(self):
        return self.chat.transcript

    # -- requests ---------------------------------------------------------------------------------
    def send(self, text: str) -> None:
        if self.engine.state != READY:
            self.chat.show_status("load a pair first (Pair tab)", error=True)
            return
        msg = Message("user", text)
        try:
            if self.conversation_id is None:
                self.conversation_id = self.store.create()
                self.qsettings.setValue(CONVERSATION_KEY, self.conversation_id)
            self.store.add(self.conversation_id, msg)  # committed before anything can go wrong
        except StoreError as exc:
            self.chat.show_status(f"Not sent: {exc}. Your message is still in the box.", error=True)
            return
        self.chat.take_input()
        self.transcript.append_message(msg)
        self.refresh_list()
        self._generate()

    def _generate(self) -> None:
        history = [m.as_chat() for m in self.transcript.messages]
        has_drafter = bool(self.engine.info and self.engine.info.config.draft)
        try:
            settings = self.settings().generation_settings(has_drafter=has_drafter)
        except ValueError as exc:
            self.chat.show_status(str(exc), error=True)
            return
        self._generating_text = f"generating ({settings.mode}, budget {settings.budget})…"
        self._progress_shown = False
        self.chat.show_status(self._generating_text)
        self._run = self.engine.generate(settings, messages=history)
        self.transcript.begin_assistant()

    def stop(self) -> None:
        self.engine.stop()

    def regenerate(self) -> None:
        if self.engine.state != READY:
            return
        msgs = self.transcript.messages
        if msgs and msgs[-1].role == "assistant":
            last = self.transcript.pop_message()
            if last.id is not None:
                self._write(self.store.delete_message, last.id)
        if self.transcript.messages:
            self._generate()

    def new_chat(self) -> None:
        if self.engine.state == GENERATING:
            return
        self.conversation_id = None
        self.qsettings.remove(CONVERSATION_KEY)
        self.transcript.set_messages([])
        self.chat.show_status("")
        self.conversations.clearSelection()
        self.stateChanged.emit()

    def open(self, conversation_id: int) -> None:
        if self.engine.state == GENERATING:
            return
        self.conversation_id = conversation_id
        self.qsettings.setValue(CONVERSATION_KEY, conversation_id)
        self.transcript.set_messages(self.store.messages(conversation_id))
        self.refresh_list()
        self.show_store_notices()
        self.stateChanged.emit()

    def open_last(self, notes=()) -> None:
        """Reopens the conversation that was open when the app last closed, if it still exists.
        ``notes``: what else the window has to say at start (settings that were reset)."""
        self.refresh_list()
        notes = list(notes)
        last = self.qsettings.value(CONVERSATION_KEY)
        try:
            last = None if last is None else int(last)
        except (TypeError, ValueError):
            notes.append(f"Settings reset: {CONVERSATION_KEY}: {str(last)[:40]!r} is not a conversation number.")
            self.qsettings.remove(CONVERSATION_KEY)
            last = None
        if last is not None and last in self.conversations.ids():
            self.open(last)
        self.show_store_notices(notes)

    def show_store_notices(self, notes=()) -> None:
        """What the store had to do (moved a damaged file aside, skipped a row, opened read-only)."""
        notes = list(notes) + self.store.take_notices()
        if notes:
            self.chat.show_status(" ".join(notes), error=True)

    def delete(self, conversation_id: int) -> None:
        if conversation_id == self.conversation_id:
            if self.engine.state == GENERATING:
                return
            self.new_chat()
        self.store.delete(conversation_id)
        self.refresh_list()

    def refresh_list(self) -> None:
        self.conversations.set_conversations(self.store.list(), self.conversation_id)

    # -- streaming --------------------------------------------------------------------------------
    @Slot()
    def _on_stream_ready(self) -> None:
        self._stream()

    def _drain(self) -> None:
        if self._closed:
            return
        self._take_stream()
        self._persist_live()
        ms = self.budget.update()
        self._stream.set_interval(ms)
        self.plots.redraws.set_interval(max(self.plots.min_interval_ms, 4 * ms))

    def _take_stream(self) -> None:
        tokens, steps = self.engine.channel.drain()
        if tokens and self._progress_shown:  # what ran before the first token is over
            self._progress_shown = False
            self.chat.show_status(self._generating_text)
        if tokens:
            self.transcript.append_tokens(tokens)
        if steps:
            self.transcript.add_steps(steps)
            self.plots.add_steps(steps)
            self.profiler.add_steps(self._run or 0, steps)
            self.status.set_tok_per_s(self.plots.recent_tok_per_s())

    def _persist_live(self, force: bool = False) -> None:
        """Stores the streaming answer: added with its first tokens, then updated at most once a second."""
        msg = self.transcript.live_message
        if msg is None or not msg.tokens or self.conversation_id is None:
            return
        now = time.monotonic()
        if msg.id is None:
            self._write(self.store.add, self.conversation_id, msg)
        elif force or now - self._live_saved_at >= LIVE_SAVE_S:
            self._write(self.store.update, msg)
        else:
            return
        self._live_saved_at = now

    def _write(self, fn, *args) -> bool:
        """A store write while an answer streams or ends: a refusal is said, never raised into Qt."""
        try:
            fn(*args)
            return True
        except StoreError as exc:
            self._unsaved = f"The answer is shown but not saved: {exc}."
            self.chat.show_status(self._unsaved, error=True)
            return False

    @Slot(int, object)
    def _on_generated(self, request_id: int, result) -> None:
        if self._closed:
            return  # a late reply after close: the store is gone
        self._stream.cancel()
        self._take_stream()  # everything streamed before the result, shown now
        self.plots.redraws.flush()
        summary = result.summary.to_dict() if result.summary else None
        msg = self.transcript.end_assistant(summary)
        if msg is not None and self.conversation_id is not None:
            if msg.id is not None:
                self._write(self.store.update, msg)  # the final text, steps and summary
            elif msg.tokens or result.summary.finish_reason != "cancelled":
                self._write(self.store.add, self.conversation_id, msg)
            else:
                self.transcript.pop_message()  # stopped before the first token
        s = result.summary
        note = f" — {s.budget_note}" if s.budget_note else ""
        note += f" — {s.auto_note}" if s.auto_note else ""
        line = f"{summary_line(summary)} · finish: {s.finish_reason}{note}"
        if self._unsaved:
            line, self._unsaved = f"{line} — {self._unsaved}", ""
        self.chat.show_status(line, error=" not saved" in line)
        self.status.set_tok_per_s(s.tok_per_s)
        self.status.set_break_even(s.break_even_commit, s.break_even, s.break_even_label, s.mode)
        self.refresh_list()
        self.stateChanged.emit()
        self.answerFinished.emit(result)

    @Slot(int, str)
    def _on_generate_progress(self, request_id: int, text: str) -> None:
        """What the request does before its first token: auto's first request on a pair and machine
        measures their step costs (seconds on a CPU), which would otherwise look like a hang."""
        if request_id != self._run:
            return
        if text.startswith("calibrating again: "):  # the steps disagreed with the cached costs
            text = f"auto measures the step costs again ({text.removeprefix('calibrating again: ')})"
        elif text.startswith("calibrating "):
            text = (
                f"auto measures what a step costs here, once per pair and machine: {text.removeprefix('calibrating ')}"
            )
        self._progress_shown = True
        self.chat.show_status(text + "…")

    @Slot(int, object)
    def _on_generate_failed(self, request_id: int, exc) -> None:
        if self._closed:
            return
        self._stream.cancel()
        self._take_stream()
        if self.transcript.streaming:
            msg = self.transcript.end_assistant(None)
            if engine_lost(exc) and msg is not None and msg.tokens:
                # the engine died mid-answer: every token it committed before is kept and stored
                if self.conversation_id is not None:
                    if msg.id is not None:
                        self._write(self.store.update, msg)
                    else:
                        self._write(self.store.add, self.conversation_id, msg)
            else:
                cut = self.transcript.pop_message()  # an answer cut by an error is not kept
                if cut is not None and cut.id is not None:
                    self._write(self.store.delete_message, cut.id)
        hint = " Raise the context size in Settings, or start a new chat." if "Context" in type(exc).__name__ else ""
        self.chat.show_status(describe_error(exc) + hint, error=True)
        self.stateChanged.emit()
        self.answerFailed.emit(exc)

    # -- closing ----------------------------------------------------------------------------------
    def close(self) -> None:
        """After the engine thread has stopped: keeps every token it committed, then lets go."""
        self._closed = True
        self._stream.cancel()
        if self.transcript.streaming:
            self._take_stream()
            self._persist_live(force=True)
