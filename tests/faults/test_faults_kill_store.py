"""kill -9 while the conversation store and the model library are written, at random moments:
the database opens, passes integrity_check, is in WAL mode, and holds every acknowledged write;
two processes on one store at once both finish with nothing lost."""

from __future__ import annotations

import pytest

from fault_store import kill_conversations_case, kill_library_case, library_models, two_writers_case


def _kills(case, n, *args):
    acked = 0
    for seed in range(n):
        out = case(*args, seed)
        assert out.lost == 0, f"{out.case}: {out.lost} acknowledged writes lost ({out.message})"
        acked += out.figures["acks"]
    return acked


def test_kill_conversation_writer(tmp_path):
    acked = _kills(kill_conversations_case, 6, tmp_path / "conversations.sqlite3")
    assert acked > 0, "no write was acknowledged before the kills: nothing was tested"


def test_kill_library_writer(tmp_path):
    models = library_models(tmp_path / "models")
    acked = _kills(kill_library_case, 4, tmp_path / "data", models)
    assert acked > 0


def test_two_processes_on_one_conversation_store(tmp_path):
    out = two_writers_case("conversations", tmp_path / "conversations.sqlite3", None, ops=150)
    assert out.lost == 0 and out.figures["acks"] == 2 * 150 * (3 + 6)


def test_two_processes_on_one_library(tmp_path):
    models = library_models(tmp_path / "models")
    out = two_writers_case("library", tmp_path / "data", models, ops=15)
    assert out.lost == 0 and out.figures["acks"] == 2 * 15 * 2


@pytest.mark.faults_long
def test_kill_stores_long(tmp_path):
    _kills(kill_conversations_case, 50, tmp_path / "conversations.sqlite3")
    _kills(kill_library_case, 50, tmp_path / "data", library_models(tmp_path / "models"))
