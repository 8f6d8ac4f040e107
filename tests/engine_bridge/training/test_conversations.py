"""The target's own conversations as training data (chat_turns, gen_conversations, the sampler of
gguf_target), on the CPU with real llama.cpp and real GGUF files.

* the template's turn fragments, joined around tokenized words, give exactly the ids of the whole
  conversation rendered and tokenized as the app's chat does (SmolLM2's real template);
* sampling: temperature-0 rows stay greedy, a seed repeats a sample, T > 0 leaves the greedy path;
* a generation run holds greedy and sampled first turns, Magpie prompts that begin with the
  template's user-turn prefix, and follow-up turns whose context extends a first turn;
* the validation split keeps every answer of a prompt on one side.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine_bridge.models import synth

torch = pytest.importorskip("torch")

from engine_bridge.training import chat_data, gen_conversations, train_chat  # noqa: E402
from engine_bridge.training.chat_turns import close_answer, close_query  # noqa: E402


def smollm2_path() -> Path:
    from engine_bridge.models import registry_models

    p = registry_models.cached()
    if p is None:
        pytest.skip("SmolLM2-135M-Instruct is not in the models cache: run `dflash-studio fetch-default`")
    return p


def test_fragments_rebuild_a_whole_conversation_on_smollm2():
    from engine_bridge.runtime.chat_template import render_chat
    from engine_bridge.runtime.llama_ffi import C
    from engine_bridge.runtime.native import Model

    m = Model(smollm2_path(), n_gpu_layers=0)
    tpl, v = m.chat_template(), m.vocab
    bos, eos = m.token_text(C.llama_vocab_bos(v)), m.token_text(C.llama_vocab_eos(v))
    stops = chat_data.end_tokens(m)
    f = chat_data.turn_fragments(m, tpl, bos, eos, stops, print)
    assert f is not None and f["answer_end"] in stops
    turns = [
        ("user", "What is 2+2? Answer briefly."),
        ("assistant", "It is 4.\n\nAnything else?"),
        ("user", "Now explain why, in one line:\n- step one"),
    ]
    whole = m.tokenize(
        render_chat(
            tpl, [{"role": r, "content": c} for r, c in turns], bos_token=bos, eos_token=eos, add_generation_prompt=True
        ),
        add_special=True,
        parse_special=True,
    )
    words = [m.tokenize(c, add_special=False, parse_special=False) for _, c in turns]
    pieces = (
        f["pre_query"]
        + close_query(words[0] + [f["answer_end"]], f, stops)
        + close_answer(words[1] + [f["answer_end"]], f)
        + close_query(words[2], f, stops)
    )
    assert pieces == whole


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("conv")
    target = synth.write_target(
        root / "tiny-llama.gguf", synth.TargetSpec(arch="llama", vocab="gpt2", n_ctx=1024, seed=5)
    )
    data = root / "data"
    chat_data.prepare(target, data, n_per_category=2, variants=1, log=lambda s: None)
    meta = json.loads((data / "meta.json").read_text())
    assert meta["turns"] is not None
    from engine_bridge.training.gguf_target import load_gguf_target

    model = load_gguf_target(target)
    # A random-weight model seldom writes its end-of-turn token: make the third token of its greedy
    # answers end a turn, so greedy first turns end (and get follow-ups) and sampled text ends
    # wherever it meets that token.
    prompts, _, _ = chat_data.load_prompts(data)
    paths = model.generate([p.tolist() for p in prompts], 8, [], pad_id=0)
    stops = set(meta["stop_ids"]) | {p[2] for p in paths}
    stops -= {t for p in paths for t in p[:2]}
    assert stops - set(meta["stop_ids"])
    meta["stop_ids"] = sorted(stops)
    (data / "meta.json").write_text(json.dumps(meta))
    return target, data, model, meta


def test_sampling_keeps_greedy_rows_and_repeats_with_a_seed(tiny):
    _, _, model, meta = tiny
    prompts = [[1, 5, 9, 20], [1, 7, 3, 30, 31, 32], [1, 5, 9, 20]]
    greedy = model.generate(prompts, 12, [], pad_id=0)
    a = model.generate(prompts, 12, [], pad_id=0, temperature=[0.0, 1.5, 1.5], seed=3)
    b = model.generate(prompts, 12, [], pad_id=0, temperature=[0.0, 1.5, 1.5], seed=3)
    assert a == b
    assert a[0] == greedy[0]
    assert a[1] != greedy[1] or a[2] != greedy[2]
    assert a[2] != greedy[2] or a[2] != a[1]
    with pytest.raises(ValueError, match="temperature"):
        model.generate(prompts, 4, [], pad_id=0, temperature=[0.5])


def test_generation_holds_greedy_sampled_magpie_and_follow_up_turns(tiny, tmp_path):
    target, data, model, meta = tiny
    lines = []
    stats = gen_conversations.generate(
        model,
        target,
        data,
        tmp_path,
        seconds=600,
        max_new=12,
        batch=8,
        max_prompts=6,
        log=lines.append,
        progress=None,
        cancel=None,
        magpie_n=8,
        query_min_tokens=1,
    )
    assert stats["by_kind"]["greedy"] > 0 and stats["by_kind"]["sampled"] > 0
    assert stats["by_kind"]["greedy"] + stats["by_kind"]["sampled"] <= 6 + stats["magpie"]["kept"]  # one answer each
    assert stats["by_kind"]["follow-up"] > 0, lines
    assert stats["magpie"]["sampled"] == 8
    z = np.load(tmp_path / "gen" / "responses.npz")
    co, ci, kind, pidx = z["ctx_offsets"], z["ctx_ids"], z["kind"], z["prompt_index"]
    ctx = [ci[co[k] : co[k + 1]].tolist() for k in range(len(co) - 1)]
    turns = meta["turns"]
    firsts = {pidx[k]: ctx[k] for k in range(len(ctx)) if kind[k] != gen_conversations.KIND_FOLLOWUP}
    for k in range(len(ctx)):
        if pidx[k] < 0:  # a request the target wrote
            assert ctx[k][: len(turns["pre_query"])] == turns["pre_query"]
            assert ctx[k][-len(turns["after_query"]) :] == turns["after_query"]
        if kind[k] == gen_conversations.KIND_FOLLOWUP:  # extends its own first turn
            first = firsts[pidx[k]]
            assert ctx[k][: len(first)] == first and len(ctx[k]) > len(first) + len(turns["after_answer"])
    seqs, plen, pi, kinds = gen_conversations.load_sequences(tmp_path)
    assert (kinds == gen_conversations.KIND_VAL).any() == (data / "val.npz").exists()
    assert len(seqs) == len(ctx) and all(len(s) > p for s, p in zip(seqs, plen))
    again = []
    gen_conversations.generate(
        model,
        target,
        data,
        tmp_path,
        seconds=1,
        max_new=6,
        batch=8,
        max_prompts=6,
        log=again.append,
        progress=None,
        cancel=None,
    )
    assert any("reusing" in s for s in again)


def test_requests_the_target_wrote_are_dropped_when_they_cannot_be_checked(tiny, tmp_path, monkeypatch):
    """Without the evaluation sets' fingerprints no Magpie request reaches the pool: an unchecked
    request could be a benchmark question (three GPU sittings ran with them missing)."""
    from engine_bridge.training import decontam

    target, data, model, _ = tiny

    def run(out):
        lines: list[str] = []
        stats = gen_conversations.generate(
            model, target, data, out, seconds=600, max_new=6, batch=8, max_prompts=2, log=lines.append,
            progress=None, cancel=None, magpie_n=8, query_min_tokens=1, followup_frac=0.0,
        )  # fmt: skip
        return stats, np.load(out / "gen" / "responses.npz")["prompt_index"], lines

    checked, pidx, _ = run(tmp_path / "checked")
    assert checked["magpie"]["checked"] and checked["magpie"]["unchecked"] == 0
    assert checked["magpie"]["kept"] > 0 and (pidx < 0).any()  # the test needs requests to drop
    decontam.load.cache_clear()
    monkeypatch.setattr(decontam, "default_path", lambda: tmp_path / "missing.npz")
    try:
        stats, pidx, lines = run(tmp_path / "unchecked")
    finally:
        decontam.load.cache_clear()
    m = stats["magpie"]
    assert not m["checked"] and m["kept"] == 0 and m["unchecked"] == checked["magpie"]["kept"]
    assert not (pidx < 0).any()
    assert any("could not be checked" in ln for ln in lines)


def test_validation_split_keeps_a_prompts_answers_together():
    pidx = np.repeat(np.arange(-50, 400), 3)  # three answers per prompt
    val = train_chat.val_split(pidx, 0.05)
    assert 0.02 < val.mean() < 0.09
    for p in np.unique(pidx):
        assert len(set(val[pidx == p].tolist())) == 1


def test_temperatures_flag_is_checked():
    import argparse

    assert train_chat._temperatures("0,0.8") == (0.0, 0.8)
    for bad in ("", "x", "-1", "0,3"):
        with pytest.raises(argparse.ArgumentTypeError):
            train_chat._temperatures(bad)


def test_blocks_open_at_the_prompts_last_token_as_a_requests_first_step_does():
    """The engine prefills prompt[:-1] and opens a request's first block at prompt[-1], so training
    must anchor blocks there too (it started one token later until 2026-11-29, and the shipped
    drafter's first step committed one token on 155 of 164 HumanEval prompts on an H200)."""
    rng = np.random.default_rng(3)
    plens, lens = [5, 12, 20, 3], [40, 20, 31, 9]
    seqs = [rng.integers(10, 1000, size=n) for n in lens]
    g = torch.Generator().manual_seed(0)
    first = 0
    for _ in range(50):
        x, anchors, block, labels, valid = train_chat.make_batch(seqs, np.asarray(plens), [0, 1, 2, 3], 16, 8, 7, 0, g)
        for b, (p, n) in enumerate(zip(plens, lens, strict=True)):
            a = anchors[b]
            assert int(a.min()) >= p - 1 and int(a.max()) <= n - 2  # a label after every anchor
            for k in np.flatnonzero((a == p - 1).numpy()):
                first += 1
                assert int(block[b, k, 0]) == seqs[b][p - 1]  # the prompt's last token opens the block
                assert (block[b, k, 1:] == 7).all()  # the rest is mask
                assert int(labels[b, k, 1]) == seqs[b][p]  # slot 1: the response's first token
                assert float(valid[b, k, 1]) == 1.0
    assert first > 0  # the first block is drawn, not only allowed
    # validation scores that block on its own: one anchor per sequence, at the prompt's last token
    x, anchors, block, labels, valid = train_chat.make_batch(
        seqs, np.asarray(plens), [0, 1, 2, 3], 16, 8, 7, 0, g, first_block=True
    )
    assert anchors.shape == (4, 1) and anchors[:, 0].tolist() == [p - 1 for p in plens]
    assert [int(labels[b, 0, 1]) for b in range(4)] == [int(seqs[b][p]) for b, p in enumerate(plens)]


CATS = ["chat", "instructions", "writing", "code", "math", "reasoning"]


def test_category_weights_put_a_categorys_prompts_ahead_and_keep_every_prompt_once():
    """A code pair's pool can be code-heavy from the same prepared prompts: with code weighing 4 the
    first answers are code about 4 times as often as an unweighted order has them; the order is still
    a permutation of every prompt (the pool joins earlier pools of the same data), a seed repeats it,
    and without weights it is the permutation generation always used (earlier pools stay reproducible)."""
    cats = np.repeat(np.arange(len(CATS), dtype=np.int8), 600)
    np.random.default_rng(0).shuffle(cats)
    code = CATS.index("code")
    plain = gen_conversations.prompt_order(cats, CATS, np.random.default_rng(7), None)
    assert (plain == np.random.default_rng(7).permutation(len(cats))).all()
    heavy = gen_conversations.prompt_order(cats, CATS, np.random.default_rng(7), {"code": 4.0})
    again = gen_conversations.prompt_order(cats, CATS, np.random.default_rng(7), {"code": 4.0})
    assert (heavy == again).all()
    assert sorted(heavy.tolist()) == list(range(len(cats)))
    share_plain = float((cats[plain[:600]] == code).mean())
    share_heavy = float((cats[heavy[:600]] == code).mean())
    assert share_plain < 0.25  # one category of six
    assert share_heavy > 0.35  # 4 / (5 + 4) at the start, less as code runs out
    light = gen_conversations.prompt_order(cats, CATS, np.random.default_rng(7), {"code": 0.25, "math": 1.0})
    assert float((cats[light[:600]] == code).mean()) < share_plain


def test_category_weights_are_checked_before_anything_loads():
    parse = gen_conversations.parse_category_weights
    assert parse(None, CATS) is None and parse("", CATS) is None
    assert parse("code=3, math=1.5", CATS) == {"code": 3.0, "math": 1.5}
    for bad, says in (
        ("cod=3", "not a category"),
        ("code", "NAME=WEIGHT"),
        ("code=x", "not a number"),
        ("code=0", "positive"),
        ("code=-2", "positive"),
        ("code=inf", "positive"),
    ):
        with pytest.raises(ValueError, match=says):
            parse(bad, CATS)


def test_a_weighted_pool_records_its_weights_and_answers_that_category_first(tiny, tmp_path):
    target, data, model, meta = tiny
    _, cats, _ = chat_data.load_prompts(data)
    names = meta["categories"]
    present = sorted({names[int(c)] for c in cats})
    assert len(present) > 1, "the fixture needs prompts of several categories"
    favoured = present[-1]
    stats = gen_conversations.generate(
        model, target, data, tmp_path, seconds=600, max_new=4, batch=8, max_prompts=2, log=lambda s: None,
        progress=None, cancel=None, magpie_frac=0.0, followup_frac=0.0, category_weights={favoured: 1e6},
    )  # fmt: skip
    assert stats["category_weights"] == {favoured: 1e6}
    assert stats["of"] == 2
    assert set(stats["by_category"]) == {favoured}
    with pytest.raises(ValueError, match="not a category"):
        train_chat.run(target, data, tmp_path / "bad", stages=("generate",), device="cpu", category_weights="nope=2")
