"""benchmarks/miss_confidence.py: a walk's hits and misses binned by the target's top-1 probability."""

from __future__ import annotations

import json

from benchmarks.miss_confidence import BINS, bin_of, main, tally


def test_bins_take_the_highest_edge_below_a_probability():
    assert [bin_of(p) for p in (1.0, 0.9, 0.89, 0.6, 0.31, 0.3, 0.0)] == [0, 0, 1, 1, 2, 2, 3]
    assert len(BINS) == 4


def test_a_walk_counts_its_accepted_drafts_as_hits_and_each_short_step_as_one_miss():
    # prompt of 3 tokens (positions 0-2), answer of 8 (positions 3-10), budget 2
    p1 = [0.95, 0.95, 0.7, 0.2, 0.95, 0.5, 0.95, 0.95]
    # anchor 3 (answer[0]): 2 accepted (answer 1, 2), a full step: no miss;
    # anchor 6: 0 accepted, miss at answer 4; anchor 7: 1 accepted (answer 5), miss at answer 6;
    # anchor 9: 1 accepted (answer 7), its miss would lie past the answer
    steps = [(3, 2), (6, 0), (7, 1), (9, 1)]
    t = tally(p1, steps, start=3, n_answer=8, budget=2)
    assert t["tokens"] == [5, 1, 1, 1]
    assert t["hits"] == [2, 1, 1, 0]  # answer 1 (0.95), 2 (0.7), 5 (0.5), 7 (0.95)
    assert t["misses"] == [2, 0, 0, 0]  # answer 4 (0.95) and 6 (0.95)


def test_a_saved_run_prints_its_table_again(tmp_path, capsys):
    saved = {"categories": {"code": {"tokens": [5, 1, 1, 1], "hits": [2, 1, 1, 0], "misses": [2, 0, 0, 0]}}}
    f = tmp_path / "miss.json"
    f.write_text(json.dumps(saved))
    assert main(["--summary", str(f)]) == 0
    out = capsys.readouterr().out
    assert "| code | 0.9-1.0 | 62% | 0.50 (4) | 100% |" in out
    assert "| code | 0.0-0.3 | 12% | - | 0% |" in out
