"""Hub search, listing and downloads against a real local HTTP server (HF_ENDPOINT -> 127.0.0.1)."""

from __future__ import annotations

import hashlib
import json
import threading

import pytest

from engine_bridge.models import hub
from engine_bridge.common.resources import vocab_path
from hubserver import COMMIT, start_isolated

TOKEN = "hf_test_token_never_written_1234"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    server = start_isolated(monkeypatch, tmp_path)
    gguf = vocab_path("phi3").read_bytes()
    server.add("z-lab/Qwen3-8B-DFlash-b16", "config.json", b'{"architectures": ["DFlashDraftModel"]}', lfs=False)
    server.add("z-lab/Qwen3-8B-DFlash-b16", "model.safetensors", b"\x08" + b"\x00" * 7 + b"{}      ")
    server.add("z-lab/Qwen3-8B-DFlash-b16", "notes/ignored.bin", b"x" * 10)
    server.add("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", gguf)
    server.add("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q8_0.gguf", gguf[::-1])
    server.add("Qwen/Qwen3-8B-GGUF", "README.md", b"# readme\n", lfs=False)
    server.add("Qwen/Qwen3-8B-GGUF", "big.gguf", bytes(range(256)) * 12000)  # 3 MB
    yield server
    server.stop()


def test_search(fake):
    hits = hub.search("qwen3-8b")
    assert {h.repo_id for h in hits} == {"z-lab/Qwen3-8B-DFlash-b16", "Qwen/Qwen3-8B-GGUF"}
    assert [h.repo_id for h in hub.search("qwen3", gguf_only=True)] == ["Qwen/Qwen3-8B-GGUF"]
    assert fake.requests[0]["path"] == "/api/models" and fake.requests[0]["query"]["search"] == ["qwen3-8b"]


def test_list_files_with_sizes_hashes_and_quants(fake):
    files = {f.path: f for f in hub.list_files("Qwen/Qwen3-8B-GGUF")}
    q4 = files["Qwen3-8B-Q4_K_M.gguf"]
    assert q4.size == vocab_path("phi3").stat().st_size and q4.quant == "Q4_K_M"
    assert q4.sha256 == hashlib.sha256(vocab_path("phi3").read_bytes()).hexdigest()
    assert files["Qwen3-8B-Q8_0.gguf"].quant == "Q8_0" and files["README.md"].sha256 is None
    assert [f.path for f in hub.list_files("Qwen/Qwen3-8B-GGUF", gguf_only=True)] == [
        "Qwen3-8B-Q4_K_M.gguf",
        "Qwen3-8B-Q8_0.gguf",
        "big.gguf",
    ]


@pytest.mark.parametrize(
    "name,quant",
    [
        ("Llama-3.1-8B-Instruct-IQ4_XS.gguf", "IQ4_XS"),
        ("x-bf16.gguf", "BF16"),
        ("model-f16.gguf", "F16"),
        ("Qwen3-4B.gguf", None),
        ("a.Q5_K_S.gguf", "Q5_K_S"),
    ],
)
def test_quant_names(name, quant):
    assert hub.quant_name(name) == quant


def test_download_verifies_and_reports_progress(fake, tmp_path):
    seen = []
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path, progress=seen.append)
    assert path == tmp_path / "Qwen" / "Qwen3-8B-GGUF" / "Qwen3-8B-Q4_K_M.gguf"
    assert path.read_bytes() == vocab_path("phi3").read_bytes()
    assert seen and seen[-1].done == seen[-1].total == path.stat().st_size and seen[-1].speed > 0
    assert "MiB" in seen[-1].line()
    rec = hub.local_record(path)
    assert rec["verified"] == "sha256" and rec["hash"] == hashlib.sha256(path.read_bytes()).hexdigest()
    # A second call finds it verified and transfers nothing.
    n_get = sum(r["method"] == "GET" for r in fake.requests)
    hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path)
    assert sum(r["method"] == "GET" for r in fake.requests) == n_get


def test_small_non_lfs_file_is_checked_by_git_hash(fake, tmp_path):
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "README.md", tmp_path)
    assert path.read_text() == "# readme\n" and hub.local_record(path)["verified"] == "git-sha1"


