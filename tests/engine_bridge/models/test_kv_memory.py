"""An explicit context size is checked against memory before anything is loaded (issue 32).

``--n-ctx 1000000000`` held 19.7 GB of a 23 GB machine for 47 s before llama.cpp gave up. The
pairing checks now estimate the KV cache from the headers and refuse, with the numbers, a context
whose cache and weights exceed the memory available (on CPU; on GPUs split_fits does it).
"""

from __future__ import annotations

import pytest

import modelfiles as mf
from engine_bridge.common.errors import IncompatiblePairError
from engine_bridge.common.memory import available_memory
from engine_bridge.models import compat, synth
from engine_bridge.models.compat import FAIL, PASS
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig

CPU = {"backend": "cpu"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with mf.fast_vocab():
        return synth.write_pair(tmp_path_factory.mktemp("kvmem"), synth.TargetSpec(), synth.DrafterSpec())


def test_a_context_beyond_memory_fails_with_the_numbers(pair):
    report = compat.check(*pair, n_ctx=1_000_000_000, build=CPU)
    check = report.get("kv_memory")
    assert check is not None and check.status == FAIL, [c.line() for c in report.checks]
    assert "1,000,000,000" in check.reason and "GiB" in check.reason and "available" in check.reason
    with pytest.raises(IncompatiblePairError, match="kv_memory"):
        PAIR_PREFLIGHT.check(EngineConfig(target=pair[0], draft=pair[1], n_ctx=1_000_000_000), [])


def test_a_context_that_fits_passes(pair):
    check = compat.check(*pair, n_ctx=4096, build=CPU).get("kv_memory")
    assert check.status == PASS and "4,096" in check.reason
    assert available_memory() and available_memory() > 0


def test_no_explicit_context_no_check(pair):
    assert compat.check(*pair, build=CPU).get("kv_memory") is None  # the default is capped by memory already
