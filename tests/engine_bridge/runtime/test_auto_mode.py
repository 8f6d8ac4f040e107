"""Calibration and verify mode ``auto`` on real tiny pairs through llama.cpp (no timed assertions)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from engine_bridge.runtime import auto_mode, calibration, generation
from engine_bridge.models import synth
from engine_bridge.cli import main as cli_main
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

#: A quick calibration for tests (the default one measures more budgets and steps).
QUICK = dict(chain_budgets=(1, 2, 4, 15), tree_budgets=(4, 16), steps=3, rounds=1)
PROMPTS = ["Hello world", "def fibonacci(n):", "The history of the"]


@pytest.fixture(autouse=True)
def private_data(tmp_path, monkeypatch):
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(scope="module")
def deaf_pair(models_dir):
    """The tiny target with a drafter whose large random weights ignore the target: it (almost)
    never drafts what the target says."""
    folder = models_dir / "deaf"
    t = synth.write_target(folder / "deaf-target.gguf", synth.TargetSpec())
    d = synth.write_drafter(folder / "deaf-dflash.gguf", synth.TargetSpec(), synth.DrafterSpec(draft_scale=3.0, seed=7))
    return t, d


def _load(target, draft, **kw):
    return Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=2048, n_batch=512, n_ubatch=64, **kw), preflight=PAIR_PREFLIGHT
    )


class _Spy:
    """Counts the engine's generate calls (the real method runs)."""

    def __init__(self, eng):
        self.calls = 0
        self._real = eng.generate
        eng.generate = self

    def __call__(self, *a, **kw):
        self.calls += 1
        return self._real(*a, **kw)


