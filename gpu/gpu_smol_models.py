"""The default pair's target shape with random weights, quantised as the shipped file is (issue 28).

The registry's SmolLM2-135M-Instruct.Q4_1.gguf (94 MB) does not fit a device call beside the
working tree, so the GPU machine writes the same shape with engine_bridge.models.synth (llama,
n_embd 576, 30 layers, 9/3 heads, head_dim 64, n_ff 1536) and SmolLM2's own tokenizer, read from
the shipped drafter (resources/models/smollm2/drafter.gguf holds all 49,152 tokens), so that the
shipped drafter attaches to it. Kernel times do not depend on the weights' values, only on their
types and shapes.

    write OUT_DIR                 smol-f16.gguf (f16)
    quantise OUT_DIR TYPE [pure]  smol-TYPE.gguf through the engine's own llama_model_quantize: TYPE
                                  q4_1 gives the shipped file's mixture (every layer matrix Q4_1, the
                                  576-wide head Q8_0: Q6_K does not fit 576 columns); "pure" puts
                                  every matrix in TYPE (the per-type MMVQ sweep)
    xover OUT_DIR                 xover-q4_1-pure.gguf: 8 layers with the Qwen3-8B shape's matrices
                                  (n_embd 4096, n_ff 12288, GPT-2 vocabulary; values tiled from one
                                  random block), every matrix Q4_1, and xover-dflash.gguf (1 layer, f16)

The shipped file ties the head to token_embd (Q8_0); the synthetic one has an untied output.weight
(Q8_0) and a Q4_1 token_embd: the head's matmul is the same type and shape, token_embd is only
ever read by get_rows.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# any GGUF holding SmolLM2's vocabulary (DFLASH_VOCAB_GGUF: e.g. the real target, where the shipped
# drafter is not in the working tree that travelled)
VOCAB = Path(
    os.environ.get("DFLASH_VOCAB_GGUF")
    or Path(__file__).resolve().parent.parent / "resources/models/smollm2/drafter.gguf"
)


def write(out: Path) -> Path:
    from engine_bridge.models import synth

    ts = synth.TargetSpec(
        arch="llama",
        vocab=str(VOCAB),
        n_embd=576,
        n_layer=30,
        n_head=9,
        n_head_kv=3,
        head_dim=64,
        n_ff=1536,
        dtype="f16",
        rope_theta=1e5,
        rms_eps=1e-5,
        name="random SmolLM2-135M shape (dflash-studio, issue 28)",
    )
    out.mkdir(parents=True, exist_ok=True)
    return synth.write_target(out / "smol-f16.gguf", ts)


def quantise(out: Path, qtype: str, pure: bool) -> Path:
    import llama_cpp

    src, dst = out / "smol-f16.gguf", out / f"smol-{qtype}{'-pure' if pure else ''}.gguf"
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{qtype.upper()}")
    p.nthread = 8
    p.pure = pure
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize {qtype} failed: rc={rc}")
    return dst


def xover(out: Path) -> Path:
    """The 8B shape's long weight rows (ne00 4096 / 12288) at one quant type, with a drafter."""
    import llama_cpp
    from engine_bridge.models import synth

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
        name="8B-shape matrices, 8 layers (dflash-studio, issue 28)",
    )
    out.mkdir(parents=True, exist_ok=True)
    with synth.tiled_random():
        synth.write_target(out / "xover-f16.gguf", ts)
    synth.write_drafter(out / "xover-dflash.gguf", ts, synth.DrafterSpec(n_layer=1, dtype="f16", rope_theta=1e6))
    dst = out / "xover-q4_1-pure.gguf"
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype, p.nthread, p.pure = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1, 16, True
    if llama_cpp.llama_model_quantize(str(out / "xover-f16.gguf").encode(), str(dst).encode(), ctypes.byref(p)) != 0:
        raise SystemExit("llama_model_quantize xover q4_1 failed")
    return dst


def main(argv: list[str]) -> int:
    t0 = time.time()
    if len(argv) >= 2 and argv[0] == "write":
        path = write(Path(argv[1]))
    elif len(argv) >= 2 and argv[0] == "xover":
        path = xover(Path(argv[1]))
    elif len(argv) >= 3 and argv[0] == "quantise":
        path = quantise(Path(argv[1]), argv[2], len(argv) > 3 and argv[3] == "pure")
    else:
        print(__doc__)
        return 2
    print(f"{path} written in {time.time() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
