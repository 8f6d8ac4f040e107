"""Our llama.cpp patches (packaging/patches): the installed engine carries exactly them, each one
applies to the pristine vendored tree of the pinned llama-cpp-python sdist, and the build stops,
naming the patch, when one no longer applies.

The pristine tree comes from the sdist: DFLASH_LCP_SDIST (a .tar.gz or an unpacked source folder)
or `pip download` (pip's cache holds it after a build). Without either the tree tests skip, saying
why. The CPU engine being unchanged is the rest of the engine suite, run on the patched build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "packaging"))
import apply_patches  # noqa: E402  (packaging/ is not a package: the build runs it as a script)

VER = "0.3.36"
VENDOR = "vendor/llama.cpp/"


def _touched(patches: list[Path]) -> set[str]:
    return {rel for p in patches for rel, _ in apply_patches._parse(p.read_text(encoding="utf-8"), p.name)}


PENDING = ROOT / "docs" / "design" / "pending-patches"


@pytest.fixture(scope="session")
def pristine_tree(tmp_path_factory) -> Path:
    """A folder laid out like the sdist (vendor/llama.cpp/...) holding the files the patches touch,
    the pending ones' (docs/design/pending-patches/) included."""
    patches = apply_patches.patch_files()
    if not patches:
        pytest.skip("no patches in packaging/patches")
    touched = _touched(patches) | _touched(apply_patches.patch_files(PENDING))
    out = tmp_path_factory.mktemp("lcp")
    src = os.environ.get("DFLASH_LCP_SDIST", "")
    if src and Path(src).is_dir():
        for rel in touched:
            dst = out / VENDOR / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(src) / VENDOR / rel, dst)
        return out
    if not src:
        dl = tmp_path_factory.mktemp("sdist")
        try:
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    "-d",
                    str(dl),
                    f"llama-cpp-python=={VER}",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
        except subprocess.TimeoutExpired:
            pytest.skip("pip download of the llama-cpp-python sdist timed out (offline?); set DFLASH_LCP_SDIST")
        found = sorted(dl.glob(f"llama_cpp_python-{VER}.tar.gz"))
        if r.returncode != 0 or not found:
            pytest.skip(
                f"the llama-cpp-python {VER} sdist is not available offline (pip: "
                f"{r.stderr.strip()[-200:]}); set DFLASH_LCP_SDIST to it"
            )
        src = str(found[0])
    with tarfile.open(src) as tf:
        for m in tf.getmembers():
            parts = m.name.split("/", 1)  # llama_cpp_python-0.3.36/vendor/llama.cpp/...
            if len(parts) == 2 and parts[1].startswith(VENDOR) and parts[1][len(VENDOR) :] in touched and m.isfile():
                dst = out / parts[1]
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(tf.extractfile(m).read())
    missing = [rel for rel in touched if not (out / VENDOR / rel).is_file()]
    assert not missing, f"the sdist lacks files our patches change: {missing}"
    return out


def test_patch_files_have_a_header_and_a_diff():
    for p in apply_patches.patch_files():
        text = p.read_text(encoding="utf-8")
        head = text.split("\ndiff --git ", 1)[0]
        assert p.name[:4].isdigit() and p.name[4] == "-", f"{p.name}: name NNNN-what.patch"
        for part in ("What it changes", "Why", "Measured", "Upstream reference"):
            assert part in head, f"{p.name}: header lacks '{part}'"
        assert "\ndiff --git a/" in text, f"{p.name}: no git diff after the header"


def test_installed_engine_lists_exactly_our_patches():
    from engine_bridge.runtime import llama_ffi

    info = llama_ffi.build_info()
    assert "patches" in info, "the installed engine was built without the patch step (rebuild it: make engine)"
    assert info["patches"] == apply_patches.describe(), (
        "the installed engine was built with other patches than packaging/patches holds now (rebuild it: make engine)"
    )


def test_doctor_lists_the_patches_and_what_the_cpu_code_was_built_for():
    from engine_bridge.runtime.cpu_build import cpu_build_advice, cpu_flags

    r = subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli", "doctor", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert [p["name"] for p in rep["patches"]] == [p.name for p in apply_patches.patch_files()]
    text = subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli", "doctor"], cwd=ROOT, capture_output=True, text=True, timeout=120
    ).stdout
    for p in apply_patches.patch_files():
        assert f"llama.cpp patch   {p.name}" in text
    # packaging/build_engine.sh's CPU flags, read back (engine_bridge/runtime/cpu_build.py)
    assert (rep["cpu_build"], rep["cpu_advice"]) == cpu_build_advice(rep["cmake_args"], cpu_flags())
    assert rep["cpu_build"] != "unknown"
    assert f"CPU code for      {rep['cpu_build']}" in text
    assert ("advice            " in text) == (rep["cpu_advice"] is not None)