def test_calibration_measures_a_sane_table_and_caches_it(tiny_pair, tmp_path):
    target = tiny_pair[0]
    draft = shutil.copy(tiny_pair[1], tmp_path / "drafter.gguf")  # its mtime is changed below
    eng = _load(target, draft)
    try:
        spy = _Spy(eng)
        table = calibration.ensure(eng, **QUICK)
        assert not table.from_cache and spy.calls > 0
        assert table.ar_ms > 0 and set(table.chain_ms) == {1, 2, 4, 15} and set(table.tree_ms) == {4, 16}
        c = table.costs()
        # a speculative step does more than an AR step (a drafter decode and a wider verify), and
        # verifying 16 rows costs more than verifying 2
        assert c[("chain", 1)] > 1.0
        assert c[("chain", 15)] > c[("chain", 1)]
        assert c[("tree", 16)] > c[("tree", 4)] * 0.8
        path = calibration.cache_path(table.key)
        assert path.exists() and json.loads(path.read_text())["key"] == table.key
        assert eng.calibration is table

        # the same key again, on a fresh engine: read from the cache, nothing measured
        eng.close()
        eng = _load(target, draft)
        spy = _Spy(eng)
        again = calibration.ensure(eng, **QUICK)
        assert again.from_cache and spy.calls == 0
        assert again.costs() == pytest.approx(table.costs())

        # the drafter file changes (a new mtime): another key, measured again
        st = os.stat(draft)
        os.utime(draft, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        eng.calibration = None
        third = calibration.ensure(eng, **QUICK)
        assert not third.from_cache and spy.calls > 0 and third.key != table.key
        # other threads: another key too
        assert calibration.calibration_key(eng.config.replace(n_threads=1)) != third.key
        # the exact verify's kernels: another key (they cost a verify otherwise)
        assert calibration.calibration_key(eng.config.replace(exact=not eng.config.exact)) != third.key
        # the engine's patches and its step code are part of the key: a new release measures again
        assert third.key["build"]["patches"] and all(":" in p for p in third.key["build"]["patches"])
        assert third.key["step_code"] == calibration.STEP_CODE
        # a corrupt cache file is ignored (and measured again), never trusted
        calibration.cache_path(third.key).write_text("{not json")
        assert calibration.load_cached(third.key) is None
    finally:
        eng.close()


class ScriptedPolicy:
    """Walks through a fixed list of (mode, budget): every kind of switch, between steps."""

    def __init__(self, script):
        self.script = list(script)
        self.i = 0
        self.probing = False
        self.seen = []

    def choose(self):
        choice = self.script[self.i % len(self.script)]
        self.i += 1
        return choice

    def observe(self, mode, budget, drafted, accepted, probing=False):
        self.seen.append((mode, budget, drafted, accepted))


SCRIPT = (
    [("ar", 0)] * 3
    + [("chain", 4)] * 2
    + [("tree", 8)] * 2
    + [("ar", 0)] * 2
    + [("tree", 16)]
    + [("chain", 15)] * 2
    + [("chain", 1)]
    + [("ar", 0)]
    + [("tree", 4)]
    + [("chain", 7)]
)


@pytest.mark.parametrize("start", ["prefill", "decode"])
@pytest.mark.parametrize("mode,budget", [("ar", 0), ("chain", 4)])
def test_calibration_times_decode_steps_only_whichever_way_a_request_starts(
    tiny_pair, monkeypatch, start, mode, budget
):
    """A run's first token is picked from the prefill (its record has no decode of its own) unless
    DFLASH_FIRST_TOKEN=decode: the calibration must time the same decode steps either way, never
    that ~0.1 ms pick, which would read as a step far cheaper than any decode."""
    monkeypatch.setenv(generation.FIRST_TOKEN_ENV, start)
    eng = _load(*tiny_pair)
    try:
        seen = []
        real = eng.generate

        def spy(*a, **kw):
            res = real(*a, **kw)
            seen.append(res.steps)
            return res

        eng.generate = spy
        walls = calibration._step_walls(eng, eng.tokenize(PROMPTS[0]), mode, budget, 3, warm=1)
        steps = seen[-1]
        decodes = [s for s in steps if not s.prefill]
        assert len(walls) == 3
        # the timed walls are the decode steps after the first (the warm-up that builds graphs)
        assert walls == [s.wall for s in decodes[1:4]]
        assert (steps[0].prefill, len(steps)) == ((True, 5) if start == "prefill" else (False, 4))
        if mode == "chain":
            assert all(s.drafted > 0 for s in decodes)
    finally:
        eng.close()


@pytest.mark.parametrize("mode,budget", [("ar", 0), ("chain", 4), ("chain", 15)])
def test_calibration_warms_up_for_a_number_of_tokens_not_steps(tiny_pair, monkeypatch, mode, budget):
    """Each run's steps settle over its first tokens after the prefill (calibration.WARM_TOKENS): the
    timed steps are those after the first steps that committed that many tokens, so an AR run drops
    as many steps as tokens and a deep chain, committing several a step, drops fewer."""
    monkeypatch.delenv(calibration.WARM_TOKENS_ENV, raising=False)
    eng = _load(*tiny_pair)
    try:
        seen = []
        real = eng.generate

        def spy(*a, **kw):
            res = real(*a, **kw)
            seen.append(res.steps)
            return res

        eng.generate = spy
        walls = calibration._step_walls(eng, eng.tokenize(PROMPTS[0]), mode, budget, 3)
        decodes = [s for s in seen[-1] if not s.prefill]
        cum = np.cumsum([s.committed for s in decodes])
        dropped = max(1, int(np.argmax(cum >= calibration.WARM_TOKENS)) + 1)
        assert cum[dropped - 1] >= calibration.WARM_TOKENS and (
            dropped == 1 or cum[dropped - 2] < calibration.WARM_TOKENS
        )
        assert walls == [s.wall for s in decodes[dropped : dropped + 3]]
        assert len(decodes) == dropped + 3
        if mode == "ar":
            assert dropped == calibration.WARM_TOKENS
        # the rule before: one step, whatever it committed ($DFLASH_CALIBRATION_WARM_TOKENS=1)
        monkeypatch.setenv(calibration.WARM_TOKENS_ENV, "1")
        walls = calibration._step_walls(eng, eng.tokenize(PROMPTS[0]), mode, budget, 3)
        decodes = [s for s in seen[-1] if not s.prefill]
        assert walls == [s.wall for s in decodes[1:4]]
        # and the cache keeps the two apart
        assert calibration.calibration_key(eng.config)["warm_tokens"] == 1
        monkeypatch.setenv(calibration.WARM_TOKENS_ENV, "x")
        with pytest.raises(ValueError, match="DFLASH_CALIBRATION_WARM_TOKENS"):
            calibration.warm_tokens()
    finally:
        eng.close()


def test_auto_switching_every_few_steps_is_lossless(tiny_engine):
    eng = tiny_engine
    for prompt in PROMPTS:
        eng.reset()
        ar = eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=80))
        eng.reset()
        eng.auto_policy = pol = ScriptedPolicy(SCRIPT)
        res = eng.generate(prompt, GenerationSettings(mode="auto", max_tokens=80))
        assert res.tokens == ar.tokens, prompt
        used = {r.tree_nodes > 0 and "tree" or (r.drafted > 0 and "chain") or "ar" for r in res.steps}
        assert used == {"ar", "chain", "tree"}
        assert res.summary.mode == "auto" and res.summary.auto_note.startswith("auto: ")
        assert pol.seen and all(m in ("chain", "tree") for m, *_ in pol.seen)
    # the next turn reuses the whole context (the drafter got every AR row's features) and stays lossless
    first = PROMPTS[0]
    eng.reset()
    eng.auto_policy = ScriptedPolicy(SCRIPT)
    turn1 = eng.generate(first, GenerationSettings(mode="auto", max_tokens=40))
    # AR steps do not feed the drafter: the next request's prefill feeds it from where it stopped
    fed = eng.dft_valid
    assert fed <= len(eng.kv)
    follow = eng.tokenize(first) + turn1.tokens + eng.tokenize(" and then", add_special=False)
    eng.auto_policy = ScriptedPolicy(list(reversed(SCRIPT)))
    turn2 = eng.generate(follow, GenerationSettings(mode="auto", max_tokens=40))
    assert turn2.summary.n_prompt_reused == fed >= len(eng.tokenize(first))
    eng.reset()
    ref = eng.generate(follow, GenerationSettings(mode="ar", max_tokens=40))
    assert turn2.tokens == ref.tokens
    eng.auto_policy = None


