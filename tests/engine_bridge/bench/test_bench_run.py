"""The bench runner on the real engine and a real tiny pair: sweeps, failures, cancel, progress."""

from __future__ import annotations

import threading

import pytest

from engine_bridge.models import synth
from engine_bridge.bench.runner import (
    BASE_VARIANT,
    BenchSpec,
    SweepError,
    expand_sweep,
    parse_sweep,
    plan_rows,
    run_bench,
)
from engine_bridge.bench.report import build_report
from engine_bridge.bench.suites import load_suite
from engine_bridge.runtime.config import EngineConfig, KVTypes

REPS, N_PROMPTS, MAX_TOKENS = 2, 2, 12


@pytest.fixture(scope="module")
def engine_config(tiny_pair):
    target, draft = tiny_pair
    # one thread: on a small shared CI box, OpenMP spinning on every core makes runs crawl
    return EngineConfig(target=target, draft=draft, n_ctx=512, n_batch=256, n_ubatch=64, n_threads=1)


def make_spec(cfg, sweep=(), suite="code", **kw) -> BenchSpec:
    return BenchSpec(
        engine=cfg,
        suite=load_suite(suite).head(N_PROMPTS),
        reps=REPS,
        max_tokens=MAX_TOKENS,
        sweep=parse_sweep(list(sweep)),
        **kw,
    )


# -- sweep parsing (no engine) --------------------------------------------------------------------
def test_parse_sweep_axes_and_aliases():
    sw = parse_sweep(["budget=4,8,15", "verify=chain,tree", "kv=q8_0,f16/q4_0", "draft=base,lora:/a.gguf@0.5"])
    assert sw["budget"] == [4, 8, 15]
    assert sw["verify_mode"] == ["chain", "tree"]
    assert sw["kv"] == [KVTypes("q8_0", "q8_0"), KVTypes("f16", "q4_0")]
    assert sw["draft_variant"] == [BASE_VARIANT, "lora:/a.gguf@0.5"]


@pytest.mark.parametrize(
    "bad",
    [
        "budget=0",
        "budget=x",
        "verify_mode=ar",
        "verify=fast",
        "type_k=q9",
        "colour=red",
        "budget",
        "budget=",
        "kv=f16/zz",
    ],
)
def test_parse_sweep_rejects(bad):
    with pytest.raises(SweepError):
        parse_sweep([bad])


def test_expand_is_the_product_and_groups_rows_by_reload(tmp_path):
    cfg = EngineConfig(target=tmp_path / "t.gguf", draft=tmp_path / "d.gguf")
    spec = BenchSpec(
        engine=cfg, suite=load_suite("math"), sweep=parse_sweep(["budget=2,4,8", "kv=f16,bf16", "verify=chain,tree"])
    )
    configs = expand_sweep(spec)
    assert len(configs) == 12
    assert {(c.budget, str(c.target_kv), c.verify_mode) for c in configs} == {
        (b, kv, v) for b in (2, 4, 8) for kv in ("f16/f16", "bf16/bf16") for v in ("chain", "tree")
    }
    plan = plan_rows(spec)
    kinds = [row.kind for row, _ in plan]
    # one AR baseline per K/V group, each followed by its 6 speculative rows
    assert kinds == ["ar"] + ["spec"] * 6 + ["ar"] + ["spec"] * 6
    assert all(row.ar_row == plan[0][0].id for row, _ in plan[:7])
    assert all(row.target_kv == KVTypes("bf16", "bf16") for row, _ in plan[7:])


