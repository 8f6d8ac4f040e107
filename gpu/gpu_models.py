"""Writes the GPU benchmark pairs with the project's own generator (engine_bridge.models.synth).

* ``q15``: a ~1.5 B-parameter qwen3 target (n_embd 2048, 18 layers, 16 heads / 8 KV heads,
  head_dim 128, n_ff 6144, the Qwen 2 vocabulary of 151,936 tokens, untied lm_head) with a 2-layer
  DFlash drafter reading target layers 1, 6, 11, 16. f16. Speed does not depend on the weights;
  the structured synthetic weights give the drafter a little agreement with the target.
* ``tiny``: the test-sized pair (GPT-2 vocabulary): host overhead dominates there.
* ``q8b``: the Qwen3-8B shape (qwen3, n_embd 4096, 36 layers, 32/8 heads, head_dim 128, n_ff 12288,
  Qwen 2 vocabulary), written f16 (``q8b-target-f16.gguf``; gpu/gpu_verify_cost.sh quantises
  it to Q4_K_M with upstream's llama-quantize as ``q8b-target.gguf``), with a 5-layer f16 drafter
  reading GGUF layers 2, 10, 18, 26, 34.
* ``q15c``: the Qwen2.5-Coder-1.5B-Instruct shape (qwen2 with Q/K/V biases, n_embd 1536, 28 layers,
  12/2 heads, head_dim 128, n_ff 8960, Qwen 2 vocabulary, untied output), written f16
  (``q15c-target-f16.gguf``; quantised to Q4_K_M like q8b) with issue 30's drafter shape (1 layer, FFN
  3072, GGUF layers 2, 8, 14, 20, 26), f16: the K-quant verify of issue 30's pair without carrying it.
* ``smol``: the SmolLM2-135M shape (llama, n_embd 576, 30 layers, 9/3 heads, head_dim 64, n_ff 1536,
  SmolLM2's vocabulary of 49,152 tokens: BUNDLE/ggml-vocab-smollm2.gguf, else GPT-2's 50,257),
  f16, with a 2-layer drafter reading 2, 8, 15, 22, 29.
* ``xover``: the per-type MMVQ crossover source: the 8B shape's matrices (n_embd 4096, n_ff 12288)
  in 8 layers with the GPT-2 vocabulary, f16 (no drafter); gpu_verify_cost.sh quantises it to each
  type measured, so that every matrix of the model has that type.

The 8B-shape matrices are tiled from one random block (synth.tiled_random): speed does not depend
on the values, and drawing every normal of the 8B shape took 349 s.

Usage: python gpu/gpu_models.py OUT_DIR BUNDLE_DIR [--pairs tiny,q15]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from engine_bridge.models import synth


def specs(name: str, bundle: Path) -> tuple[synth.TargetSpec, synth.DrafterSpec | None, str]:
    """(target spec, drafter spec or None, file stem) of one pair."""
    qwen2 = str(bundle / "ggml-vocab-qwen2.gguf")
    if name == "tiny":
        return synth.TargetSpec(), synth.DrafterSpec(), "tiny"
    if name == "q15":
        ts = synth.TargetSpec(
            vocab=qwen2,
            n_embd=2048,
            n_layer=18,
            n_head=16,
            n_head_kv=8,
            head_dim=128,
            n_ff=6144,
            dtype="f16",
            rope_theta=1e6,
            name="random qwen3 1.5B (dflash-studio)",
        )
        return ts, synth.DrafterSpec(n_layer=2, target_layers=(1, 6, 11, 16), dtype="f16", rope_theta=1e6), "q15"
    if name == "q8b":
        ts = synth.TargetSpec(
            vocab=qwen2,
            n_embd=4096,
            n_layer=36,
            n_head=32,
            n_head_kv=8,
            head_dim=128,
            n_ff=12288,
            dtype="f16",
            rope_theta=1e6,
            name="random qwen3 8B shape (dflash-studio)",
        )
        ds = synth.DrafterSpec(n_layer=5, target_layers=(2, 10, 18, 26, 34), dtype="f16", rope_theta=1e6)
        return ts, ds, "q8b"
    if name == "q15c":
        ts = synth.TargetSpec(
            arch="qwen2",
            vocab=qwen2,
            n_embd=1536,
            n_layer=28,
            n_head=12,
            n_head_kv=2,
            head_dim=128,
            n_ff=8960,
            dtype="f16",
            rope_theta=1e6,
            name="random Qwen2.5-Coder-1.5B shape (dflash-studio)",
        )
        ds = synth.DrafterSpec(n_layer=1, n_ff=3072, target_layers=(2, 8, 14, 20, 26), dtype="f16", rope_theta=1e6)
        return ts, ds, "q15c"
    if name == "smol":
        vocab = bundle / "ggml-vocab-smollm2.gguf"
        ts = synth.TargetSpec(
            arch="llama",
            vocab=str(vocab) if vocab.exists() else "gpt2",
            n_embd=576,
            n_layer=30,
            n_head=9,
            n_head_kv=3,
            head_dim=64,
            n_ff=1536,
            dtype="f16",
            rope_theta=1e5,
            name="random SmolLM2-135M shape (dflash-studio)",
        )
        ds = synth.DrafterSpec(n_layer=2, target_layers=(2, 8, 15, 22, 29), dtype="f16", rope_theta=1e5)
        return ts, ds, "smol"
    if name == "xover":
        ts = synth.TargetSpec(
            vocab="gpt2",
            n_embd=4096,
            n_layer=8,
            n_head=32,
            n_head_kv=8,
            head_dim=128,
            n_ff=12288,
            dtype="f16",
            rope_theta=1e6,
            name="8B-shape matrices, 8 layers (dflash-studio)",
        )
        return ts, None, "xover"
    raise SystemExit(f"gpu_models: unknown pair {name!r} (tiny, q15, q15c, q8b, smol, xover)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("bundle")
    ap.add_argument("--pairs", default="tiny,q15")
    a = ap.parse_args(argv)
    out_dir, bundle = Path(a.out), Path(a.bundle)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in [x for x in a.pairs.split(",") if x]:
        ts, ds, stem = specs(name, bundle)
        t0 = time.time()
        # targets that gpu_verify_cost.sh quantises are written as <stem>-target-f16.gguf
        quantised_later = name in ("q8b", "q15c", "xover")
        # only the huge shapes are tiled: tiny, q15 and smol keep the values of earlier runs
        with synth.tiled_random() if quantised_later else contextlib.nullcontext():
            tpath = out_dir / (f"{stem}-target-f16.gguf" if quantised_later else f"{stem}-target.gguf")
            synth.write_target(tpath, ts)
            if ds is not None:
                synth.write_drafter(out_dir / f"{stem}-dflash.gguf", ts, ds)
        print(f"{name} pair written in {time.time() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