def test_auto_with_the_real_policy_is_lossless(tiny_pair):
    with _load(*tiny_pair) as eng:
        calibration.ensure(eng, **QUICK)
        for prompt in PROMPTS:
            eng.reset()
            ar = eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=64))
            eng.reset()
            res = eng.generate(prompt, GenerationSettings(mode="auto", max_tokens=64))
            assert res.tokens == ar.tokens, prompt
            assert res.summary.break_even > 0 and res.summary.break_even_label
        assert isinstance(eng.auto_policy, auto_mode.AutoPolicy)


def test_auto_ends_on_ar_when_the_drafter_accepts_nothing(deaf_pair):
    with _load(*deaf_pair) as eng:
        calibration.ensure(eng, **QUICK)
        results = []
        for _rep in range(2):
            for prompt in PROMPTS:
                eng.reset()
                results.append(eng.generate(prompt, GenerationSettings(mode="auto", max_tokens=48)))
        pol = eng.auto_policy
        assert pol.best().mode == "ar"
        last = results[-1]
        ar_steps = sum(1 for r in last.steps if r.drafted == 0)
        assert ar_steps >= 0.8 * len(last.steps)
        s = last.summary
        assert s.verify_mode == "ar" and s.auto_note.startswith("auto: AR")
        # the status line's numbers: a speculative step's break-even above its commit length (0 when
        # no step here could pay even if every draft were accepted: then auto never probes)
        assert s.break_even > max(1.0, s.break_even_commit) and s.break_even_label.startswith(("chain", "tree"))
        # the same request in AR mode commits the same tokens
        eng.reset()
        assert eng.generate(PROMPTS[-1], GenerationSettings(mode="ar", max_tokens=48)).tokens == last.tokens


