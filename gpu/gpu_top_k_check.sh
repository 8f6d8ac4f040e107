#!/usr/bin/env bash
# The CUDA top-k kernels of patch 0024 (and of 0025, dropped, when it is copied back into
# docs/design/pending-patches/ or the series) checked and timed alone, on the GPU machine (gpu/top_k_check.cu):
# a pristine llama.cpp's top-k.cu is patched with every patch that changes only that file, the
# kernels are cut out of it (the "#if !defined(GGML_USE_HIP)" block the patches add), built with
# nvcc, then every case's ids are compared with a host reference and the kernels' time with the
# sort they replace.
# Usage, from the project root there:
#   bash gpu/gpu_top_k_check.sh [TREE (/tmp/w/lcp/vendor/llama.cpp)] [ARCH (90)]
#   bash gpu/gpu_top_k_check.sh --extract TREE DIR     # only DIR/top_k_small.inc (tests; no nvcc)
set -eu
if [ "${1:-}" = --extract ]; then
  TREE=$2; D=$3; EXTRACT=1
else
  TREE=${1:-/tmp/w/lcp/vendor/llama.cpp}; D=$(mktemp -d); EXTRACT=0
fi
ARCH=${2:-90}
PY=${PYTHON:-python3}
"$PY" - "$TREE" "$D" <<'PYEOF'
import shutil
import sys
from pathlib import Path

sys.path.insert(0, "packaging")
import apply_patches as ap  # noqa: E402

tree, out = Path(sys.argv[1]), Path(sys.argv[2])
rel = "ggml/src/ggml-cuda/top-k.cu"
dst = out / "t" / rel
dst.parent.mkdir(parents=True, exist_ok=True)
shutil.copyfile(tree / rel, dst)
pending = Path("docs/design/pending-patches")
ps = [
    p
    for p in ap.patch_files() + ap.patch_files(pending)
    if {r for r, _ in ap._parse(p.read_text(encoding="utf-8"), p.name)} == {rel}
]
ap.apply(out / "t", ps)
print("top-k.cu patched with", " ".join(p.name for p in ps), file=sys.stderr)
PYEOF
awk '/^#if !defined\(GGML_USE_HIP\)$/ {on = 1}
     on {print}
     on && /^#endif  \/\/ !defined\(GGML_USE_HIP\)$/ {exit}' "$D/t/ggml/src/ggml-cuda/top-k.cu" > "$D/top_k_small.inc"
grep -q "k_top_k_small" "$D/top_k_small.inc" || { echo "gpu_top_k_check: no k_top_k_small in the patched top-k.cu" >&2; exit 2; }
[ "$EXTRACT" = 1 ] && exit 0
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$NVCC" -std=c++17 -arch=sm_"$ARCH" -O2 -I"$D" -o "$D/top_k_check" gpu/top_k_check.cu
"$D/top_k_check"
