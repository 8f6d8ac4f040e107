#!/usr/bin/env bash
# Builds llama-cpp-python (pinned) from source and installs it into the given Python.
#
# Backend: CUDA when nvcc is on PATH *and* a GPU answers (nvidia-smi -L), CPU otherwise.
# A machine with the toolkit but no GPU (CI) gets the CPU build: a CUDA build there takes hours on
# two cores and could not run a single test. DFLASH_BACKEND=cpu|cuda overrides the detection.
#
# The built wheel is kept in our own cache, keyed by version + backend + CMake flags, so a second
# run with the same inputs installs it in seconds. (pip's own wheel cache is keyed by the sdist
# only and ignores CMAKE_ARGS, so it could hand a CPU wheel to a CUDA request.)
#
# Offline (GPU machine, air-gapped users): --source DIR|SDIST builds from a local llama-cpp-python
# tree or sdist, --wheels DIR resolves build dependencies from a local wheel folder, no index.
# --target DIR installs there (pip --target) instead of into the Python's site-packages.
#
# Patches: every packaging/patches/NNNN-*.patch is applied, in name order, to the source's
# vendor/llama.cpp (packaging/apply_patches.py; a patch that no longer applies stops the build,
# naming it). The source is unpacked into a temporary folder first (the sdist from pip's cache or
# index, or --source), so a given tree is never modified. The wheel cache key includes the patches'
# sha256, and build-info.json (what `dflash-studio doctor` shows) lists them.
#
# DFLASH_CPU_NATIVE=0 builds the CPU code for any x86-64 with AVX2, not for this CPU's instruction sets
# (below; the sets are part of the CMake flags, so of the cache key).
#
# DFLASH_FA_ALL_QUANTS=0 leaves out -DGGML_CUDA_FA_ALL_QUANTS=ON (a much shorter CUDA build; only
# q4_0/q4_0, q8_0/q8_0, f16/f16 and bf16/bf16 KV pairs then get fast flash-attention kernels).
#
# Usage: packaging/build_engine.sh [--python PY] [--source S] [--wheels W] [--arch 90;89]
#                                  [--target DIR] [--jobs N]
set -euo pipefail

VER=0.3.36
PY=${PYTHON:-python3}
SRC=""; WHEELS=""; ARCH=${CUDA_ARCHITECTURES:-}; TARGET=""; JOBS=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
while [ $# -gt 0 ]; do
  case $1 in
    --python) PY=$2; shift;;
    --source) SRC=$2; shift;;
    --wheels) WHEELS=$2; shift;;
    --arch) ARCH=$2; shift;;
    --target) TARGET=$2; shift;;
    --jobs) JOBS=$2; shift;;
    -h|--help) sed -n 2,16p "$0"; exit 0;;
    *) echo "build_engine: unknown argument $1" >&2; exit 2;;
  esac
  shift
done

backend=${DFLASH_BACKEND:-auto}
if [ "$backend" = auto ]; then
  if command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    backend=cuda
  else
    backend=cpu
  fi
fi

# The CPU code is built for the instruction sets of the CPU that builds it, since the engine is built
# where it runs: on a CPU with AMX-INT8 (Xeon 4th generation and later) ggml then repacks the quantised
# weights for its AVX512-VNNI kernels, and the default pair decoded 2.0-2.2x faster (AR) than with the
# portable build (docs/benchmarks.md, "An engine built for the CPU it runs on"); patch 0020 keeps
# many-row batches off the AMX tile path (0021 makes that path safe; DFLASH_AMX_TILES=1 sends prompts of
# 64 rows or more through it). The sets are named from /proc/cpuinfo, not
# taken with -march=native: that would also turn on AVX512-FP16, whose half-precision vectors ggml's
# attention cannot use at a head size of 64 (it fell to scalar code there: AR 2x slower at 250 tokens
# of context) and which accumulate dot products in half precision. A CPU with no more than AVX2 gets
# the portable flags. DFLASH_CPU_NATIVE=0 builds for any x86-64 with AVX2: what the one-file bundle
# freezes (packaging/bundle/build_bundle.sh), so that it runs on another machine.
cpu_isa=""
if [ "${DFLASH_CPU_NATIVE:-1}" != 0 ] && [ "$(uname -m)" = x86_64 ] && [ -r /proc/cpuinfo ]; then
  have=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { case "$have" in *" $1 "*) return 0;; esac; return 1; }
  if has avx512f && has avx512cd && has avx512vl && has avx512dq && has avx512bw; then
    cpu_isa="$cpu_isa -DGGML_AVX512=ON"
    if has avx512vbmi; then cpu_isa="$cpu_isa -DGGML_AVX512_VBMI=ON"; fi
    if has avx512_vnni; then cpu_isa="$cpu_isa -DGGML_AVX512_VNNI=ON"; fi
    if has avx512_bf16; then cpu_isa="$cpu_isa -DGGML_AVX512_BF16=ON"; fi
    if has amx_tile && has amx_int8 && has avx512_vnni; then cpu_isa="$cpu_isa -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON"; fi
  fi
  if has avx_vnni; then cpu_isa="$cpu_isa -DGGML_AVX_VNNI=ON"; fi
