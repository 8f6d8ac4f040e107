"""gpu/gpu_request_ab.py: a per-request switch, A/B in one process, on the tiny pair (CPU)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
import gpu_request_ab  # noqa: E402


def test_each_prompt_runs_on_both_sides_and_the_table_reads_the_saved_runs(tiny_pair, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DFLASH_OVERLAP_COMMIT", raising=False)
    target, draft = tiny_pair
    out = tmp_path / "ab.json"
    rc = gpu_request_ab.main(
        [
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--suites",
            "mt-bench,gsm8k",
            "--prompts",
            "2",
            "--rounds",
            "1",
            "--max-tokens",
            "6",
            "--modes",
            "ar,chain",
            "--threads",
            "2",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    assert "DFLASH_OVERLAP_COMMIT" not in os.environ  # the switch is left as it was
    saved = json.loads(out.read_text())
    runs = saved["runs"]
    # 2 suites x 2 prompts x 2 modes x 2 sides, and each request generated its tokens
    assert len(runs) == 16 and all(r["n_gen"] == 6 and r["gen_s"] > 0 for r in runs)
    assert {(r["suite"], r["mode"], r["side"]) for r in runs} == {
        (s, m, d) for s in ("mt-bench", "gsm8k") for m in ("ar", "chain") for d in ("0", "1")
    }
    # each side goes first on half of each mode's prompts (a switch from the other mode falls on both)
    for mode in ("ar", "chain"):
        for side in ("0", "1"):
            assert sum(r["first"] for r in runs if r["mode"] == mode and r["side"] == side) == 2
    rows = gpu_request_ab.table(runs, saved["sides"])
    # per mode: each suite, then both together; the switch does not change greedy tokens
    assert [(r["mode"], r["suite"]) for r in rows] == [
        (m, s) for m in ("ar", "chain") for s in ("gsm8k", "mt-bench", "all")
    ]
    assert all(r["same_tokens"] == r["requests"] for r in rows)
    # each side's phases per decode step: AR drafts nothing, chain drafts and injects
    for r in rows:
        for side in ("0", "1"):
            ms = r["phase_ms"][side]
            assert ms["verify"] > 0
            assert (ms["draft"] > 0 and ms["inject"] > 0) == (r["mode"] == "chain")
    assert [r["requests"] for r in rows] == [2, 2, 4, 2, 2, 4]
    printed = capsys.readouterr().out
    assert gpu_request_ab.main(["--from", str(out)]) == 0
    again = capsys.readouterr().out
    assert again.strip() and again.strip() in printed


def test_the_ratio_is_the_last_side_over_the_first():
    runs = [
        {"suite": "s", "mode": "ar", "side": "0", "n_gen": 10, "gen_s": 1.0, "tokens": [1]},
        {"suite": "s", "mode": "ar", "side": "1", "n_gen": 10, "gen_s": 0.5, "tokens": [1]},
        {"suite": "s", "mode": "ar", "side": "1", "n_gen": 10, "gen_s": 1.0, "tokens": [2]},
        {"suite": "s", "mode": "ar", "side": "0", "n_gen": 10, "gen_s": 1.0, "tokens": [3]},
    ]
    (row,) = gpu_request_ab.table(runs, ["0", "1"])
    assert row["tok_s"] == {"0": 10.0, "1": 20.0 / 1.5}
    assert abs(row["ratio"] - (20.0 / 1.5) / 10.0) < 1e-12
    assert row["median_ratio"] == 1.5  # the per-request ratios 2.0 and 1.0
    assert row["same_tokens"] == 1


def test_phase_ms_is_each_phase_per_decode_step_and_empty_for_runs_saved_without_phases():
    phases = {"draft": 0.0, "inject": 0.0, "verify": 0.0, "accept": 0.0, "other": 0.0}
    runs = [
        {"steps": 2, "phase_s": {**phases, "draft": 0.002, "verify": 0.004}},
        {"steps": 6, "phase_s": {**phases, "draft": 0.006, "verify": 0.004}},
    ]
    ms = gpu_request_ab.phase_ms(runs)
    assert abs(ms["draft"] - 1.0) < 1e-12 and abs(ms["verify"] - 1.0) < 1e-12 and ms["inject"] == 0.0
    assert gpu_request_ab.phase_ms([{"n_gen": 1, "gen_s": 1.0}]) == {}


def test_a_setting_switches_a_generation_field_per_request(tiny_pair, tmp_path, monkeypatch):
    target, draft = tiny_pair
    seen = []
    real = gpu_request_ab.Engine.generate

    def spy(self, text, settings, *args, **kwargs):
        seen.append(settings.tree_top_k)
        return real(self, text, settings, *args, **kwargs)

    monkeypatch.setattr(gpu_request_ab.Engine, "generate", spy)
    out = tmp_path / "k.json"
    argv = ["--target", str(target), "--draft", str(draft), "--suites", "gsm8k", "--prompts", "2", "--rounds", "1"]
    argv += ["--max-tokens", "6", "--modes", "tree", "--budget", "7", "--threads", "2", "--json", str(out)]
    assert gpu_request_ab.main(argv + ["--setting", "tree_top_k", "--sides", "2,8"]) == 0
    saved = json.loads(out.read_text())
    assert saved["env"] == "tree_top_k" and {r["side"] for r in saved["runs"]} == {"2", "8"}
    # the warm-up's two requests, then each prompt on both sides, as integers
    assert sorted(seen) == [2, 2, 2, 8, 8, 8]


def test_per_process_runs_each_side_and_round_in_a_process_of_its_own(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.delenv("DFLASH_OVERLAP_COMMIT", raising=False)
    target, draft = tiny_pair
    out = tmp_path / "pp.json"
    args = ["--target", str(target), "--draft", str(draft), "--suites", "gsm8k", "--prompts", "2"]
    args += ["--rounds", "2", "--max-tokens", "4", "--modes", "chain", "--threads", "2", "--json", str(out)]
    assert gpu_request_ab.main([*args, "--per-process"]) == 0
    runs = json.loads(out.read_text())["runs"]
    # 2 rounds x 2 sides x 2 prompts, each (round, side) from one process and no process twice
    assert len(runs) == 8
    pids = {
        (r["round"], r["side"]): {x["pid"] for x in runs if (x["round"], x["side"]) == (r["round"], r["side"])}
        for r in runs
    }
    assert len(pids) == 4 and all(len(p) == 1 for p in pids.values())
    assert len({p for ps in pids.values() for p in ps} | {os.getpid()}) == 5
    (row,) = [r for r in gpu_request_ab.table(runs, ["0", "1"]) if r["suite"] == "gsm8k"]
    assert row["requests"] == 4 and row["same_tokens"] == 4
