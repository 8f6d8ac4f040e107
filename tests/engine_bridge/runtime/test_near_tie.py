"""The near-tie rule (engine_bridge.runtime.near_tie) on the real target, and the bench's lossless flag using it:
a parting where the target's top two logits are close is not a loss; one where it is sure is."""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.runtime import near_tie
from engine_bridge.bench.runner import BenchResult, BenchRow, BenchSpec, Measurement
from engine_bridge.bench.report import build_report, prompt_table
from engine_bridge.bench.schema import validate
from engine_bridge.bench.suites import Prompt, Suite
from engine_bridge.runtime.config import EngineConfig, GenerationSettings, KVTypes
from engine_bridge.runtime.records import PHASES, RunSummary

PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def ar_run(tiny_engine):
    """The AR tokens, and at every position the target's own top-2 (best, second, margin)."""
    tiny_engine.reset()
    ref = tiny_engine.generate(PROMPT, GenerationSettings(mode="ar", max_tokens=16, stop_at_eog=False)).tokens
    prompt = tiny_engine.tokenize(PROMPT)
    tops = []
    for k in range(len(ref)):
        logits = tiny_engine.next_token_logits(prompt + ref[:k])
        order = np.argsort(logits)
        tops.append((int(order[-1]), int(order[-2]), float(logits[order[-1]] - logits[order[-2]])))
    return prompt, ref, tops


def _second_choice_at(ref, tops, k):
    return ref[:k] + [tops[k][1]] + ref[k + 1 :]


def test_a_parting_where_the_target_is_sure_is_a_real_divergence(tiny_engine, ar_run):
    prompt, ref, tops = ar_run
    assert [t[0] for t in tops] == ref  # next_token_logits agrees with AR
    k = max(range(len(ref)), key=lambda i: tops[i][2])
    assert tops[k][2] > near_tie.NEAR_TIE_QUANT, tops[k]
    part = near_tie.parting(tiny_engine, prompt, ref, _second_choice_at(ref, tops, k))
    assert part.index == k and part.margin == pytest.approx(tops[k][2], rel=1e-3, abs=1e-4)
    assert part.tolerance == near_tie.NEAR_TIE  # the tiny target has f32 weights
    assert not part.near_tie and part.to_dict()["near_tie"] is False
    assert near_tie.parting(tiny_engine, prompt, ref, list(ref)) is None


def test_a_run_that_stopped_first_parts_at_the_targets_own_margin(tiny_engine, ar_run):
    """One run ended (its end token is not in the text) where the other went on: the parting is the
    common prefix's end, and its margin is AR's own there, either way round (bench_lossless classes
    such partings by it instead of calling them bugs)."""
    prompt, ref, tops = ar_run
    k = len(ref) // 2
    for reference, produced in ((ref, ref[:k]), (ref[:k], ref)):
        part = near_tie.parting(tiny_engine, prompt, reference, produced)
        assert part.index == k and part.margin == pytest.approx(tops[k][2], rel=1e-3, abs=1e-4)


def test_a_run_that_stopped_first_is_replayed_with_its_end_token(tiny_engine, ar_run):
    """The run that ended picked an end-of-generation token, which its text leaves out: the judge
    replays the parting with the end token the target ranks highest there, so such a parting gets
    its shape gaps (AR's token against the end token) and can be called rounding or a bug, instead
    of a bug by default (an H200 auto run's AR steps parted from AR this way)."""
    prompt, ref, tops = ar_run
    k = len(ref) // 2
    logits = tiny_engine.replay_logits(prompt, ref[:k], 1)
    eog = near_tie.likely_eog(tiny_engine, logits)
    assert eog is not None and tiny_engine.target.is_eog(eog)
    assert all(logits[eog] >= logits[t] for t in range(len(logits)) if tiny_engine.target.is_eog(t))
    for reference, produced, gap_sign in ((ref, ref[:k], 1.0), (ref[:k], ref, -1.0)):
        part = near_tie.parting(tiny_engine, prompt, reference, produced, tolerance=0.0, replay=True)
        assert part.index == k and part.shape_gaps, part
        # one-row replay: the AR side's token against the other side's, as the target ranks them
        want = float(logits[ref[k]] - logits[eog]) * gap_sign
        assert part.shape_gaps["b1"] == pytest.approx(want, abs=1e-3)


def test_a_parting_at_a_near_tie_is_not_a_loss(tiny_engine, ar_run):
    prompt, ref, tops = ar_run
    k = min(range(len(ref)), key=lambda i: tops[i][2])  # where the target is least sure
    margin = tops[k][2]
    part = near_tie.parting(tiny_engine, prompt, ref, _second_choice_at(ref, tops, k), tolerance=margin * 1.5 + 1e-6)
    assert part.index == k and part.near_tie
    # the same parting under a tolerance below its margin is a loss: the rule is the margin, not the index
    assert not near_tie.parting(
        tiny_engine, prompt, ref, _second_choice_at(ref, tops, k), tolerance=margin * 0.5
    ).near_tie


