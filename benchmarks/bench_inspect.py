"""How long a full model inspection and a pairing check take on multi-GB files.

Writes a sparse GGUF shaped like Qwen3-8B at Q4_K_M (36 layers, hidden 4096, a 151,936-token
vocabulary with 151,387 merges, ~4.7 GiB of tensor data that is never written: the file is
extended with truncate) and a matching DFlash drafter (5 layers, F16, ~1 GiB sparse), then times
``inspect_model`` on each and ``compat.check`` on the pair. The header is in the page cache after
writing, so these are warm-cache numbers; a cold read adds the time to fetch a few MiB of header.

    .venv/bin/python benchmarks/bench_inspect.py [--runs 20] [--dir /tmp/bench-inspect] [--gguf-reader]

``--gguf-reader`` also times gguf.GGUFReader on the target for comparison (slow: seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter

Q = GGMLQuantizationType
N_VOCAB, N_MERGES = 151_936, 151_387


def _nbytes(qtype, shape) -> int:
    block, size = GGML_QUANT_SIZES[qtype]
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    return rows * (shape[-1] // block) * size


def _tokenizer(w: GGUFWriter, mask: int | None) -> None:
    tokens = [f"tok{i:06d}" for i in range(N_VOCAB)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([1] * N_VOCAB)
    w.add_token_merges([f"tok{i:06d} tok{i + 1:06d}" for i in range(N_MERGES)])
    w.add_bos_token_id(151643)
    w.add_eos_token_id(151645)
    if mask is not None:
        w.add_uint32("tokenizer.ggml.mask_token_id", mask)
    w.add_chat_template(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )


def _finish(w: GGUFWriter, path: Path, tensors: list[tuple[str, tuple[int, ...], Q]]) -> None:
    for name, shape, qtype in tensors:
        w.add_tensor_info(
            name, shape, np.dtype(np.float32 if qtype == Q.F32 else np.float16), _nbytes(qtype, shape), raw_dtype=qtype
        )
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    # The data section is sparse: extend the file to the size the header promises.
    from engine_bridge.models.gguf_header import read_header

    hdr = read_header(path)
    os.truncate(path, hdr.data_needed)


def write_target(path: Path) -> Path:
    a, d, L, ff, nh, nkv, hd = "qwen3", 4096, 36, 12288, 32, 8, 128
    w = GGUFWriter(str(path), a)
    w.add_string("general.name", "bench Qwen3-8B-shaped Q4_K_M")
    w.add_uint32("general.file_type", 15)
    for k, v in {
        "context_length": 40960,
        "embedding_length": d,
        "block_count": L,
        "feed_forward_length": ff,
        "attention.head_count": nh,
        "attention.head_count_kv": nkv,
        "attention.key_length": hd,
        "attention.value_length": hd,
    }.items():
        w.add_uint32(f"{a}.{k}", v)
    w.add_float32(f"{a}.rope.freq_base", 1e6)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    _tokenizer(w, None)
    t = [
        ("token_embd.weight", (N_VOCAB, d), Q.Q4_K),
        ("output.weight", (N_VOCAB, d), Q.Q6_K),
        ("output_norm.weight", (d,), Q.F32),
    ]
    for i in range(L):
        p = f"blk.{i}."
        t += [
            (p + "attn_norm.weight", (d,), Q.F32),
            (p + "attn_q.weight", (nh * hd, d), Q.Q4_K),
            (p + "attn_k.weight", (nkv * hd, d), Q.Q4_K),
            (p + "attn_v.weight", (nkv * hd, d), Q.Q6_K),
            (p + "attn_output.weight", (d, nh * hd), Q.Q4_K),
            (p + "attn_q_norm.weight", (hd,), Q.F32),
            (p + "attn_k_norm.weight", (hd,), Q.F32),
            (p + "ffn_norm.weight", (d,), Q.F32),
            (p + "ffn_gate.weight", (ff, d), Q.Q4_K),
            (p + "ffn_up.weight", (ff, d), Q.Q4_K),
            (p + "ffn_down.weight", (d, ff), Q.Q6_K),
        ]
    _finish(w, path, t)
    return path


def write_drafter(path: Path) -> Path:
    d, L, ff, nh, nkv, hd, layers = 4096, 5, 12288, 32, 8, 128, [2, 10, 18, 26, 34]
    w = GGUFWriter(str(path), "dflash")
    w.add_string("general.name", "bench DFlash drafter")
    w.add_uint32("general.file_type", 1)
    for k, v in {
        "context_length": 40960,
        "embedding_length": d,
        "block_count": L,
        "feed_forward_length": ff,
        "attention.head_count": nh,
        "attention.head_count_kv": nkv,
        "attention.key_length": hd,
        "attention.value_length": hd,
        "block_size": 16,
    }.items():
        w.add_uint32(f"dflash.{k}", v)
    w.add_float32("dflash.rope.freq_base", 1e6)
    w.add_float32("dflash.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_array("dflash.target_layers", layers)
    _tokenizer(w, 151669)
    t = [
        ("fc.weight", (d, len(layers) * d), Q.F16),
        ("enc.output_norm.weight", (d,), Q.F32),
        ("output_norm.weight", (d,), Q.F32),
    ]
    for i in range(L):
        p = f"blk.{i}."
        t += [
            (p + "attn_norm.weight", (d,), Q.F32),
            (p + "attn_q.weight", (nh * hd, d), Q.F16),
            (p + "attn_k.weight", (nkv * hd, d), Q.F16),
            (p + "attn_v.weight", (nkv * hd, d), Q.F16),
            (p + "attn_output.weight", (d, nh * hd), Q.F16),
            (p + "attn_q_norm.weight", (hd,), Q.F32),
            (p + "attn_k_norm.weight", (hd,), Q.F32),
            (p + "ffn_norm.weight", (d,), Q.F32),
            (p + "ffn_gate.weight", (ff, d), Q.F16),
            (p + "ffn_up.weight", (ff, d), Q.F16),
            (p + "ffn_down.weight", (d, ff), Q.F16),
        ]
    _finish(w, path, t)
    return path


def _time(fn, runs: int) -> dict:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return {
        "runs": runs,
        "median_ms": 1e3 * statistics.median(samples),
        "mean_ms": 1e3 * statistics.fmean(samples),
        "stdev_ms": 1e3 * (statistics.stdev(samples) if runs > 1 else 0.0),
        "max_ms": 1e3 * max(samples),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--gguf-reader", action="store_true")
    args = ap.parse_args()

    from engine_bridge.models import compat
    from engine_bridge.models.modelinfo import inspect_model

    folder = Path(args.dir or tempfile.mkdtemp(prefix="bench-inspect-"))
    folder.mkdir(parents=True, exist_ok=True)
    target, drafter = folder / "qwen3-8b-shaped-Q4_K_M.gguf", folder / "qwen3-8b-shaped-dflash-f16.gguf"
    if not target.exists():
        write_target(target)
    if not drafter.exists():
        write_drafter(drafter)
    cpu = {"backend": "cpu"}
    report = compat.check(target, drafter, build=cpu)
    assert report.ok, report.summary()
    res = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
        "target_bytes": target.stat().st_size,
        "target_bytes_on_disk": target.stat().st_blocks * 512,
        "drafter_bytes": drafter.stat().st_size,
        "inspect_target": _time(lambda: inspect_model(target), args.runs),
        "inspect_drafter": _time(lambda: inspect_model(drafter), args.runs),
        "check_pair": _time(lambda: compat.check(target, drafter, build=cpu), args.runs),
    }
    if args.gguf_reader:
        from gguf import GGUFReader

        res["gguf_reader_target"] = _time(lambda: GGUFReader(target), 1)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
