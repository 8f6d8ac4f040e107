"""build_bundle.sh's helpers: the build cache's key, slimming the frozen folder, the one-file bundle.

python bundle_tools.py key ROOT                      # prints the hash of every input of the bundle
python bundle_tools.py slim APPDIR                   # drops unused files, links equal engine libraries
python bundle_tools.py sfx HEADER PAYLOAD ID OUT     # header (padded) + payload -> OUT, executable
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path

#: The self-extracting header is padded to this many bytes: the payload starts right after it.
HEADER_BYTES = 8192
#: Inputs of the bundle besides the engine and .venv's packages (folders hashed file by file).
SOURCES = ("engine_bridge", "app", "resources", "packaging/bundle")
#: Qt's translations: the app's text is English only (7 MB).
DROP = ("PySide6/Qt/translations",)


def bundle_key(root: Path) -> str:
    """sha256 over our sources, the engine's files and .venv's package versions (the interpreter's)."""
    h = hashlib.sha256()

    def add(path: Path, name: str) -> None:
        h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())

    for folder in SOURCES:
        for f in sorted((root / folder).rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                add(f, str(f.relative_to(root)))
    import llama_cpp

    pkg = Path(llama_cpp.__file__).parent
    for f in sorted(pkg.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            add(f, "llama_cpp/" + str(f.relative_to(pkg)))
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    h.update(json.dumps([sys.version, dists]).encode())
    return h.hexdigest()[:24]


def slim(appdir: Path) -> int:
    """Removes DROP and turns the wheel's equal copies of each engine library (libllama.so,
    .so.0, .so.0.5.0) into links to one file; returns the bytes saved."""
    internal = appdir / "_internal"
    saved = 0
    for rel in DROP:
        p = internal / rel
        if p.is_dir():
            saved += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            shutil.rmtree(p)
    lib = internal / "llama_cpp" / "lib"
    by_hash: dict[str, list[Path]] = {}
    for f in sorted(lib.glob("lib*.so*")):
        if f.is_file() and not f.is_symlink():
            by_hash.setdefault(hashlib.sha256(f.read_bytes()).hexdigest(), []).append(f)
    for files in by_hash.values():
        keep = max(files, key=lambda p: len(p.name))  # the fully versioned name
        for f in files:
            if f != keep:
                saved += f.stat().st_size
                f.unlink()
                f.symlink_to(keep.name)
    return saved


def write_sfx(header: Path, payload: Path, bundle_id: str, out: Path) -> None:
    text = header.read_text().replace("@ID@", bundle_id).replace("@HEADER_BYTES@", str(HEADER_BYTES))
    head = text.encode()
    if len(head) >= HEADER_BYTES:
        raise SystemExit(f"{header} is {len(head)} bytes; the payload offset is {HEADER_BYTES}")
    # the padding is a shell comment line the script never reaches (it execs or exits before)
    head += b"#" * (HEADER_BYTES - len(head) - 1) + b"\n"
    with open(out, "wb") as f:
        f.write(head)
        with open(payload, "rb") as src:
            shutil.copyfileobj(src, f, 1 << 20)
    os.chmod(out, 0o755)


def main(argv: list[str]) -> int:
    if argv[:1] == ["key"] and len(argv) == 2:
        print(bundle_key(Path(argv[1])))
    elif argv[:1] == ["slim"] and len(argv) == 2:
        print(f"slim: {slim(Path(argv[1])) / 2**20:.1f} MiB saved", file=sys.stderr)
    elif argv[:1] == ["sfx"] and len(argv) == 5:
        write_sfx(Path(argv[1]), Path(argv[2]), argv[3], Path(argv[4]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
