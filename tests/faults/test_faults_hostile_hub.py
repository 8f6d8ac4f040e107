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
    from engine_bridge import hub

    from fault_hub import PAYLOAD, REPO

    for name, case in _cases(hostile, tmp_path).items():
        out = case()
        assert out.lost == 0, name
    path = hub.download_file(REPO, "model-Q8_0.gguf", tmp_path / "data" / "models")
    assert path.read_bytes() == PAYLOAD
