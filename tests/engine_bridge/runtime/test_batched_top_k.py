"""Patch 0007: one top-k for all the rows of a drafter block, and DFLASH_TREE_TOP_K.

A drafter block decoded with a backend top-k sampler attached must return, for every row, the same
k candidates with the same raw logits whether llama.cpp builds one top-k over all the rows (0007,
the default) or one per row (upstream's graph, DFLASH_BATCHED_TOP_K=0, read once per process: so
each runs in its own child process), and those must be the row's true top-k of the full logits
that a decode without a sampler returns. The children also record the scheduler's node names
(GGML_SCHED_DEBUG=2), so a batched path that never fired would not pass as "equal".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine_bridge.models import demo
from engine_bridge.runtime import drafter as drafter_mod
from engine_bridge.runtime import tree as tree_mod
from engine_bridge.runtime.config import GenerationSettings

ROOT = Path(__file__).resolve().parents[3]
PAIR = demo.shipped_pair()
PROMPTS = ["def main():\n    print(", "import numpy as np\n"]
KS = (drafter_mod.BACKEND_TOP_K, 4)
FEW = 4  # the top few compared with the host's ranking, best first
BATCHED_NODE = "top_k_ids_rows"  # the name 0007 gives its one top-k node (src/llama-graph.cpp)


# --- the child: decodes drafter blocks in one process, with DFLASH_BATCHED_TOP_K as it was given --
def _child(target: str, draft: str, out: str) -> None:
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.runtime.llama_ffi import C

    eng = Engine.load(
        EngineConfig(target=Path(target), draft=Path(draft), n_ctx=1024, n_batch=512, n_ubatch=64, n_threads=2),
        preflight=PAIR_PREFLIGHT,
    )
    d = eng.drafter
    arrays: dict[str, np.ndarray] = {}
    for p_i, prompt in enumerate(PROMPTS):
        eng.reset()
        eng.generate(prompt, GenerationSettings(mode="chain", budget=4, max_tokens=8))
        pos, last = len(eng.kv), eng.kv[-1]
        for n in (d.max_draft, 7):
            # the full logits of every block row (no sampler attached), read on the host
            d.ctx.set_backend_top_k(0)
            d.ctx.set_backend_greedy(False)
            n_block, _, _ = d._decode_block(last, pos, n, every_row=True)
            host = d.ctx.logits(n_block).copy()
            d.ctx.seq_rm(0, pos, -1)
            tag = f"p{p_i}_n{n}"
            arrays[f"{tag}_host"] = host
            # 0006 (the greedy argmax over all rows) still gives every row's argmax
            assert d.ctx.set_backend_greedy(True)
            d._decode_block(last, pos, n, every_row=True)
            arrays[f"{tag}_greedy"] = np.array([d.ctx.sampled_token(i) for i in range(n_block)], np.int64)
            d.ctx.seq_rm(0, pos, -1)
            d.ctx.set_backend_greedy(False)
            for k in KS:
                assert d.ctx.set_backend_top_k(k) and d.ctx.backend_top_k == k
                d._decode_block(last, pos, n, every_row=True)
                ids, lg = d.ctx.sampled_top_k(0, n_block)  # every row, the anchor's included
                arrays[f"{tag}_k{k}_ids"] = np.array(ids, np.int64)
                arrays[f"{tag}_k{k}_logits"] = np.array(lg, np.float32)
                arrays[f"{tag}_k{k}_counts"] = np.array(
                    [
                        (
                            int(C.llama_get_sampled_candidates_count_ith(d.ctx.ptr, i)),
                            int(C.llama_get_sampled_logits_count_ith(d.ctx.ptr, i)),
                        )
                        for i in range(n_block)
                    ],
                    np.int64,
                )
                d.ctx.seq_rm(0, pos, -1)
            d.ctx.set_backend_top_k(0)
    np.savez(out, **arrays)
    eng.close()


def _run_child(target: Path, draft: Path, out: Path, batched: bool) -> tuple[dict[str, np.ndarray], str]:
    env = {k: v for k, v in os.environ.items() if k != "DFLASH_BATCHED_TOP_K"}
    if not batched:
        env["DFLASH_BATCHED_TOP_K"] = "0"
    # the scheduler prints every graph node's name at llama.cpp's debug level, which
    # DFLASH_LLAMA_LOG lets through to stderr
    env.update(GGML_SCHED_DEBUG="2", DFLASH_LLAMA_LOG="1")
    r = subprocess.run(
        [sys.executable, __file__, json.dumps([str(target), str(draft), str(out)])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    with np.load(out) as z:
        return {key: z[key] for key in z.files}, r.stderr


def _by_id(ids: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(ids, axis=1, kind="stable")
    return np.take_along_axis(ids, order, axis=1), np.take_along_axis(logits, order, axis=1)


@pytest.mark.parametrize("pair", ["reference", "tiny-qwen3"])
def test_batched_top_k_equals_the_per_row_top_k_and_the_host_ranking(pair, tiny_pair, tmp_path):
    if pair == "reference":
        assert PAIR is not None, "the reference pair must ship in resources/models/"
        target, draft = PAIR
    else:
        target, draft = tiny_pair  # a 50k GPT-2 vocabulary, near the 49k the host ranks in ~1 ms
    on, err_on = _run_child(target, draft, tmp_path / "on.npz", batched=True)
    off, err_off = _run_child(target, draft, tmp_path / "off.npz", batched=False)

    # the batched top-k ran where it should, and only there
    assert BATCHED_NODE in err_on, "the batched top-k node is not in any drafter graph"
    assert BATCHED_NODE not in err_off, "DFLASH_BATCHED_TOP_K=0 did not restore the per-row graph"
    assert " top_k (" in err_off  # upstream's per-row node (llama_sampler_top_k_backend_apply)

    assert sorted(on) == sorted(off) and on
    hosts = [key[: -len("_host")] for key in on if key.endswith("_host")]
    assert len(hosts) == len(PROMPTS) * 2
    for tag in hosts:
        host = on[f"{tag}_host"]
        n_rows, n_vocab = host.shape
        assert n_rows > 1
        # the two processes decoded the same block to the same logits; 0006's greedy rows are the argmax
        assert np.array_equal(host, off[f"{tag}_host"]), tag
        assert np.array_equal(on[f"{tag}_greedy"], host.argmax(axis=1)), tag
        assert np.array_equal(off[f"{tag}_greedy"], host.argmax(axis=1)), tag
        for k in KS:
            key = f"{tag}_k{k}"
            ids, lg = on[f"{key}_ids"], on[f"{key}_logits"]
            assert ids.shape == lg.shape == (n_rows, k), key
            # every row holds k candidates and k logits, in both graphs
            assert (on[f"{key}_counts"] == k).all(), (key, on[f"{key}_counts"])
            assert (off[f"{key}_counts"] == k).all(), (key, off[f"{key}_counts"])
            # the same candidate set with the same raw logits as upstream's per-row graph, row by row
            # (the order within a row may differ)
            ids_on, lg_on = _by_id(ids, lg)
            ids_off, lg_off = _by_id(off[f"{key}_ids"], off[f"{key}_logits"])
            assert np.array_equal(ids_on, ids_off), key
            assert np.array_equal(lg_on, lg_off), key
            # each candidate's logit is its row's logit, and no token outside the set beats it
            rows = np.arange(n_rows)[:, None]
            assert ((ids >= 0) & (ids < n_vocab)).all(), key
            assert (np.sort(ids, axis=1)[:, 1:] != np.sort(ids, axis=1)[:, :-1]).all(), key
            assert np.array_equal(lg, host[rows, ids]), key
            outside = host.copy()
            outside[rows, ids] = -np.inf
            assert (lg.min(axis=1) >= outside.max(axis=1)).all(), key
            # the best few, best first, as the host's ranking of the full logits has them
            few = min(FEW, k)
            dev_tok, _ = tree_mod.rank_candidates(ids, lg, few)
            host_tok, _ = tree_mod.top_candidates(host.copy(), few)
            # equal values everywhere; equal tokens wherever no tie could order them differently
            assert np.array_equal(host[rows, dev_tok], host[rows, host_tok]), key
            top = -np.sort(-host, axis=1)[:, : few + 1]
            untied = (np.diff(top, axis=1) < 0).all(axis=1)
            assert untied.any(), key
            assert np.array_equal(dev_tok[untied], host_tok[untied]), key


# --- DFLASH_TREE_TOP_K: forcing where tree steps take the drafter's top-K ---------------------------
def test_dflash_tree_top_k_forces_the_choice(tiny_engine, monkeypatch):
    d = tiny_engine.drafter
    monkeypatch.delenv(drafter_mod.TREE_TOP_K_ENV, raising=False)
    assert drafter_mod.tree_top_k_on() == drafter_mod.TREE_TOP_K_ON == "auto"
    # auto on this CPU engine (and a 50k vocabulary): the host
    assert not d.on_gpu and d.tree_top_k_backend() == 0
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, "backend")
    assert d.tree_top_k_backend() == drafter_mod.BACKEND_TOP_K
    # the variable wins over the module's default, whatever that is
    monkeypatch.setattr(drafter_mod, "TREE_TOP_K_ON", "host")
    assert d.tree_top_k_backend() == drafter_mod.BACKEND_TOP_K
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, " Host ")
    monkeypatch.setattr(drafter_mod, "TREE_TOP_K_ON", "backend")
    assert d.tree_top_k_backend() == 0
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, "auto")
    assert d.tree_top_k_backend() == 0
    # empty: the module's default
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, "")
    assert d.tree_top_k_backend() == drafter_mod.BACKEND_TOP_K
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, "gpu")
    with pytest.raises(ValueError, match="DFLASH_TREE_TOP_K='gpu': expected one of auto, host, backend"):
        d.tree_top_k_backend()


def test_auto_takes_the_backend_top_k_for_large_trees_on_a_gpu(tiny_engine, monkeypatch):
    # the measured rule: on a GPU, patch 0007's one top-k (0024's kernel) pays from a tree budget of 5 up at
    # any vocabulary; below it, only at >= 100k tokens; never on the CPU
    d = tiny_engine.drafter
    monkeypatch.delenv(drafter_mod.TREE_TOP_K_ENV, raising=False)
    monkeypatch.setattr(drafter_mod, "TREE_TOP_K_ON", "auto")
    assert d.model.n_vocab < drafter_mod.BACKEND_TOP_K_MIN_VOCAB
    big, small = drafter_mod.BACKEND_TOP_K_MIN_BUDGET, drafter_mod.BACKEND_TOP_K_MIN_BUDGET - 1
    assert d.tree_top_k_backend(big) == d.tree_top_k_backend(small) == 0  # this CPU engine
    monkeypatch.setattr(d, "on_gpu", True)
    assert d.tree_top_k_backend(big) == drafter_mod.BACKEND_TOP_K
    assert d.tree_top_k_backend(small) == 0
    monkeypatch.setattr(drafter_mod, "BACKEND_TOP_K_MIN_VOCAB", d.model.n_vocab)
    assert d.tree_top_k_backend(small) == drafter_mod.BACKEND_TOP_K
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, "host")
    assert d.tree_top_k_backend(big) == 0


def test_dflash_tree_top_k_reaches_a_tree_run(tiny_engine, monkeypatch):
    eng = tiny_engine
    monkeypatch.setattr(drafter_mod, "TREE_TOP_K_ON", "auto")
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, "backend")
    eng.reset()
    r = eng.generate("The history of the", GenerationSettings(mode="tree", budget=8, max_tokens=12))
    assert r.tokens and eng.drafter.ctx.backend_top_k == drafter_mod.BACKEND_TOP_K
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, "host")
    eng.reset()
    eng.generate("The history of the", GenerationSettings(mode="tree", budget=8, max_tokens=4))
    assert eng.drafter.ctx.backend_top_k == 0


if __name__ == "__main__":
    _child(*json.loads(sys.argv[1]))
