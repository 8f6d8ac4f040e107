#!/usr/bin/env bash
# Upstream's own drivers (llama-speculative-simple, llama-bench, llama-completion) built from the
# bundle's llama.cpp tree, linked to the ggml of an engine already built and installed, instead of
# building ggml and its CUDA kernels a second time. On the GPU machine the peer's own CUDA build cost
# as much as ours (both at once: 600 s on 16 cores, of a 30-minute device budget); this one compiles
# only libllama, the common library and the three tools.
#
# The tree gets our packaging/patches, as gpu_bench.sh's peer does (the same sources as the engine's
# ggml, so the two agree); UPSTREAM_ENV below turns every patch that has a switch back to upstream's
# behaviour, so the drivers then run as upstream on the engine's kernels-with-switches-off. Patches
# that act only through calls the engine makes (0008, 0009, 0015, 0017, 0019, 0023, 0026) do nothing
# under upstream's drivers.
#
# Usage, from the project root:
#   ENGINE_LIB=/tmp/lcp_site/llama_cpp/lib bash gpu/gpu_peer_tools.sh PEER_TGZ WORKDIR [JOBS]
#     -> WORKDIR/llama.cpp/build/bin/{llama-speculative-simple,llama-bench,llama-completion}
#   eval "$(bash gpu/gpu_peer_tools.sh env)"     # exports UPSTREAM_ENV's switches (for a peer run)
set -u
if [ "${1:-}" = env ]; then
  # every switch of packaging/patches that restores upstream's behaviour (patches/README.md)
  echo "export DFLASH_MMVQ_MAX_ROWS=8 DFLASH_MMVQ_SHORT_K=0 DFLASH_BATCHED_ARGMAX=0 DFLASH_BATCHED_TOP_K=0" \
    "DFLASH_CUDA_GRAPH_PER_SHAPE=0 DFLASH_MMVQ_SHARE_Q8=0 DFLASH_ADD_RMS_NORM=0 DFLASH_CUDA_GRAPH_PER_KV=0" \
    "DFLASH_VERIFY_KERNELS=0 DFLASH_SMALL_TOP_K=0 DFLASH_KV_USED_RANGE=0 DFLASH_Q4_1_NCOLS=0 DFLASH_MMVQ_MMA=0"
  exit 0
fi
TGZ=${1:?peer llama.cpp tgz}; W=${2:?work dir}; JOBS=${3:-16}
LIB=${ENGINE_LIB:?the lib folder of the installed engine, with libggml.so and libggml-base.so}
here=$(pwd)
SECONDS=0
# pip installs the engine's libraries under their versioned names; give the linker the plain ones
for f in "$LIB"/libggml*.so.0.* "$LIB"/libllama.so.0.*; do
  [ -e "$f" ] || continue
  b=${f%.so.0.*}; [ -e "$b.so" ] || ln -sf "$(basename "$f")" "$b.so"; [ -e "$b.so.0" ] || ln -sf "$(basename "$f")" "$b.so.0"
done
for l in libggml.so libggml-base.so; do
  [ -e "$LIB/$l" ] || { echo "no $l in $LIB" >&2; exit 1; }
done
rm -rf "$W/llama.cpp"; mkdir -p "$W/ggml-config"
tar xzf "$TGZ" -C "$W" || exit 1
python3 "$here/packaging/apply_patches.py" "$W/llama.cpp" --record "$W/peer_patches.json" > "$W/peer_patches.log" 2>&1 \
  || { echo "packaging/patches did not apply to the peer tree" >&2; tail -n 20 "$W/peer_patches.log" >&2; exit 1; }
# find_package(ggml) under LLAMA_USE_SYSTEM_GGML: the engine's two libraries as imported targets
cat > "$W/ggml-config/ggml-config.cmake" <<EOF
add_library(ggml::ggml-base SHARED IMPORTED)
set_target_properties(ggml::ggml-base PROPERTIES IMPORTED_LOCATION "$LIB/libggml-base.so"
    INTERFACE_INCLUDE_DIRECTORIES "$W/llama.cpp/ggml/include")
add_library(ggml::ggml SHARED IMPORTED)
set_target_properties(ggml::ggml PROPERTIES IMPORTED_LOCATION "$LIB/libggml.so"
    INTERFACE_INCLUDE_DIRECTORIES "$W/llama.cpp/ggml/include" INTERFACE_LINK_LIBRARIES ggml::ggml-base)
set(ggml_FOUND TRUE)
EOF
gen=(); command -v ninja > /dev/null && gen=(-G Ninja)
cd "$W/llama.cpp" || exit 1
cmake -B build "${gen[@]}" -DLLAMA_USE_SYSTEM_GGML=ON -Dggml_DIR="$W/ggml-config" -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_BUILD_RPATH="$W/llama.cpp/build/bin;$LIB" > "$W/peer_cfg.log" 2>&1 \
  || { echo "peer cmake configure failed" >&2; tail -n 30 "$W/peer_cfg.log" >&2; exit 1; }
cmake --build build -j "$JOBS" --target llama-speculative-simple llama-bench llama-completion > "$W/peer_build.log" 2>&1 \
  || { echo "peer build failed" >&2; tail -n 30 "$W/peer_build.log" >&2; exit 1; }
ls build/bin
echo "peer tools built in ${SECONDS}s against $LIB"
