"""Cancel storm on the default pair: cancels from another thread at random moments, drafter swaps
and settings changes mixed in; no failure, every greedy run a prefix of the target's own output,
chain and tree lossless afterwards."""

from __future__ import annotations

import pytest

from engine_bridge.models.demo import demo_pair, shipped_pair

from fault_storm import run_storm


def _check(res, runs):
    assert res.failures == []
    assert res.runs == runs
    assert res.cancelled > 0, "no run was cancelled: the storm did not storm"
    assert res.completed >= runs // 4, "the runs left to finish did not all finish"
    assert res.swaps >= runs // 10 and res.settings_changes >= runs // 5
    assert res.prefix_checked > 0 and res.lossless_checked > 0


def test_cancel_storm_fast(tmp_path):
    # the shipped 15.7M pair when there is one: the fast part's speed; the long part takes demo_pair()
    target, drafter = shipped_pair() or demo_pair()
    # one llama.cpp thread: on a shared CI core llama.cpp's spinning thread pool can take 20x longer
    res = run_storm(target, drafter, tmp_path, runs=20, seed=1, max_tokens=32, n_threads=1)
    _check(res, 20)


@pytest.mark.faults_long
@pytest.mark.timeout(3600)  # 200 runs at one llama.cpp thread: about 25 min on a 2-vCPU machine
def test_cancel_storm_long(tmp_path):
    target, drafter = demo_pair()
    res = run_storm(target, drafter, tmp_path, runs=200, seed=2, n_threads=1)
    _check(res, 200)
