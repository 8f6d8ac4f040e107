"""Upstream's HF -> GGUF converter, run as a peer of ours, in an environment of its own.

The converter is ``convert_hf_to_gguf.py`` + ``conversion/`` + its bundled ``gguf-py`` from the
llama.cpp tree vendored in the llama-cpp-python sdist we build the engine from (same version as the
installed engine). Its Python dependencies (CPU torch, transformers, sentencepiece, ...) go into a
separate virtualenv, so neither our .venv nor our engine build sees them.

Both are cached between runs under ``$DFLASH_PEER_CACHE`` (default
``~/.cache/dflash-studio/converter-peer``): the sdist (``pip download``; or ``$DFLASH_LLAMA_SDIST``
naming a local copy), the three unpacked paths, and the virtualenv keyed by its requirements. A
first run costs about a minute of installs plus the sdist download; later runs reuse everything.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

#: What upstream's requirements-convert_hf_to_gguf.txt asks for, with torch at the CPU build this
#: project's machines carry (upstream pins 2.11.0 from the PyTorch CPU index, which pip cannot reach here).
REQUIREMENTS = (
    "torch==2.13.0",
    "transformers==4.57.6",
    "sentencepiece>=0.1.98,<0.3.0",
    "numpy~=2.2.6",
    "protobuf>=4.21.0,<5.0.0",
    "safetensors",
    "tqdm",
    "pyyaml",
    "requests",
)
_UPSTREAM_PATHS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")


class PeerUnavailable(RuntimeError):
    """The peer converter could not be provisioned (no sdist, no registry)."""


def engine_version() -> str:
    return importlib.metadata.version("llama_cpp_python")


def cache_root() -> Path:
    base = os.environ.get("DFLASH_PEER_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "dflash-studio" / "converter-peer"


def _run(cmd: list[str], what: str, timeout: int = 900, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        raise PeerUnavailable(f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc


def sdist(version: str | None = None) -> Path:
    """The llama-cpp-python sdist of the engine's version: $DFLASH_LLAMA_SDIST, the cache, or pip download."""
    version = version or engine_version()
    name = f"llama_cpp_python-{version}.tar.gz"
    given = os.environ.get("DFLASH_LLAMA_SDIST")
    if given:
        p = Path(given)
        if not p.is_file() or not p.name.endswith(f"-{version}.tar.gz"):
            raise PeerUnavailable(f"DFLASH_LLAMA_SDIST={given} is not the {version} sdist")
        return p
    dest = cache_root() / "sdist"
    cached = dest / name
    if cached.is_file():
        return cached
    dest.mkdir(parents=True, exist_ok=True)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"llama-cpp-python=={version}",
            "-d",
            str(dest),
        ],
        "pip download of the llama-cpp-python sdist",
    )
    if not cached.is_file():
        raise PeerUnavailable(f"pip download left no {name} in {dest}")
    return cached


def upstream_tree(version: str | None = None) -> Path:
    """vendor/llama.cpp's converter, conversion package and gguf-py, unpacked into the cache."""
    version = version or engine_version()
    tree = cache_root() / f"llama.cpp-{version}"
    stamp = tree / ".unpacked"
    if stamp.is_file():
        return tree
    src = sdist(version)
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    tmp = tree.with_name(tree.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(src) as tf:
        members = []
        for m in tf.getmembers():
            if not m.name.startswith(prefix) or not (m.isfile() or m.isdir()):
                continue
            rel = m.name[len(prefix) :]
            if any(rel == p or rel.startswith(p) for p in _UPSTREAM_PATHS):
                m.name = rel
                members.append(m)
        if not any(m.name == "convert_hf_to_gguf.py" for m in members):
            raise PeerUnavailable(f"{src} holds no vendor/llama.cpp/convert_hf_to_gguf.py")
        tf.extractall(tmp, members=members, filter="data")
    shutil.rmtree(tree, ignore_errors=True)
    tmp.rename(tree)
    stamp.write_text(str(src))
    return tree


def venv() -> Path:
    """The peer's own virtualenv (python path), created once per requirement set."""
    key = hashlib.sha256(("\n".join(REQUIREMENTS) + sys.version).encode()).hexdigest()[:12]
    root = cache_root() / f"venv-{key}"
    py = root / "bin" / "python"
    stamp = root / ".ready"
    if stamp.is_file() and py.exists():
        return py
    shutil.rmtree(root, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(root)], "creating the peer virtualenv")
    _run(
        [str(py), "-m", "pip", "install", "-q", *REQUIREMENTS],
        "installing the peer converter's dependencies",
        timeout=1800,
    )
    stamp.write_text("\n".join(REQUIREMENTS))
    return py


# Runs convert_hf_to_gguf.main() once per job in one interpreter: importing torch and transformers
# costs most of a conversion of these small folders, so a batch pays it once.
_BATCH_DRIVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import convert_hf_to_gguf as upstream
for argv in json.loads(sys.argv[2]):
    sys.argv = ["convert_hf_to_gguf.py", *argv]
    try:
        upstream.main()
    except SystemExit as exc:
        if exc.code:
            print(f"upstream converter exited {exc.code} on {argv[0]}", file=sys.stderr)
            raise
"""


def convert_many(jobs: list[tuple[Path, Path, Path, str]]) -> None:
    """Runs upstream's converter on every (hf_dir, target_hf_dir, out, outtype) in one process."""
    tree = upstream_tree()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_LOCAL_GGUF", "PYTHONPATH")}
    env.update(CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    argvs = [[str(h), "--target-model-dir", str(t), "--outfile", str(o), "--outtype", ty] for h, t, o, ty in jobs]
    proc = subprocess.run(
        [str(venv()), "-c", _BATCH_DRIVER, str(tree), json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
        cwd=str(tree),
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"upstream converter failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
        )


def run_python(code: str, *args: str) -> str:
    """Runs a snippet in the peer's virtualenv (e.g. transformers' own config classes); returns stdout."""
    proc = subprocess.run(
        [str(venv()), "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"peer python failed:\n{proc.stderr[-4000:]}")
    return proc.stdout
