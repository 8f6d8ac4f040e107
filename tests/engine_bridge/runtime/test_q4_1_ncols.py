"""Patch 0030: q4_1 weights against several columns, each weight block unpacked once (issue 28).

On x86 CPUs whose build does not repack the weights for AMX, a batch of several rows (a verify, a
prompt) multiplies the default target's q4_1 layers through ``ggml_vec_dot_q4_1_q8_1_ncols``: one
weight row against up to four columns. It must give every column exactly the one-column product's
result, or a verify's rows would stop rounding as one-token decodes do. These tests decode the same
batches in two processes (the switch ``DFLASH_Q4_1_NCOLS`` is read once per process), with ggml's
extra buffer types off so that no repacking (AMX on a Xeon) takes the product instead, and compare
the logits bit for bit.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from engine_bridge.models import registry_models
from engine_bridge.runtime import llama_ffi

PATCH = "0030-q4-1-ncols.patch"

#: the batch sizes decoded after the prompt: 2-4 take one group of columns, 5-7 a group and a rest,
#: 13 several groups
WIDTHS = (2, 3, 5, 7, 13)

SCRIPT = r"""
import hashlib, json, sys
import numpy as np
from engine_bridge.runtime import native
from engine_bridge.runtime.config import KVTypes

_defaults = native.C.llama_model_default_params
def _plain():  # no extra buffer types: no repacked (AMX) weights, so the CPU's own mul_mat runs
    p = _defaults()
    p.use_extra_bufts = False
    return p
native.C.llama_model_default_params = _plain

target, widths = sys.argv[1], [int(w) for w in sys.argv[2].split(",")]
model = native.Model(target, n_gpu_layers=0)
ctx = native.Context(model, n_ctx=512, n_batch=64, n_ubatch=64, kv=KVTypes(), n_threads=2)
prompt = model.tokenize("Write a Python function that checks whether a number is prime.")
cont = model.tokenize(" def is_prime(n): return n > 1 and all(n % k for k in range(2, n))", add_special=False)
out = {}
b = native.Batch(ctx)
for w in widths:
    ctx.seq_rm(0, 0, -1)
    b.clear(); b.add_tokens(prompt, 0, 0, [False] * len(prompt)); ctx.process(b)
    b.clear(); b.add_tokens(cont[:w], len(prompt), 0, [True] * w); ctx.process(b)
    batch = np.array(ctx.logits(w), dtype=np.float32)
    out[w] = {"batch": hashlib.sha256(batch.tobytes()).hexdigest(), "argmax": batch.argmax(axis=1).tolist()}
print("RESULT " + json.dumps(out))
"""


def _decode(target: str, ncols: str) -> dict:
    env = {**os.environ, "DFLASH_Q4_1_NCOLS": ncols}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, target, ",".join(map(str, WIDTHS))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def target():
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("patch 0030's kernel is x86 (AVX2) only")
    if not llama_ffi.has_patch(PATCH):
        pytest.skip(f"this engine build lacks {PATCH}")
    path = registry_models.cached()
    if path is None:
        pytest.skip("the default target is not in the models cache: run `dflash-studio fetch-default`")
    return str(path)


def test_several_columns_give_each_column_its_one_column_product_bit_for_bit(target):
    on, off = _decode(target, "1"), _decode(target, "0")
    for w in map(str, WIDTHS):
        assert on[w]["batch"] == off[w]["batch"], f"a batch of {w} rows: the logits differ"
        assert on[w]["argmax"] == off[w]["argmax"]
