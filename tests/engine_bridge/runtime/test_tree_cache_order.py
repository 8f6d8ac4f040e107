"""Tree verification is token-identical to AR on CPU (issue 29).

A tree step used to keep its accepted path wherever the batch had put it. A path that won off the
seeded chain then sat behind the chain's rejected cells, the next decode filled those holes with
later positions, and attention added the cache's rows out of position order: the greedy output
parted from AR at top-2 gaps of 0.14-0.31 on 6 of 6 MT-Bench prompts. The engine now keeps only
the path's run along the chain in the cache and writes the rest ahead of the next batch.

On CPU, below 512 cached cells (where llama.cpp's one-row attention splits the cache across
threads), a verify batch's rows are computed exactly as one-token decodes, so these tests ask for
bit-identical logits and identical tokens, not for near-ties.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from engine_bridge.bench import drift
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.common.resources import resource

TOKENS = 48


@pytest.fixture(scope="module")
def smol():
    target, draft = registry_models.cached(), smollm2_drafter()
    if target is None or draft is None:
        pytest.skip("the default pair is not in the models cache: run `dflash-studio fetch-default`")
    eng = Engine.load(EngineConfig(target=target, draft=draft, n_ctx=1024), preflight=PAIR_PREFLIGHT)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def prompts(smol):
    """Held-out prompts shipped with the drafter (the training sources' validation split), short
    enough that prompt + answer stays under 256 cells."""
    rows = [
        json.loads(line) for line in resource("models/smollm2/prompts.jsonl").read_text().splitlines() if line.strip()
    ]
    out = []
    for r in rows:
        text = r.get("text") or r.get("prompt") or (r.get("messages") or [{}])[-1].get("content")
        toks = smol.tokenize_chat([{"role": "user", "content": text}])
        if len(toks) + TOKENS < 250:
            out.append(toks)
    assert len(out) >= 4
    return out[:4]


def _gen(eng, toks, mode, budget=15):
    eng.reset()
    return eng.generate(toks, GenerationSettings(mode=mode, budget=budget, max_tokens=TOKENS))


@pytest.mark.parametrize("budget", [7, 15])
def test_tree_output_is_token_identical_to_ar(smol, prompts, budget):
    off_chain = 0
    smol.record_verify = True
    try:
        for toks in prompts:
            ar = _gen(smol, toks, "ar").tokens
            tree = _gen(smol, toks, "tree", budget)
            assert tree.tokens == ar, (
                f"tree {budget} parted from AR at token "
                f"{next(i for i, (a, b) in enumerate(zip(ar, tree.tokens)) if a != b)}"
            )
            # steps whose accepted path left the seeded chain (their nodes were written later)
            off_chain += sum(1 for vb in tree.verify_batches if any(r - 1 != i for i, r in enumerate(vb.rows[1:])))
    finally:
        smol.record_verify = False
    assert off_chain > 0, "no step won off the seeded chain: the case this guards was not run"


def test_an_exact_gpu_engine_reads_only_rows_on_the_seeded_chain(smol, prompts):
    """On a GPU a row whose ancestors sit behind other branches' masked cells drifts from a one-row
    decode (bench_drift "branch 16", H200: up to 3.8 logits) and an exact tree chat parted from AR.
    An exact GPU engine (Engine.exact_chain_rows) commits the first node off the chain as its
    parent's pick and stops there: every step's path runs along the chain, and output is AR's."""
    smol.record_verify = True
    smol.exact_chain_rows = True
    try:
        for toks in prompts:
            ar = _gen(smol, toks, "ar").tokens
            tree = _gen(smol, toks, "tree", 15)
            assert tree.tokens == ar
            for vb in tree.verify_batches:
                assert list(vb.rows) == list(range(len(vb.rows))), vb.rows  # the root, then chain nodes
    finally:
        smol.record_verify = False
        smol.exact_chain_rows = False


@pytest.mark.parametrize("kind", ["chain", "tree", "branch"])
def test_verify_rows_replayed_equal_one_token_decodes(smol, prompts, kind):
    """Every committed row of every verify batch -- positions, the ancestor mask through sequence
    ids, the cells rejected branches leave behind -- gives the logits a one-token decode gives."""
    toks = prompts[0]
    gen, ref = smol.greedy_logits(toks, 40)
    sib = [int(np.argsort(-r, kind="stable")[1]) for r in ref]
    for width in (4, 16):
        if kind == "chain":
            batches = drift.chain_batches(len(toks), gen, toks, width)
        elif kind == "tree":
            batches = drift.chain_batches(len(toks), gen, toks, width, sib)
        else:
            batches = drift.branch_batches(len(toks), gen, toks, width, sib)
        assert all(not vb.problems() for vb in batches)
        got = np.concatenate(smol.replay_verify(toks, gen, batches, every_batch=True))
        want = ref[1:]  # the first token is the prefill's: the batches commit the rest
        assert got.shape == want.shape
        assert np.array_equal(got, want), f"{kind} {width}: largest difference {np.abs(got - want).max()}"


def test_the_comparison_sees_a_one_token_change_in_the_history(smol, prompts):
    """The comparison above can fail: the same batches over a history that differs in one token
    (the runner-up at position 3, as a wrongly kept rejected cell would leave) give other logits
    from there on, and the same ones before it."""
    toks = prompts[0]
    gen, ref = smol.greedy_logits(toks, 12)
    wrong = list(gen)
    wrong[3] = int(np.argsort(-ref[3], kind="stable")[1])
    got = np.concatenate(
        smol.replay_verify(toks, wrong, drift.chain_batches(len(toks), wrong, toks, 8), every_batch=True)
    )
    # got[j] picks token j + 1 (the first is the prefill's): the same up to token 3, other from token 4 on
    assert np.array_equal(got[:3], ref[1:4]) and not np.array_equal(got[3:], ref[4 : len(got) + 1])


def test_drift_report_and_classifier(smol, prompts):
    rep = drift.measure(smol, prompts[:2], tokens=24, widths=(4, 16))
    shapes = {s.shape for s in rep.shapes}
    assert {"chain 4", "tree 16", "branch 16"} <= shapes
    assert all(s.positions > 0 for s in rep.shapes)
    assert rep.bound == 0.0, rep.table()  # short contexts on CPU: bit-identical
    back = drift.DriftReport.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert back.bound == rep.bound and back.table() == rep.table()
    assert drift.classify(0.05, 0.1) == "near-tie" and drift.classify(0.3, 0.1) == "bug"
    assert drift.classify(None, 1.0) == "bug" and drift.classify(0.0, 0.0) == "near-tie"


def test_the_drift_report_names_the_gpu_its_layers_ran_on(smol):
    """A bound measured on a GPU must say so (it once said "CPU" on the H100, whose verify rows
    drift ten times further than the CPU's)."""
    h100 = [{"type": "gpu", "name": "CUDA0", "description": "NVIDIA H100 80GB HBM3"}, {"type": "cpu", "name": "CPU"}]
    on_cpu = SimpleNamespace(config=smol.config.replace(n_gpu_layers=0))
    assert drift.device_name(on_cpu, devices=h100).startswith("CPU")  # no layer offloaded
    offloaded = SimpleNamespace(config=smol.config.replace(n_gpu_layers=-1))
    assert drift.device_name(offloaded, devices=h100) == "GPU NVIDIA H100 80GB HBM3 (n_gpu_layers -1)"
    assert drift.device_name(offloaded, devices=[{"type": "cpu", "name": "CPU"}]).startswith("CPU")
