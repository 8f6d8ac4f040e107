"""What the serve tests share besides fixtures: the server's settings, an openai client for it,
plain HTTP (the standard library's http.client: a raw body, a stream left mid-way) and waiting."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

MODE, BUDGET = "chain", 7
QUEUE = 4


def client(srv, key: str = "none"):
    from openai import OpenAI

    # no retries: a 503 must reach the test, not be retried away
    return OpenAI(base_url=srv.url, api_key=key, max_retries=0, timeout=60)


def connect(srv, timeout: float = 30.0) -> http.client.HTTPConnection:
    u = urlsplit(srv.url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


def post(srv, path: str, body, headers: dict | None = None, timeout: float = 30.0):
    """(status, headers, parsed JSON) of a POST; ``body`` bytes are sent as they are."""
    conn = connect(srv, timeout)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", "/v1" + path, data, {"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), json.loads(r.read() or b"null")
    finally:
        conn.close()


def get(srv, path: str, headers: dict | None = None):
    conn = connect(srv)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def wait_for(cond, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for the server")
        time.sleep(0.01)
