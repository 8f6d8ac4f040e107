"""Hugging Face Hub: search, list a repo's GGUF files, download with resume, cancel and sha256.

huggingface_hub does the talking to the Hub (search, the HEAD that yields a file's commit, size
and LFS sha256, auth headers, error types); file listings and transfers are our own streamed GETs
on its HTTP session, so that a hostile or broken Hub cannot do harm: a listing is bounded in
entries, pages and bytes; a transfer reports progress, stops on a cancel event even while the
server sends nothing (the socket is shut down under the blocked read), resumes with a Range request
after an interruption, follows redirects only to the Hub and its own file storage (the token only
ever goes to the endpoint), stops with a clear message on a full disk, and verifies the bytes
before the file takes its final name. A ``.part`` file is all an interruption leaves behind; a
verified file is renamed into place atomically and described in a small sidecar
(``.NAME.dflash.json``) so it can be used offline later.

The endpoint is read from HF_ENDPOINT at call time (tests point it at a local server). The access
token comes from HF_TOKEN or huggingface_hub's own token store and is only ever put in request
headers: it is never written to a file, the library or a log.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Callable
from urllib.parse import quote, urljoin, urlsplit

from ..common.errors import EngineError

CHUNK = 1 << 20
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_QUANT_RE = re.compile(r"(?i)(?:^|[-_.])((?:IQ|Q)\d(?:_[A-Z0-9]+)*|BF16|F16|F32|FP16|FP32)(?=[-_.]|$)")
#: Files a drafter folder download takes (weights, config, tokenizer); others are skipped.
#: Bounds on a repo listing. Real model repos hold tens to hundreds of files and the Hub pages a
#: recursive tree by 1,000 entries (a few hundred KB); a Hub that answers with more is refused
#: rather than allowed to fill memory or page forever.
MAX_LISTED_ENTRIES = 20_000
MAX_LISTING_PAGES = 40  # twice what MAX_LISTED_ENTRIES takes at the Hub's 1,000 a page
MAX_LISTING_PAGE_BYTES = 16 << 20
#: Redirect hops a request may take, and the domains where the Hub keeps file contents (its CDN
#: and Xet storage); a download is redirected there, over https, without the token.
MAX_REDIRECTS = 5
HUB_STORAGE_DOMAINS = ("huggingface.co", "hf.co")
#: How often a transfer's watchdog looks at the cancel event.
CANCEL_POLL_S = 0.05
#: A transfer that receives fewer than STALL_BYTES in STALL_S seconds has stalled: it is given up with
#: a resumable error (the read timeout alone never fires on a server that sends a byte every 20 s).
STALL_S = 60.0
STALL_BYTES = 1024
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
FOLDER_PATTERNS = (
    re.compile(r"\.safetensors$"),
    re.compile(
        r"(^|/)(config|generation_config|tokenizer|tokenizer_config|"
        r"special_tokens_map|adapter_config)\.json$"
    ),
    re.compile(r"\.jinja$"),
    re.compile(r"\.safetensors\.index\.json$"),
    re.compile(r"(^|/)README\.md$"),
)


class HubError(EngineError):
    """The Hub could not answer (network, missing repo or file, access denied)."""


class UnsafeFilenameError(HubError):
    """A repo file name that would land outside the models folder."""


class DownloadCancelled(HubError):
    """The cancel event was set; the partial file is kept for a later resume."""


class DownloadInterrupted(HubError):
    """The transfer broke off; the partial file is kept and the next call resumes it."""


class DiskFullError(DownloadInterrupted):
    """The disk (or the process's file-size limit) ran out; what was received is kept as ``.part``."""


class UnsafeRedirectError(HubError):
    """The Hub sent a request elsewhere than the Hub or its file storage."""


class ChecksumMismatchError(HubError):
    """The downloaded bytes do not match the Hub's hash; the bad data was removed."""


class OfflineError(HubError):
    """Offline mode, and the file is not in the models folder yet."""


@dataclass(frozen=True)
class RepoHit:
    repo_id: str
    downloads: int | None = None
    likes: int | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int | None
    sha256: str | None  # LFS files only
    quant: str | None  # Q4_K_M, Q8_0, F16 ... parsed from the name

    @property
    def is_gguf(self) -> bool:
        return self.path.lower().endswith(".gguf")


@dataclass(frozen=True)
class DownloadProgress:
    filename: str
    done: int
    total: int | None
    speed: float  # bytes per second, this session
    eta: float | None  # seconds

    def line(self) -> str:
        tot = f"/{self.total / 2**20:.1f}" if self.total else ""
        eta = f" ETA {self.eta:.0f}s" if self.eta is not None else ""
        return f"{self.filename}: {self.done / 2**20:.1f}{tot} MiB at {self.speed / 2**20:.1f} MiB/s{eta}"


# --------------------------------------------------------------------------------------------
# settings read at call time


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def token() -> str | None:
    """HF_TOKEN, else huggingface_hub's stored login; None when neither exists."""
    tok = os.environ.get("HF_TOKEN")
    if tok:
        return tok
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:  # noqa: BLE001 - a broken token store means "anonymous"
        return None


def is_offline(offline: bool | None = None) -> bool:
    if offline is not None:
        return offline
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _api():
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint(), token=token() or False)


