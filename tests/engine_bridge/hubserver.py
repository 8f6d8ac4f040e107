"""A small, real HTTP server on 127.0.0.1 that answers the Hub endpoints huggingface_hub 2.4 calls.

Read from huggingface_hub's source (hf_api.py, file_download.py): ``GET /api/models`` (search),
``GET /api/models/{repo}/tree/{rev}`` (listing, with ``lfs.oid`` = sha256), ``GET
/api/models/{repo}[/revision/{rev}]`` (model info), and ``HEAD``/``GET
/{repo}/resolve/{rev}/{path}`` with ``X-Repo-Commit``, ``ETag`` (git blob sha1), for LFS files
``X-Linked-Etag`` (sha256) and ``X-Linked-Size``, and Range requests. Faults can be injected:
a transfer that breaks off after N bytes, bytes that do not match the advertised hash, a slow
stream (for cancel tests), a private repo that wants a token.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubFile:
    data: bytes
    lfs: bool = True

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def git_sha1(self) -> str:
        return hashlib.sha1(b"blob %d\0" % len(self.data) + self.data).hexdigest()


@dataclass
class FakeHub:
    repos: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    private: dict[str, str] = field(default_factory=dict)  # repo -> required token
    break_after: dict[str, int] = field(default_factory=dict)  # path -> bytes sent before the next GET breaks (once)
    corrupt: set[str] = field(default_factory=set)  # paths served with one byte flipped
    slow: set[str] = field(default_factory=set)  # paths streamed in small, slow pieces
    # paths whose GET has no Content-Length and keeps streaming junk after the file, up to this many
    # bytes (the HEAD still announces the true size): a hostile or broken server filling the disk
    endless: dict[str, int] = field(default_factory=dict)
    # paths whose GET sends half the file, then one byte every this many seconds (a stalled server)
    trickle: dict[str, float] = field(default_factory=dict)
    requests: list[dict] = field(default_factory=list)
    url: str = ""

    def add(self, repo: str, path: str, data: bytes, lfs: bool = True) -> HubFile:
        f = HubFile(data, lfs)
        self.repos.setdefault(repo, {})[path] = f
        return f

    # -- server ---------------------------------------------------------------------------------
    def start(self) -> "FakeHub":
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def setup(self):
                super().setup()
                hub._conns.append(self.connection)

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self._conns = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        """Stops listening and drops kept-alive connections too (a real outage, not a polite one)."""
        import socket

        self._server.shutdown()
        self._server.server_close()
        for conn in self._conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._conns.clear()

    # -- routing --------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        u = urlparse(h.path)
        path = unquote(u.path)
        q = parse_qs(u.query)
        self.requests.append(
            {
                "method": h.command,
                "path": path,
                "query": q,
                "range": h.headers.get("Range"),
                "auth": h.headers.get("Authorization"),
            }
        )
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"]:
            if len(parts) == 2:
                return self._search(h, q)
            repo = "/".join(parts[2:4])
            if not self._allowed(h, repo):
                return
            if len(parts) >= 6 and parts[4] == "tree":
                return self._tree(h, repo, "/".join(parts[6:]))
            return self._info(h, repo)
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = "/".join(parts[:2])
            if not self._allowed(h, repo):
                return
            return self._resolve(h, repo, "/".join(parts[4:]), head)
        self._json(h, {"error": "not found"}, 404)

    def _allowed(self, h, repo: str) -> bool:
        if repo not in self.repos:
            self._json(h, {"error": "Repository not found"}, 404, {"X-Error-Code": "RepoNotFound"})
            return False
        want = self.private.get(repo)
        if want and h.headers.get("Authorization") != f"Bearer {want}":
            self._json(h, {"error": "Invalid credentials"}, 401, {"X-Error-Code": "RepoNotFound"})
            return False
        return True

    def _json(self, h, obj, status: int = 200, headers: dict | None = None) -> None:
        body = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def _search(self, h, q) -> None:
        term = (q.get("search") or [""])[0].lower()
        limit = int((q.get("limit") or ["100"])[0])
        want_gguf = "gguf" in (q.get("filter") or [])
        hits = []
        for repo, files in sorted(self.repos.items()):
            has_gguf = any(p.endswith(".gguf") for p in files)
            if term in repo.lower() and (has_gguf or not want_gguf):
                hits.append(
                    {
                        "id": repo,
                        "_id": repo,
                        "downloads": 10 * len(files),
                        "likes": len(files),
                        "tags": ["gguf"] if has_gguf else [],
                    }
                )
        self._json(h, hits[:limit])

    def _tree(self, h, repo: str, sub: str) -> None:
        out = []
        for p, f in sorted(self.repos[repo].items()):
            if sub and not p.startswith(sub.rstrip("/") + "/"):
                continue
            entry = {"type": "file", "path": p, "size": len(f.data), "oid": f.git_sha1}
            if f.lfs:
                entry["lfs"] = {"oid": f.sha256, "size": len(f.data), "pointerSize": 134}
            out.append(entry)
        self._json(h, out)

    def _info(self, h, repo: str) -> None:
        self._json(h, {"id": repo, "sha": COMMIT, "siblings": [{"rfilename": p} for p in sorted(self.repos[repo])]})

    def _resolve(self, h, repo: str, path: str, head: bool) -> None:
        f = self.repos[repo].get(path)
        if f is None:
            return self._json(h, {"error": "Entry not found"}, 404, {"X-Error-Code": "EntryNotFound"})
        data = f.data
        if path in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes=") and not head:
            start = int(rng[len("bytes=") :].split("-")[0])
            if start >= len(data):
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{len(data)}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
        body = data[start:]
        if not head and path in self.endless:
            return self._endless(h, body, self.endless[path])
        h.send_response(206 if start else 200)
        h.send_header("X-Repo-Commit", COMMIT)
        h.send_header("ETag", f'"{f.git_sha1}"')
        if f.lfs:
            h.send_header("X-Linked-Etag", f'"{f.sha256}"')
            h.send_header("X-Linked-Size", str(len(f.data)))
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(body)))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if head:
            return
        cut = self.break_after.pop(path, None)
        if cut is not None:
            h.wfile.write(body[:cut])
            h.wfile.flush()
            h.close_connection = True
            import socket

            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if path in self.trickle:
            return self._trickle(h, body, self.trickle[path])
        step = 16384 if path in self.slow else len(body) or 1
        for i in range(0, len(body), step):
            try:
                h.wfile.write(body[i : i + step])
                h.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
            if path in self.slow:
                time.sleep(0.002)

    def _endless(self, h, body: bytes, cap: int) -> None:
        h.send_response(200)
        h.send_header("X-Repo-Commit", COMMIT)
        h.send_header("Connection", "close")  # no Content-Length: the body ends when the server says
        h.end_headers()
        h.close_connection = True
        junk = b"\xee" * 65536
        sent = 0
        try:
            h.wfile.write(body)
            while sent < cap:
                h.wfile.write(junk)
                sent += len(junk)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return

    def _trickle(self, h, body: bytes, every: float) -> None:
        half = len(body) // 2
        try:
            h.wfile.write(body[:half])
            h.wfile.flush()
            for i in range(half, len(body)):
                time.sleep(every)
                h.wfile.write(body[i : i + 1])
                h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            return


def start_isolated(monkeypatch, tmp_path) -> FakeHub:
    """Starts a FakeHub and points huggingface_hub at it, with no token from the machine running
    the tests (environment or stored login). The caller stops it."""
    import huggingface_hub.constants as hc

    server = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hc, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(hc, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-tokens"))
    return server
