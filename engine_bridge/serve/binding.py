"""Where the server listens and whether it needs an API key there.

Safe default: 127.0.0.1 only. Any other address reaches other machines (or containers), so it
needs a key, given with --api-key or the DFLASH_API_KEY environment variable and checked as an
``Authorization: Bearer`` token."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
KEY_ENV = "DFLASH_API_KEY"


def is_loopback(host: str) -> bool:
    """True for addresses only this machine reaches: 127.0.0.0/8, ::1 and the name localhost."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


@dataclass(frozen=True)
class Binding:
    host: str
    port: int
    api_key: str | None
    key_source: str  # "--api-key", "DFLASH_API_KEY" or "none"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"


def resolve_binding(host: str, port: int, api_key: str | None, environ: Mapping[str, str]) -> Binding:
    """The binding asked for, or a ValueError with a sentence for the user: a non-loopback address
    without a key, an empty key, a port out of range."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port {port}: a port is 0..65535 (0: any free port)")
    source = "none"
    if api_key is not None:
        source = "--api-key"
    elif environ.get(KEY_ENV) is not None:
        api_key, source = environ[KEY_ENV], KEY_ENV
    if api_key is not None and not api_key.strip():
        raise ValueError(f"the API key from {source} is empty")
    if not is_loopback(host) and api_key is None:
        raise ValueError(
            f"--host {host} lets other machines reach the server: give an API key with "
            f"--api-key KEY or {KEY_ENV}=KEY (clients send it as 'Authorization: Bearer KEY'), "
            f"or keep the default --host {DEFAULT_HOST}"
        )
    return Binding(host, port, api_key, source)
