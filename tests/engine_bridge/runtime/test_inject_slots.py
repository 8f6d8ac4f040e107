"""A drafter's feature inject keeps a graph per row count (patch 0029, issue 28).

A speculative step injects the target's features of its committed rows into the drafter's KV: as
many rows as the step committed, so the inject's shape follows the commit length. With patch 0008's
one slot for batches without outputs, llama.cpp builds and allocates the inject's graph again
whenever that length changes. Patch 0029 (``llama_set_no_output_row_slots``, switched per request by
``DFLASH_INJECT_SLOTS``) gives each row count a slot of its own. These tests run the real default
pair on the CPU engine with the slots on and off: the same drafts and tokens either way, and the
graphs kept that it exists for.
"""

from __future__ import annotations

import pytest

from engine_bridge.runtime import drafter as drafter_mod
from engine_bridge.runtime.config import GenerationSettings
from default_pair import CODE_AND_MATH_PROMPTS, load_default_pair

PROMPTS = CODE_AND_MATH_PROMPTS


@pytest.fixture(scope="module")
def engine():
    eng = load_default_pair()
    yield eng
    eng.close()


def _run(eng, monkeypatch, slots: int, prompt: str, mode: str, budget: int):
    monkeypatch.setenv(drafter_mod.INJECT_SLOTS_ENV, str(slots))
    toks = eng.tokenize_chat([{"role": "user", "content": prompt}])
    before = eng.drafter.ctx.graph_reuses()
    res = eng.generate(toks, GenerationSettings(mode=mode, budget=budget, max_tokens=64))
    assert eng.drafter.inject_slots == slots
    drafts = [(s.drafted, s.accepted, s.committed) for s in res.steps]
    return res.tokens, drafts, eng.drafter.ctx.graph_reuses() - before


def _new_lengths(drafts) -> tuple[int, int]:
    """Of a request's injects (one per speculative step, as many rows as it committed): how many
    changed the row count from the inject before, and how many of those came back to a count seen
    earlier in the request (where a slot per row count still holds its graph)."""
    seen, last, changed, back = set(), None, 0, 0
    for drafted, _, committed in drafts:
        if not drafted:
            continue
        if last is not None and committed != last:
            changed += 1
            back += committed in seen
        seen.add(committed)
        last = committed
    return changed, back


@pytest.mark.parametrize("mode,budget", [("chain", 5), ("tree", 15)])
def test_a_slot_per_inject_length_keeps_its_graph_and_changes_no_draft(engine, monkeypatch, mode, budget):
    assert engine.drafter.two_schedulers, "this engine build lacks patch 0008"
    gained = expected = 0
    for prompt in PROMPTS:
        tokens_off, drafts_off, reused_off = _run(engine, monkeypatch, 0, prompt, mode, budget)
        tokens_on, drafts_on, reused_on = _run(engine, monkeypatch, drafter_mod.INJECT_SLOTS_MAX, prompt, mode, budget)
        assert tokens_on == tokens_off and drafts_on == drafts_off, (mode, prompt)
        changed, back = _new_lengths(drafts_on)
        assert changed > 3, "the commit length hardly changed: nothing to measure"
        gained += reused_on - reused_off
        expected += back
    # every inject that comes back to a length seen before reuses its slot's graph, but for the few
    # that cross a KV-size boundary (llama.cpp pads the cells a graph attends over to 256) or that a
    # tree's shortened block displaced
    assert gained >= max(1, expected - 4 * len(PROMPTS)), (mode, gained, expected)


def test_turning_the_slots_off_again_gives_patch_0008s_one_slot(engine, monkeypatch):
    tokens_on, drafts_on, _ = _run(engine, monkeypatch, 4, PROMPTS[1], "chain", 7)
    tokens_off, drafts_off, reused_off = _run(engine, monkeypatch, 0, PROMPTS[1], "chain", 7)
    assert (tokens_on, drafts_on) == (tokens_off, drafts_off)
    assert engine.drafter.inject_slots == 0


@pytest.mark.parametrize("raw", ["17", "-1", "many"])
def test_a_bad_slot_count_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv(drafter_mod.INJECT_SLOTS_ENV, raw)
    with pytest.raises(ValueError, match=drafter_mod.INJECT_SLOTS_ENV):
        drafter_mod.inject_slots_wanted("chain", True)


def test_unset_gives_slots_to_chain_and_tree_steps_on_a_gpu_only(monkeypatch, engine):
    monkeypatch.delenv(drafter_mod.INJECT_SLOTS_ENV, raising=False)
    wanted = drafter_mod.inject_slots_wanted
    # measured on H100s: chain 5 1.0142x (s73), tree 15 1.0154x (s76, a process per side); a 2-vCPU
    # CPU's chain 5 0.9979x
    assert wanted("chain", True) == wanted("tree", True) == drafter_mod.INJECT_SLOTS_ON_DEVICE > 0
    assert wanted("chain", False) == wanted("tree", False) == wanted("auto", True) == wanted("ar", True) == 0
    # the engine asks at each request: this CPU engine's drafter goes back to one slot when unset
    toks, settings = engine.tokenize(PROMPTS[0]), GenerationSettings(mode="chain", budget=5, max_tokens=8)
    monkeypatch.setenv(drafter_mod.INJECT_SLOTS_ENV, "8")
    engine.generate(toks, settings)
    assert engine.drafter.inject_slots == 8
    monkeypatch.delenv(drafter_mod.INJECT_SLOTS_ENV)
    engine.generate(toks, settings)
    assert engine.drafter.inject_slots == 0