def test_cli_calibrate_prints_the_table_and_advice_and_generate_auto_reports(deaf_pair, capsys):
    t, d = map(str, deaf_pair)
    args = [
        "calibrate",
        "--target",
        t,
        "--draft",
        d,
        "--n-ctx",
        "1024",
        "--probe-tokens",
        "16",
        "--chain-budgets",
        "1,4,40",
        "--tree-budgets",
        "8",
        "--rounds",
        "1",
        "--json",
    ]
    assert cli_main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert not out["from_cache"]
    modes = [(r["mode"], r["budget"]) for r in out["rows"]]
    assert modes == [("ar", 0), ("chain", 1), ("chain", 4), ("tree", 8)]  # 40 > the drafter's block
    assert all(r["break_even"] > 0 for r in out["rows"])
    assert out["choice"]["mode"] == "ar" and "does not pay" in out["advice"]
    assert cli_main(args) == 0
    assert json.loads(capsys.readouterr().out)["from_cache"]
    # the text form
    assert cli_main(args[:-1]) == 0
    text = capsys.readouterr().out
    assert "break-even" in text and "advice: speculation does not pay" in text and "auto would run: AR" in text
    # generate --mode auto says what ran and the break-even
    assert (
        cli_main(
            [
                "generate",
                "--target",
                t,
                "--draft",
                d,
                "--n-ctx",
                "1024",
                "--mode",
                "auto",
                "--prompt",
                "Hello",
                "--max-tokens",
                "24",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "[auto]" in err and "auto: " in err and "break-even commit" in err
    # no drafter, bad budgets: clear errors
    assert cli_main(["calibrate", "--target", t, "--n-ctx", "1024"]) != 0
    assert "give a drafter" in capsys.readouterr().err
    assert cli_main(["calibrate", "--target", t, "--draft", d, "--chain-budgets", "0,x"]) != 0
    assert "dflash-studio calibrate:" in capsys.readouterr().err


# -- AR steps of auto decode as plain AR does; the drafter is caught up before speculation -----------
SWITCHES = (
    [("ar", 0)] * 6 + [("chain", 4)] * 3 + [("ar", 0)] * 9 + [("tree", 8)] * 3 + [("ar", 0)] * 5 + [("chain", 7)] * 2
)


class _ExtractionWatch:
    """on_step: the engine's extraction state and the drafter's fill level after every step."""

    def __init__(self, eng):
        self.eng = eng
        self.rows = []

    def __call__(self, rec):
        self.rows.append((self.eng._extracting, self.eng.dft_valid, len(self.eng.kv), rec))


def test_auto_ar_steps_do_not_extract_and_switches_stay_lossless(tiny_engine, monkeypatch):
    """The re-decoding feature path (the default where the target runs on a GPU)."""
    eng = tiny_engine
    assert eng.span_rollback
    monkeypatch.setattr(eng, "auto_keep_features", "redecode")
    for prompt in PROMPTS:
        eng.reset()
        ar = eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=72))
        eng.reset()
        eng.auto_policy = ScriptedPolicy(SWITCHES)
        watch = _ExtractionWatch(eng)
        res = eng.generate(prompt, GenerationSettings(mode="auto", max_tokens=72), on_step=watch)
        assert res.tokens == ar.tokens, prompt
        watch.rows = watch.rows[1:]  # step 0: the first token, the prefill's (not one of auto's steps)
        # step i ran the script's i-th choice (the first is asked once, before prefill)
        kinds = [SWITCHES[i % len(SWITCHES)][0] for i in range(len(watch.rows))]
        assert {"ar", "chain", "tree"} <= set(kinds)
        assert any(r.tree_nodes for *_, r in watch.rows) and any(r.drafted for *_, r in watch.rows)
        for i, (extracting, dft_valid, kv_len, rec) in enumerate(watch.rows):
            if kinds[i] == "ar":
                # decoded with extraction off, and nothing handed to the drafter
                assert not extracting and rec.drafted == 0, (prompt, i)
                assert dft_valid < kv_len, (prompt, i)
            else:
                # a speculative step runs with extraction on and leaves the drafter whole: it holds
                # every committed token but the next root (a tree step may leave some of them out of
                # the target's cache until its next batch writes them: Generation.unwritten)
                assert extracting and dft_valid == rec.pos + rec.committed, (prompt, i)
                assert kv_len <= dft_valid if rec.tree_nodes else kv_len == dft_valid, (prompt, i)
        # each AR -> speculative switch caught the drafter up on exactly the AR steps' tokens (each
        # AR step adds one token to the target's cache), charged to the speculative step after it
        switches = [i for i in range(1, len(kinds)) if kinds[i] != "ar" and kinds[i - 1] == "ar"]
        assert len(switches) >= 3
        last_spec = max(i for i, k in enumerate(kinds) if k != "ar")
        note = res.summary.auto_note
        assert f"drafter caught up {len(switches)} times on " in note, note
        caught = int(note.split(" on ")[-1].split()[0])
        assert caught == sum(1 for k in kinds[:last_spec] if k == "ar")
        for i in switches:
            rec = watch.rows[i][3]
            assert rec.t_inject > 0 and rec.wall >= rec.t_inject
    # after the run the engine goes on as usual: a plain AR request, then a chain one, lossless
    eng.auto_policy = None
    eng.reset()
    ar = eng.generate(PROMPTS[0], GenerationSettings(mode="ar", max_tokens=40))
    eng.reset()
    assert eng.generate(PROMPTS[0], GenerationSettings(mode="chain", budget=4, max_tokens=40)).tokens == ar.tokens


class _DraftSpy:
    """Records every chain draft the drafter makes, with its logits (the real method runs)."""

    def __init__(self, drafter):
        self.calls = []
        self._real = drafter.draft
        drafter.draft = self

    def __call__(self, last, pos, n, p_min=0.0):
        draft, logits = self._real(last, pos, n, p_min)
        self.calls.append((int(last), int(pos), int(n), [int(x) for x in draft], np.array(logits)))
        return draft, logits


def _auto_drafts(eng, prompt: str, script, max_tokens: int = 60):
    """Runs auto along ``script``; returns (result, the committed text, the drafter's drafts), where
    the token at position p is text[p]."""
    toks = eng.tokenize(prompt)
    eng.reset()
    eng.auto_policy = ScriptedPolicy(script)
    spy = _DraftSpy(eng.drafter)
    res = eng.generate(toks, GenerationSettings(mode="auto", max_tokens=max_tokens))
    del eng.drafter.draft
    return res, toks + res.tokens, spy.calls


def _assert_drafted_as_if_prefilled(eng, text, last, pos, n, draft, logits, where) -> float:
    """A draft at ``pos`` equals (tokens, and logits up to rounding) the draft of a fresh drafter fed
    every committed token before ``pos`` by prefill; returns the logits' scale."""
    assert text[pos] == last
    scale = float(np.abs(logits).max())
    eng.reset()
    eng._prefill(text[:pos], need_features=True)
    ref, ref_logits = eng.drafter.draft(last, pos, n)
    assert [int(x) for x in ref] == draft, where
    assert np.allclose(ref_logits, logits, atol=1e-3 * scale), where
    return scale


def test_after_a_catch_up_the_drafter_drafts_as_if_it_never_left_speculation(tiny_pair):
    """Each chain draft after AR stretches equals the draft (tokens, and logits up to rounding) of a
    drafter fed the whole committed text by prefill, as a run that never left speculation feeds it;
    a drafter that missed the AR stretch's features (zeros in their place) drafts with other logits,
    so the comparison can fail."""
    script = [("chain", 4)] * 2 + [("ar", 0)] * 10 + [("chain", 4)] * 4 + [("ar", 0)] * 7 + [("chain", 7)] * 4
    # host-side argmax: the drafter's logits come back to compare
    with _load(*tiny_pair, backend_sampling=False) as eng:
        eng.auto_keep_features = "redecode"
        checked = differs = 0
        for prompt in PROMPTS:
            res, text, calls = _auto_drafts(eng, prompt, script)
            assert "drafter caught up" in res.summary.auto_note
            for last, pos, n, draft, logits in calls[2:]:  # the drafts after the first AR stretch
                scale = _assert_drafted_as_if_prefilled(eng, text, last, pos, n, draft, logits, (prompt, pos))
                checked += 1
                # contrast: a drafter that missed the last 8 positions' features (llama.cpp wants
                # the drafter's positions contiguous, so zeros stand in for them)
                eng.reset()
                eng._prefill(text[: pos - 8], need_features=True)
                eng.drafter.inject_features(np.zeros((8, eng.drafter.n_embd_enc), np.float32), 8, pos - 8)
                _, holey = eng.drafter.draft(last, pos, n)
                differs += not np.allclose(holey, logits, atol=1e-3 * scale)
        eng.auto_policy = None
        assert checked >= 6 and differs >= checked // 2


def test_host_path_drafter_drafts_as_if_it_never_left_speculation(tiny_pair):
    """The host path (AR steps keep their feature rows, fed to the drafter when speculation resumes)
    reads each AR step's layer inputs where llama.cpp put them. It asks for their addresses once per
    stretch of AR steps: a batch with more outputs than the context's sequences moves the output
    views (the logits come first; a larger batch reallocates the buffer), so addresses kept from
    before a chain step would read other data. Two sequences here (max_tree_nodes=2), so each chain
    verify of 5 or 8 rows does that. Each chain draft after an AR stretch must equal the draft of a
    drafter fed the whole committed text by prefill."""
    script = (
        [("chain", 4)] * 2
        + [("ar", 0)] * 9
        + [("chain", 7)] * 3
        + [("ar", 0)] * 8
        + [("chain", 4)] * 3
        + [("ar", 0)] * 6
        + [("chain", 7)] * 3
    )
    with _load(*tiny_pair, backend_sampling=False, max_tree_nodes=2) as eng:
        eng.auto_keep_features = "host"
        checked = 0
        for prompt in PROMPTS:
            res, text, calls = _auto_drafts(eng, prompt, script)
            assert "caught up" not in res.summary.auto_note  # the host path: nothing decoded again
            for last, pos, n, draft, logits in calls[2:]:  # the drafts after the first AR stretch
                _assert_drafted_as_if_prefilled(eng, text, last, pos, n, draft, logits, (prompt, pos))
                checked += 1
        eng.auto_policy = None
        eng.auto_keep_features = None
        assert checked >= 9


def test_targets_without_span_rollback_keep_extraction_on_during_ar(tiny_engine, monkeypatch):
    """A recurrent or hybrid target cannot drop a span to decode it again: auto then keeps
    extraction on during AR steps and hands their rows to the drafter in batches (still lossless)."""
    eng = tiny_engine
    monkeypatch.setattr(eng, "span_rollback", False)
    eng.reset()
    ar = eng.generate(PROMPTS[1], GenerationSettings(mode="ar", max_tokens=48))
    eng.reset()
    eng.auto_policy = ScriptedPolicy(SWITCHES)
    watch = _ExtractionWatch(eng)
    res = eng.generate(PROMPTS[1], GenerationSettings(mode="auto", max_tokens=48), on_step=watch)
    eng.auto_policy = None
    assert res.tokens == ar.tokens
    assert all(extracting for extracting, *_ in watch.rows)
    assert "caught up" not in res.summary.auto_note
    assert eng.dft_valid == len(eng.kv)  # the run's end flushed the kept rows


def test_cpu_auto_keeps_ar_features_on_the_host_and_stays_lossless(tiny_engine):
    """On CPU (the default "host" path) AR steps keep extraction on, nothing is decoded again, and
    every switch stays lossless; the drafter holds the whole context after the run."""
    eng = tiny_engine
    assert auto_mode.feature_path(eng) == "host"
    for prompt in PROMPTS:
        eng.reset()
        ar = eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=72))
        eng.reset()
        eng.auto_policy = ScriptedPolicy(SWITCHES)
        watch = _ExtractionWatch(eng)
        res = eng.generate(prompt, GenerationSettings(mode="auto", max_tokens=72), on_step=watch)
        eng.auto_policy = None
        assert res.tokens == ar.tokens, prompt
        assert all(extracting for extracting, *_ in watch.rows)
        assert "caught up" not in res.summary.auto_note
        assert eng.dft_valid == len(eng.kv)


