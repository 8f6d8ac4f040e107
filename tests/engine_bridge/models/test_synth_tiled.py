"""synth.tiled_random: the fast writer of huge random benchmark models (gpu/gpu_models.py)."""

from __future__ import annotations

import numpy as np

from engine_bridge.models import synth
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT


def test_tiled_matrices_keep_shape_and_rows_differ():
    rng = np.random.default_rng(0)
    with synth.tiled_random(block=1000):
        a = synth._randn(rng, (300, 64))
        small = synth._randn(rng, (10, 10))  # below the block: drawn as before
    assert a.shape == (300, 64) and a.dtype == np.float32
    assert not np.array_equal(a[0], a[1]), "rows must not repeat with the block period"
    flat = a.ravel()
    assert np.array_equal(flat[:1001], flat[1001:2002]), "the block (odd length) repeats"
    assert small.shape == (10, 10)
    assert synth._TILE_ABOVE is None, "the context restores the normal draw"
    b = synth._randn(np.random.default_rng(0), (300, 64))
    assert not np.array_equal(b.ravel()[:1001], b.ravel()[1001:2002])


def test_tiled_target_loads_and_decodes(tmp_path):
    with synth.tiled_random(block=4096):
        t, d = synth.write_pair(tmp_path, synth.TargetSpec(dtype="f16"), synth.DrafterSpec(dtype="f16"))
    with Engine.load(EngineConfig(target=str(t), draft=str(d), n_ctx=256), preflight=PAIR_PREFLIGHT) as eng:
        r = eng.generate("Hello", GenerationSettings(max_tokens=8, mode="ar"))
        assert r.summary.n_generated == 8
