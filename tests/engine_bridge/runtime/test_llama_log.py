"""llama.cpp's log stays off the terminal unless DFLASH_LLAMA_LOG is set; its warnings reach the user as
our own lines; the default context size is the model's own length (no "training context overflow")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine_bridge.runtime import context_size
from engine_bridge.runtime.native import Model

ROOT = Path(__file__).resolve().parents[3]
#: what llama.cpp's own lines look like: "llama_context: ...", "load_tensors: ...", "print_info: ..."
RAW_LLAMA = re.compile(r"^(llama_\w+|load\w*|print_info|ggml_\w+|gguf_\w+|\.+)[:.]", re.M)


def _generate(target, draft, *extra, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "DFLASH_LLAMA_LOG"}
    env.update(env_extra or {})
    cmd = [
        sys.executable,
        "-m",
        "engine_bridge.cli",
        "generate",
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--prompt",
        "The quick brown fox",
        "--max-tokens",
        "8",
        *extra,
    ]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_generation_prints_no_raw_llama_lines_and_reports_its_warning_as_ours(tiny_pair):
    target, draft = tiny_pair  # trained context 4096: asking for 8192 makes llama.cpp warn
    proc = _generate(target, draft, "--n-ctx", "8192")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not RAW_LLAMA.search(proc.stderr), proc.stderr[:2000]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("dflash-studio: llama.cpp warning:")]
    assert any("n_ctx_seq (8192) > n_ctx_train (4096)" in line for line in ours), proc.stderr
    assert len(ours) == len(set(ours))  # target and drafter warn alike: said once


def test_dflash_llama_log_lets_llama_cpp_speak(tiny_pair):
    target, draft = tiny_pair
    proc = _generate(target, draft, "--n-ctx", "8192", env_extra={"DFLASH_LLAMA_LOG": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert RAW_LLAMA.search(proc.stderr)
    assert re.search(r"^llama_context: n_ctx_seq \(8192\) > n_ctx_train \(4096\)", proc.stderr, re.M)


def test_the_default_context_is_the_models_own_and_draws_no_warning(tiny_pair):
    target, draft = tiny_pair
    proc = _generate(target, draft, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["engine"]["n_ctx"] == 4096
    assert "warning" not in proc.stderr and not RAW_LLAMA.search(proc.stderr), proc.stderr


def test_the_default_context_is_capped_by_memory(tiny_pair):
    target, _ = tiny_pair
    m = Model(target)
    try:
        per_token = context_size.kv_bytes_per_token(m)
        assert per_token == 4 * 2 * 16 * (2 + 2)  # 4 layers, 2 KV heads of 16, f16 K and V
        assert context_size.default_n_ctx(m, memory=1 << 40) == 4096  # the trained length
        small = int(1000 * per_token * 2 / context_size.KV_MEMORY_SHARE)  # room for 1000 tokens
        assert context_size.default_n_ctx(m, memory=small) == 1000
        assert context_size.default_n_ctx(m, memory=1) == context_size.MIN_DEFAULT_CTX
    finally:
        m.free()


def test_a_refused_load_says_why_in_llama_cpps_words(tmp_path):
    from engine_bridge.common.errors import ModelLoadError

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + (99).to_bytes(4, "little") + bytes(64))
    with pytest.raises(ModelLoadError, match=r"llama\.cpp error: .*version 99"):
        Model(bad)