def test_no_features_where_speculation_cannot_pay(tiny_pair):
    """A table where no step could pay even with every draft accepted: auto feeds the drafter
    nothing (no features at prefill, extraction off), exactly as plain AR runs."""
    with _load(*tiny_pair) as eng:
        key = calibration.calibration_key(eng.config)
        eng.calibration = calibration.CostTable(key=key, ar_ms=1.0, chain_ms={1: 5.0, 4: 9.0}, tree_ms={4: 9.0})
        eng.auto_policy = pol = auto_mode.AutoPolicy(eng.calibration, eng.drafter.max_draft)
        pol.recheck_factor = float("inf")
        assert not pol.can_probe and not pol.needs_drafter()
        watch = _ExtractionWatch(eng)
        eng.reset()
        ar = eng.generate(PROMPTS[0], GenerationSettings(mode="ar", max_tokens=40))
        eng.reset()
        res = eng.generate(PROMPTS[0], GenerationSettings(mode="auto", max_tokens=40), on_step=watch)
        assert res.tokens == ar.tokens and res.summary.auto_note == "auto: AR x39"  # (the first token: the prefill's)
        assert not any(extracting for extracting, *_ in watch.rows) and eng.dft_valid == 0


def test_a_calibration_that_disagrees_with_the_steps_is_measured_again(tiny_pair):
    """A table whose AR step is far off the steps auto measures (as one taken on a busy machine)
    is suspect after RECHECK_WINDOW steps; the next auto request measures it again and keeps it."""
    with _load(*tiny_pair) as eng:
        real = calibration.ensure(eng, **QUICK)
        wrong = calibration.CostTable(
            key=real.key,
            ar_ms=real.ar_ms * 40,
            chain_ms={b: v * 40 for b, v in real.chain_ms.items()},
            tree_ms={b: v * 40 for b, v in real.tree_ms.items()},
            measured_at=real.measured_at,
        )
        calibration.save(wrong)
        eng.calibration, eng.auto_policy = wrong, None
        eng.reset()
        eng.generate(PROMPTS[0], GenerationSettings(mode="auto", max_tokens=1))
        pol = eng.auto_policy
        pol.recheck_at = 0.0
        for _ in range(8):  # until some configuration has run RECHECK_WINDOW full steps
            eng.reset()
            eng.generate(PROMPTS[0], GenerationSettings(mode="auto", max_tokens=64, stop_at_eog=False))
            if pol.suspect:
                break
        assert pol.table is wrong and "steps take" in pol.suspect, pol.suspect
        eng.reset()
        res = eng.generate(PROMPTS[1], GenerationSettings(mode="auto", max_tokens=8))
        assert pol.rechecks == 1 and pol.table is not wrong and eng.calibration is pol.table
        assert "calibration was measured again first (" in res.summary.auto_note, res.summary.auto_note
        # a new measurement, not the wrong table kept (no bound on its figures: a timed assertion failed
        # once on a 2-vCPU machine busy with a compile, where the new AR step measured 462 ms)
        assert pol.table.measured_at > wrong.measured_at and pol.table.ar_ms != wrong.ar_ms and not pol.suspect
        assert calibration.load_cached(real.key).ar_ms == pol.table.ar_ms


