"""Writes the GPU benchmark pairs with the project's own generator (engine_bridge.synth).

* ``q15``: a ~1.5 B-parameter qwen3 target (n_embd 2048, 18 layers, 16 heads / 8 KV heads,
  head_dim 128, n_ff 6144, the Qwen 2 vocabulary of 151,936 tokens, untied lm_head) with a 2-layer
  DFlash drafter reading target layers 1, 6, 11, 16. f16. Speed does not depend on the weights;
  the structured synthetic weights give the drafter a little agreement with the target.
* ``tiny``: the test-sized pair (GPT-2 vocabulary): host overhead dominates there.

Usage: python packaging/gpu_models.py OUT_DIR BUNDLE_DIR
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from engine_bridge import synth


def main(out: str, bundle: str) -> int:
    out_dir = Path(out)
    t0 = time.time()
    synth.write_pair(out_dir, synth.TargetSpec(), synth.DrafterSpec(), stem="tiny")
    print(f"tiny pair written in {time.time() - t0:.1f} s", flush=True)
    vocab = Path(bundle) / "ggml-vocab-qwen2.gguf"
    ts = synth.TargetSpec(vocab=str(vocab), n_embd=2048, n_layer=18, n_head=16, n_head_kv=8, head_dim=128,
                          n_ff=6144, dtype="f16", rope_theta=1e6, name="random qwen3 1.5B (dflash-studio)")
    ds = synth.DrafterSpec(n_layer=2, target_layers=(1, 6, 11, 16), dtype="f16", rope_theta=1e6)
    t0 = time.time()
    synth.write_pair(out_dir, ts, ds, stem="q15")
    print(f"q15 pair written in {time.time() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