def _m(row, pid, tokens, divergence=None):
    s = RunSummary(
        mode="ar" if row == "ar" else "chain",
        n_prompt=5,
        n_prompt_reused=0,
        n_generated=len(tokens),
        n_steps=len(tokens),
        n_drafted=0,
        n_accepted=0,
        t_prefill=0.01,
        t_first_token=0.01,
        t_generate=0.5,
        budget_requested=0,
        budget_effective=0,
        budget_note="",
        finish_reason="max_tokens",
    )
    return Measurement(row, pid, 0, 0, s.to_dict(), {p: 0.0 for p in PHASES}, [1] * len(tokens), tokens, "", divergence)


def test_the_bench_flag_applies_the_rule_per_prompt(tiny_engine, ar_run, tmp_path):
    prompt, ref, tops = ar_run
    sure = max(range(len(ref)), key=lambda i: tops[i][2])
    close = min(range(len(ref)), key=lambda i: tops[i][2])
    tie = near_tie.parting(
        tiny_engine, prompt, ref, _second_choice_at(ref, tops, close), tolerance=tops[close][2] * 1.5 + 1e-6
    )
    real = near_tie.parting(tiny_engine, prompt, ref, _second_choice_at(ref, tops, sure))
    suite = Suite(
        "t", "t.jsonl", "0" * 64, (Prompt("tie", text=PROMPT), Prompt("real", text=PROMPT), Prompt("same", text=PROMPT))
    )
    spec = BenchSpec(engine=EngineConfig(target=tmp_path / "t.gguf", draft=tmp_path / "d.gguf"), suite=suite, reps=1)
    kv = KVTypes()
    rows = [
        BenchRow("ar", "ar", "autoregressive", "ar", 0, kv, "", "ar", status="ok"),
        BenchRow("c0", "spec", "budget=4", "chain", 4, kv, "base", "ar", status="ok"),
    ]
    ms = [_m("ar", pid, ref) for pid in ("tie", "real", "same")] + [
        _m("c0", "tie", _second_choice_at(ref, tops, close), tie.to_dict()),
        _m("c0", "real", _second_choice_at(ref, tops, sure), real.to_dict()),
        _m("c0", "same", list(ref)),
    ]
    machine = {
        "os": "x",
        "python": "3",
        "cpu": "x",
        "n_cpus": 2,
        "memory_bytes": 2**30,
        "gpus": [],
        "gpu_info": "",
        "driver": "",
    }
    build = {"build_commit": "x", "llama_cpp_python": "0.3.36", "backend": "cpu", "system_info": "", "cmake_args": ""}
    rep = build_report(BenchResult(spec, rows, ms, machine, build, started_at=1.0, finished_at=2.0))
    assert validate(rep) == []
    prompts = {p["prompt_id"]: p for p in rep["prompts"] if p["row_id"] == "c0"}
    assert prompts["tie"]["lossless"] is True and prompts["tie"]["divergence_margin"] == pytest.approx(tie.margin)
    assert prompts["real"]["lossless"] is False and prompts["real"]["divergence_margin"] == pytest.approx(real.margin)
    assert prompts["same"]["lossless"] is True and prompts["same"]["divergence_margin"] is None
    assert rep["rows"][1]["lossless"] is False and rep["rows"][1]["lossless_mismatches"] == ["real"]
    runs = {r["prompt_id"]: r for r in rep["runs"] if r["row_id"] == "c0"}
    assert runs["tie"]["divergence"]["near_tie"] and runs["same"]["divergence"] is None
    # the per-prompt table tells the reader which "yes" parted at a near-tie and where a "NO" parted
    cells = {r[1]: r[-1] for r in prompt_table(rep)[1] if r[0] == "c0"}
    assert cells["tie"] == f"yes (parted, margin {tie.margin:.3g})"
    assert cells["real"] == f"NO (parted, margin {real.margin:.3g})" and cells["same"] == "yes"


def test_the_bench_runner_records_no_divergence_for_a_lossless_greedy_row(tiny_pair):
    """A real bench run (AR + chain, greedy): identical outputs carry no divergence; the rows are lossless."""
    from engine_bridge.bench.runner import run_bench

    suite = Suite("t", "t.jsonl", "0" * 64, (Prompt("p1", text=PROMPT), Prompt("p2", text="Hello world")))
    spec = BenchSpec(
        engine=EngineConfig(target=tiny_pair[0], draft=tiny_pair[1], n_ctx=512, n_batch=256, n_ubatch=64),
        suite=suite,
        reps=1,
        max_tokens=12,
        budget=4,
        warmup=False,
    )
    res = run_bench(spec)
    spec_ms = [m for m in res.measurements if m.row_id != "ar"]
    assert spec_ms and all(m.divergence is None or m.divergence["near_tie"] for m in spec_ms)
    rep = build_report(res)
    assert rep["rows"][1]["lossless"] is True