def _hub_call(what: str, fn):
    try:
        return fn()
    except HubError:
        raise
    except Exception as exc:  # noqa: BLE001 - every Hub/network failure becomes one readable error
        raise HubError(f"{what}: {_describe(exc)}") from exc


def _describe(exc: Exception) -> str:
    name = type(exc).__name__
    msg = str(exc).splitlines()[0] if str(exc) else ""
    tok = token()
    if tok and tok in msg:  # never echo a token back
        msg = msg.replace(tok, "***")
    return f"{name}: {msg}" if msg else name


# --------------------------------------------------------------------------------------------
# search and listing


def check_repo_id(repo_id: str) -> str:
    if not isinstance(repo_id, str) or not _REPO_RE.match(repo_id) or ".." in repo_id:
        raise HubError(f"{repo_id!r} is not a repository id (owner/name)")
    return repo_id


def search(query: str, limit: int = 20, *, gguf_only: bool = False) -> list[RepoHit]:
    def run():
        kwargs = {"search": query, "limit": limit}
        if gguf_only:
            kwargs["filter"] = "gguf"
        return [
            RepoHit(
                m.id, getattr(m, "downloads", None), getattr(m, "likes", None), tuple(getattr(m, "tags", None) or ())
            )
            for m in _api().list_models(**kwargs)
        ]

    return _hub_call(f"search {query!r}", run)


def quant_name(filename: str) -> str | None:
    stem = PurePosixPath(filename).name
    if stem.lower().endswith(".gguf"):
        stem = stem[:-5]
    found = _QUANT_RE.findall(stem)
    return found[-1].upper() if found else None


def list_files(repo_id: str, revision: str = "main", *, gguf_only: bool = False) -> list[RemoteFile]:
    """Every file of a repo (recursive), bounded: see MAX_LISTED_ENTRIES and friends."""
    check_repo_id(repo_id)
    what = f"list {repo_id}"
    url: str | None = f"{endpoint()}/api/models/{repo_id}/tree/{quote(revision, safe='')}"
    params: dict | None = {"recursive": "true", "expand": "false"}
    files: list[RemoteFile] = []
    entries = pages = 0
    while url:
        pages += 1
        if pages > MAX_LISTING_PAGES:
            raise HubError(f"{what}: the listing goes on for more than {MAX_LISTING_PAGES} pages; refusing it")
        page, url = _listing_page(url, params, what)
        params = None  # the next link carries them
        entries += len(page)
        if entries > MAX_LISTED_ENTRIES:
            raise HubError(
                f"{what}: the repo lists more than {MAX_LISTED_ENTRIES:,} entries; "
                "DFlash Studio reads at most that many"
            )
        for entry in page:
            if not isinstance(entry, dict) or entry.get("type") != "file" or not isinstance(entry.get("path"), str):
                continue
            size = entry.get("size")
            lfs = entry.get("lfs")
            sha = lfs.get("oid") if isinstance(lfs, dict) and isinstance(lfs.get("oid"), str) else None
            files.append(
                RemoteFile(entry["path"], size if isinstance(size, int) else None, sha, quant_name(entry["path"]))
            )
    return [f for f in files if f.is_gguf] if gguf_only else files


