"""gpu/gpu_carry.sh: a file too large for one device call, cut here and joined there over calls
(issue 30's 1.1 GB target), run on a small file with tiny parts, each call simulated by a working
tree that holds only the manifest and that call's part."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "gpu" / "gpu_carry.sh"


def sh(*args, cwd, env):
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_split_then_take_call_by_call_joins_the_same_bytes(tmp_path):
    data = os.urandom(10_000)
    here = tmp_path / "here"
    here.mkdir()
    (here / "big.gguf").write_bytes(data)
    env = {**os.environ, "PART_BYTES": "3000", "STORE": str(tmp_path / "store"), "DEST": str(tmp_path / "t")}
    r = sh("split", "big.gguf", "big", cwd=here, env=env)
    assert r.returncode == 0 and "4 parts" in r.stdout
    calls = sh("calls", "big", cwd=here, env=env).stdout.split("\n")
    calls = [c for c in calls if c]
    assert len(calls) == 4 and all(".gpu-carry/big/MANIFEST" in c for c in calls)
    parts = sorted((here / ".gpu-carry" / "big").glob("part.*"))
    joined = tmp_path / "t" / "big.gguf"
    for i, p in enumerate(parts):
        # one call: a fresh tree with the manifest and one part, as the device machine gets it
        there = tmp_path / f"call{i}"
        (there / ".gpu-carry" / "big").mkdir(parents=True)
        shutil.copy(here / ".gpu-carry" / "big" / "MANIFEST", there / ".gpu-carry" / "big")
        if i == 1:  # a part damaged on the way: named, dropped, carried again below
            (there / ".gpu-carry" / "big" / p.name).write_bytes(b"x" + p.read_bytes()[1:])
            r = sh("take", "big", cwd=there, env=env)
            assert r.returncode == 1 and f"part {p.name} does not match" in r.stdout
            shutil.copy(p, there / ".gpu-carry" / "big")
        else:
            shutil.copy(p, there / ".gpu-carry" / "big")
        r = sh("take", "big", cwd=there, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        if i < len(parts) - 1:
            assert "missing:" in r.stdout and not joined.exists()
            assert sh("status", "big", cwd=there, env=env).returncode == 1
    assert "joined and verified" in r.stdout
    assert joined.read_bytes() == data and (tmp_path / "t" / "big.gguf.ok").exists()
    assert hashlib.sha256(joined.read_bytes()).hexdigest() in (here / ".gpu-carry" / "big" / "MANIFEST").read_text()
    assert not list((tmp_path / "store" / "big").glob("part.*"))  # the parts go once joined
    again = sh("take", "big", cwd=there, env=env)
    assert again.returncode == 0 and "already joined" in again.stdout
    assert sh("status", "big", cwd=there, env=env).returncode == 0
