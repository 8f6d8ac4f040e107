"""Where the local server listens, kept in QSettings apart from the engine's settings (they need no
reload). The switch itself is not kept: a port opens only when the user turns it on in this session."""

from __future__ import annotations

import os
from dataclasses import dataclass

from PySide6.QtCore import QSettings

from engine_bridge.serve.binding import DEFAULT_HOST, DEFAULT_PORT, KEY_ENV, Binding, is_loopback, resolve_binding

QUEUE_RANGE = (1, 64)


@dataclass(frozen=True)
class ServerSettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT  # 0: any free port
    api_key: str = ""  # '' : none (then DFLASH_API_KEY, as for the CLI)
    queue: int = 8  # requests that may wait for the engine; past that: 503

    def binding(self, environ=os.environ) -> Binding:
        """The CLI's rule: any address but loopback needs a key. A ValueError says why not."""
        host = self.host.strip()
        if not is_loopback(host) and not self.api_key and not environ.get(KEY_ENV):
            raise ValueError(
                f"{host} lets other machines reach the server: set an API key (clients send it as "
                f"'Authorization: Bearer KEY'), or keep {DEFAULT_HOST}"
            )
        return resolve_binding(host, self.port, self.api_key or None, environ)

    @classmethod
    def load(cls, qs: QSettings) -> "ServerSettings":
        d = cls()

        def num(key, default, lo, hi):
            try:
                v = int(qs.value(key, default))
            except (TypeError, ValueError):
                return default
            return v if lo <= v <= hi else default

        return cls(
            host=str(qs.value("server/host", d.host) or d.host),
            port=num("server/port", d.port, 0, 65535),
            api_key=str(qs.value("server/api_key", d.api_key) or ""),
            queue=num("server/queue", d.queue, *QUEUE_RANGE),
        )

    def save(self, qs: QSettings) -> None:
        qs.setValue("server/host", self.host)
        qs.setValue("server/port", self.port)
        qs.setValue("server/api_key", self.api_key)
        qs.setValue("server/queue", self.queue)
        qs.sync()


__all__ = ["ServerSettings", "KEY_ENV", "QUEUE_RANGE"]
