"""Patch 0021: with DFLASH_AMX_TILES=1 a prompt of 64 rows or more goes through ggml's AMX tile kernels,
and that path runs (with patch 0020 alone it died with SIGILL on this project's Xeon hosts: upstream
issue 20824), while every verify keeps a one-token decode's kernel, so chain and tree stay AR's tokens.
Only where the CPU has AMX-INT8 and the engine was built for it; the switch is read once per process,
so the runs are a child process's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.runtime.cpu_build import cpu_flags

ROOT = Path(__file__).resolve().parents[3]

#: a prompt of ~108 tokens: its prefill is one batch of more than 64 rows (the tile path), every
#: step after it fewer (the one-row kernels)
CHILD = """
import json, sys
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
target, draft = sys.argv[1], sys.argv[2]
prompt = " ".join(["The history of the city begins with a small settlement on the river, where traders met."] * 6)
out = {}
with Engine.load(EngineConfig(target=target, draft=draft, n_ctx=1024, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    out["n_prompt"] = len(eng.tokenize(prompt))
    for mode in ("ar", "chain", "tree"):
        res = eng.generate(prompt, GenerationSettings(mode=mode, budget=7, max_tokens=24))
        out[mode] = list(res.tokens)
print("RESULT " + json.dumps(out))
"""


def _amx_engine() -> bool:
    try:
        from engine_bridge.runtime.llama_ffi import build_info

        return "-DGGML_AMX_INT8=ON" in str(build_info().get("cmake_args", ""))
    except Exception:  # noqa: BLE001 - no engine: nothing to run
        return False


def test_the_amx_tile_path_runs_a_prompt_and_keeps_ar_tokens():
    if not {"amx_int8", "amx_tile"} <= cpu_flags() or not _amx_engine():
        pytest.skip("needs a CPU with AMX-INT8 and an engine built for it (packaging/build_engine.sh on it)")
    target, draft = registry_models.cached(), smollm2_drafter()
    if target is None or draft is None:
        pytest.skip("the default pair is not in the models cache: run `dflash-studio fetch-default`")
    env = dict(os.environ, DFLASH_AMX_TILES="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(target), str(draft)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"the tile path died (rc {proc.returncode}): {proc.stderr[-2000:]}"
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    out = json.loads(line[len("RESULT ") :])
    assert out["n_prompt"] >= 64  # (the prefill took the tiles)
    assert len(out["ar"]) == 24
    assert out["chain"] == out["ar"] and out["tree"] == out["ar"]
