"""A model file that changes or disappears between the pairing check and the load; a disk that
fills up during a download. The user reads what happened; nothing is lost."""

from __future__ import annotations

import pytest

from engine_bridge.models import hub

from fault_files import ACTIONS, case_changed_before_load, case_file_size_limit, case_full_tmpfs, mount_tmpfs, unmount
from hubserver import start_isolated

PAYLOAD = bytes(range(256)) * 12_000  # 3 MB


@pytest.mark.parametrize("action", list(ACTIONS))
def test_model_file_changes_between_check_and_load(tiny_pair, tmp_path, action):
    out = case_changed_before_load(tiny_pair[0], tiny_pair[1], tmp_path, action)
    assert out.lost == 0


@pytest.fixture
def small_hub(monkeypatch, tmp_path):
    server = start_isolated(monkeypatch, tmp_path)
    server.add("acme/models", "big-Q8_0.gguf", PAYLOAD)
    server.add("acme/models", "README.md", b"# small\n", lfs=False)
    yield server
    server.stop()


def test_file_size_limit_during_download(small_hub, tmp_path):
    models = tmp_path / "models"
    keep = hub.download_file("acme/models", "README.md", models)
    out = case_file_size_limit(small_hub.url, models, "acme/models", "big-Q8_0.gguf", len(PAYLOAD), keep)
    assert out.lost == 0


def test_full_disk_during_download(small_hub, tmp_path):
    small = tmp_path / "small"
    if not mount_tmpfs(small):
        pytest.skip("mounting a tmpfs needs root and a system that allows mounts (CI has both)")
    try:
        out = case_full_tmpfs(small, "acme/models", "big-Q8_0.gguf", len(PAYLOAD), "README.md")
    finally:
        unmount(small)
    assert out.lost == 0