# -- real runs --------------------------------------------------------------------------------------
def test_run_measures_ar_and_speculative(engine_config):
    events = []
    spec = make_spec(engine_config, ["verify=chain,tree"], base_seed=5)
    res = run_bench(spec, on_progress=events.append)
    rows = {r.id: r for r in res.rows}
    assert [r.kind for r in res.rows] == ["ar", "spec", "spec"]
    assert rows["ar"].status == "ok" and rows["c0"].status == "ok"
    # tree verification either runs or fails on its own row with the engine's reason
    assert rows["c1"].status == "ok" or (rows["c1"].status == "failed" and rows["c1"].error)
    for rid in ("ar", "c0"):
        ms = res.of_row(rid)
        # warm-up excluded: exactly reps x prompts timed generations
        assert len(ms) == REPS * N_PROMPTS
        assert sorted({m.seed for m in ms}) == [5, 6]
        # every run starts from empty caches, so nothing of the prompt is reused
        assert all(m.summary["n_prompt_reused"] == 0 for m in ms)
        assert all(m.summary["n_generated"] > 0 for m in ms)
    assert all(m.summary["n_drafted"] == 0 for m in res.of_row("ar"))
    assert sum(m.summary["n_drafted"] for m in res.of_row("c0")) > 0
    # greedy speculative decoding is lossless: same tokens as the baseline, prompt by prompt
    ar = {(m.prompt_id, m.rep): m.tokens for m in res.of_row("ar")}
    assert all(ar[(m.prompt_id, m.rep)] == m.tokens for m in res.of_row("c0") + res.of_row("c1"))
    # progress: monotonic, reaches the total, ETA known once something was timed
    dones = [e.done for e in events]
    assert dones == sorted(dones) and events[-1].done == events[-1].total == 3 * REPS * N_PROMPTS
    assert events[-1].stage == "done"
    timed = [e for e in events if e.stage == "run"]
    assert timed and all(e.eta_s is not None and e.eta_s >= 0 for e in timed)
    assert [e.measurement for e in timed] == res.measurements
    report = build_report(res)
    by_id = {r["id"]: r for r in report["rows"]}
    assert by_id["c0"]["lossless"] is True
    assert by_id["ar"]["lossless"] is None  # nothing to compare the baseline with
    # each run says how many of its target decodes kept llama.cpp's graph (an AR run's one-row
    # decodes all have one shape: every one after the first keeps it)
    for run in report["runs"]:
        assert isinstance(run["graphs_reused"], int) and 0 <= run["graphs_reused"] <= run["n_steps"]
    assert all(r["graphs_reused"] >= r["n_steps"] - 2 for r in report["runs"] if r["row_id"] == "ar")


@pytest.mark.parametrize("inline", [False, True])
def test_the_judge_replays_after_a_rows_timed_runs(engine_config, monkeypatch, inline):
    """The judge's AR replays switch the engine's extraction and sampler off; run between two timed
    generations they made the next one pay llama.cpp's reserve. By default they come after the row."""
    from engine_bridge.bench import runner

    calls = []
    gen, judge = runner._Runner._generate, runner._Runner._divergence

    def spy_gen(self, eng, text, settings):
        calls.append(("gen", settings.mode))
        return gen(self, eng, text, settings)

    def spy_judge(self, eng, row, *a):
        calls.append(("judge", row.id))
        return judge(self, eng, row, *a)

    monkeypatch.setattr(runner._Runner, "_generate", spy_gen)
    monkeypatch.setattr(runner._Runner, "_divergence", spy_judge)
    monkeypatch.setattr(runner, "JUDGE_INLINE", inline)
    res = run_bench(make_spec(engine_config, ["verify=chain"]))
    # each round of the chain row: its warm-up, its timed runs, then (by default) their judge
    # (the rounds of the AR row, which is never judged, lie between those of the chain row)
    rounds: list[list[str]] = [[]]
    for kind, what in calls:
        if what == "ar":
            if rounds[-1]:
                rounds.append([])
        else:
            rounds[-1].append(kind)
    rounds = [r for r in rounds if r]
    assert sum(r.count("judge") for r in rounds) == REPS * N_PROMPTS == len(res.of_row("c0"))
    assert len(rounds) == REPS
    for kinds in rounds:
        if inline:
            assert kinds == ["gen"] + ["gen", "judge"] * N_PROMPTS
        else:
            assert kinds == ["gen"] * (1 + N_PROMPTS) + ["judge"] * N_PROMPTS
    assert build_report(res)["rows"][1]["lossless"] is True


