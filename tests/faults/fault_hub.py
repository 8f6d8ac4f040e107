"""A hostile Hub on 127.0.0.1 and the cases run against it.

HostileHub extends the engine tests' FakeHub (tests/engine_bridge/hubserver.py) with what a broken
or malicious server does: a body shorter than announced, a HEAD that lies about the size, a
stream that stalls after its first bytes, a redirect to another host, file names that climb out of
the models folder, and listings that are huge, endless, enormous in bytes or that page elsewhere.

Every case checks what the user is told (the exception and its message) and that nothing
unverified reaches the library: no file under its final name, nothing outside the models folder,
nothing the library's scan lists for that repo.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from engine_bridge.models import hub
from engine_bridge.models.library import Library

from fault_outcomes import RECOVERED, REFUSED, Outcome
from hubserver import COMMIT, FakeHub, start_isolated

REPO = "hostile/models"
#: Names a listing may carry that must never become paths.
HOSTILE_NAMES = ("../../x.gguf", "/etc/x", "a//b", "C:\\x", "a/../../x.gguf", "sub/./x.gguf", "x\x00.gguf")
#: A 3 MB model-like payload (not a GGUF: the library would list it as unreadable, never as a model).
PAYLOAD = bytes(range(256)) * 12_000


@dataclass
class HostileHub(FakeHub):
    short_body: dict[str, int] = field(default_factory=dict)  # path -> bytes served as the whole body (once)
    lie_size: set[str] = field(default_factory=set)  # HEAD announces the short body's size
    stall: dict[str, int] = field(default_factory=dict)  # path -> bytes sent before the stream stalls
    redirect: dict[str, str] = field(default_factory=dict)  # path -> Location a GET is sent to
    listings: dict[str, str] = field(default_factory=dict)  # repo -> "entries" | "endless" | "bytes" | "elsewhere"
    elsewhere: str = ""  # base URL of "another host"
    release: threading.Event = field(default_factory=threading.Event)

    def _resolve(self, h, repo: str, path: str, head: bool) -> None:
        f = self.repos[repo].get(path)
        short = self.short_body.get(path)
        lying = path in self.lie_size
        special = path in self.redirect or short is not None or path in self.stall
        if f is None or not special or (head and not lying):  # HEADs are honest unless lying
            return super()._resolve(h, repo, path, head)
        if not head and path in self.redirect:
            h.send_response(302)
            h.send_header("Location", self.redirect[path])
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        body = f.data[:short] if short is not None else f.data
        h.send_response(200)
        h.send_header("X-Repo-Commit", COMMIT)
        h.send_header("ETag", f'"{f.git_sha1}"')
        h.send_header("X-Linked-Etag", f'"{f.sha256}"')  # the true file's hash, whatever is sent
        h.send_header("X-Linked-Size", str(len(body)))
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if head:
            return
        if path in self.stall:
            h.wfile.write(body[: self.stall[path]])
            h.wfile.flush()
            self.release.wait(120)  # the stream stalls: headers and a first piece, then nothing
            return
        h.wfile.write(body)
        h.wfile.flush()
        if short is not None and not lying:
            self.short_body.pop(path, None)  # once: the next request (the resume) is served honestly

    def _tree(self, h, repo: str, sub: str) -> None:
        kind = self.listings.get(repo)
        if kind is None:
            return super()._tree(h, repo, sub)
        q = parse_qs(urlparse(h.path).query)
        page = int((q.get("page") or ["0"])[0])
        here = f"{self.url}/api/models/{repo}/tree/main"
        if kind == "entries":  # one page, more entries than any model repo
            return self._json(h, [{"type": "file", "path": f"f{i:06d}.gguf", "size": 1} for i in range(25_000)])
        if kind == "endless":  # small pages, each pointing at the next, forever
            return self._json(
                h,
                [{"type": "file", "path": f"p{page}-{i}.gguf", "size": 1} for i in range(3)],
                headers={"Link": f'<{here}?page={page + 1}>; rel="next"'},
            )
        if kind == "elsewhere":  # the next page on another host
            return self._json(
                h,
                [{"type": "file", "path": "a.gguf", "size": 1}],
                headers={"Link": f'<{self.elsewhere}/api/models/{repo}/tree/main?page=1>; rel="next"'},
            )
        if kind == "bytes":  # one answer of 40 MB, streamed without a length
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            piece = json.dumps({"type": "file", "path": "x" * 65_000 + ".gguf", "size": 1}).encode()
            try:
                h.wfile.write(b"1\r\n[\r\n")
                for i in range(600):
                    chunk = (b"," if i else b"") + piece
                    h.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                h.wfile.write(b"1\r\n]\r\n0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            h.close_connection = True
            return
        raise ValueError(kind)


def start_hostile(monkeypatch, tmp_path) -> tuple[HostileHub, FakeHub]:
    """The hostile Hub (HF_ENDPOINT points at it, no token) and a second server, "another host",
    reached as ``localhost`` while the Hub is ``127.0.0.1``. The caller stops both."""
    # start_isolated clears the token from the environment and the stored login; its server
    # serves as the other host.
    other = start_isolated(monkeypatch, tmp_path)
    hostile = HostileHub().start()
    monkeypatch.setenv("HF_ENDPOINT", hostile.url)
    hostile.elsewhere = other.url.replace("127.0.0.1", "localhost")
    quiet(hostile)
    quiet(other)
    hostile.add(REPO, "model-Q8_0.gguf", PAYLOAD)
    hostile.add(REPO, "config.json", b"{}", lfs=False)
    for kind in ("entries", "endless", "bytes", "elsewhere"):
        repo = f"huge/{kind}"
        hostile.add(repo, "a.gguf", b"x")
        hostile.listings[repo] = kind
    return hostile, other


def quiet(server: FakeHub) -> FakeHub:
    """Connections that the faults cut on purpose are not server errors worth a traceback."""
    server._server.handle_error = lambda request, client_address: None
    return server


def stop_hostile(hostile: HostileHub, other: FakeHub) -> None:
    hostile.release.set()
    hostile.stop()
    other.stop()


# ------------------------------------------------------------------------------------------------
# what "nothing reached the library" means


def assert_nothing_landed(models: Path, data: Path, filename: str, *, part_kept: bool) -> None:
    folder = models / REPO
    final = folder / filename
    assert not final.exists(), f"{final} exists: an unverified download took its final name"
    part = final.with_name(final.name + ".part")
    if not part_kept:
        assert not part.exists(), "bad bytes were kept"
    listed = [f.path for f in Library(data).scan(models) if REPO in f.path]
    assert listed == [], f"the library lists {listed}"


def _expect(exc_type, match: str, fn, *args, **kwargs) -> str:
    try:
        fn(*args, **kwargs)
    except exc_type as exc:
        msg = str(exc)
        assert match in msg, f"the message {msg!r} does not say {match!r}"
        return msg
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"expected {exc_type.__name__}, got {type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"expected {exc_type.__name__}, the call succeeded")


# ------------------------------------------------------------------------------------------------
# cases (each leaves the Hub's fault switches as it found them)


def case_truncated(hostile: HostileHub, models: Path, data: Path) -> Outcome:
    """The connection is cut mid-body: the user is told to run again; the resume verifies."""
    name = "model-Q8_0.gguf"
    hostile.break_after[name] = 700_000
    msg = _expect(hub.DownloadInterrupted, "run again to resume", hub.download_file, REPO, name, models)
    assert_nothing_landed(models, data, name, part_kept=True)
    path = hub.download_file(REPO, name, models)  # the resume
    assert path.read_bytes() == PAYLOAD
    _cleanup(models)
    return Outcome("truncated transfer (connection cut)", RECOVERED, msg)


def case_short_body(hostile: HostileHub, models: Path, data: Path) -> Outcome:
    """The server ends the body early with a matching Content-Length: the size check catches it."""
    name = "model-Q8_0.gguf"
    hostile.short_body[name] = 1_000_000
    msg = _expect(
        hub.DownloadInterrupted, f"got 1000000 of {len(PAYLOAD)} bytes", hub.download_file, REPO, name, models
    )
    assert_nothing_landed(models, data, name, part_kept=True)
    path = hub.download_file(REPO, name, models)
    assert path.read_bytes() == PAYLOAD
    _cleanup(models)
    return Outcome("truncated transfer (short body)", RECOVERED, msg)


def case_lying_size(hostile: HostileHub, models: Path, data: Path) -> Outcome:
    """HEAD announces the short size too: only the sha256 can tell, and it does; nothing is kept."""
    name = "model-Q8_0.gguf"
    hostile.short_body[name] = 1_000_000
    hostile.lie_size.add(name)
    try:
        msg = _expect(hub.ChecksumMismatchError, "sha256", hub.download_file, REPO, name, models)
    finally:
        hostile.short_body.pop(name, None)
        hostile.lie_size.discard(name)
    assert_nothing_landed(models, data, name, part_kept=False)
    return Outcome("truncated transfer (lying size)", REFUSED, msg)


def case_corrupted(hostile: HostileHub, models: Path, data: Path) -> Outcome:
    name = "model-Q8_0.gguf"
    hostile.corrupt.add(name)
    try:
        msg = _expect(hub.ChecksumMismatchError, "the download was discarded", hub.download_file, REPO, name, models)
    finally:
        hostile.corrupt.discard(name)
    assert_nothing_landed(models, data, name, part_kept=False)
    return Outcome("corrupted transfer", REFUSED, msg)


def case_stalled_cancel(hostile: HostileHub, models: Path, data: Path, *, join_s: float = 10.0) -> Outcome:
    """The stream stalls after its first bytes; the user cancels. The download thread must see the
    cancel while the server still sends nothing (the read timeout is 30 s; join_s is far below)."""
    name = "model-Q8_0.gguf"
    hostile.stall[name] = 200_000
    hostile.release.clear()
    cancel, first_bytes = threading.Event(), threading.Event()
    box: dict = {}

    def run():
        try:
            hub.download_file(REPO, name, models, cancel=cancel, progress=lambda p: first_bytes.set())
        except Exception as exc:  # noqa: BLE001
            box["exc"] = exc
            box["at"] = time.monotonic()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        assert first_bytes.wait(30), "the first bytes never arrived"
        time.sleep(0.3)  # the stream is stalled now: the server sends nothing more
        t0 = time.monotonic()
        cancel.set()
        worker.join(join_s)
        assert not worker.is_alive(), f"the cancel was not observed within {join_s} s of a stalled stream"
    finally:
        hostile.release.set()
        hostile.stall.pop(name, None)
        worker.join(60)
    exc = box.get("exc")
    assert isinstance(exc, hub.DownloadCancelled), f"expected DownloadCancelled, got {exc!r}"
    assert "cancelled at" in str(exc) and "run again to resume" in str(exc)
    assert_nothing_landed(models, data, name, part_kept=True)
    _cleanup(models)
    return Outcome("stalled stream, cancel", REFUSED, str(exc), figures={"cancel_ms": 1000 * (box["at"] - t0)})


def case_hostile_name(hostile: HostileHub, models: Path, data: Path, name: str) -> Outcome:
    n = len(hostile.requests)
    msg = _expect(hub.UnsafeFilenameError, "refusing file name", hub.download_file, REPO, name, models)
    assert len(hostile.requests) == n, "a request was made for a name that was refused"
    assert not any(p.is_file() for p in models.parent.rglob("x*")), "a file escaped"
    return Outcome(f"file name {name!r}", REFUSED, msg)


def case_hostile_listing_names(hostile: HostileHub, models: Path, data: Path) -> Outcome:
    """A folder download whose listing carries a hostile name is refused before anything is fetched."""
    repo = "hostile/folder"
    hostile.add(repo, "config.json", b"{}", lfs=False)
    hostile.add(repo, "model.safetensors", b"\x08" + b"\x00" * 7 + b"{}      ")
    for bad in HOSTILE_NAMES[:4]:
        hostile.add(repo, bad + ".safetensors" if not bad.endswith(".gguf") else bad[:-5] + ".safetensors", b"x")
    try:
        msg = _expect(hub.UnsafeFilenameError, "refusing file name", hub.download_folder, repo, models)
    finally:
        del hostile.repos[repo]
    assert not (models / repo).exists() or not any((models / repo).iterdir()), "files were written"
    return Outcome("listing with hostile names", REFUSED, msg)


def case_redirect_elsewhere(hostile: HostileHub, other: FakeHub, models: Path, data: Path) -> Outcome:
    name = "model-Q8_0.gguf"
    other.add(REPO, name, PAYLOAD)
    hostile.redirect[name] = f"{hostile.elsewhere}/{REPO}/resolve/main/{name}"
    n_other = len(other.requests)
    try:
        msg = _expect(
            hub.UnsafeRedirectError, "neither the Hub nor its file storage", hub.download_file, REPO, name, models
        )
    finally:
        hostile.redirect.pop(name, None)
    assert len(other.requests) == n_other, "the other host was contacted"
    assert_nothing_landed(models, data, name, part_kept=True)
    _cleanup(models)
    return Outcome("redirect to another host", REFUSED, msg)


def case_redirect_same_host(hostile: HostileHub, models: Path, data: Path) -> Outcome:
    """The control: a redirect within the Hub is followed (real downloads need redirects)."""
    name = "moved-Q8_0.gguf"
    hostile.add(REPO, name, PAYLOAD)
    hostile.redirect[name] = f"/{REPO}/resolve/main/model-Q8_0.gguf"
    try:
        path = hub.download_file(REPO, name, models)
    finally:
        hostile.redirect.pop(name, None)
        del hostile.repos[REPO][name]
    assert path.read_bytes() == PAYLOAD
    _cleanup(models)
    return Outcome("redirect within the Hub (control)", RECOVERED, "followed")


LISTING_MESSAGES = {
    "entries": f"more than {hub.MAX_LISTED_ENTRIES:,} entries",
    "endless": f"more than {hub.MAX_LISTING_PAGES} pages",
    "bytes": f"larger than {hub.MAX_LISTING_PAGE_BYTES >> 20} MiB",
    "elsewhere": "not on the Hub",
}


def case_huge_listing(hostile: HostileHub, other: FakeHub, kind: str) -> Outcome:
    n_other = len(other.requests)
    msg = _expect(hub.HubError, LISTING_MESSAGES[kind], hub.list_files, f"huge/{kind}")
    assert len(other.requests) == n_other, "the other host was contacted"
    return Outcome(f"listing: {kind}", REFUSED, msg)


def _cleanup(models: Path) -> None:
    """Removes what a case downloaded, so the next case starts from an empty repo folder."""
    folder = models / REPO
    if folder.exists():
        for p in folder.iterdir():
            p.unlink()


def all_cases(hostile: HostileHub, other: FakeHub, models: Path, data: Path):
    """(name, thunk) for every hostile-hub case, in a fixed order."""
    yield "truncated", lambda: case_truncated(hostile, models, data)
    yield "short body", lambda: case_short_body(hostile, models, data)
    yield "lying size", lambda: case_lying_size(hostile, models, data)
    yield "corrupted", lambda: case_corrupted(hostile, models, data)
    yield "stalled", lambda: case_stalled_cancel(hostile, models, data)
    for name in HOSTILE_NAMES:
        yield f"name {name!r}", lambda name=name: case_hostile_name(hostile, models, data, name)
    yield "listing names", lambda: case_hostile_listing_names(hostile, models, data)
    yield "redirect elsewhere", lambda: case_redirect_elsewhere(hostile, other, models, data)
    yield "redirect same host", lambda: case_redirect_same_host(hostile, models, data)
    for kind in LISTING_MESSAGES:
        yield f"listing {kind}", lambda kind=kind: case_huge_listing(hostile, other, kind)
