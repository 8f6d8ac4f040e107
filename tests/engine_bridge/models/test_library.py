"""The model library on real files and a real SQLite database (engine_bridge.models.library)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

import modelfiles as mf
from engine_bridge.models import hub, synth
from engine_bridge.models.convert_quant import quantize_drafter
from engine_bridge.common.errors import UnreadableModelError
from engine_bridge.models.library import Library, load_catalog
from engine_bridge.models.modelinfo import inspect_model


@pytest.fixture
def lib(tmp_path, monkeypatch):
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))
    return Library()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("libmodels")
    with mf.fast_vocab():
        tspec = synth.TargetSpec()
        target, drafter = synth.write_pair(d, tspec, synth.DrafterSpec())
        other = synth.write_drafter(d / "other-dflash.gguf", tspec, synth.DrafterSpec(n_layer=2, n_ff=96, seed=9))
        mf.write_hf_drafter(d / "hf-drafter", tspec, synth.DrafterSpec())
    return dict(dir=d, target=target, drafter=drafter, other=other, tspec=tspec)


def _copy_models(models, dest):
    import shutil

    shutil.copytree(models["dir"], dest)
    return {k: dest / v.relative_to(models["dir"]) for k, v in models.items() if k in ("target", "drafter", "other")}


def test_data_dir_from_environment(lib, tmp_path):
    assert lib.db_path == tmp_path / "data" / "library.sqlite" and lib.db_path.is_file()
    with sqlite3.connect(lib.db_path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"files", "pairs", "variants", "meta"} <= tables


def test_scan_records_good_and_broken_files(lib, models, tmp_path):
    files = _copy_models(models, lib.models_dir / "mine")
    mf.truncate_copy(files["target"], lib.models_dir / "mine" / "cut.gguf", 100)
    (lib.models_dir / "junk.gguf").write_text("this is not a model, just some text\n" * 4)
    (lib.models_dir / "x.gguf.part").write_bytes(b"partial")  # a download in progress: ignored
    found = {os.path.basename(f.path): f for f in lib.scan()}
    assert found["tiny-target.gguf"].role == "target" and found["tiny-dflash.gguf"].role == "dflash"
    assert found["hf-drafter"].role == "dflash" and found["hf-drafter"].info.format == "hf"
    assert found["cut.gguf"].info is not None and not found["cut.gguf"].info.data_complete
    assert found["junk.gguf"].info is None and "not a GGUF" in found["junk.gguf"].error
    assert "x.gguf.part" not in found
    assert {os.path.basename(f.path) for f in lib.files(role="drafter")} == {
        "tiny-dflash.gguf",
        "other-dflash.gguf",
        "hf-drafter",
    }


def test_cached_inspection_equals_a_fresh_one_and_is_invalidated(lib, models, tmp_path):
    files = _copy_models(models, tmp_path / "m")
    first = lib.inspect(files["drafter"])
    assert first == inspect_model(files["drafter"])
    with sqlite3.connect(lib.db_path) as db:
        stamp = db.execute("SELECT inspected_at FROM files").fetchone()[0]
    assert lib.inspect(files["drafter"]) == first
    with sqlite3.connect(lib.db_path) as db:
        assert db.execute("SELECT inspected_at FROM files").fetchone()[0] == stamp  # served from the cache
    # Replace the file in place (new content, same name): the cache must notice.
    mf.rewrite_gguf(files["drafter"], tmp_path / "edited.gguf", set_kv={"dflash.block_size": 8})
    os.replace(tmp_path / "edited.gguf", files["drafter"])
    assert lib.inspect(files["drafter"]).block_size == 8


def test_unreadable_files_are_cached_as_errors(lib, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"nope" * 10)
    for _ in range(2):
        with pytest.raises(UnreadableModelError):
            lib.inspect(bad)
    with pytest.raises(UnreadableModelError):
        lib.inspect(tmp_path / "missing.gguf")


def test_pairs_keep_their_last_check(lib, models, tmp_path):
    files = _copy_models(models, tmp_path / "m")
    report = lib.check_pair(files["target"], files["drafter"], build={"backend": "cpu"})
    assert report.ok
    bad = mf.rewrite_gguf(files["drafter"], tmp_path / "nomask.gguf", drop_kv=["tokenizer.ggml.mask_token_id"])
    assert not lib.check_pair(files["target"], bad, build={"backend": "cpu"}).ok
    recs = {os.path.basename(p.drafter): p for p in lib.pairs()}
    assert recs["tiny-dflash.gguf"].ok and recs["tiny-dflash.gguf"].failures == 0
    assert not recs["nomask.gguf"].ok and any(
        c["name"] == "mask_token" and c["status"] == "FAIL" for c in recs["nomask.gguf"].report["checks"]
    )
    missing = lib.check_pair(files["target"], tmp_path / "gone.gguf", build={"backend": "cpu"})
    assert missing.unreadable


def test_variants_grouped_under_their_drafter(lib, models, tmp_path):
    files = _copy_models(models, lib.models_dir / "m")
    made = lib.make_variant(files["drafter"], "q8_0")
    assert made.name == "tiny-dflash-q8_0.gguf" and made.is_file()
    quantize_drafter(
        files["drafter"], lib.models_dir / "m" / "found-q4_0.gguf", "q4_0"
    )  # not recorded: found by identity
    mf.write_lora(
        lib.models_dir / "m" / "fits.lora.gguf",
        files["drafter"],
        tensors=("blk.0.attn_q.weight", "blk.0.ffn_gate.weight"),
    )
    mf.write_lora(lib.models_dir / "m" / "foreign.lora.gguf", files["drafter"], arch="qwen3")
    lib.scan()
    groups = {os.path.basename(g.drafter.path): g for g in lib.groups()}
    assert set(groups) == {"tiny-dflash.gguf", "other-dflash.gguf", "hf-drafter"}
    variants = {(os.path.basename(p), kind) for p, kind in groups["tiny-dflash.gguf"].variants}
    assert variants == {("tiny-dflash-q8_0.gguf", "quant"), ("found-q4_0.gguf", "quant"), ("fits.lora.gguf", "lora")}
    assert groups["other-dflash.gguf"].variants == []


def test_forget_keeps_the_file(lib, models, tmp_path):
    files = _copy_models(models, tmp_path / "m")
    lib.inspect(files["target"])
    lib.forget(files["target"])
    assert lib.files() == [] and files["target"].is_file()


def test_variants_go_under_the_data_folder_and_forget_deletes_only_what_the_app_made(lib, models, tmp_path):
    """Issue 33, item 4: nothing is written beside the source (a read-only install, the checkout)."""
    install = tmp_path / "install" / "resources" / "models"
    files = _copy_models(models, install)
    same_name = tmp_path / "elsewhere" / files["drafter"].name  # another drafter of the same name
    same_name.parent.mkdir()
    same_name.write_bytes(files["other"].read_bytes())
    before = sorted(p.name for p in install.iterdir())
    made = lib.make_variant(files["drafter"], "q4_0")
    assert made.is_file() and made.is_relative_to(lib.data_dir / "variants")
    assert made.name == "tiny-dflash-q4_0.gguf" and made.parent.name.startswith("models-")
    assert sorted(p.name for p in install.iterdir()) == before
    other = lib.make_variant(same_name, "q4_0")
    assert other.name == made.name and other != made and made.is_file()
    assert lib.made_by_app(made) == "q4_0 variant" and lib.made_by_app(files["drafter"]) is None
    # forget: a file the app did not make stays, whatever is asked; one it made goes when asked
    assert lib.forget(files["drafter"], delete_file=True) is False and files["drafter"].is_file()
    assert lib.forget(other) is False and other.is_file()
    assert lib.forget(made, delete_file=True) is True and not made.exists()
    assert lib.made_by_app(made) is None and str(made) not in {f.path for f in lib.files()}


def test_catalog():
    entries = {e.id: e for e in load_catalog()}
    repos = {e.drafter_repo for e in entries.values()}
    assert {
        "z-lab/Qwen3-4B-DFlash-b16",
        "z-lab/Qwen3-8B-DFlash-b16",
        "z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat",
        "z-lab/Qwen3.5-9B-DFlash",
        "z-lab/Qwen3.6-27B-DFlash",
    } <= repos
    assert any(e.kind == "dspark" for e in entries.values())
    for e in entries.values():
        hub.check_repo_id(e.drafter_repo)
        hub.check_repo_id(e.target_repo)
        assert e.target_gguf_repo or e.target_gguf_search
        assert e.recommended_quants and e.title and e.source
    assert Library.catalog() == list(entries.values())
    json.loads(json.dumps([e.__dict__ for e in entries.values()]))


# --- issue 32: the cache never stops the pairing ---------------------------------------------------


def _aside(data):
    return sorted(p for p in data.iterdir() if p.name.startswith("library.sqlite.unreadable-"))


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_unreadable_cache_is_rebuilt(tmp_path, models, damage):
    data = tmp_path / "data"
    Library(data).scan(models["dir"])
    db = data / "library.sqlite"
    raw = db.read_bytes()
    bad = b"not a database\n" * 400 if damage == "garbage" else raw[: len(raw) // 3]
    db.write_bytes(bad)
    lib = Library(data)
    assert lib.inspect(models["drafter"]).role == "dflash"
    assert lib.check_pair(models["target"], models["drafter"]).ok
    assert [p.read_bytes() for p in _aside(data)] == [bad]  # moved aside, not deleted
    assert lib.notices and "rebuilt" in lib.notices[0]


def test_cache_from_before_value_checks_is_dropped(tmp_path, models):
    """A version-1 cache holds inspections made before header values were checked: reusing one
    would let a NaN-epsilon drafter pass. Opening it migrates and re-inspects."""
    data = tmp_path / "data"
    with mf.fast_vocab():
        bad = synth.write_drafter(tmp_path / "nan-eps.gguf", models["tspec"], synth.DrafterSpec(rms_eps=float("nan")))
    lib = Library(data)
    lib.inspect(bad)
    db = sqlite3.connect(data / "library.sqlite")
    record = json.loads(db.execute("SELECT info FROM files").fetchone()[0])
    record.pop("value_problems")  # as version 1 wrote it
    db.execute("UPDATE files SET info=?", (json.dumps(record),))
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    assert Library(data).inspect(bad).value_problems
    assert not Library(data).check_pair(models["target"], bad).ok


def test_newer_cache_is_left_alone(tmp_path, models):
    data = tmp_path / "data"
    Library(data).scan(models["dir"])
    db = sqlite3.connect(data / "library.sqlite")
    db.execute("PRAGMA user_version=99")
    db.commit()
    db.close()
    before = (data / "library.sqlite").read_bytes()
    lib = Library(data)
    assert lib.inspect(models["target"]).role == "target"
    assert any("newer" in n for n in lib.notices)
    assert (data / "library.sqlite").read_bytes() == before


def test_a_symlink_loop_does_not_stop_the_scan(tmp_path, models):
    """issue 32: one symlink loop aborted a whole `library scan`."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "good.gguf").write_bytes(models["target"].read_bytes())
    (folder / "a.gguf").symlink_to(folder / "b.gguf")
    (folder / "b.gguf").symlink_to(folder / "a.gguf")
    (folder / "self.gguf").symlink_to(folder / "self.gguf")
    found = {Path(f.path).name: f for f in Library(tmp_path / "data").scan(folder)}
    assert found["good.gguf"].role == "target"
    broken = [f for name, f in found.items() if name != "good.gguf"]
    assert len(broken) == 3 and all(f.info is None and f.error for f in broken)


def test_files_added_while_a_fresh_cache_is_opened_elsewhere_are_kept(tmp_path, models):
    """The app opens the library on several worker threads at once (a read for the tree, an add per
    dropped file). On a fresh cache each opener saw version 0 and migrated, and a late migration's
    clean-up deleted a file another thread had just added (CI: one drafter shown of two)."""
    import shutil
    import threading

    copies = []
    for i in range(12):
        p = tmp_path / f"m{i}" / "drafter.gguf"
        p.parent.mkdir()
        copies.append(Path(shutil.copy(models["drafter"], p)))
    for attempt in range(5):
        data = tmp_path / f"data{attempt}"
        start = threading.Barrier(len(copies) * 2)
        errors = []

        def add(path):
            try:
                start.wait()
                Library(data).add(path)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        def read():
            try:
                start.wait()
                Library(data).files()
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=add, args=(p,)) for p in copies] + [
            threading.Thread(target=read) for _ in copies
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert sorted(f.path for f in Library(data).files()) == sorted(str(p.resolve()) for p in copies)
