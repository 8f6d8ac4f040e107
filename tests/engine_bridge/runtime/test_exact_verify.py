"""The exact verify (issue 29): batch-invariant CPU kernels (llama.cpp patch 0005, EngineConfig.exact).

From 512 cached cells llama.cpp's CPU flash attention splits the cache across threads for a one-row
decode and not for a verify batch, so the fast verify's rows round differently from AR's there. With
exact on, every row is computed as a one-token decode computes it: speculative output is the
target's own, token for token, at any context length.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.bench import drift
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

# a user turn long enough that prompt + answer pass 256 cells (n_kv 512: the one-row split path)
LONG = (
    "Here are my notes from the planning meeting. "
    + " ".join(
        f"Item {i}: the team discussed budget line {i * 7}, the schedule for phase {i % 5 + 1}, and who "
        f"reviews the design document before the deadline on day {i * 3 + 2}."
        for i in range(12)
    )
    + " Summarise the decisions in a short list."
)


@pytest.fixture(scope="module")
def pair():
    target, draft = registry_models.cached(), smollm2_drafter()
    if target is None or draft is None:
        pytest.skip("the default pair is not in the models cache: run `dflash-studio fetch-default`")
    return EngineConfig(target=target, draft=draft, n_ctx=1024)


@pytest.fixture(scope="module")
def exact(pair):
    try:
        eng = Engine.load(pair.replace(exact=True), preflight=PAIR_PREFLIGHT)
    except Exception as exc:  # noqa: BLE001 - a build without patch 0005 says so
        pytest.fail(f"the exact verify did not load: {exc}")
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def fast(pair):
    eng = Engine.load(pair, preflight=PAIR_PREFLIGHT)
    yield eng
    eng.close()


def test_the_build_has_the_switch(fast):
    assert llama_ffi.set_batch_invariant(fast.target_ctx.ptr, False)
    assert fast.describe()["exact"] is False


def test_rows_past_512_cells_round_as_one_token_decodes_only_when_exact(fast, exact):
    toks = exact.tokenize_chat([{"role": "user", "content": LONG}])
    assert 256 < len(toks) and len(toks) + 64 < 1024
    diffs = {}
    for name, eng in (("fast", fast), ("exact", exact)):
        gen, ref = eng.greedy_logits(toks, 40)
        got = np.concatenate(
            eng.replay_verify(toks, gen, drift.chain_batches(len(toks), gen, toks, 2), every_batch=True)
        )
        diffs[name] = float(np.abs(got - ref[1:]).max())  # (the first token: the prefill's)
    assert diffs["exact"] == 0.0
    assert diffs["fast"] > 0.0, "the fast verify no longer differs here: this test lost its point"


@pytest.fixture(scope="module")
def exact_ar(exact):
    toks = exact.tokenize_chat([{"role": "user", "content": LONG}])
    exact.reset()
    return toks, exact.generate(toks, GenerationSettings(mode="ar", max_tokens=48)).tokens


@pytest.mark.parametrize("mode", ["chain", "tree"])
def test_exact_speculative_output_is_the_targets_own(exact, exact_ar, mode):
    toks, ar = exact_ar
    exact.reset()
    out = exact.generate(toks, GenerationSettings(mode=mode, budget=15, max_tokens=48))
    assert out.tokens == ar
    assert out.summary.n_accepted > 0


def test_cli_exact_flag(tmp_path, pair):
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "engine_bridge.cli",
        "generate",
        "--target",
        str(pair.target),
        "--draft",
        str(pair.draft),
        "--n-ctx",
        "1024",
        "--max-tokens",
        "8",
        "--prompt",
        "Hello",
        "--exact",
        "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert '"exact": true' in out.stdout


def test_dflash_exact_switches_the_exact_verify_whatever_the_config_says(pair, monkeypatch):
    """$DFLASH_EXACT (gpu/gpu_fuse_ab.py --env DFLASH_EXACT, the A/B of patch 0016) turns the kernels
    on or off, not only the config's flag: past 512 cells only the exact kernels keep the drift at 0."""
    toks = None
    for value, configured, want in (("1", False, True), ("0", True, False)):
        monkeypatch.setenv("DFLASH_EXACT", value)
        with Engine.load(pair.replace(exact=configured), preflight=PAIR_PREFLIGHT) as eng:
            assert eng.describe()["exact"] is want
            toks = toks or eng.tokenize_chat([{"role": "user", "content": LONG}])
            gen, ref = eng.greedy_logits(toks, 24)
            got = np.concatenate(
                eng.replay_verify(toks, gen, drift.chain_batches(len(toks), gen, toks, 2), every_batch=True)
            )
            assert (float(np.abs(got - ref[1:]).max()) == 0.0) is want  # (ref[0]: the prefill's row)
