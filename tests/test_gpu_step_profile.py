"""gpu/gpu_step_profile.py --context N (patch 0022's measurement by KV length): the timing loops run
with an N-token prompt in the cache, and whole chain / tree steps are still timed when the drafter
takes most of a repeated prompt's blocks. Run on the CPU engine with the tiny pair."""

from __future__ import annotations

import json
from pathlib import Path

GPU = Path(__file__).resolve().parents[1] / "gpu"


def test_context_holds_the_prompt_in_the_cache_and_times_every_phase(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(GPU))
    import gpu_step_profile as sp

    target, draft = tiny_pair
    out = tmp_path / "phases.json"
    args = ["--target", str(target), "--draft", str(draft), "--time", "--timed", "2", "--rounds", "1"]
    assert sp.main([*args, "--steps", "4", "--context", "300", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["context"] == 300
    assert set(res["phases"]) == set(sp.PHASES)
    assert all(p["ms_median"] > 0 for p in res["phases"].values())
    assert res["phases"]["chain7"]["n"] == 4 and res["phases"]["tree15"]["n"] == 4


def test_long_prompt_repeats_the_paragraph_to_the_length_asked(tiny_engine, monkeypatch):
    monkeypatch.syspath_prepend(str(GPU))
    import gpu_step_profile as sp

    short = sp.long_prompt(tiny_engine, 0)
    assert short == tiny_engine.tokenize(sp.PROMPT)
    long = sp.long_prompt(tiny_engine, 257)
    assert len(long) == 257 and long[: len(short)] == short
