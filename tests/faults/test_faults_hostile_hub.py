"""A hostile Hub on 127.0.0.1: truncated and corrupted transfers, a stalled stream cancelled,
hostile file names, a redirect to another host, huge listings. Each is refused (or recovered)
with a message that says what happened, and nothing unverified reaches the library."""

from __future__ import annotations

import pytest

from fault_hub import all_cases, start_hostile, stop_hostile
from fault_outcomes import RECOVERED, REFUSED


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """One hostile Hub for the module (each case leaves its fault switches as it found them)."""
    with pytest.MonkeyPatch.context() as mp:
        servers = start_hostile(mp, tmp_path_factory.mktemp("hub"))
        yield servers
        stop_hostile(*servers)


def _cases(servers, tmp_path):
    hostile, other = servers
    return dict(all_cases(hostile, other, tmp_path / "data" / "models", tmp_path / "data"))


CASE_NAMES = list(dict(all_cases(None, None, None, None)))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_hostile_hub_case(hostile, tmp_path, name):
    out = _cases(hostile, tmp_path)[name]()
    assert out.kind in (REFUSED, RECOVERED) and out.lost == 0
    assert out.message


def test_every_case_in_one_session(hostile, tmp_path):
    """All cases one after another on one Hub and one models folder: no case leaves state behind
    that breaks the next, and an honest download still works at the end."""
    from engine_bridge.models import hub

    from fault_hub import PAYLOAD, REPO

    for name, case in _cases(hostile, tmp_path).items():
        out = case()
        assert out.lost == 0, name
    path = hub.download_file(REPO, "model-Q8_0.gguf", tmp_path / "data" / "models")
    assert path.read_bytes() == PAYLOAD


@pytest.mark.parametrize(
    "source,target,allowed",
    [
        # the real Hub sends file contents to its CDN and Xet storage: followed (over https)
        ("https://huggingface.co/a/b/resolve/main/x.gguf", "https://cdn-lfs-us-1.hf.co/repos/x?sig=1", True),
        ("https://huggingface.co/a/b/resolve/main/x.gguf", "https://cas-bridge.xethub.hf.co/x", True),
        ("https://huggingface.co/a/b/resolve/main/x.gguf", "https://huggingface.co/c/d/resolve/main/x.gguf", True),
        # another host, a look-alike, a downgrade to http, another scheme: refused
        ("https://huggingface.co/a/b/resolve/main/x.gguf", "https://evil.example/x.gguf", False),
        ("https://huggingface.co/a/b/resolve/main/x.gguf", "https://huggingface.co.evil.example/x", False),
        ("https://huggingface.co/a/b/resolve/main/x.gguf", "https://nothf.co/x", False),
        ("https://huggingface.co/a/b/resolve/main/x.gguf", "http://cdn-lfs.hf.co/x", False),
        ("https://huggingface.co/a/b/resolve/main/x.gguf", "file:///etc/passwd", False),
    ],
)
def test_redirect_policy(monkeypatch, source, target, allowed):
    from engine_bridge.models import hub

    monkeypatch.setenv("HF_ENDPOINT", "https://huggingface.co")
    assert hub.redirect_allowed(source, target) is allowed
