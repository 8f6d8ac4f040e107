"""Issue 29's divergence table (engine_bridge.bench.divergences, benchmarks/bench_divergences.py):
partings counted by the judge's reason, those that are not near-ties named, and margins above a
device's measured bound listed; checked on reports made for the purpose and on the H200 run whose
table docs/benchmarks.md gives ("Drift and divergences on the H200")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine_bridge.bench import divergences as dv

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "docs/runs/2026-11-28-gpu/s38-h200-outrows-full"


def _report(runs, temperature=0.0):
    return {
        "settings": {"suite": {"name": "gsm8k"}, "temperature": temperature},
        "rows": [
            {"id": "ar", "label": "autoregressive", "kind": "ar"},
            {"id": "c0", "label": "verify=chain budget=7", "kind": "spec"},
        ],
        "runs": [{"row_id": "ar", "prompt_id": p, "rep": 0, "divergence": None} for p in "abcde"] + runs,
    }


def _div(margin, gaps=None, near=True, tol=0.1):
    return {"index": 3, "margin": margin, "tolerance": tol, "near_tie": near, "shape_gaps": gaps}


def test_each_parting_is_counted_under_the_first_reason_the_judge_reads():
    runs = [
        {"row_id": "c0", "prompt_id": "a", "rep": 0, "divergence": None},
        {"row_id": "c0", "prompt_id": "b", "rep": 0, "divergence": _div(0.05)},
        {"row_id": "c0", "prompt_id": "c", "rep": 0, "divergence": _div(0.5, {"b1": 0.5, "v8": -0.2})},
        {"row_id": "c0", "prompt_id": "d", "rep": 0, "divergence": _div(0.5, {"b1": 0.5, "v8": 0.05})},
        {"row_id": "c0", "prompt_id": "e", "rep": 0, "divergence": _div(0.5, {"b1": 0.5, "v8": 0.2})},
        {"row_id": "c0", "prompt_id": "f", "rep": 1, "divergence": _div(2.5, {"b1": 2.5, "v8": 2.4}, near=False)},
    ]
    (row,) = dv.rows_of(_report(runs), bound=1.0)
    assert (row.suite, row.runs, row.identical, row.parted) == ("gsm8k", 6, 1, 5)
    assert [row.near_ties[k] for k in dv.REASONS] == [1, 1, 1, 1]
    assert row.not_near_ties == [("f", 1, 2.5)]
    assert row.above_bound == [("f", 1, 2.5, 3)]
    md = dv.markdown([row], bound=1.0)
    assert "| gsm8k | verify=chain budget=7 | 6 | 1 | 5 | 1 / 1 / 1 / 1 | 1 | 0.500 / 2.500 | 1 |" in md
    assert "5 of 6 runs parted from AR; 4 near-ties, 1 not." in md
    assert "not a near-tie: gsm8k verify=chain budget=7, f rep 1 (margin 2.500)" in md


def test_without_a_bound_nothing_is_listed_above_it_and_sampled_reports_are_refused():
    runs = [{"row_id": "c0", "prompt_id": "a", "rep": 0, "divergence": _div(9.0, {"v8": -1.0})}]
    (row,) = dv.rows_of(_report(runs))
    assert row.above_bound == [] and row.near_ties[dv.PICKED] == 1
    assert "margins above" not in dv.markdown([row])
    with pytest.raises(dv.NotGreedyError):
        dv.rows_of(_report(runs, temperature=0.7))


def test_the_h200_table_in_the_docs_is_what_the_tool_reads_from_its_reports():
    if not (RUN / "real-chain7-auto-full.tgz").exists():
        pytest.skip("the H200 run's reports are not in this checkout")
    r = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_divergences.py",
            str(RUN / "real-chain7-auto-full.tgz"),
            str(RUN / "real-tree15-full.tgz"),
            "--drift",
            str(RUN / "drift.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "near-tie bound: 4.637" in out
    assert "| gsm8k | verify=chain budget=7 | 200 | 2 | 198 | 68 / 118 / 10 / 2 | 0 | 0.147 / 0.730 | 0 |" in out
    assert "1631 of 1720 runs parted from AR; 1631 near-ties, 0 not." in out
    assert out.count("above the bound: humaneval") == 3


def test_a_missing_report_is_a_clear_error():
    r = subprocess.run(
        [sys.executable, "benchmarks/bench_divergences.py", "no-such-report.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "no-such-report.json" in r.stderr