def _listing_page(url: str, params: dict | None, what: str) -> tuple[list, str | None]:
    """One page of a tree listing (at most MAX_LISTING_PAGE_BYTES) and the next page's URL."""
    try:
        with _hub_stream(url, what, params=params) as r:
            body = bytearray()
            for chunk in r.iter_bytes():
                body += chunk
                if len(body) > MAX_LISTING_PAGE_BYTES:
                    raise HubError(
                        f"{what}: one page of the listing is larger than "
                        f"{MAX_LISTING_PAGE_BYTES >> 20} MiB; refusing it"
                    )
            _raise_for_status(r, bytes(body), what)
            next_url = r.links.get("next", {}).get("url")
    except HubError:
        raise
    except Exception as exc:  # noqa: BLE001 - network failures become one readable error
        raise HubError(f"{what}: {_describe(exc)}") from exc
    if next_url:
        next_url = urljoin(url, next_url)
        if _origin(next_url) != _origin(url):
            raise UnsafeRedirectError(
                f"{what}: the next page is on {urlsplit(next_url).netloc}, not on the Hub; refusing it"
            )
    try:
        page = json.loads(body)
    except ValueError as exc:
        raise HubError(f"{what}: the Hub's answer is not JSON") from exc
    if not isinstance(page, list):
        raise HubError(f"{what}: the Hub's answer is not a file listing")
    return page, next_url


def _read_bounded(r, limit: int) -> bytes:
    """At most ``limit`` bytes of a streamed body (an error page is read for its message only)."""
    body = bytearray()
    for chunk in r.iter_bytes():
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])


def _raise_for_status(r, body: bytes, what: str) -> None:
    """huggingface_hub's readable errors (repo not found, gated, ...) for a streamed answer."""
    if r.status_code < 400:
        return
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    read = httpx2.Response(r.status_code, headers=r.headers, content=body, request=r.request)
    _hub_call(what, lambda: hf_raise_for_status(read))
    raise HubError(f"{what}: HTTP {r.status_code}")


# --------------------------------------------------------------------------------------------
# requests: redirects only to the Hub or its storage, the token only to the endpoint


def _origin(url: str) -> tuple[str, str, int]:
    u = urlsplit(url)
    return u.scheme, (u.hostname or "").lower(), u.port or {"http": 80, "https": 443}.get(u.scheme, 0)


def redirect_allowed(source: str, target: str) -> bool:
    """A request to ``source`` may go on to ``target``: the same origin, the endpoint's host or
    its subdomains, or the Hub's own storage domains; never from https down to http."""
    s_scheme, _, _ = _origin(source)
    t_scheme, t_host, _ = _origin(target)
    if t_scheme not in ("http", "https") or (s_scheme == "https" and t_scheme != "https"):
        return False
    if _origin(target) == _origin(source):
        return True
    _, home, _ = _origin(endpoint())
    if home and (t_host == home or t_host.endswith("." + home)):
        return True
    return t_scheme == "https" and any(t_host == d or t_host.endswith("." + d) for d in HUB_STORAGE_DOMAINS)


@contextmanager
def _hub_stream(url: str, what: str, *, params: dict | None = None, headers: dict | None = None, timeout: float = 30):
    """A streamed GET, following at most MAX_REDIRECTS redirects that ``redirect_allowed``."""
    from huggingface_hub.utils import build_hf_headers, get_session

    session = get_session()
    for _ in range(MAX_REDIRECTS + 1):
        to_endpoint = _origin(url) == _origin(endpoint())
        h = build_hf_headers(token=(token() or False) if to_endpoint else False)
        h.update(headers or {})
        request = session.build_request("GET", url, params=params, headers=h, timeout=timeout)
        r = session.send(request, stream=True, follow_redirects=False)
        if not r.has_redirect_location:
            try:
                yield r
            finally:
                r.close()
            return
        target = urljoin(str(r.url), r.headers["Location"])
        r.close()
        if not redirect_allowed(str(r.url), target):
            raise UnsafeRedirectError(
                f"{what}: the Hub redirected to {urlsplit(target).netloc or target!r}, which is "
                "neither the Hub nor its file storage; refusing it"
            )
        url, params = target, None
    raise HubError(f"{what}: more than {MAX_REDIRECTS} redirects")


# --------------------------------------------------------------------------------------------
# downloads


