"""An 8B-shaped target (Llama-3-8B's matrices and 128,256-token vocabulary, 2 layers, f16, random
tiled values) with a 1-layer DFlash drafter: compute buffers depend on shapes, not values or depth."""

import sys
from pathlib import Path
from engine_bridge.models import synth

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
ts = synth.TargetSpec(
    vocab="/work/main/.gpu-bundle/ggml-vocab-llama-bpe.gguf",
    n_embd=4096,
    n_layer=2,
    n_head=32,
    n_head_kv=8,
    head_dim=128,
    n_ff=14336,
    dtype="f16",
    rope_theta=5e5,
    name="8B shape, 2 layers (dflash-studio, 0019 memory)",
)
with synth.tiled_random():
    synth.write_target(out / "t8b.gguf", ts)
synth.write_drafter(out / "d8b.gguf", ts, synth.DrafterSpec(n_layer=1, dtype="f16", rope_theta=5e5))
print("written")