def test_rows_run_in_rounds_so_a_drift_falls_on_every_row(engine_config, monkeypatch):
    """Repetition r of every row runs before repetition r + 1 of any (each row's round after its
    own warm-up): a machine whose speed drifts over minutes biases no row against the baseline."""
    from engine_bridge.bench import runner

    order = []
    gen = runner._Runner._generate

    def spy(self, eng, text, settings):
        order.append((settings.mode, settings.budget, settings.seed))
        return gen(self, eng, text, settings)

    monkeypatch.setattr(runner._Runner, "_generate", spy)
    spec = make_spec(engine_config, ["budget=2,4"], base_seed=7)
    res = run_bench(spec)
    assert [r.status for r in res.rows] == ["ok"] * 3
    per_round = 1 + N_PROMPTS  # warm-up (seed of repetition 0) + the timed runs
    blocks = [order[i : i + per_round] for i in range(0, len(order), per_round)]
    assert len(blocks) == 3 * REPS
    rows_of = [(b[0][0], b[0][1] if b[0][0] != "ar" else None) for b in blocks]
    assert rows_of == [("ar", None), ("chain", 2), ("chain", 4)] * REPS
    seeds = [{s for _, _, s in b[1:]} for b in blocks]
    assert seeds == [{7}] * 3 + [{8}] * 3  # the timed runs of round r use seed base + r
    # the measurements arrive round by round as well
    assert [m.rep for m in res.measurements] == [0] * (3 * N_PROMPTS) + [1] * (3 * N_PROMPTS)


def test_rows_take_blocks_of_prompts_in_turn_when_asked(engine_config, monkeypatch):
    """round_prompts=1: every row runs prompt 1 (after its warm-up on it), then every row prompt 2,
    so a drift of the machine's speed lies seconds, not a whole suite, between a row and its
    baseline; the measurements and the judge's verdicts are those of whole rounds."""
    from engine_bridge.bench import runner

    order = []
    gen = runner._Runner._generate

    def spy(self, eng, text, settings):
        order.append((settings.mode, settings.budget, settings.seed, text))
        return gen(self, eng, text, settings)

    monkeypatch.setattr(runner._Runner, "_generate", spy)
    spec = make_spec(engine_config, ["budget=2,4"], base_seed=3, round_prompts=1)
    assert spec.to_dict()["round_prompts"] == 1
    res = run_bench(spec)
    assert [r.status for r in res.rows] == ["ok"] * 3
    texts = list(dict.fromkeys(t for *_, t in order))
    assert len(texts) == N_PROMPTS
    # blocks of (warm-up, timed run): each row on one prompt, the rows in plan order, prompt by prompt
    blocks = [order[i : i + 2] for i in range(0, len(order), 2)]
    assert len(blocks) == 3 * N_PROMPTS * REPS
    expect = [
        (mode, budget, text)
        for _ in range(REPS)
        for text in texts
        for mode, budget in (("ar", None), ("chain", 2), ("chain", 4))
    ]
    got = [(b[0][0], b[0][1] if b[0][0] != "ar" else None, b[1][3]) for b in blocks]
    assert got == expect
    assert all(b[0][3] == b[1][3] for b in blocks)  # the warm-up runs the block's own prompt
    assert [b[1][2] for b in blocks] == [3] * (3 * N_PROMPTS) + [4] * (3 * N_PROMPTS)
    assert [len(res.of_row(r.id)) for r in res.rows] == [REPS * N_PROMPTS] * 3
    report = build_report(res)
    assert all(row["lossless"] is True for row in report["rows"][1:])
    from engine_bridge.bench.report import to_markdown

    assert "rows in turn on blocks of 1 prompts" in to_markdown(report)  # the report says how rows took turns
    with pytest.raises(ValueError, match="round_prompts"):
        make_spec(engine_config, round_prompts=-1)