fi
flags="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF$cpu_isa -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
# RPC devices (issue 18): libggml-rpc.so ships beside libllama and registers itself. RDMA stays off:
# CMake turns it on where libibverbs is found and the wheel would then fail to load where it is not.
flags="$flags -DGGML_RPC=ON -DGGML_RPC_RDMA=OFF"
if [ "$backend" = cuda ]; then
  if [ -z "$ARCH" ]; then
    # Detected from the GPUs present: compute capability 9.0 -> 90.
    ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d . | sort -u | paste -sd';' -)
  fi
  [ -n "$ARCH" ] || { echo "build_engine: CUDA requested but no architecture detected; pass --arch" >&2; exit 2; }
  flags="$flags -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$ARCH"
  [ "${DFLASH_FA_ALL_QUANTS:-1}" = 1 ] && flags="$flags -DGGML_CUDA_FA_ALL_QUANTS=ON"
fi

pytag=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
here=$(cd "$(dirname "$0")" && pwd)
# "name sha256" per patch, in the order they are applied: part of the cache key and of build-info
patches=$("$PY" "$here/apply_patches.py" --list)
keyin=$(printf '%s|%s|%s|%s' "$VER" "$backend" "$flags" "$pytag")
# no patches: the key of the unpatched builds before patches existed (their cached wheels stay valid)
[ -n "$patches" ] && keyin="$keyin|$patches"
key=$(printf '%s' "$keyin" | sha256sum | cut -c1-16)
CACHE=${DFLASH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dflash-studio/wheels}/$key
mkdir -p "$CACHE"

pipi=("$PY" -m pip install --no-deps --force-reinstall)
[ -n "$TARGET" ] && pipi+=(--target "$TARGET")
idx=()
[ -n "$WHEELS" ] && idx=(--no-index --find-links "$WHEELS")

whl=$(ls "$CACHE"/llama_cpp_python-"$VER"-*.whl 2>/dev/null | head -n1 || true)
if [ -n "$whl" ]; then
  echo "build_engine: reusing cached wheel ($backend) $whl"
else
  echo "build_engine: building llama-cpp-python $VER ($backend) with: $flags"
  start=$SECONDS
  # the source, unpacked into a temporary folder that the patches may change
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/dflash-engine-src.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  if [ -z "$SRC" ]; then
    # the sdist (pip's HTTP cache keeps it: a second download is local)
    "$PY" -m pip download -q --no-deps --no-binary :all: "${idx[@]}" -d "$tmp/dl" "llama-cpp-python==$VER"
    SRC=$(ls "$tmp"/dl/llama_cpp_python-"$VER".tar.gz)
  fi
  if [ -d "$SRC" ]; then
    cp -a "$SRC" "$tmp/src"
  else
    mkdir -p "$tmp/unpack" && tar xzf "$SRC" -C "$tmp/unpack"
    mv "$tmp"/unpack/* "$tmp/src"
  fi
  [ -d "$tmp/src/vendor/llama.cpp" ] || { echo "build_engine: $SRC has no vendor/llama.cpp" >&2; exit 2; }
  if ! "$PY" "$here/apply_patches.py" "$tmp/src/vendor/llama.cpp" --record "$tmp/patches.json"; then
    echo "build_engine: a patch in $here/patches no longer applies to llama-cpp-python $VER (see above)" >&2
    exit 3
  fi
  src=$tmp/src
  build_iso=()
  if [ -n "$WHEELS" ]; then
    # Offline: the build backend comes from the local wheel folder (unless already importable).
    "$PY" -c "import scikit_build_core" 2>/dev/null || "$PY" -m pip install -q "${idx[@]}" scikit-build-core pathspec packaging
    build_iso=(--no-build-isolation)
  fi
  CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS FORCE_CMAKE=1 \
    "$PY" -m pip wheel --no-deps --no-cache-dir --no-binary llama-cpp-python "${build_iso[@]}" "${idx[@]}" \
      -w "$CACHE" "$src"
  whl=$(ls "$CACHE"/llama_cpp_python-"$VER"-*.whl | head -n1)
  printf '{"version": "%s", "backend": "%s", "cmake_args": "%s", "cuda_architectures": "%s", "seconds": %d, "patches": %s}\n' \
    "$VER" "$backend" "$flags" "$ARCH" $((SECONDS - start)) "$(tr -d '\n' < "$tmp/patches.json")" > "$CACHE/build-info.json"
fi
"${pipi[@]}" "$whl"
if [ -z "$TARGET" ]; then
  # The runtime dependencies of llama-cpp-python itself (numpy, jinja2, diskcache, typing-extensions);
  # with --target the caller provides them (the offline bundle does).
  "$PY" -m pip install -q "${idx[@]}" numpy jinja2 diskcache typing-extensions
  dest=$("$PY" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("llama_cpp").submodule_search_locations[0]))')
else
  dest=$TARGET/llama_cpp
fi
# What doctor reports: the flags this engine was built with.
cp "$CACHE/build-info.json" "$dest/dflash_build_info.json"
echo "build_engine: installed $(basename "$whl") ($backend); build info in $dest/dflash_build_info.json"