def test_a_calibration_in_the_middle_of_a_chat_puts_both_caches_back(tiny_pair):
    """A re-check measures in the middle of a conversation (auto_mode.recheck). It must leave the
    conversation's caches as they were: emptied, the next turn prefilled the whole chat again, in
    prompt batches whose K/V an exact engine's steps never wrote (an exact auto chat parted from
    AR at the turn after a re-check, H200)."""
    with _load(*tiny_pair) as eng:
        chat = eng.tokenize(PROMPTS[1])
        res = eng.generate(chat, GenerationSettings(mode="chain", budget=4, max_tokens=24, stop_at_eog=False))
        assert eng.dft_valid > 0
        target, dft_valid = eng.snapshot_target(), eng.dft_valid
        drafter = eng.drafter.ctx.seq_state(0)
        calibration.measure(eng, **QUICK)
        assert eng.kv == target.tokens and eng.target_ctx.seq_state(0) == target.state
        assert eng.dft_valid == dft_valid and eng.drafter.ctx.seq_state(0) == drafter
        follow = chat + list(res.tokens) + eng.tokenize(" And then?", add_special=False)
        again = eng.generate(follow, GenerationSettings(mode="chain", budget=4, max_tokens=4, stop_at_eog=False))
        assert again.summary.n_prompt_reused == len(target.tokens)