def test_a_row_that_cannot_run_fails_alone_with_its_reason(engine_config, tmp_path):
    # a drafter built for another hidden size: the pair check refuses it when the variant is applied
    bad = synth.write_drafter(tmp_path / "wrong-width.gguf", synth.TargetSpec(), synth.DrafterSpec(n_embd=32))
    events = []
    res = run_bench(make_spec(engine_config, [f"draft={bad},base"]), on_progress=events.append)
    status = {r.id: r.status for r in res.rows}
    assert status == {"ar": "ok", "c0": "failed", "c1": "ok"}
    failed = res.rows[1]
    assert "wrong-width.gguf" in failed.error and len(failed.error) > len("draft variant wrong-width.gguf: ")
    assert any(e.stage == "failed" and e.row_id == "c0" and e.message == failed.error for e in events)
    assert events[-1].done == events[-1].total
    report = build_report(res)
    row = report["rows"][1]
    assert row["status"] == "failed" and row["avg_ts"] is None and row["samples_ts"] == []
    assert report["rows"][2]["speedup"] is not None


def test_cancel_keeps_what_finished(engine_config):
    cancel = threading.Event()
    stop_after = 3

    def progress(p):
        if p.stage == "run" and p.done >= stop_after:
            cancel.set()

    spec = make_spec(engine_config, ["budget=2,4"])
    res = run_bench(spec, on_progress=progress, cancel=cancel)
    assert res.cancelled
    assert len(res.measurements) == stop_after
    statuses = [r.status for r in res.rows]
    assert statuses == ["cancelled", "cancelled", "cancelled"]
    report = build_report(res)
    assert report["status"] == "cancelled"
    ar = report["rows"][0]
    # 3 of 4 generations of the AR row finished: one complete repetition, the rest is per-prompt
    assert ar["n_reps"] == 1 and len(ar["samples_ts"]) == 1
    assert sum(p["n_reps"] for p in report["prompts"]) == stop_after
    assert len(report["runs"]) == stop_after


def test_draft_variants_swap_files_and_adapters(engine_config, tmp_path):
    other = synth.write_drafter(tmp_path / "other-dflash.gguf", synth.TargetSpec(), synth.DrafterSpec(seed=11))
    lora = synth.write_lora(tmp_path / "tiny-lora.gguf", synth.TargetSpec(), synth.DrafterSpec(), scale=0.5)
    spec = make_spec(engine_config, [f"draft=base,{other},lora:{lora}@0.5,base"])
    res = run_bench(spec)
    rows = [r for r in res.rows if r.kind == "spec"]
    assert [r.status for r in rows] == ["ok"] * 4, [r.error for r in rows]
    assert [r.model["draft_filename"] for r in rows] == [
        engine_config.draft.name,
        engine_config.draft.name,
        "other-dflash.gguf",
        engine_config.draft.name,
    ]
    lora_row = next(r for r in rows if r.draft_variant.startswith("lora:"))
    assert lora_row.model["adapters"] == [[str(lora), 0.5]]
    # whichever drafter proposes, the target decides: every variant stays lossless
    report = build_report(res)
    assert all(r["lossless"] is True for r in report["rows"] if r["kind"] == "spec")


def test_kv_sweep_reloads_and_fails_an_impossible_group(engine_config):
    # The tiny target's head_dim is 16: q8_0 blocks of 32 cannot hold it, so that group fails
    # at load (with the pair check's reason) while the bf16 group runs on a reloaded engine.
    spec = make_spec(engine_config, ["kv=bf16,q8_0"])
    res = run_bench(spec)
    st = {r.id: (r.status, str(r.target_kv)) for r in res.rows}
    assert st == {
        "ar0": ("ok", "bf16/bf16"),
        "c0": ("ok", "bf16/bf16"),
        "ar1": ("failed", "q8_0/q8_0"),
        "c1": ("failed", "q8_0/q8_0"),
    }
    assert all("head_dim" in r.error for r in res.rows if r.status == "failed")
    report = build_report(res)
    assert report["rows"][1]["type_k"] == "bf16" and report["rows"][1]["speedup"] is not None