def safe_destination(models_dir: str | os.PathLike, repo_id: str, filename: str) -> Path:
    """models_dir/owner/name/filename, refusing any name that would escape that folder."""
    check_repo_id(repo_id)
    if not filename or "\\" in filename or "\x00" in filename or re.match(r"^[A-Za-z]:", filename):
        raise UnsafeFilenameError(f"refusing file name {filename!r}")
    parts = filename.split("/")  # raw parts: PurePosixPath would quietly normalise "a//b" and "a/./b"
    if filename.startswith("/") or any(p in ("..", ".", "") for p in parts):
        raise UnsafeFilenameError(f"refusing file name {filename!r}: it would leave the models folder")
    base = (Path(models_dir) / repo_id).resolve()
    dest = (base / Path(*parts)).resolve()
    if base not in dest.parents:
        raise UnsafeFilenameError(f"refusing file name {filename!r}: it would leave the models folder")
    return dest


def _sidecar(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.dflash.json")


def local_record(dest: Path) -> dict | None:
    """What a finished download recorded about ``dest`` (None: not downloaded by us, or changed)."""
    side = _sidecar(dest)
    if not (dest.is_file() and side.is_file()):
        return None
    try:
        rec = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict):  # hand-edited or damaged: as if it were not there
        return None
    return rec if rec.get("size") == dest.stat().st_size else None


def _file_meta(repo_id: str, filename: str, revision: str):
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint())
    meta = _hub_call(
        f"{repo_id}/{filename}", lambda: get_hf_file_metadata(url, token=token() or False, endpoint=endpoint())
    )
    return url, meta


def _expected_hash(etag: str | None) -> tuple[str | None, str | None]:
    """('sha256'|'git-sha1', hex) from the Hub's ETag (LFS files carry their sha256)."""
    if etag and re.fullmatch(r"[0-9a-f]{64}", etag):
        return "sha256", etag
    if etag and re.fullmatch(r"[0-9a-f]{40}", etag):
        return "git-sha1", etag
    return None, None


def download_file(
    repo_id: str,
    filename: str,
    models_dir: str | os.PathLike | None = None,
    *,
    revision: str = "main",
    progress: Callable[[DownloadProgress], None] | None = None,
    cancel: threading.Event | None = None,
    offline: bool | None = None,
    force: bool = False,
    stall_s: float = STALL_S,
) -> Path:
    """Downloads one repo file into the models folder; returns its path.

    Resumes a ``.part`` left by an interruption or a cancel, verifies the result against the
    Hub's hash, and only then gives it its name. Offline, an already downloaded file is returned
    as is and a missing one raises OfflineError. A transfer that passes the announced size is cut
    there; one that receives less than STALL_BYTES in ``stall_s`` seconds is given up (resumable).
    """
    if models_dir is None:
        from ..common.paths import models_dir as default_models

        models_dir = default_models()
    dest = safe_destination(models_dir, repo_id, filename)
    rec = local_record(dest)
    if is_offline(offline):
        if rec is None and not dest.is_file():
            raise OfflineError(f"offline and {repo_id}/{filename} is not in {models_dir}")
        return dest
    try:
        url, meta = _file_meta(repo_id, filename, revision)
    except HubError:
        if rec is not None:  # the Hub is unreachable but a verified copy is here: use it
            return dest
        raise
    algo, expected = _expected_hash(meta.etag)
    if rec is not None and not force and rec.get("etag") == meta.etag:
        return dest  # already here and verified against the same upstream version
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    part_info = dest.with_name(f".{dest.name}.part.json")
    if part.exists():
        try:
            info = json.loads(part_info.read_text())
            same = isinstance(info, dict) and info.get("etag") == meta.etag
        except (OSError, ValueError):
            same = False
        if meta.size is not None and part.stat().st_size > meta.size:
            same = False  # longer than the file (a server that overran): no resume can fix it
        if not same:  # the file changed upstream since the interruption: start over
            part.unlink()
    try:
        part_info.write_text(json.dumps({"etag": meta.etag, "commit": meta.commit_hash}))
    except OSError as exc:
        if exc.errno in _DISK_FULL:
            raise _disk_full(part, filename, 0, exc) from exc
        raise
    _transfer(url, part, filename, meta.size, progress, cancel, stall_s)

    size = part.stat().st_size
    if meta.size is not None and size != meta.size:
        raise DownloadInterrupted(f"{filename}: got {size} of {meta.size} bytes; run again to resume")
    digest = _hash_file(part, algo)
    if expected is not None and digest != expected:
        part.unlink()
        part_info.unlink(missing_ok=True)
        raise ChecksumMismatchError(
            f"{filename}: {algo} is {digest}, the Hub says {expected}; the download was discarded, run again"
        )
    record = json.dumps(
        {
            "repo": repo_id,
            "file": filename,
            "revision": revision,
            "commit": meta.commit_hash,
            "etag": meta.etag,
            "size": size,
            "verified": algo,
            "hash": digest,
            "at": time.time(),
        }
    )
    try:  # the sidecar first: a full disk here leaves the verified .part in place, not a bare file
        _sidecar(dest).write_text(record)
    except OSError as exc:
        _sidecar(dest).unlink(missing_ok=True)
        if exc.errno in _DISK_FULL:
            raise _disk_full(part, filename, size, exc) from exc
        raise
    os.replace(part, dest)
    part_info.unlink(missing_ok=True)
    return dest


