"""The figures docs/benchmarks.md and patch 0032's header take from mmvq_ab32_time.txt: per-layer sums of
the 1.5B's matrices at 8 columns, the split's gain on ffn_down and the largest split differences.

    python docs/runs/2026-12-07-gpu/s81-h100-split-standalone/layer_sums.py

A layer's matrices, each at its Q4_K time: q, o (1536 x 1536), k, v (256 x 1536), gate, up (8960 x 1536),
ffn_down half Q4_K and half Q6_K (Q4_K_M's mix; attn_v's Q6_K layers are counted at Q4_K's time)."""

import re
from pathlib import Path

CELL = re.compile(r"n=(\d+) ([\d.]+)/([\d.]+)/([\d.]+) us \([^;]+; diff [\d.e+-]+, split ([\d.e+-]+), of ([\d.e+-]+)\)")
rows = {}
for line in (Path(__file__).parent / "mmvq_ab32_time.txt").read_text().splitlines():
    name = line.split(":")[0].split()
    rows[" ".join(name[:2])] = {int(m[0]): tuple(float(x) for x in m[1:]) for m in CELL.findall(line)}

LAYER = {"1.5B q": 2, "1.5B kv": 2, "1.5B gate": 2, "1.5B down4": 0.5, "1.5B down6": 0.5}
SPLIT_FROM_32 = {"1.5B down4", "1.5B down6"}  # K = 8960: 35 super-blocks a row; the others have 6
for n in (4, 8, 16):
    s31 = sum(w * rows[k][n][1] for k, w in LAYER.items())
    s32 = sum(w * rows[k][n][2] for k, w in LAYER.items())
    s32r = sum(w * rows[k][n][2 if k in SPLIT_FROM_32 else 1] for k, w in LAYER.items())
    print(
        f"n={n}: a 1.5B layer, us: 0031 {s31:.1f}, split from 4 super-blocks {s32:.1f}, from 32 {s32r:.1f}"
        f" ({s32r / s31 - 1:+.1%})"
    )
for k in sorted(SPLIT_FROM_32):
    for n in (4, 8, 16):
        mmvq, m31, m32 = rows[k][n][:3]
        print(f"{k} n={n}: split {1 - m32 / m31:.0%} under 0031, {m32 / mmvq:.2f}x MMVQ")
for t, keys in (
    ("Q6_K", ["1.5B down6", "8B down6", "8B head6", "1.5B head6"]),
    ("Q4_K", [k for k in rows if not k.endswith("6")]),
):
    worst = max((rows[k][n][3], rows[k][n][4], k, n) for k in keys for n in rows[k])
    print(f"largest split difference, {t}: {worst[0]:.1e} (of {worst[1]:.1e}, {worst[2]} n={worst[3]})")