def test_interrupted_transfer_resumes(fake, tmp_path):
    fake.break_after["big.gguf"] = 100_000
    with pytest.raises(hub.DownloadInterrupted, match="run again to resume"):
        hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path)
    part = tmp_path / "Qwen" / "Qwen3-8B-GGUF" / "big.gguf.part"
    assert 0 < part.stat().st_size <= 100_000
    assert not (tmp_path / "Qwen" / "Qwen3-8B-GGUF" / "big.gguf").exists()
    have = part.stat().st_size
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path)
    assert path.read_bytes() == fake.repos["Qwen/Qwen3-8B-GGUF"]["big.gguf"].data and not part.exists()
    assert any(r["range"] == f"bytes={have}-" for r in fake.requests)


def test_cancel_keeps_the_partial_file(fake, tmp_path):
    fake.slow.add("big.gguf")
    cancel = threading.Event()

    def stop_early(p):
        if p.done >= 200_000:
            cancel.set()

    with pytest.raises(hub.DownloadCancelled):
        hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path, progress=stop_early, cancel=cancel)
    part = tmp_path / "Qwen" / "Qwen3-8B-GGUF" / "big.gguf.part"
    size = fake.repos["Qwen/Qwen3-8B-GGUF"]["big.gguf"].data.__len__()
    assert 200_000 <= part.stat().st_size < size
    fake.slow.clear()
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake.repos["Qwen/Qwen3-8B-GGUF"]["big.gguf"].sha256


def test_corrupted_file_is_refused_and_removed(fake, tmp_path):
    fake.corrupt.add("Qwen3-8B-Q8_0.gguf")
    with pytest.raises(hub.ChecksumMismatchError, match="sha256"):
        hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q8_0.gguf", tmp_path)
    folder = tmp_path / "Qwen" / "Qwen3-8B-GGUF"
    assert not any(p.name.startswith("Qwen3-8B-Q8_0.gguf") for p in folder.iterdir())
    fake.corrupt.clear()
    assert hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q8_0.gguf", tmp_path).is_file()


@pytest.mark.parametrize(
    "bad", ["../escape.gguf", "/etc/passwd", "a/../../b.gguf", "C:\\evil.gguf", "..", "a//b", "sub/./x"]
)
def test_unsafe_file_names_are_refused(fake, tmp_path, bad):
    n = len(fake.requests)
    with pytest.raises(hub.UnsafeFilenameError):
        hub.download_file("Qwen/Qwen3-8B-GGUF", bad, tmp_path)
    assert len(fake.requests) == n  # refused before any request


@pytest.mark.parametrize("bad", ["../x", "a/b/c", "noslash", "a/..", "/abs"])
def test_bad_repo_ids(bad, tmp_path):
    with pytest.raises(hub.HubError):
        hub.safe_destination(tmp_path, bad, "x.gguf")


def test_folder_download_and_escaping_listing(fake, tmp_path):
    folder = hub.download_folder("z-lab/Qwen3-8B-DFlash-b16", tmp_path)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "config.json",
        "model.safetensors",
    ]
    fake.add("evil/repo", "config.json", b"{}", lfs=False)
    fake.add("evil/repo", "../../outside.safetensors", b"x")
    with pytest.raises(hub.UnsafeFilenameError):
        hub.download_folder("evil/repo", tmp_path)
    assert not (tmp_path / "outside.safetensors").exists() and not (tmp_path / "evil" / "repo" / "config.json").exists()


def test_offline_uses_what_is_there(fake, tmp_path, monkeypatch):
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path)
    hub.download_folder("z-lab/Qwen3-8B-DFlash-b16", tmp_path)
    fake.stop()
    # Hub unreachable without offline mode: a verified local copy is still used.
    assert hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path) == path
    with pytest.raises(hub.HubError):
        hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path) == path
    assert hub.download_folder("z-lab/Qwen3-8B-DFlash-b16", tmp_path).is_dir()
    with pytest.raises(hub.OfflineError):
        hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path)
    fake.start()  # restarted on a new port only so the fixture can stop it


