"""A random-weight DFlash drafter with a trained drafter's shape, for step costs on a real target.

A step's cost does not depend on whether the drafts are accepted: the verify decodes budget + 1 rows
either way, and the drafter's kernels depend on its shapes and types only. So where the trained
drafter is not at hand on the GPU machine (issue 30's 1.5B drafter must be trained again), a random
one of the same shape measures the same phases, and carries nothing but the target across.

    python gpu/gpu_synth_drafter.py TARGET OUT [--layers 1] [--ffn 3072] [--target-layers 3,9,15,21,27]
                                    [--type q8_0]

The defaults are issue 30's drafter for Qwen2.5-Coder-1.5B (one layer at FFN 3072, five target
layers, block 16, q8_0: 31.5 M weights, 39 MB). Its drafts are noise (acceptance 0).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target")
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--target-layers", default="3,9,15,21,27", help="GGUF layer ids (HF id + 1)")
    ap.add_argument("--type", default="q8_0", choices=("f16", "q8_0", "q4_0"))
    a = ap.parse_args(argv)
    from engine_bridge.models import synth
    from engine_bridge.models.convert_quant import quantize_drafter

    t0 = time.perf_counter()
    layers = tuple(int(x) for x in a.target_layers.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        f16 = Path(tmp) / "d-f16.gguf"
        synth.write_drafter_for(a.target, f16, n_layer=a.layers, n_ff=a.ffn, target_layers=layers, dtype="f16")
        if a.type == "f16":
            Path(a.out).write_bytes(f16.read_bytes())
        else:
            quantize_drafter(f16, a.out, a.type, overwrite=True)
    size = Path(a.out).stat().st_size
    print(
        f"written {a.out}: {size / 1e6:.1f} MB, {a.layers} layer(s), FFN {a.ffn}, target layers {list(layers)}, "
        f"{a.type}, {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
