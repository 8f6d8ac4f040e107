"""Applies packaging/patches/*.patch, in name order, to a llama.cpp tree; strict, no fuzz.

The engine build (packaging/build_engine.sh) and the GPU peer build (gpu/gpu_bench.sh) both
use it, so the same patches reach our llama-cpp-python wheel and upstream's tools. It needs neither
git nor patch(1) (the GPU machine and slim CI images may lack them): a unified diff whose context
and removed lines do not match the tree exactly fails, naming the patch, file and hunk, and leaves
the tree untouched (every patch is checked against an in-memory copy before anything is written).

Each patch file is a header (free text: what it changes, why, what it measured, upstream
reference) followed by a `git diff` of the llama.cpp tree (paths a/ggml/..., b/ggml/...), which
`git apply` and `patch -p1` accept as well.

Usage:
  python packaging/apply_patches.py TREE [--patches DIR] [--check] [--record FILE]
  python packaging/apply_patches.py --list [--patches DIR]   # "name sha256" per patch
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

PATCH_DIR = Path(__file__).resolve().parent / "patches"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(RuntimeError):
    pass


def patch_files(patch_dir: Path = PATCH_DIR) -> list[Path]:
    return sorted(p for p in Path(patch_dir).glob("*.patch") if p.is_file())


def describe(patch_dir: Path = PATCH_DIR) -> list[dict]:
    """Name and sha256 of every patch, in the order they are applied (what build-info records)."""
    return [{"name": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in patch_files(patch_dir)]


def _parse(text: str, name: str) -> list[tuple[str, list[tuple[int, list[str], list[str]]]]]:
    """[(relative path, [(old start line, old lines, new lines), ...]), ...] of one patch."""
    files: list[tuple[str, list]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old_path = line[4:].split("\t")[0].strip()
            new_path = lines[i + 1][4:].split("\t")[0].strip()
            if old_path == "/dev/null" or new_path == "/dev/null":
                raise PatchError(f"{name}: file creation/deletion is not supported ({old_path} -> {new_path})")
            if not new_path.startswith("b/"):
                raise PatchError(f"{name}: expected a -p1 path (b/...), got {new_path}")
            hunks: list = []
            files.append((new_path[2:], hunks))
            i += 2
            continue
        m = _HUNK.match(line)
        if m:
            if not files:
                raise PatchError(f"{name}: hunk before any file header")
            n_old = int(m.group(2)) if m.group(2) is not None else 1
            n_new = int(m.group(4)) if m.group(4) is not None else 1
            old, new = [], []
            i += 1
            while (len(old) < n_old or len(new) < n_new) and i < len(lines):
                body = lines[i]
                if body.startswith("\\"):  # "\ No newline at end of file"
                    i += 1
                    continue
                tag, rest = (body[:1], body[1:]) if body else (" ", "")
                if tag == " ":
                    old.append(rest)
                    new.append(rest)
                elif tag == "-":
                    old.append(rest)
                elif tag == "+":
                    new.append(rest)
                else:
                    raise PatchError(f"{name}: malformed hunk line {i + 1}: {body[:60]!r}")
                i += 1
            if len(old) != n_old or len(new) != n_new:
                raise PatchError(f"{name}: truncated hunk in {files[-1][0]}")
            files[-1][1].append((int(m.group(1)), old, new))
            continue
        i += 1
    if not files:
        raise PatchError(f"{name}: no file changes found")
    return files


def _apply_hunks(content: list[str], hunks, where: str) -> list[str]:
    out = list(content)
    delta = 0
    for k, (start, old, new) in enumerate(hunks, 1):
        at = max(0, start - 1 + delta)
        if out[at : at + len(old)] != old:
            # the hunk may have moved (an earlier hunk of another patch): exact match nearby only
            found = None
            for off in range(1, 400):
                for cand in (at - off, at + off):
                    if 0 <= cand <= len(out) - len(old) and out[cand : cand + len(old)] == old:
                        found = cand
                        break
                if found is not None:
                    break
            if found is None:
                raise PatchError(f"{where}: hunk {k} (@@ -{start}) does not match the tree")
            at = found
        out[at : at + len(old)] = new
        delta = at + len(new) - (start - 1) - len(old)
    return out


def apply(tree: Path, patches: list[Path], check: bool = False) -> list[dict]:
    """Applies every patch in order; nothing is written unless all of them apply."""
    tree = Path(tree)
    staged: dict[str, list[str]] = {}
    applied = []
    for p in patches:
        for rel, hunks in _parse(p.read_text(encoding="utf-8"), p.name):
            path = tree / rel
            if rel not in staged:
                if not path.is_file():
                    raise PatchError(f"patch {p.name} no longer applies: {rel} is missing from {tree}")
                staged[rel] = path.read_text(encoding="utf-8").split("\n")
            try:
                staged[rel] = _apply_hunks(staged[rel], hunks, f"{p.name}: {rel}")
            except PatchError as exc:
                raise PatchError(f"patch {p.name} no longer applies: {exc}") from None
        applied.append({"name": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()})
    if not check:
        for rel, lines in staged.items():
            (tree / rel).write_text("\n".join(lines), encoding="utf-8")
    return applied


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree", nargs="?", help="the llama.cpp tree (vendor/llama.cpp of llama-cpp-python)")
    ap.add_argument("--patches", default=str(PATCH_DIR))
    ap.add_argument("--check", action="store_true", help="only check that every patch applies")
    ap.add_argument("--record", help="write the applied patches (name, sha256) as JSON here")
    ap.add_argument("--list", action="store_true", help="print 'name sha256' per patch and exit")
    a = ap.parse_args(argv)
    if a.list:
        for d in describe(Path(a.patches)):
            print(d["name"], d["sha256"])
        return 0
    if not a.tree:
        ap.error("TREE is required")
    try:
        done = apply(Path(a.tree), patch_files(Path(a.patches)), check=a.check)
    except PatchError as exc:
        print(f"apply_patches: FAILED: {exc}", file=sys.stderr)
        return 1
    if a.record:
        Path(a.record).write_text(json.dumps(done, indent=1) + "\n")
    for d in done:
        print(f"apply_patches: {'ok' if a.check else 'applied'} {d['name']} {d['sha256'][:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