def test_errors_are_readable(fake, tmp_path):
    with pytest.raises(hub.HubError, match="nobody/nothing"):
        hub.download_file("nobody/nothing", "x.gguf", tmp_path)
    with pytest.raises(hub.HubError):
        hub.download_file("Qwen/Qwen3-8B-GGUF", "missing.gguf", tmp_path)
    with pytest.raises(hub.HubError):
        hub.list_files("nobody/nothing")


def test_token_is_sent_but_never_written(fake, tmp_path, monkeypatch):
    fake.add("me/private", "model-Q8_0.gguf", b"GGUF" + b"\x01" * 5000)
    fake.private["me/private"] = TOKEN
    with pytest.raises(hub.HubError) as err:
        hub.download_file("me/private", "model-Q8_0.gguf", tmp_path)
    assert TOKEN not in str(err.value)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    path = hub.download_file("me/private", "model-Q8_0.gguf", tmp_path)
    assert path.is_file()
    assert any(r["auth"] == f"Bearer {TOKEN}" for r in fake.requests)
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert TOKEN.encode() not in p.read_bytes(), p


# --- issue 32: a server or a leftover file that does not play by the rules ---------------------------


def test_a_transfer_past_the_announced_size_is_cut_and_the_excess_discarded(fake, tmp_path):
    fake.endless["Qwen3-8B-Q4_K_M.gguf"] = 64 << 20  # 64 MiB of junk after the file
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path)
    assert path.read_bytes() == vocab_path("phi3").read_bytes()  # the file, verified; no junk kept
    assert not path.with_name(path.name + ".part").exists()


def test_a_part_larger_than_the_file_is_discarded_before_resuming(fake, tmp_path):
    dest = hub.safe_destination(tmp_path, "Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf")
    dest.parent.mkdir(parents=True)
    real = vocab_path("phi3").read_bytes()
    part = dest.with_name(dest.name + ".part")
    part.write_bytes(real + b"\xee" * 5000)  # left by a server that overran
    meta = hub._file_meta("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", "main")[1]
    dest.with_name(f".{dest.name}.part.json").write_text(json.dumps({"etag": meta.etag, "commit": COMMIT}))
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path)
    assert path.read_bytes() == real
    assert any(r["method"] == "GET" and "Q4_K_M" in r["path"] and r["range"] is None for r in fake.requests)


def test_a_stalled_server_gives_a_resumable_error(fake, tmp_path):
    fake.trickle["big.gguf"] = 0.5  # half the file, then a byte every 0.5 s
    with pytest.raises(hub.DownloadInterrupted, match="stalled") as info:
        hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path, stall_s=2.0)
    assert "run again to resume" in str(info.value)
    part = hub.safe_destination(tmp_path, "Qwen/Qwen3-8B-GGUF", "big.gguf")
    assert part.with_name(part.name + ".part").stat().st_size >= 256 * 12000 // 2  # what came is kept
    del fake.trickle["big.gguf"]  # the server recovers: the resume completes
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path)
    assert path.read_bytes() == bytes(range(256)) * 12000


@pytest.mark.parametrize("sidecar", ["[1, 2, 3]", '"text"', "42", "null"])
def test_a_sidecar_that_is_not_an_object_is_treated_as_absent(fake, tmp_path, sidecar):
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path)
    path.with_name(f".{path.name}.dflash.json").write_text(sidecar)
    assert hub.local_record(path) is None
    again = hub.download_file("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", tmp_path)
    assert again.read_bytes() == vocab_path("phi3").read_bytes()
    assert hub.local_record(again)["size"] == again.stat().st_size


def test_a_part_sidecar_that_is_not_an_object_restarts_the_transfer(fake, tmp_path):
    dest = hub.safe_destination(tmp_path, "Qwen/Qwen3-8B-GGUF", "big.gguf")
    dest.parent.mkdir(parents=True)
    dest.with_name(dest.name + ".part").write_bytes(b"\x00" * 1000)
    dest.with_name(f".{dest.name}.part.json").write_text("[]")
    path = hub.download_file("Qwen/Qwen3-8B-GGUF", "big.gguf", tmp_path)
    assert path.read_bytes() == bytes(range(256)) * 12000