def test_replayed_shapes_reproduce_ar_and_judge_a_forced_parting(tiny_engine, ar_run):
    """Engine.replay_logits with one-row batches is the AR run itself (its pick at every position is
    the AR token); batched replays of this f32 target stay within rounding of it; and a parting forced
    where the target is sure is replayed under every shape and still judged a real divergence."""
    prompt, ref, tops = ar_run
    k = len(ref) - 3
    single = tiny_engine.replay_logits(prompt, ref[:k], 1)
    assert int(np.argmax(single)) == ref[k]
    for rows in (2, 4, 8):
        tiny_engine.reset()
        batched = tiny_engine.replay_logits(prompt, ref[:k], rows)
        assert np.abs(batched - single).max() < 1e-2 * max(1.0, float(np.abs(single).max()))
        tiny_engine.reset()
        shaped = tiny_engine.replay_logits(prompt, ref[:k], rows, follow=ref[k : k + rows - 1])
        assert int(np.argmax(shaped)) == ref[k]
    sure = max(range(len(ref)), key=lambda i: tops[i][2])
    produced = _second_choice_at(ref, tops, sure)
    part = near_tie.parting(tiny_engine, prompt, ref, produced, replay=True)
    assert part.index == sure and part.margin > part.tolerance
    shapes = {f"b{n}" for n in near_tie.REPLAY_ROWS} | {f"v{n}" for n in near_tie.REPLAY_ROWS if n > 1}
    assert {"b1", "b8", "v8", "b32", "v32"} <= shapes <= set(part.shape_gaps)
    assert set(part.shape_gaps) - shapes <= {"w", "p50", "p75"}
    # every shape keeps the AR token ahead by about the target's own margin: not picked by the target
    assert all(g > 0.5 * part.margin for g in part.shape_gaps.values()), part.shape_gaps
    assert not part.picked_by_target and not part.within_shape_spread and not part.near_tie
    d = part.to_dict()
    assert d["shape_gaps"] == part.shape_gaps and d["picked_by_target"] is False
    # a parting the target itself makes under a shape is rounding, whatever the margin
    assert near_tie.Parting(3, 5.0, 0.1, {"b1": 0.4, "v8": -0.01}).near_tie
    # as is one whose smallest lead (0.05) is less than the shapes move the gap (0.35)
    assert near_tie.Parting(3, 5.0, 0.1, {"b1": 0.4, "v8": 0.05}).within_shape_spread
    assert not near_tie.Parting(3, 5.0, 0.1, {"b1": 0.4, "v8": 0.3}).near_tie
    # and one whose lead under some replayed history is below the tolerance
    assert near_tie.Parting(3, 5.0, 0.1, {"b1": 0.12, "w": 0.09}).near_tie


def test_recorded_tree_batches_replay_to_the_runs_own_picks(tiny_engine):
    """Engine.record_verify keeps every tree step's verify batch; replaying the run's batches in
    order (the target alone, no drafter) gives, at each step's committed rows, the very tokens the
    run committed -- the replay rebuilds what the run's target read. A batch whose sequence sets
    would let a row see a sibling is refused, not replayed."""
    import dataclasses

    prompt = tiny_engine.tokenize(PROMPT)
    tiny_engine.reset()
    tiny_engine.record_verify = True
    try:
        run = tiny_engine.generate(PROMPT, GenerationSettings(mode="tree", budget=12, max_tokens=24, stop_at_eog=False))
    finally:
        tiny_engine.record_verify = False
    vbs = run.verify_batches
    # the first batch commits from the second token on: the first is the prefill's
    assert vbs and vbs[0].first == 1 and all(not vb.problems() for vb in vbs)
    assert sum(len(vb.rows) for vb in vbs) <= len(run.tokens)
    assert any(len(vb.rows) > 1 for vb in vbs), "no step accepted a draft: the path replay went untested"
    for n in (0, len(vbs) // 2, len(vbs) - 1):
        rows = tiny_engine.replay_verify(prompt, run.tokens, vbs[: n + 1])
        picks = [int(np.argmax(r)) for r in rows]
        assert picks == run.tokens[vbs[n].first : vbs[n].first + len(vbs[n].rows)], f"step {n}"
    # the engine is left empty and usable
    assert tiny_engine.kv == []
    # nothing is recorded unless asked (chat and bench runs keep no batches)
    tiny_engine.reset()
    assert tiny_engine.generate(PROMPT, GenerationSettings(mode="tree", budget=12, max_tokens=8)).verify_batches == []
    # a malformed batch: two siblings sharing a sequence (a row would see its sibling's cell)
    vb = next(v for v in vbs if sum(1 for d in v.depth if d == 0) >= 2)
    firsts = [i for i, d in enumerate(vb.depth) if d == 0][:2]
    seqs = list(vb.seqs)
    seqs[firsts[1]] = tuple(sorted(set(seqs[firsts[1]]) | {seqs[firsts[0]][0]}))
    bad = dataclasses.replace(vb, seqs=tuple(seqs))
    assert any("siblings sharing" in p for p in bad.problems())
    with pytest.raises(ValueError, match="not a well-formed tree"):
        tiny_engine.replay_verify(prompt, run.tokens, [bad])
    assert tiny_engine.kv == []