def test_auto_gets_its_own_row_against_the_best_fixed_one(engine_config):
    """Issue 29: `bench --sweep verify=chain,auto` measures auto beside the fixed modes and reports
    auto's tok/s over the best fixed configuration of the same load (AR included)."""
    from engine_bridge.bench.report import auto_table, to_markdown

    spec = make_spec(engine_config, ["verify=chain,auto", "budget=4"])
    res = run_bench(spec)
    assert [r.status for r in res.rows] == ["ok"] * 3, [r.error for r in res.rows]
    report = build_report(res)
    rows = {r["verify_mode"]: r for r in report["rows"]}
    auto = rows["auto"]
    best = max((rows["ar"], rows["chain"]), key=lambda r: r["avg_ts"])
    assert auto["best_fixed"] == best["id"]
    assert auto["auto_vs_best"] == pytest.approx(auto["avg_ts"] / best["avg_ts"])
    assert rows["chain"]["auto_vs_best"] is None and rows["ar"]["best_fixed"] is None
    assert auto["lossless"] is True  # greedy: auto commits what AR commits
    headers, table = auto_table(report)
    assert len(table) == 1 and "auto ÷ best fixed" in headers
    assert "auto against the best fixed configuration" in to_markdown(report)


# -- suites -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["code", "math", "chat"])
def test_builtin_suites_load(name):
    suite = load_suite(name)
    assert len(suite.prompts) >= 10
    assert len({p.id for p in suite.prompts}) == len(suite.prompts)
    assert len(suite.sha256) == 64 and suite.head(3).prompts == suite.prompts[:3]


def test_user_suite_errors_name_their_lines(tmp_path):
    from engine_bridge.bench.suites import SuiteError

    good = tmp_path / "mine.jsonl"
    good.write_text(
        '# my prompts\n{"prompt": "hello"}\n\n{"id": "q2", "text": "bye"}\n'
        '{"id": "c", "messages": [{"role": "user", "content": "hi"}]}\n'
    )
    suite = load_suite(good)
    assert [p.id for p in suite.prompts] == ["line-2", "q2", "c"] and suite.name == "mine"
    assert suite.prompts[2].kind == "chat"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "a", "prompt": "x"}\nnot json\n{"id": "a", "prompt": "y"}\n{"id": "b"}\n'
        '{"id": "m", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}\n'
    )
    with pytest.raises(SuiteError) as exc:
        load_suite(bad)
    msg = str(exc.value)
    for part in (
        "line 2: not JSON",
        "line 3: duplicate id 'a'",
        "line 4: give exactly one of",
        "line 5: the last message must be the user's",
    ):
        assert part in msg
    with pytest.raises(SuiteError, match="unknown suite"):
        load_suite("poetry")


def test_chat_prompts_go_through_the_targets_template(tiny_engine):
    p = load_suite("chat").prompts[5]  # has a system message
    text = p.render(tiny_engine.format_chat)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert p.messages[-1][1] in text


def test_a_p_min_sweep_runs_each_cut_on_its_own_row(engine_config):
    """p_min is a sweep axis (issue 28's A/B of a chain cut where the drafter is unsure): each value a
    row of its own, labelled and reported, the cut one drafting less for the same tokens."""
    from engine_bridge.bench.report import build_report

    assert parse_sweep(["p_min=0,0.25"])["p_min"] == [0.0, 0.25]
    for bad in ("p_min=1.5", "p_min=x"):
        with pytest.raises(SweepError):
            parse_sweep([bad])
    res = run_bench(make_spec(engine_config, ["p_min=0,0.999999"]))
    rows = [r for r in res.rows if r.kind == "spec"]
    assert [r.p_min for r in rows] == [0.0, 0.999999] and rows[1].label == "p_min=0.999999"
    assert all(r.status == "ok" for r in res.rows)
    drafted = [sum(m.summary["n_drafted"] for m in res.of_row(r.id)) for r in rows]
    assert drafted[1] < drafted[0]
    tokens = [{(m.prompt_id, m.rep): m.tokens for m in res.of_row(r.id)} for r in rows]
    assert tokens[0] == tokens[1]
    report = build_report(res)
    assert [r["p_min"] for r in report["rows"] if r["verify_mode"] != "ar"] == [0.0, 0.999999]