def _transfer(
    url: str, part: Path, filename: str, total: int | None, progress, cancel, stall_s: float = STALL_S
) -> None:
    have = part.stat().st_size if part.exists() else 0
    if total is not None and have >= total:
        return
    if total is not None:
        _check_free_space(part, filename, total - have)
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    started, got = time.monotonic(), 0

    def cancelled() -> DownloadCancelled:
        return DownloadCancelled(f"{filename}: cancelled at {have + got} bytes; run again to resume")

    watch = None
    try:
        with _hub_stream(url, f"download {filename}", headers=headers) as r, _CancelWatch(r, cancel, stall_s) as watch:
            if r.status_code == 416 and have:  # nothing left to send
                return
            if r.status_code not in (200, 206):
                _raise_for_status(r, _read_bounded(r, 1 << 20), f"download {filename}")
                raise HubError(f"download {filename}: HTTP {r.status_code}")
            mode = "ab" if r.status_code == 206 and have else "wb"
            if mode == "wb":
                have = 0  # the server ignored the Range: start from the first byte
            with open(part, mode) as f:
                # Chunks as they arrive (no re-buffering): an interruption loses nothing already received.
                for chunk in r.iter_bytes():
                    if cancel is not None and cancel.is_set():
                        raise cancelled()
                    watch.received(len(chunk))
                    if total is not None and have + got + len(chunk) > total:
                        # past the announced size: keep the file's bytes, drop the rest, stop reading
                        chunk = chunk[: max(0, total - have - got)]
                        f.write(chunk)
                        got += len(chunk)
                        break
                    f.write(chunk)
                    got += len(chunk)
                    if progress is not None:
                        dt = max(time.monotonic() - started, 1e-6)
                        speed = got / dt
                        left = (total - have - got) if total is not None else None
                        progress(
                            DownloadProgress(
                                filename,
                                have + got,
                                total,
                                speed,
                                left / speed if left is not None and speed > 0 else None,
                            )
                        )
                    if cancel is not None and cancel.is_set():
                        raise cancelled()
    except HubError:
        raise
    except OSError as exc:
        if exc.errno in _DISK_FULL:
            raise _disk_full(part, filename, have + got, exc) from exc
        if cancel is not None and cancel.is_set():
            raise cancelled() from exc
        if watch is not None and watch.stalled:
            raise _stalled(filename, have + got, stall_s) from exc
        raise DownloadInterrupted(
            f"{filename}: transfer broke off at {have + got} bytes ({_describe(exc)}); run again to resume"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - a broken connection: keep the .part for a resume
        if cancel is not None and cancel.is_set():  # the watchdog shut the socket under a stalled read
            raise cancelled() from exc
        if watch is not None and watch.stalled:
            raise _stalled(filename, have + got, stall_s) from exc
        raise DownloadInterrupted(
            f"{filename}: transfer broke off at {have + got} bytes ({_describe(exc)}); run again to resume"
        ) from exc


def _stalled(filename: str, at: int, stall_s: float) -> DownloadInterrupted:
    return DownloadInterrupted(
        f"{filename}: the transfer stalled at {at} bytes (less than {STALL_BYTES} bytes in "
        f"{stall_s:g} s); the partial file is kept: run again to resume"
    )


class _CancelWatch:
    """While a transfer runs, a thread watches ``cancel`` and the flow of bytes, and shuts the socket
    down when the user cancels or the transfer stalls (fewer than STALL_BYTES in ``stall_s``): a
    read blocked on a server that sends nothing, or a byte now and then, returns at once."""

    def __init__(self, response, cancel: threading.Event | None, stall_s: float = STALL_S):
        self._cancel = cancel
        self._stall_s = stall_s
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._since_mark = 0
        self._mark = time.monotonic()
        self.stalled = False
        stream = response.extensions.get("network_stream")
        self._sock = stream.get_extra_info("socket") if stream is not None else None

    def __enter__(self):
        if self._sock is not None:
            threading.Thread(target=self._watch, name="download-cancel-watch", daemon=True).start()
        return self

    def received(self, n: int) -> None:
        self._since_mark += n
        if self._since_mark >= STALL_BYTES:
            self._since_mark = 0
            self._mark = time.monotonic()

    def _watch(self) -> None:
        while not self._done.is_set():
            cancelled = self._cancel.wait(CANCEL_POLL_S) if self._cancel is not None else self._done.wait(CANCEL_POLL_S)
            stalled = time.monotonic() - self._mark > self._stall_s
            if cancelled or stalled:
                with self._lock:
                    if not self._done.is_set():
                        self.stalled = stalled and not cancelled
                        try:  # socket.socket's own shutdown: an SSL socket's would drop its state
                            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)  # type: ignore[arg-type]
                        except OSError:
                            pass
                return

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._done.set()


