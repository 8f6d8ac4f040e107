"""The chat page: transcript, input box and the buttons that drive a conversation.

It only displays and asks: sending, stopping, regenerating and starting a chat are signals that
the main window turns into engine requests and stored messages.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from .transcript import TranscriptView


class PromptEdit(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line."""

    submitted = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            event.modifiers() & Qt.KeyboardModifier.ShiftModifier
        ):
            self.submitted.emit()
            return
        super().keyPressEvent(event)


class ChatView(QWidget):
    sendRequested = Signal(str)
    stopRequested = Signal()
    regenerateRequested = Signal()
    newChatRequested = Signal()
    highlightToggled = Signal(bool)
    reloadRequested = Signal()  # the engine's process died: load the pair again

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("chatView")
        self.transcript = TranscriptView(self)
        self.input = PromptEdit(self)
        self.input.setObjectName("chatInput")
        self.input.setPlaceholderText("Message the model (Enter sends, Shift+Enter for a new line)")
        self.input.setMaximumHeight(90)
        self.send_button = QPushButton("Send", self, objectName="sendButton")
        self.stop_button = QPushButton("Stop", self, objectName="stopButton")
        self.regenerate_button = QPushButton("Regenerate", self, objectName="regenerateButton")
        self.new_chat_button = QPushButton("New chat", self, objectName="newChatButton")
        self.highlight_box = QCheckBox("Highlight drafts", self, objectName="highlightToggle")
        self.highlight_box.setChecked(True)
        self.highlight_box.setToolTip(
            "Green: the drafter proposed the token and the target accepted it. "
            "The underline colour changes at every step."
        )
        self.template_label = QLabel("", self, objectName="chatTemplateLabel")
        self.template_label.setTextFormat(Qt.TextFormat.PlainText)
        self.template_label.setStyleSheet("color: #777;")
        self.template_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.status = QLabel(self, objectName="chatStatus")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # paths and errors are text, never markup
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reload_button = QPushButton("Reload the pair", self, objectName="reloadButton")
        self.reload_button.setToolTip("The engine's process ended; load the same pair again in a fresh one.")
        self.reload_button.hide()

        top = QHBoxLayout()
        top.addWidget(self.new_chat_button)
        top.addWidget(self.regenerate_button)
        self.template_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        top.addWidget(self.template_label, 1)
        top.addWidget(self.highlight_box)
        bottom = QHBoxLayout()
        bottom.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        bottom.addLayout(buttons)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.transcript, 1)
        status_row = QHBoxLayout()
        status_row.addWidget(self.status, 1)
        status_row.addWidget(self.reload_button, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(status_row)
        lay.addLayout(bottom)

        self.send_button.clicked.connect(self._send)
        self.input.submitted.connect(self._send)
        self.stop_button.clicked.connect(self.stopRequested)
        self.regenerate_button.clicked.connect(self.regenerateRequested)
        self.new_chat_button.clicked.connect(self.newChatRequested)
        self.reload_button.clicked.connect(self.reloadRequested)
        self.highlight_box.toggled.connect(self._on_highlight)
        self.set_state(can_send=False, generating=False)

    def _send(self) -> None:
        text = self.input.toPlainText().strip()
        if text and self.send_button.isEnabled():
            # the box is emptied by take_input() once the message is stored, never before: a
            # refused send (no pair, a full disk, a read-only store) leaves the text where it was
            self.sendRequested.emit(text)

    def take_input(self) -> None:
        """The message was stored: empty the box for the next one."""
        self.input.clear()

    def _on_highlight(self, on: bool) -> None:
        self.transcript.set_highlight(on)
        self.highlightToggled.emit(on)

    def set_highlight(self, on: bool) -> None:
        self.highlight_box.setChecked(on)
        self.transcript.set_highlight(on)

    def set_state(self, *, can_send: bool, generating: bool) -> None:
        self.send_button.setEnabled(can_send and not generating)
        self.stop_button.setEnabled(generating)
        has_answer = any(m.role == "assistant" for m in self.transcript.messages)
        self.regenerate_button.setEnabled(can_send and not generating and has_answer)
        self.new_chat_button.setEnabled(not generating)

    def show_template(self, template: str | None) -> None:
        """Says how turns are rendered: the model's own chat template, or plain 'role: text' lines."""
        if template:
            self.template_label.setText("model's chat template")
            self.template_label.setToolTip(template)
        else:
            self.template_label.setText("no chat template")
            self.template_label.setToolTip(
                "The target carries no chat template (a base model?); turns are sent as 'role: text' lines."
            )

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #b00020;" if error else "")
        self.status.setText(text)

    def show_engine_lost(self, text: str) -> None:
        """The engine's process died: say how, and offer to load the pair again."""
        self.show_status(text, error=True)
        self.reload_button.show()

    def hide_reload(self) -> None:
        self.reload_button.hide()