def test_every_patch_applies_to_the_pristine_tree(pristine_tree, tmp_path):
    tree = tmp_path / "src"
    shutil.copytree(pristine_tree, tree)
    llama = tree / VENDOR
    before = {rel: (llama / rel).read_bytes() for rel in _touched(apply_patches.patch_files())}
    applied = apply_patches.apply(llama, apply_patches.patch_files())
    assert applied == apply_patches.describe()
    for rel, old in before.items():
        assert (llama / rel).read_bytes() != old, f"{rel} unchanged after the patches"
    # applied twice is an error (the context no longer matches), never a silent double edit
    with pytest.raises(apply_patches.PatchError, match="no longer applies"):
        apply_patches.apply(llama, apply_patches.patch_files(), check=True)
    if shutil.which("git"):
        # git apply agrees with our applier on the pristine files
        fresh = tmp_path / "git"
        shutil.copytree(pristine_tree / VENDOR, fresh)
        for p in apply_patches.patch_files():
            r = subprocess.run(["git", "apply", str(p)], cwd=fresh, capture_output=True, text=True)
            assert r.returncode == 0, f"git apply {p.name}: {r.stderr}"
        for rel in before:
            assert (fresh / rel).read_bytes() == (llama / rel).read_bytes(), rel


def test_every_pending_patch_applies_after_the_series(pristine_tree, tmp_path):
    """A patch waiting for its measurement (docs/design/pending-patches/) stays buildable: it has a
    header and applies on top of the shipped series, as the build would apply it once moved."""
    pending = apply_patches.patch_files(PENDING)
    if not pending:
        pytest.skip("no patch waits in docs/design/pending-patches")
    tree = tmp_path / "src"
    shutil.copytree(pristine_tree, tree)
    llama = tree / VENDOR
    apply_patches.apply(llama, apply_patches.patch_files())
    shipped = {q.name[:4] for q in apply_patches.patch_files()}
    for p in pending:
        head = p.read_text(encoding="utf-8").split("\ndiff --git ", 1)[0]
        for part in ("What it changes", "Why", "Measured", "Upstream reference"):
            assert part in head, f"{p.name}: header lacks '{part}'"
        assert p.name[:4] not in shipped, f"{p.name}: its number is taken by a shipped patch"
    assert [d["name"] for d in apply_patches.apply(llama, pending)] == [p.name for p in pending]


def test_build_stops_naming_the_patch_that_no_longer_applies(pristine_tree, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(pristine_tree, src)
    first = apply_patches.patch_files()[0]
    rel, hunks = apply_patches._parse(first.read_text(encoding="utf-8"), first.name)[0]
    # change one line the first hunk of the first patch needs as context or removes
    f = src / VENDOR / rel
    lines = f.read_text(encoding="utf-8").split("\n")
    start, old, _ = hunks[0]
    lines[start - 1 + len(old) // 2] += "  // changed upstream"
    f.write_text("\n".join(lines), encoding="utf-8")
    pristine_copy = f.read_bytes()
    env = dict(os.environ, DFLASH_BACKEND="cpu", DFLASH_WHEEL_CACHE=str(tmp_path / "cache"))
    r = subprocess.run(
        [
            "bash",
            str(ROOT / "packaging/build_engine.sh"),
            "--python",
            sys.executable,
            "--source",
            str(src),
            "--target",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"patch {first.name} no longer applies" in r.stderr
    assert "hunk 1" in r.stderr
    assert f.read_bytes() == pristine_copy, "the given source tree was modified"
    assert not list((tmp_path / "cache").rglob("*.whl")) and not (tmp_path / "site").exists()


def test_applier_rejects_a_malformed_patch(tmp_path):
    bad = tmp_path / "patches"
    bad.mkdir()
    (bad / "0001-bad.patch").write_text("header only, no diff\n")
    (tmp_path / "tree").mkdir()
    r = subprocess.run(
        [sys.executable, str(ROOT / "packaging/apply_patches.py"), str(tmp_path / "tree"), "--patches", str(bad)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "0001-bad.patch: no file changes found" in r.stderr


def test_the_gpu_top_k_check_builds_on_the_patched_kernels(pristine_tree, tmp_path):
    """gpu/gpu_top_k_check.sh cuts the top-k kernels out of top-k.cu patched with every patch that
    changes only that file (0024; 0025, dropped, if copied back into pending): the cut holds the kernel, the launch
    where 0025 is in, and nothing of ggml's context; with nvcc here, gpu/top_k_check.cu builds
    against it (the GPU machine runs it)."""
    r = subprocess.run(
        ["bash", "gpu/gpu_top_k_check.sh", "--extract", str(pristine_tree / VENDOR), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHON=sys.executable),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    inc = (tmp_path / "top_k_small.inc").read_text(encoding="utf-8")
    names = [p.name for p in apply_patches.patch_files() + apply_patches.patch_files(PENDING)]
    assert "k_top_k_small" in inc and "ggml_cuda_info" not in inc
    assert ("top_k_small_launch" in inc) == any(n.startswith("0025-") for n in names)
    assert "0024-small-top-k.patch" in r.stderr
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return
    stub = tmp_path / "stub"  # no CUDA libraries are linked: compile only
    stub.mkdir()
    b = subprocess.run(
        [nvcc, "-std=c++17", "-arch=sm_90", "-c", f"-I{tmp_path}", "-o", str(stub / "x.o"), "gpu/top_k_check.cu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert b.returncode == 0, b.stderr[-2000:]
