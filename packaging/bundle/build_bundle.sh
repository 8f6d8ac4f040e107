#!/usr/bin/env bash
# `make package`: one file that starts DFlash Studio on a Linux machine with no toolchain and no Python.
#
#   packaging/bundle/build_bundle.sh [--python PY] [--out DIR] [--no-cache]
#
# 1. PyInstaller (pinned in requirements.txt, installed with `pip install --target` into
#    ~/.cache/dflash-studio/pyinstaller/<hash>, never into .venv) freezes this checkout's app, CLI and the
#    engine .venv holds (our llama-cpp-python build; a portable build of it where .venv's is for this
#    CPU only) into one folder (onedir, dflash-studio.spec).
# 2. That folder becomes one self-extracting file: sfx_header.sh + a tar.gz of it. Not an AppImage:
#    its runtime and appimagetool come from no package registry here (PyPI, Debian, npm). Not Debian's
#    makeself: its header takes every leading option for itself (`--version`, `--help`; an unknown one
#    such as `--screenshot` stops it), so the file could not behave like `dflash-studio`, and it
#    unpacks the whole bundle into /tmp again on every start. sfx_header.sh passes every argument on and
#    unpacks once into ~/.cache/dflash-studio/bundle/<id>/.
#
# The result, dist/dflash-studio-<version>-linux-<arch>-<backend>.run, is also kept under
# ~/.cache/dflash-studio/bundle-build/<key>.run, the key hashing every input (our sources, resources,
# this folder, the engine's build info and libraries, .venv's package versions), so a second build of
# the same inputs (the bundle test after `make package`) is a copy. --no-cache builds anew.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/packaging/bundle"
PY="$ROOT/.venv/bin/python"
OUT="$ROOT/dist"
USE_CACHE=1
while [ $# -gt 0 ]; do
    case "$1" in
        --python) PY="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --no-cache) USE_CACHE=0; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "build_bundle.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/dflash-studio"
say() { echo "package: $*" >&2; }

[ -x "$PY" ] || { say "no Python at $PY: run make setup first"; exit 2; }
# this checkout's sources, whatever an editable install in .venv points at
export PYTHONPATH="$ROOT"
"$PY" -c 'import llama_cpp.llama_cpp' 2>/dev/null || { say "the engine is not built in $PY's environment: run make setup"; exit 2; }

read -r VERSION BACKEND NATIVE < <("$PY" - <<'EOF'
import json, engine_bridge
from pathlib import Path
import llama_cpp
info = Path(llama_cpp.__file__).with_name("dflash_build_info.json")
build = json.loads(info.read_text()) if info.exists() else {}
from engine_bridge.runtime.cpu_build import PORTABLE, cpu_build_advice
built, _ = cpu_build_advice(build.get("cmake_args", ""), set())
print(engine_bridge.__version__, build.get("backend", "cpu"), int(built != PORTABLE))
EOF
)
# An engine built for this machine's CPU (packaging/build_engine.sh's default where the CPU has more
# than AVX2), or of unknown flags, may not run on another one: the bundle freezes a portable build of
# the same source and patches instead, installed into build/bundle/engine (from build_engine.sh's
# wheel cache after the first time), which then comes first on the path. The bundle test compares the
# bundle's answers with that engine's.
ENGINE_DIR="$ROOT/build/bundle/engine"
rm -rf "$ENGINE_DIR"
if [ "$NATIVE" = 1 ]; then
    say "the .venv engine is not a portable build: building a portable one for the bundle into $ENGINE_DIR"
    DFLASH_CPU_NATIVE=0 "$ROOT/packaging/build_engine.sh" --python "$PY" --target "$ENGINE_DIR" >&2
    export PYTHONPATH="$ENGINE_DIR:$PYTHONPATH"
fi
ARCH=$(uname -m)
NAME="dflash-studio-$VERSION-linux-$ARCH-$BACKEND"
KEY=$("$PY" "$HERE/bundle_tools.py" key "$ROOT")
mkdir -p "$OUT"
if [ "$USE_CACHE" = 1 ] && [ -f "$CACHE/bundle-build/$KEY.run" ]; then
    cp "$CACHE/bundle-build/$KEY.run" "$OUT/$NAME.run.tmp" && mv "$OUT/$NAME.run.tmp" "$OUT/$NAME.run"
    say "unchanged inputs: $OUT/$NAME.run from the build cache ($(du -h "$OUT/$NAME.run" | cut -f1))"
    echo "$OUT/$NAME.run"
    exit 0
fi

# PyInstaller, pinned, beside .venv (its own dependencies packaging and setuptools come from .venv)
REQ="$HERE/requirements.txt"
PYI="$CACHE/pyinstaller/$(sha256sum "$REQ" | cut -c1-16)"
if [ ! -f "$PYI/.complete" ]; then
    say "installing $(grep -m1 '^pyinstaller==' "$REQ") into $PYI"
    rm -rf "$PYI"
    "$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$PYI" -r "$REQ"
    touch "$PYI/.complete"
fi

WORK="$ROOT/build/bundle"
rm -rf "$WORK/dist"
mkdir -p "$WORK"
say "freezing the app, the CLI and the $BACKEND engine with PyInstaller (onedir)"
PYTHONPATH="$PYTHONPATH:$PYI" "$PY" -m PyInstaller --noconfirm --log-level WARN \
    --distpath "$WORK/dist" --workpath "$WORK/work" "$HERE/dflash-studio.spec"
APPDIR="$WORK/dist/dflash-studio"
"$PY" "$HERE/bundle_tools.py" slim "$APPDIR"

say "packing $NAME.run (self-extracting: sh + tar.gz)"
PAYLOAD="$WORK/payload.tar.gz"
tar -C "$WORK/dist" --owner=0 --group=0 --numeric-owner -cf - dflash-studio | gzip -9 -n > "$PAYLOAD"
ID="$VERSION-$(sha256sum "$PAYLOAD" | cut -c1-12)"
"$PY" "$HERE/bundle_tools.py" sfx "$HERE/sfx_header.sh" "$PAYLOAD" "$ID" "$OUT/$NAME.run.tmp"
mv "$OUT/$NAME.run.tmp" "$OUT/$NAME.run"
mkdir -p "$CACHE/bundle-build"
rm -f "$CACHE"/bundle-build/*.run           # one cached build: the newest
cp "$OUT/$NAME.run" "$CACHE/bundle-build/$KEY.run"
say "wrote $OUT/$NAME.run ($(du -h "$OUT/$NAME.run" | cut -f1); unpacked $(du -sh "$APPDIR" | cut -f1))"
echo "$OUT/$NAME.run"