def _ar_steps_between_probes(
    chain_ms: dict[int, float], n_probes: int = 3, switch_cost: float = 0.0
) -> tuple[tuple[str, int], list[int]]:
    """Drives a policy whose probes all fail (nothing accepted): the probed configuration and the
    AR choices counted between one probe's end and the next probe's start."""
    pol = auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=chain_ms), max_draft=15)
    if switch_cost:
        pol.observe_switch(switch_cost)
    gaps, ar_run, probed = [], None, None
    for _ in range(20_000):
        mode, budget = pol.choose()
        if mode == "ar":
            ar_run = 0 if ar_run is None else ar_run
            ar_run += 1
            continue
        probed = (mode, budget)
        if ar_run is not None:
            gaps.append(ar_run)
            ar_run = None
            if len(gaps) == n_probes:
                break
        pol.observe(mode, budget, drafted=budget, accepted=0, probing=pol.probing)
    return probed, gaps


def test_a_failed_probe_waits_in_proportion_to_what_it_wastes():
    """Where a probe step costs c AR steps, the AR stretch after a failed probe is at least
    PROBE_STEPS * (c - 1) / PROBE_SHARE steps (2 % of AR time lost to probes at most), and still
    doubles after each failed probe; a cheap probe keeps the doubling from AR_PROBE_FIRST."""
    probed, gaps = _ar_steps_between_probes({3: 1.8})  # an H100-like chain-3 step
    assert (auto_mode.PROBE_STEPS, auto_mode.PROBE_SHARE) == (2, 0.02)  # the floors below: 80 and 200
    assert probed == ("chain", 3)
    assert gaps[0] >= 79 and all(b >= 2 * a - 1 for a, b in zip(gaps, gaps[1:])), gaps
    probed, gaps = _ar_steps_between_probes({3: 3.0})  # a 2-core CPU's chain 3
    assert gaps[0] >= 199, gaps
    probed, gaps = _ar_steps_between_probes({1: 1.1})  # nearly free probes: AR_PROBE_FIRST doubling
    assert gaps[0] <= 2 * auto_mode.AR_PROBE_FIRST, gaps
    # a switch that costs 6 AR steps beyond its steps (graphs built again on a GPU) waits longer
    probed, gaps = _ar_steps_between_probes({3: 1.8}, switch_cost=6.0)
    assert gaps[0] >= (2 * 0.8 + 6.0) / 0.02 - 1, gaps
    probed, gaps = _ar_steps_between_probes({1: 1.1, 3: 1.8})  # the cheaper of two budgets that could pay
    assert probed == ("chain", 1), probed


class _SwitchWatchingPolicy(ScriptedPolicy):
    """A scripted policy with a cost table, recording what auto tells it about switches."""

    def __init__(self, script, table):
        super().__init__(script)
        self.table = table
        self.switches: list[float] = []

    def observe_switch(self, extra_ar_steps):
        self.switches.append(extra_ar_steps)


def test_auto_tells_the_policy_what_each_switch_cost(tiny_engine):
    """Each switch from AR into speculation and back is measured once, against the table: the
    speculative step's and the next AR step's walls beyond their table costs, in AR steps. A table
    that says every step costs almost nothing makes each switch look expensive; one that says each
    costs hours makes it look free (clamped by the policy, reported raw here)."""
    eng = tiny_engine
    script = [("ar", 0)] * 4 + [("chain", 4)] * 2 + [("ar", 0)] * 4 + [("chain", 4)] + [("ar", 0)] * 4
    for ar_ms, sign in ((1e-6, 1), (1e9, -1)):
        table = calibration.CostTable(key={}, ar_ms=ar_ms, chain_ms={4: 2 * ar_ms})
        pol = _SwitchWatchingPolicy(script, table)
        eng.reset()
        eng.auto_policy = pol
        # (room for the whole script: step 0 is the prefill's token, outside it, and a chain step
        # commits up to 5; 16 tokens ended in the second round trip)
        res = eng.generate(PROMPTS[0], GenerationSettings(mode="auto", max_tokens=24, stop_at_eog=False))
        eng.auto_policy = None
        assert len(res.steps) >= 12, res.summary.auto_note
        assert len(pol.switches) == 2, pol.switches  # two round trips, each told once
        assert all(sign * x > 0 for x in pol.switches), pol.switches


