"""GGUF versions: `check` accepts exactly the files the vendored llama.cpp loads (versions 2 and 3)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from engine_bridge.common.errors import ModelLoadError
from engine_bridge.models.gguf_header import GGUF_VERSIONS, GGUFHeaderError, read_header
from engine_bridge.runtime.native import Model

ROOT = Path(__file__).resolve().parents[3]


def _with_version(src: Path, dst: Path, version: int, order: str = "<") -> Path:
    shutil.copy(src, dst)
    with open(dst, "r+b") as f:
        f.seek(4)
        f.write(struct.pack(order + "I", version))
    return dst


def _check(target, draft):
    return subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli", "check", str(target), str(draft)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


@pytest.mark.parametrize("version", [99, 4, 1, 0])
def test_a_version_llama_cpp_refuses_is_refused_by_check_with_the_reason(tiny_pair, tmp_path, version):
    target, draft = tiny_pair
    bad = _with_version(target, tmp_path / f"v{version}.gguf", version)
    with pytest.raises(GGUFHeaderError, match=rf"GGUF version {version}: the bundled llama\.cpp reads versions 2 to 3"):
        read_header(bad)
    proc = _check(bad, draft)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # unreadable, not "compatible"
    assert f"GGUF version {version}" in proc.stdout + proc.stderr
    assert "compatible," not in proc.stdout
    # and llama.cpp really refuses it: the two agree
    with pytest.raises(ModelLoadError):
        Model(bad).free()


@pytest.mark.parametrize("version", GGUF_VERSIONS)
def test_the_versions_llama_cpp_reads_pass(tiny_pair, tmp_path, version):
    target, draft = tiny_pair
    ok = _with_version(target, tmp_path / f"v{version}.gguf", version)
    assert read_header(ok).version == version
    assert _check(ok, draft).returncode == 0
    Model(ok).free()  # llama.cpp loads it


def test_a_byte_swapped_header_is_refused_like_llama_cpp_does(tiny_pair, tmp_path):
    target, _ = tiny_pair
    swapped = _with_version(target, tmp_path / "be.gguf", 3, order=">")
    with pytest.raises(GGUFHeaderError, match="big-endian"):
        read_header(swapped)
    with pytest.raises(ModelLoadError):
        Model(swapped).free()