def _check_free_space(part: Path, filename: str, need: int) -> None:
    try:
        free = shutil.disk_usage(part.parent).free
    except OSError:
        return
    if free < need:
        raise DiskFullError(
            f"{filename}: needs {need / 2**20:.1f} MiB more but only {free / 2**20:.1f} MiB are free "
            f"in {part.parent}; free some space and run again"
        )


def _disk_full(part: Path, filename: str, at: int, exc: OSError) -> DiskFullError:
    why = "the file-size limit was reached" if exc.errno == errno.EFBIG else "the disk is full"
    return DiskFullError(
        f"{filename}: {why} after {at} bytes in {part.parent} ({os.strerror(exc.errno or 0)}); "
        "the partial file is kept: free some space and run again to resume"
    )


def _hash_file(path: Path, algo: str | None) -> str | None:
    if algo is None:
        return None
    if algo == "sha256":
        h = hashlib.sha256()
    else:  # git blob id of a small, non-LFS file
        h = hashlib.sha1()
        h.update(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def download_folder(
    repo_id: str,
    models_dir: str | os.PathLike | None = None,
    *,
    revision: str = "main",
    progress=None,
    cancel: threading.Event | None = None,
    offline: bool | None = None,
) -> Path:
    """Downloads a drafter folder (config, tokenizer, safetensors) into models_dir/owner/name."""
    if models_dir is None:
        from ..common.paths import models_dir as default_models

        models_dir = default_models()
    folder = safe_destination(models_dir, repo_id, "config.json").parent
    if is_offline(offline):
        if not (folder / "config.json").is_file():
            raise OfflineError(f"offline and {repo_id} is not in {models_dir}")
        return folder
    wanted = [f for f in list_files(repo_id, revision) if any(p.search(f.path) for p in FOLDER_PATTERNS)]
    if not any(f.path.endswith("config.json") for f in wanted):
        raise HubError(f"{repo_id} has no config.json; it is not a model folder")
    for f in wanted:
        safe_destination(models_dir, repo_id, f.path)  # refuse the whole listing before fetching anything
    for f in wanted:
        download_file(repo_id, f.path, models_dir, revision=revision, progress=progress, cancel=cancel, offline=False)
    return folder


def progress_printer(stream=None, every: float = 0.5) -> Callable[[DownloadProgress], None]:
    """A progress callback printing one line at most every ``every`` seconds (the CLI's)."""
    import sys

    out = stream or sys.stderr
    last = [0.0]

    def show(p: DownloadProgress) -> None:
        now = time.monotonic()
        if now - last[0] >= every or (p.total is not None and p.done >= p.total):
            last[0] = now
            print("\r" + p.line() + " " * 8, end="", file=out, flush=True)

    return show


def to_dict(obj) -> dict:
    return asdict(obj)