def test_a_first_auto_request_says_how_far_its_calibration_is_and_a_cached_one_says_nothing(tiny_pair, monkeypatch):
    """Auto's first request on a pair and machine measures their step costs before its first token
    (seconds on a CPU): ``on_progress`` hears each configuration as it is measured, with how far along
    the whole measurement is, all before the first token; the next request reads the cache and
    hears nothing."""
    import functools

    monkeypatch.setattr(calibration, "ensure", functools.partial(calibration.ensure, **QUICK))
    events: list[tuple[str, object]] = []
    with _load(*tiny_pair) as eng:
        settings = GenerationSettings(mode="auto", budget=4, max_tokens=8, stop_at_eog=False)
        eng.generate(
            "Hello world",
            settings,
            on_token=lambda ev: events.append(("token", ev)),
            on_progress=lambda text: events.append(("progress", text)),
        )
        said = [v for k, v in events if k == "progress"]
        n = len(calibration.configurations(eng, QUICK["chain_budgets"], QUICK["tree_budgets"]))
        assert n >= 4 and len(said) == n  # one round (QUICK)
        assert said[0] == f"calibrating AR: step costs 1/{n}"
        assert said[1] == f"calibrating chain 1: step costs 2/{n}"
        assert said[-1].endswith(f": step costs {n}/{n}")
        kinds = [k for k, _ in events]
        assert kinds.index("token") > max(i for i, k in enumerate(kinds) if k == "progress")
        events.clear()
        eng.generate(
            "Hello world",
            settings,
            on_token=lambda ev: events.append(("token", ev)),
            on_progress=lambda text: events.append(("progress", text)),
        )
        assert [k for k, _ in events if k == "progress"] == [] and events


def test_a_stop_during_auto_s_first_calibration_ends_the_request_at_once_and_keeps_no_table(tiny_pair, monkeypatch):
    """A first auto request waits for the whole calibration (seconds on a CPU, far longer on a busy
    one). A stop then (the user's, or the app closing) must not wait for it: the measurement stops at
    the next configuration, the request ends as cancelled with no token, no table is cached, and
    the next request calibrates and answers as usual."""
    import functools
    import threading

    monkeypatch.setattr(calibration, "ensure", functools.partial(calibration.ensure, **QUICK))
    cancel = threading.Event()
    said: list[str] = []

    def progress(text: str) -> None:
        said.append(text)
        if len(said) == 2:
            cancel.set()  # during the measurement, as the stop signal's handler would

    with _load(*tiny_pair) as eng:
        settings = GenerationSettings(mode="auto", budget=4, max_tokens=8, stop_at_eog=False)
        res = eng.generate("Hello world", settings, cancel=cancel, on_progress=progress)
        assert res.summary.finish_reason == "cancelled" and res.tokens == []
        assert len(said) == 2  # it stopped at the next configuration
        key = calibration.calibration_key(eng.config)
        assert calibration.load_cached(key) is None and eng.calibration is None
        with pytest.raises(calibration.CalibrationCancelled):
            calibration.measure(eng, cancel=cancel, **QUICK)
        res = eng.generate("Hello world", settings)
        assert len(res.tokens) == 8 and calibration.load_cached(key) is not None


@pytest.mark.parametrize(("env", "fresh", "follow_up"), [("", False, True), ("0", False, False), ("1", True, True)])
def test_which_requests_probe_at_their_start_through_the_engine(deaf_pair, monkeypatch, env, fresh, follow_up):
    """A chat's follow-up (the next turn, whose prompt holds the last request's prompt and answer)
    probes at its first step by default; a new conversation does not, until the interval runs out.
    Through the real engine: a drafter that accepts nothing, under an H200's chain costs, where a
    probe could pay."""
    monkeypatch.setenv(auto_mode.REQUEST_PROBE_ENV, env)
    h200 = {1: 1.74, 2: 1.80, 3: 1.85, 4: 1.89, 7: 2.05, 11: 2.25, 15: 2.39}

    def first_steps(eng, conversation: bool) -> list[bool]:
        key = calibration.calibration_key(eng.config)
        eng.calibration = calibration.CostTable(key=key, ar_ms=1.0, chain_ms=h200)  # used as if measured here
        eng.auto_policy = None
        eng.reset()
        probed, prompt = [], []
        for text in PROMPTS * 2:
            if conversation:  # the next turn: everything so far, then more
                prompt = prompt + eng.tokenize(" " + text)
            else:  # a new conversation
                eng.reset()
                prompt = eng.tokenize(text)
            res = eng.generate(prompt, GenerationSettings(mode="auto", max_tokens=16))
            probed.append(res.steps[1].drafted > 0)  # (step 0: the first token, the prefill's)
            assert any(r.drafted == 0 for r in res.steps), "nothing is accepted: auto returns to AR"
            eng.auto_policy.recheck_factor = float("inf")  # this machine's step times are not the table's
            eng.auto_policy.suspect = ""
            prompt = prompt + list(res.tokens)
        return probed

    with _load(*deaf_pair) as eng:
        for conversation, expect in ((False, fresh), (True, follow_up)):
            probed = first_steps(eng, conversation)
            assert probed[0]  # a new policy's first choice probes either way
            # otherwise the failed probe's grown interval keeps the next requests on AR
            assert probed[1:] == [expect] * (len(probed) - 1), (env, conversation, probed)
