#!/usr/bin/env bash
# Patch 0024's top-k kernel checked and timed alone, on the GPU machine (gpu/top_k_check.cu): the
# kernel is cut out of the patch (its first "#if !defined(GGML_USE_HIP)" block), built with nvcc,
# then every case's ids are compared with a host reference and its time with the sort it replaces.
# Usage, from the project root there:  bash gpu/gpu_top_k_check.sh [PATCH] [ARCH (90)]
set -eu
P=${1:-$(ls packaging/patches/0024-*.patch docs/design/pending-patches/0024-*.patch 2>/dev/null | head -n 1)}
ARCH=${2:-90}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
D=$(mktemp -d)
awk '/^\+#if !defined\(GGML_USE_HIP\)$/ {on = 1}
     on {sub(/^\+/, ""); print}
     on && /^#endif  \/\/ !defined\(GGML_USE_HIP\)$/ {exit}' "$P" > "$D/top_k_small.inc"
grep -q "k_top_k_small" "$D/top_k_small.inc" || { echo "gpu_top_k_check: no k_top_k_small in $P" >&2; exit 2; }
"$NVCC" -std=c++17 -arch=sm_"$ARCH" -O2 -I"$D" -o "$D/top_k_check" gpu/top_k_check.cu
"$D/top_k_check"
