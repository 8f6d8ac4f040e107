"""Counts per MMVQ Q4_K kernel (ncols 1..16) in the PTX of mmvq.cu before patch 0031, as quoted in
docs/benchmarks.md ("K-quant verifies on tensor cores"): `nvcc -O3 -std=c++17 -arch=sm_90 -I STUB
-I ggml/include -I ggml/src -I ggml/src/ggml-cuda -DGGML_USE_CUDA -ptx -o mmvq90.ptx
ggml/src/ggml-cuda/mmvq.cu` in a tree with 0001-0030, then `python ptx_counts.py mmvq90.ptx`."""

import re
import sys

ptx = open(sys.argv[1]).read()
for n in (1, 2, 4, 8, 9, 16):
    name = f"_Z13mul_mat_vec_qIL9ggml_type12ELi{n}ELb0ELb0ELb0ELb0E"
    i = ptx.find(".entry " + name)
    body = ptx[i : ptx.find("\n}\n", i)]

    def cnt(p):
        return len(re.findall(p, body))

    print(
        n,
        "lines",
        body.count("\n"),
        "ld.global",
        cnt(r"ld\.global"),
        "dp4a",
        cnt(r"dp4a"),
        "shr/and",
        cnt(r"\bshr\.") + cnt(r"\band\.b32"),
        "fma",
        cnt(r"fma\.rn\.f32"),
    )
