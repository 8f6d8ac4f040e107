"""The "Local server" switch and where it listens: a page beside Pair and Settings.

The switch serves the pair that is loaded (LocalServer); host, port, API key and queue apply when
it is turned on (they are locked while it serves). Binding beyond 127.0.0.1 needs a key, as
``dflash-studio serve`` does: the refusal is said here, and the switch goes back off."""

from __future__ import annotations

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QCheckBox, QFormLayout, QLabel, QLineEdit, QSpinBox, QVBoxLayout, QWidget

from ..common.plain_text import plain
from .local_server import OFF, SERVING, STARTING, LocalServer
from .server_settings import KEY_ENV, QUEUE_RANGE, ServerSettings


class ServerPanel(QWidget):
    def __init__(self, server: LocalServer, qsettings: QSettings, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("serverPanel")
        self.server, self.qsettings = server, qsettings
        opts = ServerSettings.load(qsettings)
        self.switch = QCheckBox(
            "Local server: serve the loaded pair over an OpenAI-compatible API", self, objectName="serverSwitch"
        )
        self.switch.setToolTip(
            "Other programs (editors, agents, chat front ends) use the pair at the URL below, "
            "as with `dflash-studio serve`. Their requests run in turn with your chat turns."
        )
        self.host = QLineEdit(opts.host, self, objectName="serverHost")
        self.host.setToolTip(
            "127.0.0.1: this machine only. Any other address lets other machines in and needs an API key."
        )
        self.port = QSpinBox(self, objectName="serverPort")
        self.port.setRange(0, 65535)
        self.port.setValue(opts.port)
        self.port.setToolTip("0: any free port (the status bar says which)")
        self.api_key = QLineEdit(opts.api_key, self, objectName="serverApiKey")
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText(f"none (or {KEY_ENV})")
        self.api_key.setToolTip("Clients send it as 'Authorization: Bearer KEY'; required beyond 127.0.0.1")
        self.queue = QSpinBox(self, objectName="serverQueue")
        self.queue.setRange(*QUEUE_RANGE)
        self.queue.setValue(opts.queue)
        self.queue.setToolTip("requests that may wait for the engine; more get 503 with Retry-After")
        self.message = QLabel("", self, objectName="serverMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        plain(self.message)  # addresses and OS errors are text, never markup

        form = QFormLayout()
        form.addRow("Host", self.host)
        form.addRow("Port", self.port)
        form.addRow("API key", self.api_key)
        form.addRow("Queue", self.queue)
        lay = QVBoxLayout(self)
        lay.addWidget(self.switch)
        lay.addLayout(form)
        lay.addWidget(self.message)
        lay.addStretch(1)

        self.switch.toggled.connect(self._toggled)
        server.stateChanged.connect(self._on_state)
        server.failed.connect(self._on_failed)

    def options(self) -> ServerSettings:
        return ServerSettings(
            host=self.host.text().strip() or "127.0.0.1",
            port=self.port.value(),
            api_key=self.api_key.text(),
            queue=self.queue.value(),
        )

    def _toggled(self, on: bool) -> None:
        opts = self.options()
        if on:
            opts.save(self.qsettings)
            self.message.setText("")
        self._lock(on)
        self.server.set_enabled(on, opts)
        if on and self.server.state == OFF and self.server.wanted:
            self.message.setText("The server starts once a pair is loaded.")

    def _lock(self, on: bool) -> None:
        for w in (self.host, self.port, self.api_key, self.queue):
            w.setEnabled(not on)

    def _on_state(self, state: str) -> None:
        if state == SERVING:
            self.message.setText(f"Serving {self.server.url} (model {self.server.server.app.model_ids[0]}).")
        elif state == STARTING:
            self.message.setText("Starting…")
        elif self.server.wanted:
            self.message.setText("The server starts again once a pair is loaded.")

    def _on_failed(self, why: str) -> None:
        self.switch.blockSignals(True)
        self.switch.setChecked(False)
        self.switch.blockSignals(False)
        self._lock(False)
        self.message.setText(f"Not serving: {why}")
